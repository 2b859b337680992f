package governance

import "testing"

// An allow rule stands for acts that would each have needed approvals: one
// made by one person must not let an act through in a mode that requires
// two, while a rule from the configuration and any deny rule still decide.
func TestAllowRuleCountsThePeopleWhoMadeIt(t *testing.T) {
	t.Parallel()
	strict := ShippedModes()[ModeSupervised]
	strict.Name, strict.ApprovalsRequired = "strict", 2
	modes := ShippedModes()
	modes[strict.Name] = strict
	rule := func(approvals int) Rule { r := allowRule("r1"); r.Approvals = approvals; return r }
	tests := []struct {
		name string
		rule Rule
		mode string
		want Outcome
	}{
		{"one person's rule in a one-approval mode", rule(1), ModeSupervised, Allow},
		{"one person's rule in a two-approval mode", rule(1), "strict", Ask},
		{"two people's rule in a two-approval mode", rule(2), "strict", Allow},
		{"a configured rule in a two-approval mode", rule(0), "strict", Allow},
		{"a deny rule by one person in a two-approval mode", func() Rule { r := denyRule("d1"); r.Approvals = 1; return r }(), "strict", Refuse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := pumpWrite(tc.mode)
			got := Judge(&req, &Policy{Modes: modes, Rules: []Rule{tc.rule}})
			if got.Outcome != tc.want {
				t.Errorf("Judge(%s, rule with %d approvals) = %v (%s), want %v", tc.mode, tc.rule.Approvals, got.Outcome, got.Why, tc.want)
			}
		})
	}
	if err := rule(-1).Validate(); err == nil {
		t.Errorf("Validate(rule with -1 approvals) = nil, want an error")
	}
}
