package runtime_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// A surface turns a person into the principal the engine sees.
type surface struct {
	name      string
	principal func(user string) string
}

// surfaces are the four ways a person reaches the engine. An API token and
// an uplink client are named after their owner, as the configuration
// names the user behind each.
var surfaces = []surface{
	{"mqtt", func(u string) string { return "mqtt:" + u }},
	{"console", func(u string) string { return "console:" + u }},
	{"api", func(u string) string { return "api:" + u + "-ci" }},
	{"uplink", func(u string) string { return "uplink:site-" + u }},
}

// person is the engine's Options.Person in these tests, as the gateway
// wires it: users behind MQTT and the console, token and uplink owners
// behind theirs.
func person(principal string) string {
	kind, name, _ := strings.Cut(principal, ":")
	switch kind {
	case "mqtt", "console":
		return name
	case "api":
		if u, ok := strings.CutSuffix(name, "-ci"); ok {
			return u
		}
	case "uplink":
		if u, ok := strings.CutPrefix(name, "site-"); ok {
			return u
		}
	}
	return principal
}

// strictWorld runs in mode strict (supervised, two approvals), with
// maint2 (maintenance, two approvals) also known.
func strictWorld(t *testing.T, mode string) *world {
	t.Helper()
	strict := governance.ShippedModes()[governance.ModeSupervised]
	strict.Name, strict.ApprovalsRequired = "strict", 2
	maint2 := governance.ShippedModes()[governance.ModeMaintenance]
	maint2.Name, maint2.ApprovalsRequired = "maint2", 2
	return newWorld(t, func(s *setup) {
		s.opts.Modes = []governance.Mode{strict, maint2}
		s.opts.Mode = mode
		s.opts.Person = person
	})
}

func (w *world) writes() int { return w.g.Count("write", "valve-1", "open") }

func (w *world) pendingAnswers(id string) int {
	w.t.Helper()
	ap, ok := w.e.Approval(id)
	if !ok || ap.Status != runtime.ApprovalPending {
		w.t.Fatalf("approval %s = %+v, want pending", id, ap)
	}
	return len(ap.Answers)
}

func TestAdversarialFourEyesRequesterNeverApprovesOnAnySurface(t *testing.T) {
	for _, asked := range surfaces {
		for _, answered := range surfaces {
			t.Run(asked.name+"_then_"+answered.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					w := strictWorld(t, "strict")
					obs := w.do(asked.principal("appr"), "c1", "valve-1", "open", on)
					want(t, obs, runtime.ApprovalRequest, "")
					id := obs.Approval.ID
					for _, d := range []runtime.Decision{runtime.Approve, runtime.ApproveAndRule} {
						_, err := w.e.Answer(w.ctx, id, runtime.Answer{By: answered.principal("appr"), Decision: d, Admin: true})
						if !errors.Is(err, runtime.ErrNotPermitted) {
							t.Fatalf("requester %s answering %s as %s: err = %v, want ErrNotPermitted",
								asked.principal("appr"), d, answered.principal("appr"), err)
						}
					}
					if n := w.pendingAnswers(id); n != 0 {
						t.Fatalf("answers recorded = %d, want 0", n)
					}
					if n := w.writes(); n != 0 {
						t.Fatalf("driver writes = %d, want 0", n)
					}
					if len(w.e.Rules()) != 0 {
						t.Fatalf("rules = %+v, want none", w.e.Rules())
					}
				})
			})
		}
	}
}

func TestAdversarialFourEyesOnePersonApprovesOnce(t *testing.T) {
	for _, first := range surfaces {
		for _, second := range surfaces {
			t.Run(first.name+"_then_"+second.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					w := strictWorld(t, "strict")
					obs := w.do("mqtt:op", "c1", "valve-1", "open", on)
					want(t, obs, runtime.ApprovalRequest, "")
					id := obs.Approval.ID
					if ap := w.answer(id, runtime.Answer{By: first.principal("appr"), Decision: runtime.Approve}); ap.Status != runtime.ApprovalPending {
						t.Fatalf("after one approval status = %s, want pending", ap.Status)
					}
					_, err := w.e.Answer(w.ctx, id, runtime.Answer{By: second.principal("appr"), Decision: runtime.Approve})
					if !errors.Is(err, runtime.ErrNotPermitted) {
						t.Fatalf("second approval by the same person as %s: err = %v, want ErrNotPermitted", second.principal("appr"), err)
					}
					if n := w.pendingAnswers(id); n != 1 {
						t.Fatalf("answers recorded = %d, want 1", n)
					}
					if n := w.writes(); n != 0 {
						t.Fatalf("driver writes = %d, want 0", n)
					}
					// A second person, through the second surface, completes it.
					w.answer(id, runtime.Answer{By: second.principal("carol"), Decision: runtime.Approve})
					if ev := w.outcome(obs.Run); ev.Kind != runtime.KindActed {
						t.Fatalf("outcome = %s %s, want acted", ev.Kind, ev.Body)
					}
					if n := w.writes(); n != 1 {
						t.Fatalf("driver writes = %d, want 1", n)
					}
				})
			})
		}
	}
}

func TestAdversarialFourEyesRuleWaitsForTheSecondPerson(t *testing.T) {
	for _, first := range surfaces {
		for _, second := range surfaces {
			t.Run(first.name+"_then_"+second.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					w := strictWorld(t, "strict")
					obs := w.do("mqtt:op", "c1", "valve-1", "open", on)
					id := obs.Approval.ID
					w.answer(id, runtime.Answer{By: first.principal("appr"), Decision: runtime.ApproveAndRule, RuleFor: 2 * time.Hour, RuleAnyValue: true})
					if rules := w.e.Rules(); len(rules) != 0 {
						t.Fatalf("after one of two approvals rules = %+v, want none", rules)
					}
					if n := w.writes(); n != 0 {
						t.Fatalf("driver writes = %d, want 0", n)
					}
					// While the rule waits, the same act from the same
					// principal still asks (refused here: one pending per actuator).
					want(t, w.do("mqtt:op", "c2", "valve-1", "open", on), runtime.Refused, "already has a pending approval")
					ap := w.answer(id, runtime.Answer{By: second.principal("carol"), Decision: runtime.ApproveAndRule, RuleFor: 30 * time.Minute})
					if ev := w.outcome(obs.Run); ev.Kind != runtime.KindActed {
						t.Fatalf("outcome = %s %s, want acted", ev.Kind, ev.Body)
					}
					rules := w.e.Rules()
					if len(rules) != 1 {
						t.Fatalf("after two approvals rules = %+v, want one", rules)
					}
					r := rules[0].Rule
					if r.Approvals != 2 || r.Principal != "mqtt:op" || !strings.Contains(r.MadeBy, first.principal("appr")) ||
						!strings.Contains(r.MadeBy, second.principal("carol")) || ap.Answers[1].Rule != r.ID {
						t.Fatalf("rule = %+v (answers %+v), want made by both, counting 2", r, ap.Answers)
					}
					// The narrowest terms asked for: 30 minutes, this value only.
					if got := r.ExpiresAt.Sub(rules[0].MadeAt); got != 30*time.Minute || len(r.Values.Set) != 1 {
						t.Fatalf("rule lasts %s for values %v, want 30m for the one value", got, r.Values)
					}
					want(t, w.do("mqtt:op", "c3", "valve-1", "open", on), runtime.Acted, "")
				})
			})
		}
	}
}

// A rule needs as many people asking for it as the act needed: a second
// person who only approves the act makes no rule.
func TestAdversarialFourEyesRuleNeedsEveryApproverToAskForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := strictWorld(t, "strict")
		obs := w.do("mqtt:op", "c1", "valve-1", "open", on)
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:appr", Decision: runtime.ApproveAndRule})
		w.answer(obs.Approval.ID, runtime.Answer{By: "api:carol-ci", Decision: runtime.Approve})
		if ev := w.outcome(obs.Run); ev.Kind != runtime.KindActed {
			t.Fatalf("outcome = %s, want acted", ev.Kind)
		}
		if rules := w.e.Rules(); len(rules) != 0 {
			t.Fatalf("rules = %+v, want none", rules)
		}
		want(t, w.do("mqtt:op", "c2", "valve-1", "open", on), runtime.ApprovalRequest, "mode strict asks")
		if n := w.writes(); n != 1 {
			t.Fatalf("driver writes = %d, want 1", n)
		}
	})
}

// A rule one person made under a one-approval mode does not let acts
// through once the mode requires two; an act asked for under one approval
// and answered after the switch needs two people.
func TestAdversarialFourEyesSwitchToTwoApprovals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := strictWorld(t, governance.ModeSupervised)
		obs := w.do("mqtt:op", "c1", "valve-1", "open", on)
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:appr", Decision: runtime.ApproveAndRule, RuleAnyValue: true})
		if ev := w.outcome(obs.Run); ev.Kind != runtime.KindActed {
			t.Fatalf("outcome = %s, want acted", ev.Kind)
		}
		if rules := w.e.Rules(); len(rules) != 1 || rules[0].Rule.Approvals != 1 {
			t.Fatalf("rules = %+v, want one made by one person", rules)
		}
		// The any-value rule covers another value under supervised.
		want(t, w.do("mqtt:op", "c2", "valve-1", "open", value.Bool(false)), runtime.Acted, "")
		if _, ap, err := w.e.SetMode(w.ctx, "console:root", "strict", "second pair of eyes"); err != nil || ap != nil {
			t.Fatalf("SetMode(strict) = %v %v, want immediate", ap, err)
		}
		want(t, w.do("mqtt:op", "c3", "valve-1", "open", on), runtime.ApprovalRequest, "mode strict asks")
		if n := w.writes(); n != 2 {
			t.Fatalf("driver writes = %d, want 2", n)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := strictWorld(t, governance.ModeSupervised)
		obs := w.do("mqtt:appr", "c1", "valve-1", "open", on)
		if obs.Approval.Required != 1 {
			t.Fatalf("required = %d, want 1", obs.Approval.Required)
		}
		if _, _, err := w.e.SetMode(w.ctx, "console:root", "strict", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := w.e.Answer(w.ctx, obs.Approval.ID, runtime.Answer{By: "console:appr", Decision: runtime.Approve}); !errors.Is(err, runtime.ErrNotPermitted) {
			t.Fatalf("requester approving after the switch to strict: err = %v, want ErrNotPermitted", err)
		}
		if ap := w.answer(obs.Approval.ID, runtime.Answer{By: "console:carol", Decision: runtime.Approve}); ap.Status != runtime.ApprovalPending || ap.Required != 2 {
			t.Fatalf("after one approval = %s (required %d), want pending, required 2", ap.Status, ap.Required)
		}
		if n := w.writes(); n != 0 {
			t.Fatalf("driver writes = %d, want 0", n)
		}
	})
}

func TestAdversarialFourEyesModeChangeNeedsTwoPeople(t *testing.T) {
	cases := []struct{ from, to string }{
		{"strict", governance.ModeSupervised},  // fewer approvals
		{"strict", governance.ModeMaintenance}, // wider, fewer approvals
		{governance.ModeSupervised, "maint2"},  // wider, into two approvals
	}
	for _, tc := range cases {
		for _, first := range surfaces {
			for _, second := range surfaces {
				t.Run(tc.from+"_to_"+tc.to+"/"+first.name+"_then_"+second.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						w := strictWorld(t, tc.from)
						_, ap, err := w.e.SetMode(w.ctx, first.principal("root"), tc.to, "")
						if err != nil || ap == nil {
							t.Fatalf("SetMode(%s) = %v %v, want a pending approval", tc.to, ap, err)
						}
						if ap.Required != 2 {
							t.Fatalf("required = %d, want 2", ap.Required)
						}
						refuse := func(by string) {
							t.Helper()
							if _, err := w.e.Answer(w.ctx, ap.ID, runtime.Answer{By: by, Admin: true, Decision: runtime.Approve}); !errors.Is(err, runtime.ErrNotPermitted) {
								t.Fatalf("approval by %s: err = %v, want ErrNotPermitted", by, err)
							}
							if got := w.e.Mode(w.ctx).Name; got != tc.from {
								t.Fatalf("mode = %s, want %s", got, tc.from)
							}
						}
						refuse(second.principal("root")) // the requester
						w.answer(ap.ID, runtime.Answer{By: first.principal("admin2"), Admin: true, Decision: runtime.Approve})
						if got := w.e.Mode(w.ctx).Name; got != tc.from {
							t.Fatalf("after one approval mode = %s, want %s", got, tc.from)
						}
						refuse(second.principal("admin2")) // the same person again
						w.answer(ap.ID, runtime.Answer{By: second.principal("admin3"), Admin: true, Decision: runtime.Approve})
						if got := w.e.Mode(w.ctx).Name; got != tc.to {
							t.Fatalf("after two approvals mode = %s, want %s", got, tc.to)
						}
					})
				})
			}
		}
	}
}

// The length of a rule is a number a person sends. No value widens it
// beyond MaxRuleTTL, and none fails or panics.
func TestAdversarialFourEyesRuleForExtremes(t *testing.T) {
	for _, d := range []time.Duration{0, -1, 1 << 31, 1<<53 + 1, math.MaxInt64, math.MinInt64} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := strictWorld(t, "strict")
				obs := w.do("mqtt:op", "c1", "valve-1", "open", on)
				w.answer(obs.Approval.ID, runtime.Answer{By: "console:appr", Decision: runtime.ApproveAndRule, RuleFor: d})
				w.answer(obs.Approval.ID, runtime.Answer{By: "mqtt:carol", Decision: runtime.ApproveAndRule, RuleFor: d})
				rules := w.e.Rules()
				if len(rules) != 1 {
					t.Fatalf("rules = %+v, want one", rules)
				}
				if got := rules[0].Rule.ExpiresAt.Sub(rules[0].MadeAt); got <= 0 || got > 24*time.Hour {
					t.Fatalf("RuleFor %d gives a rule of %s, want within (0, 24h]", d, got)
				}
			})
		})
	}
}

// Without a Person option, the part after the colon names the person.
func TestFourEyesDefaultPersonIsTheUser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		strict := governance.ShippedModes()[governance.ModeSupervised]
		strict.Name, strict.ApprovalsRequired = "strict", 2
		w := newWorld(t, func(s *setup) { s.opts.Modes = []governance.Mode{strict}; s.opts.Mode = "strict" })
		obs := w.do("mqtt:appr", "c1", "valve-1", "open", on)
		if _, err := w.e.Answer(w.ctx, obs.Approval.ID, runtime.Answer{By: "console:appr", Decision: runtime.Approve}); !errors.Is(err, runtime.ErrNotPermitted) {
			t.Fatalf("mqtt:appr's request approved as console:appr: err = %v, want ErrNotPermitted", err)
		}
		if got := runtime.PersonAfterColon("uplink:site:a"); got != "site:a" {
			t.Errorf("PersonAfterColon(uplink:site:a) = %q, want site:a", got)
		}
		if got := runtime.PersonAfterColon("gateway"); got != "gateway" {
			t.Errorf("PersonAfterColon(gateway) = %q, want gateway", got)
		}
	})
}

func TestObservationOutcome(t *testing.T) {
	tests := []struct {
		obs  runtime.Observation
		want string
	}{
		{runtime.Observation{Kind: runtime.Acted, Receipt: &runtime.Receipt{Confirmation: runtime.WrongFinal}}, "contradicted"},
		{runtime.Observation{Kind: runtime.Acted, Receipt: &runtime.Receipt{Confirmation: runtime.Unconfirmed}}, "acted"},
		{runtime.Observation{Kind: runtime.Acted}, "acted"},
		{runtime.Observation{Kind: runtime.Completed}, "completed"},
		{runtime.Observation{Kind: runtime.Refused}, "refused"},
		{runtime.Observation{Kind: runtime.ApprovalRequest}, "pending_approval"},
		{runtime.Observation{Kind: runtime.Failed}, "failed"},
		{runtime.Observation{}, "failed"},
	}
	for _, tc := range tests {
		if got := tc.obs.Outcome(); got != tc.want {
			t.Errorf("Observation{%s, %+v}.Outcome() = %q, want %q", tc.obs.Kind, tc.obs.Receipt, got, tc.want)
		}
	}
}

// Mode is the mode in force, which after a restart is the journal's, not
// the configured one: the gateway's start-up log shows it.
func TestModeInForceSurvivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		if _, ap, err := w.e.SetMode(w.ctx, "console:root", governance.ModeObserve, "storm"); err != nil || ap != nil {
			t.Fatalf("SetMode(observe) = %v, %v", ap, err)
		}
		_ = w.e.Close()
		reg := devices.NewRegistry()
		if err := reg.Add("sim", w.g); err != nil {
			t.Fatal(err)
		}
		e, err := runtime.New(w.ctx, runtime.Options{Registry: reg, Journal: w.j, Policies: policies(), Mode: governance.ModeSupervised})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if got := e.Mode(w.ctx); got.Name != governance.ModeObserve || got.By != "console:root" {
			t.Fatalf("Mode() after a restart = %+v, want observe set by console:root", got)
		}
	})
}
