package runtime_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// TestForeseeJudgesAPendingActAgain: a pending request is judged again as
// its act would judge it, when the mode or an interlock changes, and the
// act, approved, meets what was foreseen.
func TestForeseeJudgesAPendingActAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		want(t, w.do("gateway:poller", "p1", "tank-1", "level", value.Value{}), runtime.Completed, "")
		obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		if obs.Approval == nil {
			t.Fatalf("pump-1.on = %+v, want a request", obs)
		}
		id := obs.Approval.ID
		if f, ok := w.e.Foresee(id); !ok || f.Refuse || f.Mode != governance.ModeSupervised {
			t.Fatalf("foresight in supervised = %+v %v, want it to go ahead", f, ok)
		}
		// A reading that does not hold, fresh and good: refused, by the
		// interlock, as last read.
		w.g.Adjust(func(st *sim.State) { st.Level = 4 })
		w.do("gateway:poller", "p2", "tank-1", "level", value.Value{})
		if f, _ := w.e.Foresee(id); !f.Refuse || !f.Interlock || !strings.Contains(f.Why, "interlock tank-1.level > 10") {
			t.Fatalf("foresight with the tank low = %+v, want refused by the interlock", f)
		}
		// A reading that cannot be judged (bad, or too old) is read again
		// by the act: the foresight names it and does not refuse.
		w.g.Adjust(func(st *sim.State) { st.Level = 60 })
		w.g.SetFault("tank-1", sim.Fault{ReadErr: errors.New("sensor cable cut")})
		w.do("gateway:poller", "p3", "tank-1", "level", value.Value{})
		if f, _ := w.e.Foresee(id); f.Refuse || len(f.Unread) != 1 || !strings.Contains(f.Unread[0], "tank-1.level > 10: the reading of tank-1.level is not good") {
			t.Fatalf("foresight with the tank's reading bad = %+v, want the interlock named as unread", f)
		}
		w.g.SetFault("tank-1", sim.Fault{})
		w.do("gateway:poller", "p4", "tank-1", "level", value.Value{})
		time.Sleep(31 * time.Second)
		if f, _ := w.e.Foresee(id); f.Refuse || len(f.Unread) != 1 || !strings.Contains(f.Unread[0], "old (max_age 30s)") {
			t.Fatalf("foresight with the tank's reading old = %+v, want the interlock named as unread", f)
		}
		w.do("gateway:poller", "p5", "tank-1", "level", value.Value{})
		if f, _ := w.e.Foresee(id); f.Refuse || len(f.Unread) != 0 {
			t.Fatalf("foresight with the tank read again = %+v, want it to go ahead", f)
		}
		if _, _, err := w.e.SetMode(w.ctx, "console:bob", governance.ModeObserve, "storm"); err != nil {
			t.Fatal(err)
		}
		f, _ := w.e.Foresee(id)
		if !f.Refuse || f.Mode != governance.ModeObserve || !strings.Contains(f.Why, "mode observe does not permit it") {
			t.Fatalf("foresight in observe = %+v, want refused by the mode", f)
		}
		w.answer(id, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
		if ev := w.outcome(obs.Run); ev.Kind != runtime.KindRefused || !strings.Contains(string(ev.Body), "mode observe does not permit it") {
			t.Fatalf("the act = %s %s, want refused as foreseen", ev.Kind, ev.Body)
		}
		if _, ok := w.e.Foresee(id); ok {
			t.Fatal("an answered request is foreseen")
		}
		if _, ok := w.e.Foresee("no-such-approval"); ok {
			t.Fatal("an unknown request is foreseen")
		}
	})
}

// TestForeseeSeesTheActuatorMoved: consent asked with the valve closed is
// not consent with it open, at the act and in the foresight alike.
func TestForeseeSeesTheActuatorMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		want(t, w.do("gateway:poller", "p1", "tank-1", "level", value.Value{}), runtime.Completed, "")
		obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		if obs.Approval == nil {
			t.Fatalf("pump-1.on = %+v, want a request", obs)
		}
		w.g.Adjust(func(st *sim.State) { st.Pump = true })
		w.do("gateway:poller", "p2", "pump-1", "on", value.Value{})
		f, _ := w.e.Foresee(obs.Approval.ID)
		if !f.Refuse || !strings.Contains(f.Why, "pump-1.on was false when this was asked and reads true now") {
			t.Fatalf("foresight with the pump moved = %+v, want refused", f)
		}
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
		if ev := w.outcome(obs.Run); ev.Kind != runtime.KindRefused {
			t.Fatalf("the act = %s %s, want refused as foreseen", ev.Kind, ev.Body)
		}
	})
}
