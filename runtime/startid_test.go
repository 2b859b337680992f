package runtime_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// TestPlanStartIDOutlivesARestartAndOlderRuns: a plan start sent again
// with the same request id is the run it started, not a second one that
// writes again: after a restart, and after a thousand other runs pushed
// the first out of memory.
func TestPlanStartIDOutlivesARestartAndOlderRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pump := runtime.Plan{Name: "pump", Lease: runtime.Lease{MaxSteps: 5, MaxActuations: 1},
			Steps: []runtime.PlanStep{{Op: runtime.OpWrite, Device: "valve-1", Capability: "open", Value: on}}}
		plans := []runtime.Plan{pump}
		w := newWorld(t, func(s *setup) { s.opts.Plans, s.opts.Mode = plans, governance.ModeMaintenance })
		start := runtime.StartPlan{Plan: "pump", Principal: "mqtt:line-3", Origin: "mqtt", RequestID: "fill-1"}
		first, err := w.e.StartPlan(w.ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		if rr, err := w.e.Wait(w.ctx, first.ID); err != nil || rr.End != runtime.EndCompleted {
			t.Fatalf("the first run = %+v, %v", rr, err)
		}
		// A thousand other runs push it out of the engine's memory.
		for range 1001 {
			w.do("gateway:poller", "", "tank-1", "level", value.Value{})
		}
		if again, err := w.e.StartPlan(w.ctx, start); err != nil || again.ID != first.ID {
			t.Fatalf("the same start after a thousand runs = %+v, %v; want run %s", again, err, first.ID)
		}
		_ = w.e.Close()
		reg := devices.NewRegistry()
		if err := reg.Add("sim", w.g); err != nil {
			t.Fatal(err)
		}
		e, err := runtime.New(w.ctx, runtime.Options{Registry: reg, Journal: w.j, Policies: policies(), Plans: plans, Mode: governance.ModeMaintenance})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		again, err := e.StartPlan(w.ctx, start)
		if err != nil || again.ID != first.ID || again.End != runtime.EndCompleted {
			t.Fatalf("the same start after a restart = %+v, %v; want run %s, completed", again, err, first.ID)
		}
		time.Sleep(time.Second)
		if n := w.g.Count("write", "valve-1", "open"); n != 1 {
			t.Fatalf("valve-1 written %d times, want once", n)
		}
		other := start
		other.RequestID = "fill-2"
		if r, err := e.StartPlan(w.ctx, other); err != nil || r.ID == first.ID {
			t.Fatalf("a new id = %+v, %v; want a new run", r, err)
		}
	})
}

// Identifiers made one after another sort in the order they were made,
// so that the journal's store adds what they name at the end of its
// trees; made in the same millisecond, they still differ.
func TestIdentifiersSortInTheOrderMade(t *testing.T) {
	var ids []string
	for range 5 {
		ids = append(ids, runtime.NewID("run"))
		time.Sleep(2 * time.Millisecond)
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("ids made in turn do not sort in turn: %v", ids)
	}
	seen := map[string]bool{}
	for range 10_000 {
		id := runtime.NewID("act")
		if seen[id] || len(id) != len("act-")+24 {
			t.Fatalf("id %q: made twice, or not 24 hex digits", id)
		}
		seen[id] = true
	}
}
