package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shadowgate/shadowgate/runtime"
)

// running starts w's engine and stops it when the test ends.
func running(t *testing.T, w *world) {
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- w.e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A second start of a plan while a run of it has not ended is refused,
// whoever asks, naming the run; a repeat of the same request id is not a
// second start; once the run ends the plan starts again. A parked run
// counts as not ended, and its approval is named.
func TestOneRunOfAPlanAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		soak := runtime.Plan{Name: "soak", Lease: runtime.Lease{MaxSteps: 5},
			Steps: []runtime.PlanStep{{Op: runtime.OpWait, Wait: time.Minute}}}
		pump := runtime.Plan{Name: "pump", Lease: runtime.Lease{MaxSteps: 5, MaxActuations: 1},
			Steps: []runtime.PlanStep{{Op: runtime.OpWrite, Device: "pump-1", Capability: "on", Value: on}}}
		race := soak
		race.Name = "race"
		w := newWorld(t, func(s *setup) { s.opts.Plans = []runtime.Plan{soak, pump, race} })
		first, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "soak", Principal: "console:bob", Origin: "console", RequestID: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, who := range []runtime.StartPlan{
			{Plan: "soak", Principal: "console:bob", Origin: "console"},
			{Plan: "soak", Principal: "mqtt:alice", Origin: "mqtt", RequestID: "m1"},
			{Plan: "soak", Principal: "schedule:soak", Origin: "schedule"},
		} {
			_, err := w.e.StartPlan(w.ctx, who)
			var pr *runtime.PlanRunningError
			if !errors.Is(err, runtime.ErrPlanRunning) || !errors.As(err, &pr) || pr.Run != first.ID || !strings.Contains(err.Error(), first.ID) {
				t.Fatalf("second start by %s = %v; want ErrPlanRunning naming %s", who.Principal, err, first.ID)
			}
		}
		again, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "soak", Principal: "console:bob", Origin: "console", RequestID: "r1"})
		if err != nil || again.ID != first.ID {
			t.Fatalf("the same request again = %+v, %v; want run %s", again, err, first.ID)
		}
		if _, err := w.e.Wait(w.ctx, first.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "soak", Principal: "mqtt:alice", Origin: "mqtt", RequestID: "m1"}); err != nil {
			t.Fatalf("start after the run ended = %v", err)
		}

		// Starts at once: one wins.
		var wg sync.WaitGroup
		var won atomic.Int32
		for i := range 8 {
			wg.Go(func() {
				_, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "race", Principal: "api:bot" + string(rune('0'+i)), Origin: "api"})
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, runtime.ErrPlanRunning):
					t.Errorf("a start at once = %v", err)
				}
			})
		}
		wg.Wait()
		if n := won.Load(); n != 1 {
			t.Errorf("%d of 8 starts at once started the plan, want 1", n)
		}

		parked, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "pump", Principal: "console:bob", Origin: "console"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		aps := w.e.Approvals()
		if len(aps) != 1 {
			t.Fatalf("approvals = %+v, want the pump's", aps)
		}
		_, err = w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "pump", Principal: "api:carol", Origin: "api"})
		if !errors.Is(err, runtime.ErrPlanRunning) || !strings.Contains(err.Error(), parked.ID) || !strings.Contains(err.Error(), aps[0].ID) {
			t.Fatalf("start while parked = %v; want ErrPlanRunning naming %s and approval %s", err, parked.ID, aps[0].ID)
		}
	})
}

// A schedule that comes round while its plan's run has not ended skips
// the start and journals it, naming the run; runs never overlap.
func TestScheduleSkipsWhileARunGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := runtime.Plan{Name: "slow", Every: 10 * time.Second, Lease: runtime.Lease{MaxSteps: 5},
			Steps: []runtime.PlanStep{{Op: runtime.OpWait, Wait: 25 * time.Second}}}
		w := newWorld(t, func(s *setup) { s.opts.Plans = []runtime.Plan{slow} })
		running(t, w)
		time.Sleep(65 * time.Second)
		synctest.Wait()
		// Ticks at 10s (starts, ends at 35s), 20s and 30s skipped, 40s
		// (starts, ends at 65s), 50s and 60s skipped.
		var runs []runtime.RunRecord
		for _, r := range w.e.Runs() {
			if r.Plan == "slow" {
				runs = append(runs, r)
			}
		}
		if len(runs) != 2 {
			t.Fatalf("runs = %+v, want 2", runs)
		}
		evs, _ := w.e.Events(w.ctx, 0, 0)
		var skipped []string
		for _, ev := range evs {
			if ev.Kind != runtime.KindScheduleSkipped {
				continue
			}
			var b runtime.ScheduleSkippedBody
			if err := ev.DecodeBody(&b); err != nil {
				t.Fatal(err)
			}
			if b.Plan != "slow" || !strings.Contains(b.Why, b.Run) {
				t.Errorf("skip %+v", b)
			}
			skipped = append(skipped, b.Run)
		}
		older, newer := runs[1].ID, runs[0].ID // Runs is newest first
		if diff := cmp.Diff([]string{older, older, newer, newer}, skipped); diff != "" {
			t.Errorf("skips name the run going (-want +got):\n%s", diff)
		}
	})
}
