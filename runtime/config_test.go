package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
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

func TestReconfigureSwapsTheConfigurationWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		// Supervised: a write asks.
		want(t, w.do("mqtt:alice", "c1", "valve-1", "open", on), runtime.ApprovalRequest, "")
		if _, err := w.e.Answer(w.ctx, w.e.Approvals()[0].ID, runtime.Answer{By: "console:bob", Decision: runtime.Deny, Reason: "no"}); err != nil {
			t.Fatal(err)
		}

		allowValve := governance.Rule{ID: "valve-by-day", Principal: "mqtt:*", Device: "valve-1", Capability: "open",
			Decision: governance.DecideAllow, ExpiresAt: time.Now().Add(time.Hour), MadeBy: "configuration"}
		cfg := runtime.Config{Policies: policies(), Rules: []governance.Rule{allowValve},
			Plans: []runtime.Plan{{Name: "look", Steps: []runtime.PlanStep{{Op: runtime.OpRead, Device: "tank-1", Capability: "level"}}}}}
		if err := w.e.Reconfigure(w.ctx, cfg); err != nil {
			t.Fatal(err)
		}
		want(t, w.do("mqtt:alice", "c2", "valve-1", "open", on), runtime.Acted, "")
		if names := w.e.PlanNames(); len(names) != 1 || names[0] != "look" {
			t.Fatalf("plans after the swap = %v", names)
		}

		// A configuration that does not check changes nothing.
		bad := cfg
		bad.Plans = append(bad.Plans, runtime.Plan{Name: "look"})
		if err := w.e.Reconfigure(w.ctx, bad); err == nil {
			t.Fatal("a plan defined twice was put in force")
		}
		bad = runtime.Config{Modes: []governance.Mode{{Name: "custom"}}}
		if err := w.e.Reconfigure(w.ctx, bad); err == nil {
			t.Fatal("a mode with no base was put in force")
		}
		want(t, w.do("mqtt:alice", "c3", "valve-1", "open", value.Bool(false)), runtime.Acted, "")

		// Nor does one that drops the mode in force.
		tight := governance.ShippedModes()[governance.ModeSupervised]
		tight.Name, tight.Base = "tight", governance.ModeSupervised
		if err := w.e.Reconfigure(w.ctx, runtime.Config{Policies: policies(), Modes: []governance.Mode{tight}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.e.SetMode(w.ctx, "console:ann", "tight", "test"); err != nil {
			t.Fatal(err)
		}
		if err := w.e.Reconfigure(w.ctx, runtime.Config{Policies: policies()}); !errors.Is(err, runtime.ErrUnknownMode) {
			t.Fatalf("dropping the mode in force = %v, want ErrUnknownMode", err)
		}
		if got := w.e.Mode(w.ctx).Name; got != "tight" {
			t.Fatalf("mode = %s, want tight", got)
		}
		// The rule went with the configuration that had it.
		want(t, w.do("mqtt:alice", "c4", "valve-1", "open", on), runtime.ApprovalRequest, "")
	})
}

// Steps run while the configuration is swapped under them; the race
// detector watches.
func TestReconfigureUnderLoad(t *testing.T) {
	w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeInterlocked })
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 2 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				obs, err := w.e.Read(w.ctx, "test", "tank-1", "level")
				if err != nil || obs.Kind != runtime.Completed {
					t.Errorf("reader %d: read = %v (%q), %v", i, obs.Kind, obs.Why, err)
					return
				}
			}
		})
	}
	for i := range 50 {
		cfg := runtime.Config{Policies: policies()}
		if i%2 == 0 {
			cfg.Plans = []runtime.Plan{{Name: "look", Steps: []runtime.PlanStep{{Op: runtime.OpRead, Device: "tank-1", Capability: "level"}}}}
		}
		if err := w.e.Reconfigure(w.ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

// A time-bound mode is bound from the first start, not only when switched
// to, and no decision is taken against it once it has run out.
func TestTimeBoundModeRunsOutEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeMaintenance })
		maint := governance.ShippedModes()[governance.ModeMaintenance]
		if maint.MaxDuration <= 0 {
			t.Fatal("maintenance has no max_duration")
		}
		if got := w.e.Mode(w.ctx); got.Name != governance.ModeMaintenance || got.Expires.IsZero() {
			t.Fatalf("mode at start = %+v, want maintenance with an expiry", got)
		}
		time.Sleep(maint.MaxDuration + time.Second)
		// Before anything else reads the mode, an operator asks for
		// interlocked: against supervised (what is in force), that widens
		// and asks an admin; against the expired maintenance it would not.
		rec, ap, err := w.e.SetMode(w.ctx, "console:olga", governance.ModeInterlocked, "after maintenance")
		if err != nil {
			t.Fatal(err)
		}
		if ap == nil || rec.Name != governance.ModeSupervised {
			t.Fatalf("SetMode after maintenance ran out = %+v, approval %v; want supervised and an approval to ask", rec, ap)
		}
	})
}

// A narrowing the journal cannot record stands, and the caller is told it
// will not survive a restart.
func TestUnjournaledNarrowingIsSaid(t *testing.T) {
	w := newWorld(t, func(s *setup) {
		s.opts.Mode = governance.ModeInterlocked
		s.journal = func(m *runtimetest.MemJournal) runtime.Journal {
			return &refusingJournal{MemJournal: m, kind: runtime.KindModeChanged}
		}
	})
	rec, _, err := w.e.SetMode(w.ctx, "console:ann", governance.ModeObserve, "closing up")
	if rec.Name != governance.ModeObserve || err == nil || !strings.Contains(err.Error(), "until the gateway restarts") || !errors.Is(err, runtime.ErrNotWitnessed) {
		t.Fatalf("SetMode with a journal that refuses = %+v, %v; want observe in force and an error saying it is not journaled", rec, err)
	}
}

// refusingJournal fails every commit of one kind of event.
type refusingJournal struct {
	*runtimetest.MemJournal
	kind runtime.Kind
}

func (j *refusingJournal) Commit(ctx context.Context, en runtime.Entry) (runtime.Event, error) {
	if en.Event.Kind == j.kind {
		return runtime.Event{}, errors.New("disk full")
	}
	return j.MemJournal.Commit(ctx, en)
}

// A narrowing closes the widenings asked for against the mode it left;
// staying in a time-bound mode does not re-arm its time; a rule from the
// configuration is removed in the file, not at run time.
func TestModeAndRuleLoopholes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfgRule := governance.Rule{ID: "from-file", Principal: "mqtt:*", Device: "heater-1", Capability: "on",
			Decision: governance.DecideAllow, ExpiresAt: time.Now().Add(time.Hour), MadeBy: "configuration"}
		w := newWorld(t, func(s *setup) { s.opts.Rules = []governance.Rule{cfgRule} })
		_, ap, err := w.e.SetMode(w.ctx, "console:root", governance.ModeMaintenance, "pump service")
		if err != nil || ap == nil {
			t.Fatalf("SetMode(maintenance) = %v, %v; want an approval to ask", ap, err)
		}
		if _, _, err := w.e.SetMode(w.ctx, "console:olga", governance.ModeObserve, "closing up"); err != nil {
			t.Fatal(err)
		}
		if _, err := w.e.Answer(w.ctx, ap.ID, runtime.Answer{By: "console:ann", Admin: true, Decision: runtime.Approve}); !errors.Is(err, runtime.ErrApprovalClosed) {
			t.Fatalf("approving a widening asked against the mode since left = %v, want ErrApprovalClosed", err)
		}
		if got := w.e.Mode(w.ctx).Name; got != governance.ModeObserve {
			t.Fatalf("mode = %s, want observe", got)
		}

		if err := w.e.RevokeRule(w.ctx, "from-file", "console:root"); !errors.Is(err, runtime.ErrRuleFromConfiguration) {
			t.Fatalf("revoking a rule of the file = %v, want ErrRuleFromConfiguration", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeMaintenance })
		first := w.e.Mode(w.ctx).Expires
		time.Sleep(30 * time.Minute)
		if _, _, err := w.e.SetMode(w.ctx, "console:olga", governance.ModeMaintenance, "a little longer"); err != nil {
			t.Fatal(err)
		}
		if got := w.e.Mode(w.ctx).Expires; !got.Equal(first) {
			t.Fatalf("staying in maintenance moved its end from %s to %s", first, got)
		}
	})
}

// A rule revoked while a step reads the world no longer allows that step:
// the step takes the configuration again before it judges.
func TestRuleRevokedDuringAStepNoLongerAllowsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		w.g.Adjust(func(s *sim.State) { s.Level = 80 })
		obs := w.do("mqtt:alice", "p1", "pump-1", "on", on)
		want(t, obs, runtime.ApprovalRequest, "")
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.ApproveAndRule, RuleFor: time.Hour, RuleAnyValue: true})
		if _, err := w.e.Wait(w.ctx, obs.Run); err != nil {
			t.Fatal(err)
		}
		var rule string
		for _, r := range w.e.Rules() {
			rule = r.Rule.ID
		}
		if rule == "" {
			t.Fatal("no rule was made")
		}
		time.Sleep(31 * time.Second) // the interlock's reading goes stale
		w.g.SetFault("tank-1", sim.Fault{ReadDelay: 3 * time.Second})
		done := make(chan runtime.Observation, 1)
		go func() { done <- w.do("mqtt:alice", "p2", "pump-1", "on", value.Bool(false)) }()
		synctest.Wait() // the step is reading the interlock's sensor
		if err := w.e.RevokeRule(w.ctx, rule, "console:root"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		want(t, <-done, runtime.ApprovalRequest, "")
	})
}

// A time-bound mode configured as the initial one keeps its end across a
// restart: the first start journals it.
func TestInitialModeEndSurvivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeMaintenance })
		first := w.e.Mode(w.ctx)
		time.Sleep(20 * time.Minute)
		if err := w.e.Close(); err != nil {
			t.Fatal(err)
		}
		reg := devices.NewRegistry()
		if err := reg.Add("sim", w.g); err != nil {
			t.Fatal(err)
		}
		again, err := runtime.New(w.ctx, runtime.Options{Registry: reg, Journal: w.j, Policies: policies(), Mode: governance.ModeMaintenance})
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		if got := again.Mode(w.ctx); got.Name != governance.ModeMaintenance || !got.Expires.Equal(first.Expires) {
			t.Fatalf("mode after a restart = %+v, want maintenance ending at %s", got, first.Expires)
		}
	})
}

// TestDenyRuleMadeWhileARequestWaitsStopsItsAct: a deny rule that comes
// into force while a request waits ("valve under repair") refuses the act
// of an approval given after it, and the foresight says so beforehand.
func TestDenyRuleMadeWhileARequestWaitsStopsItsAct(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		asked := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, asked, runtime.ApprovalRequest, "")
		repair := governance.Rule{ID: "valve-under-repair", Principal: "mqtt:*", Device: "valve-1", Capability: "open",
			Decision: governance.DecideDeny, Reason: "valve under repair", MadeBy: "configuration"}
		if err := w.e.Reconfigure(w.ctx, runtime.Config{Policies: policies(), Rules: []governance.Rule{repair}}); err != nil {
			t.Fatal(err)
		}
		if f, ok := w.e.Foresee(asked.Approval.ID); !ok || !f.Refuse || !strings.Contains(f.Why, "valve-under-repair") {
			t.Fatalf("Foresee = %+v, %v; want refused by the deny rule", f, ok)
		}
		w.answer(asked.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve, Reason: "looks fine"})
		ev := w.outcome(asked.Run)
		if ev.Kind != runtime.KindRefused || !strings.Contains(string(ev.Body), "deny rule valve-under-repair") {
			t.Fatalf("the act after the rule = %s %s, want refused by it", ev.Kind, ev.Body)
		}
		if n := w.g.Count("write", "valve-1", "open"); n != 0 {
			t.Fatalf("driver writes = %d, want none", n)
		}
	})
}
