package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

func TestDeniedWriteNeverActs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		want(t, obs, runtime.ApprovalRequest, "")
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Deny, Reason: "tank is being cleaned"})
		ev := w.outcome(obs.Run)
		if ev.Kind != runtime.KindRefused || !strings.Contains(string(ev.Body), "denied by console:bob: tank is being cleaned") {
			t.Fatalf("outcome = %s %s", ev.Kind, ev.Body)
		}
		if n := w.g.Count("write", "pump-1", "on"); n != 0 {
			t.Fatalf("a denied write reached the driver %d times", n)
		}
		if r := w.run(obs.Run); r.End != runtime.EndRefused {
			t.Fatalf("run end = %s, want refused", r.End)
		}
	})
}

func TestApproveAndAddRuleUntilItExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, obs, runtime.ApprovalRequest, "")
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.ApproveAndRule, RuleFor: 30 * time.Minute, Reason: "irrigation week"})
		if ev := w.outcome(obs.Run); ev.Kind != runtime.KindActed {
			t.Fatalf("first write: %s %s", ev.Kind, ev.Body)
		}
		rules := w.e.Rules()
		if len(rules) != 1 || rules[0].Rule.MadeBy != "console:bob" || rules[0].Rule.Principal != "mqtt:alice" {
			t.Fatalf("rules = %+v", rules)
		}
		// The same write now runs without asking.
		time.Sleep(time.Minute)
		obs = w.do("mqtt:alice", "c2", "valve-1", "open", on)
		want(t, obs, runtime.Acted, "")
		if obs.Receipt.Confirmation != runtime.Confirmed {
			t.Fatalf("receipt = %+v", obs.Receipt)
		}
		// Another value is not covered, and neither is another principal.
		want(t, w.do("mqtt:alice", "c3", "valve-1", "open", value.Bool(false)), runtime.ApprovalRequest, "")
		w.answer(w.e.Approvals()[0].ID, runtime.Answer{By: "console:bob", Decision: runtime.Deny})
		// After expiry, it asks again.
		time.Sleep(30 * time.Minute)
		want(t, w.do("mqtt:alice", "c4", "valve-1", "open", on), runtime.ApprovalRequest, "mode supervised asks")
		if len(w.e.Rules()) != 0 {
			t.Fatalf("an expired rule is still listed")
		}
	})
}

func TestRuleTTLIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.MaxRuleTTL = 2 * time.Hour })
		obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.ApproveAndRule, RuleFor: 1000 * time.Hour})
		w.outcome(obs.Run)
		r := w.e.Rules()[0]
		if got := r.Rule.ExpiresAt.Sub(r.MadeAt); got != 2*time.Hour {
			t.Fatalf("rule lives %v, want the 2h cap", got)
		}
		if err := w.e.RevokeRule(w.ctx, r.Rule.ID, "console:bob"); err != nil {
			t.Fatal(err)
		}
		want(t, w.do("mqtt:alice", "c2", "valve-1", "open", on), runtime.ApprovalRequest, "")
	})
}

func TestEnvelopeRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		obs := w.do("mqtt:alice", "c1", "heater-1", "on", on)
		want(t, obs, runtime.Refused, "envelope: value true is not one of the allowed values")
		if obs.Stage != "envelope" {
			t.Fatalf("stage = %q", obs.Stage)
		}
		want(t, w.do("mqtt:alice", "c2", "heater-1", "on", value.Text("true")), runtime.Refused, `value "true" is a string, want bool`)
		if n := w.g.Count("write", "heater-1", "on"); n != 0 {
			t.Fatalf("driver writes = %d", n)
		}
	})
}

func TestEnvelopeRefusesEvenInMaintenance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeMaintenance })
		want(t, w.do("mqtt:alice", "c1", "heater-1", "on", on), runtime.Refused, "envelope")
		want(t, w.do("mqtt:alice", "c2", "valve-1", "open", on), runtime.Acted, "")
	})
}

func TestStaleInterlockRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		want(t, w.do("gateway:poller", "p1", "tank-1", "level", value.Value{}), runtime.Completed, "")
		w.g.SetFault("tank-1", sim.Fault{ReadErr: errors.New("sensor cable cut")})
		time.Sleep(45 * time.Second)
		obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		want(t, obs, runtime.Refused, "interlock tank-1.level > 10: the reading of tank-1.level is not good")
		w.g.SetFault("tank-1", sim.Fault{Offline: true})
		time.Sleep(45 * time.Second)
		want(t, w.do("mqtt:alice", "c2", "pump-1", "on", on), runtime.Refused, "interlock tank-1.level > 10")
		if n := w.g.Count("write", "pump-1", "on"); n != 0 {
			t.Fatalf("driver writes = %d", n)
		}
	})
}

func TestInterlockNotSatisfiedRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.initial = &sim.State{Level: 5, Temperature: 14} })
		want(t, w.do("mqtt:alice", "c1", "pump-1", "on", on), runtime.Refused, "reading 5 is not > 10")
	})
}

func TestApprovalWhoseOperateWithinLapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.OperateWithin = 3 * time.Second })
		obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		want(t, obs, runtime.ApprovalRequest, "")
		// The fresh interlock read at the act takes longer than operate_within.
		w.g.SetFault("tank-1", sim.Fault{ReadDelay: 4 * time.Second})
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
		ev := w.outcome(obs.Run)
		if ev.Kind != runtime.KindRefused || !strings.Contains(string(ev.Body), "lapsed") {
			t.Fatalf("outcome = %s %s, want a refusal saying the authorization lapsed", ev.Kind, ev.Body)
		}
		if n := w.g.Count("write", "pump-1", "on"); n != 0 {
			t.Fatalf("driver writes = %d", n)
		}
	})
}

func TestInterlockBrokeBetweenApprovalAndAct(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		want(t, obs, runtime.ApprovalRequest, "")
		time.Sleep(time.Minute)
		// While the person thought, someone drained the tank by hand.
		w.g.Adjust(func(s *sim.State) { s.Level = 4 })
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
		ev := w.outcome(obs.Run)
		if ev.Kind != runtime.KindRefused || !strings.Contains(string(ev.Body), "at the act: interlock tank-1.level > 10: reading 4 is not > 10") {
			t.Fatalf("outcome = %s %s, want a refusal at the act naming the interlock", ev.Kind, ev.Body)
		}
		if n := w.g.Count("write", "pump-1", "on"); n != 0 {
			t.Fatalf("driver writes = %d", n)
		}
	})
}

func TestSecondRequestWhilePendingIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		first := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		want(t, first, runtime.ApprovalRequest, "")
		second := w.do("mqtt:carol", "c9", "pump-1", "on", value.Bool(false))
		want(t, second, runtime.Refused, "pump-1.on already has a pending approval "+first.Approval.ID+", asked by mqtt:alice at ")
		// The same request again is not a second request: it gets the first outcome.
		again := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		if again.Kind != runtime.ApprovalRequest || again.Approval.ID != first.Approval.ID || !again.Replayed {
			t.Fatalf("repeat = %+v", again)
		}
		want(t, w.do("mqtt:alice", "c1", "pump-1", "on", value.Bool(false)), runtime.Refused, "already used for a different act")
	})
}

func TestIdempotentRepeatActsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeInterlocked })
		first := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, first, runtime.Acted, "")
		again := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		if again.Kind != runtime.Acted || !again.Replayed || again.Receipt.Attempt != first.Receipt.Attempt {
			t.Fatalf("repeat = %+v, want the first receipt replayed", again)
		}
		if n := w.g.Count("write", "valve-1", "open"); n != 1 {
			t.Fatalf("driver writes = %d, want 1", n)
		}
	})
}

func TestStuckActuatorIsContradicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeInterlocked })
		w.g.SetFault("valve-1", sim.Fault{Stuck: true})
		obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, obs, runtime.Acted, "")
		if obs.Receipt.Confirmation != runtime.WrongFinal || !strings.Contains(obs.Receipt.Detail, "valve-1.open is false after") {
			t.Fatalf("receipt = %+v, want wrong_final", obs.Receipt)
		}
		if got := obs.Outcome(); got != "contradicted" {
			t.Fatalf("Outcome() = %q, want contradicted", got)
		}
		if got := w.do("mqtt:alice", "c2", "valve-1", "open", value.Bool(false)).Outcome(); got != "acted" {
			t.Fatalf("Outcome() of a confirmed act = %q, want acted", got)
		}
		evs, _ := w.e.Events(w.ctx, 0, 0)
		alarm := false
		for _, ev := range evs {
			alarm = alarm || (ev.Kind == runtime.KindAlarm && strings.Contains(string(ev.Body), obs.Receipt.Attempt))
		}
		if !alarm {
			t.Fatal("no alarm event after a contradiction")
		}
	})
}

// An error the driver did not place (it says neither offline, refused nor
// bad request) may have followed the command out: the outcome is unknown,
// the actuator locks and is read back; here the valve did not move, so it
// stays locked.
func TestUnplacedDriverErrorIsUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeInterlocked })
		w.g.SetFault("valve-1", sim.Fault{WriteErr: errors.New("coil open circuit")})
		obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, obs, runtime.Failed, "valve-1.open is locked until an admin resolves attempt")
		if !strings.Contains(obs.Why, "coil open circuit") {
			t.Fatalf("why %q does not say what the driver said", obs.Why)
		}
		if a, _, _ := w.j.Attempt(w.ctx, "mqtt:alice/c1"); a.State != runtime.AttemptUnknown {
			t.Fatalf("attempt state = %s, want unknown", a.State)
		}
		if locks := w.e.Locks(); len(locks) != 1 {
			t.Fatalf("locks = %+v, want the valve", locks)
		}
	})
}

func irrigate(continueOnFailure bool) runtime.Plan {
	return runtime.Plan{Name: "irrigate", ContinueOnFailure: continueOnFailure,
		Lease: runtime.Lease{MaxSteps: 10, MaxActuations: 4, MaxWall: 10 * time.Minute},
		Steps: []runtime.PlanStep{
			{Op: runtime.OpWrite, Device: "valve-1", Capability: "open", Value: on},
			{Op: runtime.OpWait, Wait: 10 * time.Second},
			{Op: runtime.OpWrite, Device: "pump-1", Capability: "on", Value: on},
			{Op: runtime.OpExpect, Expect: &runtime.Expect{Sensor: "flow-1.rate", Op: governance.OpGT, Value: value.Number(1), Within: 10 * time.Second}},
			{Op: runtime.OpWait, Wait: 10 * time.Second},
			{Op: runtime.OpWrite, Device: "pump-1", Capability: "on", Value: value.Bool(false)},
			{Op: runtime.OpWrite, Device: "valve-1", Capability: "open", Value: value.Bool(false)},
		}}
}

func TestPlanRunsToCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) {
			s.opts.Mode = governance.ModeInterlocked
			s.opts.Plans = []runtime.Plan{irrigate(false)}
		})
		rec, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "irrigate", Principal: "console:bob"})
		if err != nil {
			t.Fatal(err)
		}
		// pump-1 costs, so it asks even in interlocked; approve each ask.
		for {
			synctest.Wait()
			aps := w.e.Approvals()
			if len(aps) == 0 {
				break
			}
			w.answer(aps[0].ID, runtime.Answer{By: "console:carol", Decision: runtime.Approve})
		}
		done, _ := w.e.Wait(w.ctx, rec.ID)
		if done.End != runtime.EndCompleted || done.Actuations != 4 || done.Steps != 7 {
			t.Fatalf("run = %+v, want completed with 7 steps and 4 actuations", done)
		}
		if st := w.g.State(); st.Pump || st.Valve {
			t.Fatalf("state after the plan = %+v, want pump and valve off", st)
		}
	})
}

func TestDeviceVanishesMidPlan(t *testing.T) {
	for _, cont := range []bool{false, true} {
		t.Run(map[bool]string{false: "plan ends", true: "plan continues"}[cont], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, func(s *setup) {
					s.opts.Mode = governance.ModeMaintenance
					s.opts.Plans = []runtime.Plan{irrigate(cont)}
				})
				rec, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "irrigate", Principal: "console:bob"})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Second) // during the wait step
				w.g.SetFault("pump-1", sim.Fault{Offline: true})
				done, _ := w.e.Wait(w.ctx, rec.ID)
				if !cont {
					if done.End != runtime.EndFailed || !strings.Contains(done.Why, "device pump-1 is offline: offline by an injected fault") {
						t.Fatalf("run = %+v, want failed naming pump-1", done)
					}
					if !w.g.State().Valve {
						t.Fatal("the run went on after the failure")
					}
					return
				}
				if done.End != runtime.EndCompleted || w.g.State().Valve {
					t.Fatalf("run = %+v valve=%v, want completed with the valve closed", done, w.g.State().Valve)
				}
				evs, _ := w.e.Events(w.ctx, 0, 0)
				offline := false
				for _, ev := range evs {
					offline = offline || (ev.Kind == runtime.KindDeviceOffline && ev.Device == "pump-1")
				}
				if !offline {
					t.Fatal("no device_offline event for pump-1")
				}
			})
		})
	}
}

func TestLeaseExhaustionAndRefusalsSpendNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plan := runtime.Plan{Name: "flick", Lease: runtime.Lease{MaxSteps: 3, MaxActuations: 2},
			Steps: []runtime.PlanStep{
				{Op: runtime.OpWrite, Device: "valve-1", Capability: "open", Value: on},
				{Op: runtime.OpWrite, Device: "valve-1", Capability: "open", Value: value.Bool(false)},
				{Op: runtime.OpWrite, Device: "valve-1", Capability: "open", Value: on},
			}}
		refusing := runtime.Plan{Name: "heat", Lease: runtime.Lease{MaxSteps: 1, MaxActuations: 1},
			Steps: []runtime.PlanStep{{Op: runtime.OpWrite, Device: "heater-1", Capability: "on", Value: on}}}
		w := newWorld(t, func(s *setup) {
			s.opts.Mode = governance.ModeInterlocked
			s.opts.Plans = []runtime.Plan{plan, refusing}
		})
		rec, _ := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "flick", Principal: "console:bob"})
		done, _ := w.e.Wait(w.ctx, rec.ID)
		if done.End != runtime.EndLeaseExhausted || done.Actuations != 2 || !strings.Contains(done.Why, "2 of 2 actuations spent") {
			t.Fatalf("run = %+v, want lease_exhausted after 2 actuations", done)
		}
		if n := w.g.Count("write", "valve-1", "open"); n != 2 {
			t.Fatalf("driver writes = %d, want 2", n)
		}
		rec, _ = w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "heat", Principal: "console:bob"})
		done, _ = w.e.Wait(w.ctx, rec.ID)
		if done.End != runtime.EndRefused || done.Steps != 0 || done.Actuations != 0 {
			t.Fatalf("refused run = %+v, want refused with nothing spent", done)
		}
	})
}

func TestParkedTimeIsNotSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plan := runtime.Plan{Name: "one", Lease: runtime.Lease{MaxSteps: 2, MaxWall: time.Minute},
			Steps: []runtime.PlanStep{
				{Op: runtime.OpWrite, Device: "pump-1", Capability: "on", Value: on},
				{Op: runtime.OpRead, Device: "tank-1", Capability: "level"},
			}}
		w := newWorld(t, func(s *setup) { s.opts.Plans = []runtime.Plan{plan} })
		rec, _ := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "one", Principal: "console:bob"})
		synctest.Wait()
		time.Sleep(5 * time.Minute) // a person thinks for five minutes: parked
		aps := w.e.Approvals()
		if len(aps) != 1 {
			t.Fatalf("approvals = %v", aps)
		}
		w.answer(aps[0].ID, runtime.Answer{By: "console:carol", Decision: runtime.Approve})
		done, _ := w.e.Wait(w.ctx, rec.ID)
		if done.End != runtime.EndCompleted || done.Spent > time.Minute {
			t.Fatalf("run = %+v, want completed with the parked time unspent", done)
		}
	})
}

func TestApprovalExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.ApprovalTimeout = time.Minute })
		obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		time.Sleep(2 * time.Minute)
		ev := w.outcome(obs.Run)
		if ev.Kind != runtime.KindRefused || !strings.Contains(string(ev.Body), "expired") {
			t.Fatalf("outcome = %s %s", ev.Kind, ev.Body)
		}
		if _, err := w.e.Answer(w.ctx, obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve}); !errors.Is(err, runtime.ErrApprovalClosed) {
			t.Fatalf("late answer = %v, want ErrApprovalClosed", err)
		}
	})
}

func TestFourEyes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		strict := governance.ShippedModes()[governance.ModeSupervised]
		strict.Name, strict.ApprovalsRequired = "strict", 2
		w := newWorld(t, func(s *setup) { s.opts.Modes = []governance.Mode{strict}; s.opts.Mode = "strict" })
		obs := w.do("console:alice", "c1", "valve-1", "open", on)
		id := obs.Approval.ID
		if obs.Approval.Required != 2 {
			t.Fatalf("required = %d", obs.Approval.Required)
		}
		if _, err := w.e.Answer(w.ctx, id, runtime.Answer{By: "console:alice", Decision: runtime.Approve}); !errors.Is(err, runtime.ErrNotPermitted) {
			t.Fatalf("self-approval = %v, want ErrNotPermitted", err)
		}
		if ap := w.answer(id, runtime.Answer{By: "console:bob", Decision: runtime.Approve}); ap.Status != runtime.ApprovalPending {
			t.Fatalf("after one approval status = %s, want pending", ap.Status)
		}
		if _, err := w.e.Answer(w.ctx, id, runtime.Answer{By: "console:bob", Decision: runtime.Approve}); !errors.Is(err, runtime.ErrNotPermitted) {
			t.Fatalf("second approval by the same person = %v", err)
		}
		w.answer(id, runtime.Answer{By: "console:carol", Decision: runtime.Approve})
		if ev := w.outcome(obs.Run); ev.Kind != runtime.KindActed {
			t.Fatalf("outcome = %s", ev.Kind)
		}
	})
}

func TestModeChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		if _, _, err := w.e.SetMode(w.ctx, "console:bob", "turbo", ""); !errors.Is(err, runtime.ErrUnknownMode) {
			t.Fatalf("unknown mode = %v", err)
		}
		m, ap, err := w.e.SetMode(w.ctx, "console:bob", governance.ModeObserve, "storm")
		if err != nil || ap != nil || m.Name != governance.ModeObserve {
			t.Fatalf("narrowing = %+v %v %v, want immediate", m, ap, err)
		}
		want(t, w.do("mqtt:alice", "c1", "valve-1", "open", on), runtime.Refused, "mode observe does not permit it")
		m, ap, err = w.e.SetMode(w.ctx, "console:bob", governance.ModeMaintenance, "fixing the pump")
		if err != nil || ap == nil || m.Name != governance.ModeObserve {
			t.Fatalf("widening = %+v %v %v, want a pending approval", m, ap, err)
		}
		if _, err := w.e.Answer(w.ctx, ap.ID, runtime.Answer{By: "console:carol", Decision: runtime.Approve}); !errors.Is(err, runtime.ErrNotPermitted) {
			t.Fatalf("non-admin approval of widening = %v", err)
		}
		w.answer(ap.ID, runtime.Answer{By: "console:root", Admin: true, Decision: runtime.Approve})
		if got := w.e.Mode(w.ctx); got.Name != governance.ModeMaintenance || got.Expires.Sub(got.Since) != time.Hour {
			t.Fatalf("mode = %+v, want maintenance for an hour", got)
		}
		want(t, w.do("mqtt:alice", "c2", "valve-1", "open", on), runtime.Acted, "")
		time.Sleep(61 * time.Minute)
		if got := w.e.Mode(w.ctx); got.Name != governance.ModeSupervised {
			t.Fatalf("mode after max_duration = %s, want supervised", got.Name)
		}
	})
}

func TestSlowSubscriberCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		release := make(chan struct{})
		var got []uint64
		done := make(chan error, 1)
		go func() {
			done <- w.e.Subscribe(w.ctx, 0, func(ev runtime.Event) error {
				if len(got) == 0 {
					<-release // stuck on the first event
				}
				got = append(got, ev.Seq)
				if len(got) == 40 {
					return errors.New("enough")
				}
				return nil
			})
		}()
		for i := range 14 {
			w.do("mqtt:alice", "r"+string(rune('a'+i)), "tank-1", "level", value.Value{})
		}
		if last := w.e.LastSeq(); last < 40 {
			t.Fatalf("only %d events committed while the subscriber was stuck", last)
		}
		close(release)
		<-done
		for i, s := range got {
			if s != uint64(i+1) {
				t.Fatalf("subscriber saw seq %d at %d: %v", s, i, got)
			}
		}
	})
}

func TestIllegalAttemptTransitions(t *testing.T) {
	j := runtimetest.NewMemJournal()
	ctx := t.Context()
	commit := func(s runtime.AttemptState) error {
		_, err := j.Commit(ctx, runtime.Entry{Event: runtime.Event{Kind: runtime.KindInvoked}, Attempt: &runtime.Attempt{Key: "k", State: s}})
		return err
	}
	if err := commit(runtime.AttemptExecuting); !errors.Is(err, runtime.ErrIllegalTransition) {
		t.Fatalf("none -> executing = %v", err)
	}
	for _, s := range []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting, runtime.AttemptUnknown, runtime.AttemptReconciled} {
		if err := commit(s); err != nil {
			t.Fatalf("-> %s: %v", s, err)
		}
	}
	if err := commit(runtime.AttemptExecuting); !errors.Is(err, runtime.ErrIllegalTransition) || !strings.Contains(err.Error(), "reconciled -> executing") {
		t.Fatalf("reconciled -> executing = %v", err)
	}
	evs, _ := j.Events(ctx, 0, 0)
	if len(evs) != 5 {
		t.Fatalf("%d events stored, want 5: a refused transition stores nothing", len(evs))
	}
}

func TestRunPollsSensorsWithGovernedReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := sim.New(sim.Options{Devices: []devices.Device{
			{ID: "tank-1", Area: "greenhouse", Driver: "sim", Address: "tank", Capabilities: sensor("level", 5*time.Second)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		reg := devices.NewRegistry()
		_ = reg.Add("sim", g)
		e, err := runtime.New(t.Context(), runtime.Options{Registry: reg, Journal: runtimetest.NewMemJournal(), Mode: governance.ModeObserve})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- e.Run(ctx) }()
		time.Sleep(21 * time.Second)
		cancel()
		<-done
		if n := g.Count("read", "tank-1", "level"); n != 5 {
			t.Fatalf("polled %d times in 21s at 5s, want 5", n)
		}
		evs, _ := e.Events(t.Context(), 0, 0)
		observed := 0
		for _, ev := range evs {
			if ev.Kind == runtime.KindObserved && strings.Contains(string(ev.Body), `"principal":"gateway:poller"`) {
				observed++
			}
		}
		if observed != 5 {
			t.Fatalf("%d observed events from the poller, want 5", observed)
		}
		if _, err := e.Read(t.Context(), "x", "tank-1", "level"); !errors.Is(err, runtime.ErrStopped) {
			t.Fatalf("Read after Run ended = %v, want ErrStopped", err)
		}
	})
}

func TestDriverTimeoutIsAnUnknownEffectSettledByReadBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeInterlocked })
		// The valve opens but never answers: the read-back settles it.
		w.g.SetFault("valve-1", sim.Fault{AckDelay: time.Hour})
		obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, obs, runtime.Acted, "")
		if obs.Receipt.Confirmation != runtime.Confirmed || !strings.Contains(obs.Receipt.Detail, "did not answer") {
			t.Fatalf("receipt = %+v", obs.Receipt)
		}
		if a, _, _ := w.j.Attempt(w.ctx, "mqtt:alice/c1"); a.State != runtime.AttemptReconciled {
			t.Fatalf("attempt = %s, want reconciled", a.State)
		}
		if len(w.e.Locks()) != 0 {
			t.Fatalf("locks = %+v", w.e.Locks())
		}

		// The pump hangs before acting: it stays locked, nothing retried.
		w.g.SetFault("valve-1", sim.Fault{})
		w.g.SetFault("pump-1", sim.Fault{WriteDelay: time.Hour})
		w.g.Adjust(func(s *sim.State) { s.Level = 80 })
		obs = w.do("mqtt:alice", "c2", "pump-1", "on", on)
		want(t, obs, runtime.Failed, "pump-1.on is locked until an admin resolves attempt")
		locks := w.e.Locks()
		if len(locks) != 1 || locks[0].Key != "mqtt:alice/c2" || locks[0].State != runtime.AttemptUnknown {
			t.Fatalf("locks = %+v", locks)
		}
		w.g.SetFault("pump-1", sim.Fault{})
		again := w.do("mqtt:alice", "c3", "pump-1", "on", on)
		want(t, again, runtime.Refused, "pump-1.on is locked: attempt "+locks[0].ID)
		if n := w.g.Count("write", "pump-1", "on"); n != 1 {
			t.Fatalf("the pump was written %d times, want 1", n)
		}
	})
}
