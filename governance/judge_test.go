package governance

import (
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/value"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type factMap map[string]Fact

func (m factMap) Fact(s string) (Fact, bool) { f, ok := m[s]; return f, ok }

type panickingFacts struct{}

func (panickingFacts) Fact(string) (Fact, bool) { panic("sensor table corrupted") }

func pumpProfile() EffectProfile {
	p := Nothing()
	p.Writes = Scopes("greenhouse/pump-1")
	p.Costs = true
	return p
}

func valveProfile() EffectProfile {
	p := Nothing()
	p.Writes = Scopes("greenhouse/valve-1")
	return p
}

func readProfile() EffectProfile {
	p := Nothing()
	p.Reads = Scopes("greenhouse/tank-1")
	return p
}

func pumpWrite(mode string) Request {
	return Request{
		Principal: "mqtt:alice", Device: "pump-1", Capability: "on", Write: true,
		Profile: pumpProfile(), Value: value.Bool(true),
		Envelope:   &Envelope{Type: value.TypeBool},
		Interlocks: []Condition{{Sensor: "tank-1.level", Op: OpGT, Value: value.Number(10), MaxAge: 30 * time.Second}},
		Facts:      factMap{"tank-1.level": {Value: value.Number(50), At: t0.Add(-time.Second), Good: true}},
		Mode:       mode, Now: t0,
	}
}

func policy(rules ...Rule) *Policy { return &Policy{Modes: ShippedModes(), Rules: rules} }

func allowRule(id string) Rule {
	return Rule{ID: id, Principal: "mqtt:alice", Device: "pump-1", Capability: "on",
		Values: ValueMatch{Set: []value.Value{value.Bool(true)}}, Decision: DecideAllow, ExpiresAt: t0.Add(time.Hour)}
}

func denyRule(id string) Rule {
	return Rule{ID: id, Principal: "*", Device: "pump-1", Capability: "*", Decision: DecideDeny, Reason: "pump under repair"}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		req         func() Request
		pol         *Policy
		want        Outcome
		stage       Stage
		rule, field string
		why         string
	}{
		{name: "read allowed in observe", req: func() Request {
			return Request{Principal: "plan:poll", Device: "tank-1", Capability: "level", Profile: readProfile(), Mode: ModeObserve, Now: t0}
		}, pol: policy(), want: Allow, stage: StageMode},
		{name: "write refused by observe ceiling", req: func() Request { return pumpWrite(ModeObserve) },
			pol: policy(), want: Refuse, stage: StageCeiling, field: "writes", why: "mode observe does not permit it: it writes greenhouse/pump-1"},
		{name: "write asks in supervised", req: func() Request { return pumpWrite(ModeSupervised) },
			pol: policy(), want: Ask, stage: StageAskLine, field: "writes", why: "mode supervised asks: it writes greenhouse/pump-1"},
		{name: "reversible contained free write runs in interlocked", req: func() Request {
			r := pumpWrite(ModeInterlocked)
			r.Profile = valveProfile()
			return r
		}, pol: policy(), want: Allow, stage: StageMode},
		{name: "irreversible write asks in interlocked", req: func() Request {
			r := pumpWrite(ModeInterlocked)
			r.Profile.Reversible = false
			return r
		}, pol: policy(), want: Ask, stage: StageAskLine, field: "reversible", why: "mode interlocked asks: it is irreversible"},
		{name: "reaching write asks in interlocked", req: func() Request {
			r := pumpWrite(ModeInterlocked)
			r.Profile.Reaches = true
			return r
		}, pol: policy(), want: Ask, stage: StageAskLine, field: "reaches"},
		{name: "irreversible write runs in maintenance", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Profile = Worst()
			return r
		}, pol: policy(), want: Allow, stage: StageMode},
		{name: "envelope beats maintenance", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Envelope = &Envelope{Type: value.TypeNumber, HasMax: true, Max: 30}
			r.Value = value.Number(42)
			return r
		}, pol: policy(), want: Refuse, stage: StageEnvelope, why: "envelope: value 42 is above the maximum 30"},
		{name: "envelope type mismatch", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Value = value.Text("true")
			return r
		}, pol: policy(), want: Refuse, stage: StageEnvelope, why: `envelope: value "true" is a string, want bool`},
		{name: "envelope below min", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Envelope = &Envelope{Type: value.TypeNumber, HasMin: true, Min: 5}
			r.Value = value.Number(1)
			return r
		}, pol: policy(), want: Refuse, stage: StageEnvelope, why: "envelope: value 1 is below the minimum 5"},
		{name: "envelope off step", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Envelope = &Envelope{Type: value.TypeNumber, Step: 0.5}
			r.Value = value.Number(1.2)
			return r
		}, pol: policy(), want: Refuse, stage: StageEnvelope},
		{name: "envelope allowed set", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Envelope = &Envelope{Type: value.TypeEnum, Allowed: []value.Value{value.Enum("low"), value.Enum("high")}}
			r.Value = value.Enum("max")
			return r
		}, pol: policy(), want: Refuse, stage: StageEnvelope, why: `envelope: value "max" is not one of the allowed values`},
		{name: "envelope min dwell", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Envelope.MinDwell = time.Minute
			r.History = History{Current: value.Bool(false), LastChange: t0.Add(-10 * time.Second)}
			return r
		}, pol: policy(), want: Refuse, stage: StageEnvelope, why: "envelope: it changed 10s ago; the minimum dwell is 1m0s"},
		{name: "dwell does not apply to the current value", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Envelope.MinDwell = time.Minute
			r.History = History{Current: value.Bool(true), LastChange: t0.Add(-10 * time.Second)}
			return r
		}, pol: policy(), want: Allow, stage: StageMode},
		{name: "envelope max rate", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Envelope.MaxRate = 4
			r.History = History{Current: value.Bool(false), ChangesLastMinute: 4}
			return r
		}, pol: policy(), want: Refuse, stage: StageEnvelope},
		{name: "write without a value", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Value = value.Value{}
			return r
		}, pol: policy(), want: Refuse, stage: StageEnvelope},
		{name: "interlock not satisfied", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Facts = factMap{"tank-1.level": {Value: value.Number(4), At: t0, Good: true}}
			return r
		}, pol: policy(), want: Refuse, stage: StageInterlock, why: "interlock tank-1.level > 10: reading 4 is not > 10"},
		{name: "interlock stale reading", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Facts = factMap{"tank-1.level": {Value: value.Number(50), At: t0.Add(-45 * time.Second), Good: true}}
			return r
		}, pol: policy(), want: Refuse, stage: StageInterlock, why: "interlock tank-1.level > 10: the reading of tank-1.level is 45s old (max_age 30s)"},
		{name: "interlock bad reading", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Facts = factMap{"tank-1.level": {Value: value.Number(50), At: t0, Good: false}}
			return r
		}, pol: policy(), want: Refuse, stage: StageInterlock},
		{name: "interlock missing reading", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Facts = factMap{}
			return r
		}, pol: policy(), want: Refuse, stage: StageInterlock, why: "interlock tank-1.level > 10: no reading of tank-1.level"},
		{name: "interlock beats an allow rule", req: func() Request {
			r := pumpWrite(ModeSupervised)
			r.Facts = nil
			return r
		}, pol: policy(allowRule("r1")), want: Refuse, stage: StageInterlock},
		{name: "deny rule refuses", req: func() Request { return pumpWrite(ModeMaintenance) },
			pol: policy(denyRule("d1")), want: Refuse, stage: StageDenyRule, rule: "d1", why: "deny rule d1 (pump under repair)"},
		{name: "deny rule beats allow rule", req: func() Request { return pumpWrite(ModeSupervised) },
			pol: policy(allowRule("a1"), denyRule("d1")), want: Refuse, stage: StageDenyRule, rule: "d1"},
		{name: "allow rule skips the ask", req: func() Request { return pumpWrite(ModeSupervised) },
			pol: policy(allowRule("a1")), want: Allow, stage: StageAllowRule, rule: "a1"},
		{name: "allow rule never widens the ceiling", req: func() Request { return pumpWrite(ModeObserve) },
			pol: policy(allowRule("a1")), want: Refuse, stage: StageCeiling},
		{name: "expired allow rule decides nothing", req: func() Request {
			r := pumpWrite(ModeSupervised)
			r.Now = t0.Add(2 * time.Hour)
			r.Facts = factMap{"tank-1.level": {Value: value.Number(50), At: r.Now, Good: true}}
			return r
		}, pol: policy(allowRule("a1")), want: Ask, stage: StageAskLine},
		{name: "expired deny rule decides nothing", req: func() Request { return pumpWrite(ModeMaintenance) },
			pol: policy(func() Rule { r := denyRule("d1"); r.ExpiresAt = t0.Add(-time.Second); return r }()), want: Allow, stage: StageMode},
		{name: "allow rule for another value asks", req: func() Request {
			r := pumpWrite(ModeSupervised)
			r.Value = value.Bool(false)
			return r
		}, pol: policy(allowRule("a1")), want: Ask, stage: StageAskLine},
		{name: "allow rule for another principal asks", req: func() Request {
			r := pumpWrite(ModeSupervised)
			r.Principal = "mqtt:mallory"
			return r
		}, pol: policy(allowRule("a1")), want: Ask, stage: StageAskLine},
		{name: "unknown mode refuses", req: func() Request { return pumpWrite("turbo") },
			pol: policy(allowRule("a1")), want: Refuse, stage: StageMode, why: `unknown mode "turbo": unjudged is not permission`},
		{name: "unknown mode refuses reads too", req: func() Request {
			return Request{Device: "tank-1", Capability: "level", Profile: readProfile(), Mode: "", Now: t0}
		}, pol: policy(), want: Refuse, stage: StageMode},
		{name: "panic while judging refuses", req: func() Request {
			r := pumpWrite(ModeMaintenance)
			r.Facts = panickingFacts{}
			return r
		}, pol: policy(), want: Refuse, stage: StageUnjudged, why: "unjudged: sensor table corrupted"},
		{name: "re-check at the act skips the ask line", req: func() Request {
			r := pumpWrite(ModeSupervised)
			r.AtAct = true
			return r
		}, pol: policy(), want: Allow, stage: StageCeiling},
		{name: "re-check at the act still refuses above the ceiling", req: func() Request {
			r := pumpWrite(ModeObserve)
			r.AtAct = true
			return r
		}, pol: policy(), want: Refuse, stage: StageCeiling},
		{name: "re-check at the act still refuses by a deny rule", req: func() Request {
			r := pumpWrite(ModeSupervised)
			r.AtAct = true
			return r
		}, pol: policy(denyRule("d1")), want: Refuse, stage: StageDenyRule, rule: "d1"},
		{name: "re-check at the act still checks interlocks", req: func() Request {
			r := pumpWrite(ModeSupervised)
			r.AtAct = true
			r.Facts = factMap{"tank-1.level": {Value: value.Number(3), At: t0, Good: true}}
			return r
		}, pol: policy(), want: Refuse, stage: StageInterlock},
		{name: "undeclared actuator is the worst case and asks in interlocked", req: func() Request {
			r := pumpWrite(ModeInterlocked)
			r.Profile = Worst()
			return r
		}, pol: policy(), want: Ask, stage: StageAskLine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := tc.req()
			got := Judge(&req, tc.pol)
			if got.Outcome != tc.want || got.Stage != tc.stage {
				t.Fatalf("Judge = %v at %v (%q), want %v at %v", got.Outcome, got.Stage, got.Why, tc.want, tc.stage)
			}
			if got.Rule != tc.rule {
				t.Errorf("Judge rule = %q, want %q", got.Rule, tc.rule)
			}
			if tc.field != "" && got.Field.String() != tc.field {
				t.Errorf("Judge field = %q, want %q", got.Field, tc.field)
			}
			if tc.why != "" && got.Why != tc.why {
				t.Errorf("Judge why = %q, want %q", got.Why, tc.why)
			}
			if got.Outcome != Allow && got.Why == "" {
				t.Errorf("Judge gave %v with no reason", got.Outcome)
			}
		})
	}
}

func TestJudgeNilPolicyRefuses(t *testing.T) {
	req := pumpWrite(ModeSupervised)
	if v := Judge(&req, nil); v.Outcome != Refuse {
		t.Fatalf("Judge(nil policy) = %v, want refuse", v.Outcome)
	}
}

func TestConfiguredModes(t *testing.T) {
	shipped := ShippedModes()
	narrowAsk := readsOnly()
	night := Mode{Name: "night", Base: ModeInterlocked, Ceiling: shipped[ModeInterlocked].Ceiling, AskAbove: &narrowAsk, ApprovalsRequired: 2}
	if err := CheckConfigured(night); err != nil {
		t.Fatalf("CheckConfigured(night) = %v, want nil", err)
	}
	tests := []struct {
		name string
		mode func() Mode
		want string
	}{
		{"unknown base", func() Mode { m := night; m.Base = "turbo"; return m }, `mode night names base "turbo", which is not a shipped mode (observe, supervised, interlocked, maintenance)`},
		{"shipped name", func() Mode { m := night; m.Name = ModeSupervised; return m }, "mode supervised is a shipped mode and cannot be redefined"},
		{"never asks", func() Mode { m := night; m.AskAbove = nil; return m }, "mode night does not narrow its base interlocked: it never asks, so it runs without asking what interlocked asks about (reaches)"},
		{"wider ask line", func() Mode {
			m := night
			wide := Worst()
			m.AskAbove = &wide
			return m
		}, "mode night does not narrow its base interlocked: its ask line is wider than interlocked's in reaches"},
		{"wider ceiling", func() Mode {
			m := night
			m.Base = ModeObserve
			return m
		}, "mode night does not narrow its base observe: its ceiling is wider than observe's in writes"},
		{"three approvals", func() Mode { m := night; m.ApprovalsRequired = 3; return m }, "mode night requires 3 approvals (want 1 or 2)"},
		{"observe-like without an ask line is fine", func() Mode {
			return Mode{Name: "quiet", Base: ModeSupervised, Ceiling: readsOnly(), ApprovalsRequired: 1}
		}, ""},
		{"longer than maintenance", func() Mode {
			return Mode{Name: "long", Base: ModeMaintenance, Ceiling: Worst(), ApprovalsRequired: 1, MaxDuration: 2 * time.Hour}
		}, "mode long does not narrow its base maintenance: it may last longer than maintenance's max_duration 1h0m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckConfigured(tc.mode())
			if tc.want == "" {
				if err != nil {
					t.Errorf("CheckConfigured = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("CheckConfigured = %v, want %q", err, tc.want)
			}
		})
	}
}

func BenchmarkJudge(b *testing.B) {
	pol := policy(denyRule("d1"), allowRule("a1"))
	pol.Rules[0].Device = "heater-1"
	cases := map[string]Request{
		"ask":   pumpWrite(ModeSupervised),
		"allow": func() Request { r := pumpWrite(ModeInterlocked); r.Profile = valveProfile(); return r }(),
		"rule":  func() Request { r := pumpWrite(ModeSupervised); return r }(),
		"read": {Principal: "plan:poll", Device: "tank-1", Capability: "level", Profile: readProfile(),
			Mode: ModeSupervised, Now: t0},
	}
	for name, req := range cases {
		p := pol
		if name == "ask" {
			p = policy(denyRule("d1"))
			p.Rules[0].Device = "heater-1"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v := Judge(&req, p)
				if v.Outcome == 0 {
					b.Fatal("no outcome")
				}
			}
		})
	}
}

func TestJudgeAllocations(t *testing.T) {
	req := pumpWrite(ModeInterlocked)
	req.Profile = valveProfile()
	pol := policy()
	if n := testing.AllocsPerRun(100, func() { Judge(&req, pol) }); n > 0 {
		t.Errorf("Judge on the allow path allocates %v times, want 0", n)
	}
	ask := pumpWrite(ModeSupervised)
	if n := testing.AllocsPerRun(100, func() { Judge(&ask, pol) }); n > 5 {
		t.Errorf("Judge on the ask path allocates %v times, want at most 5", n)
	}
}
