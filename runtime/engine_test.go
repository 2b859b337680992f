package runtime_test

import (
	"context"
	"errors"
	"log/slog"
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

// world is a sim greenhouse behind an engine, for one test.
type world struct {
	t   *testing.T
	g   *sim.Greenhouse
	e   *runtime.Engine
	j   *runtimetest.MemJournal
	ctx context.Context
}

func sensor(name string, poll time.Duration) []devices.Capability {
	return []devices.Capability{{Name: name, Kind: devices.KindSensor, Type: value.TypeNumber, Poll: poll}}
}

func greenhouse() []devices.Device { return runtimetest.Greenhouse("greenhouse") }

func policies() map[string]runtime.CapPolicy {
	readBack := &runtime.Confirm{ReadBack: true, Within: 3 * time.Second}
	return map[string]runtime.CapPolicy{
		"pump-1.on": {
			Effects:    &runtime.Declared{Reversible: true, Contained: true, Costs: true},
			Envelope:   &governance.Envelope{MinDwell: 5 * time.Second},
			Interlocks: []governance.Condition{{Sensor: "tank-1.level", Op: governance.OpGT, Value: value.Number(10), MaxAge: 30 * time.Second}},
			Confirm:    readBack,
		},
		"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Confirm: readBack},
		"heater-1.on": {
			Effects:  &runtime.Declared{Reversible: true, Contained: true, Costs: true},
			Envelope: &governance.Envelope{Allowed: []value.Value{value.Bool(false)}},
			Confirm:  readBack,
		},
	}
}

type setup struct {
	opts    runtime.Options
	initial *sim.State
	// journal, if set, wraps the in-memory journal the engine uses.
	journal func(*runtimetest.MemJournal) runtime.Journal
	// driver, if set, wraps the simulated greenhouse the engine drives.
	driver func(*sim.Greenhouse) devices.Driver
}

func newWorld(t *testing.T, mod func(*setup)) *world {
	t.Helper()
	s := &setup{opts: runtime.Options{Policies: policies(), Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}}
	if mod != nil {
		mod(s)
	}
	g, err := sim.New(sim.Options{Devices: greenhouse(), Initial: s.initial})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := g.Open(ctx); err != nil {
		t.Fatal(err)
	}
	var d devices.Driver = g
	if s.driver != nil {
		d = s.driver(g)
	}
	reg := devices.NewRegistry()
	if err := reg.Add("sim", d); err != nil {
		t.Fatal(err)
	}
	j := runtimetest.NewMemJournal()
	s.opts.Registry, s.opts.Journal = reg, j
	if s.journal != nil {
		s.opts.Journal = s.journal(j)
	}
	e, err := runtime.New(ctx, s.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return &world{t: t, g: g, e: e, j: j, ctx: ctx}
}

func (w *world) do(principal, id, device, capability string, v value.Value) runtime.Observation {
	w.t.Helper()
	obs, err := w.e.Do(w.ctx, runtime.Command{Principal: principal, Origin: "test", RequestID: id, Device: device, Capability: capability, Value: v})
	if err != nil {
		w.t.Fatalf("Do(%s.%s = %v): %v", device, capability, v, err)
	}
	return obs
}

func (w *world) answer(id string, a runtime.Answer) runtime.Approval {
	w.t.Helper()
	ap, err := w.e.Answer(w.ctx, id, a)
	if err != nil {
		w.t.Fatalf("Answer(%s): %v", id, err)
	}
	return ap
}

// acted waits for the acted (or failed/refused) outcome of a run from the journal.
func (w *world) outcome(run string) runtime.Event {
	w.t.Helper()
	if _, err := w.e.Wait(w.ctx, run); err != nil {
		w.t.Fatalf("Wait(%s): %v", run, err)
	}
	evs, _ := w.e.Events(w.ctx, 0, 0)
	for i := len(evs) - 1; i >= 0; i-- {
		switch ev := evs[i]; ev.Kind {
		case runtime.KindActed, runtime.KindRefused, runtime.KindFailed:
			if ev.Run == run {
				return ev
			}
		}
	}
	w.t.Fatalf("run %s has no outcome event", run)
	return runtime.Event{}
}

func (w *world) run(id string) runtime.RunRecord {
	for _, r := range w.e.Runs() {
		if r.ID == id {
			return r
		}
	}
	w.t.Fatalf("run %s not found", id)
	return runtime.RunRecord{}
}

func want(t *testing.T, obs runtime.Observation, kind runtime.ObservationKind, why string) {
	t.Helper()
	if obs.Kind != kind {
		t.Fatalf("observation = %s (%q), want %s", obs.Kind, obs.Why, kind)
	}
	if why != "" && !strings.Contains(obs.Why, why) {
		t.Fatalf("observation why = %q, want it to contain %q", obs.Why, why)
	}
}

var on = value.Bool(true)

func TestAllowedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		obs := w.do("mqtt:alice", "r1", "tank-1", "level", value.Value{})
		want(t, obs, runtime.Completed, "")
		if obs.Reading == nil || obs.Reading.Value.Num != 60 || obs.Reading.Quality != devices.QualityGood {
			t.Fatalf("reading = %+v, want 60%% good", obs.Reading)
		}
		if n := w.g.Count("read", "tank-1", "level"); n != 1 {
			t.Fatalf("driver reads = %d, want 1", n)
		}
	})
}

func TestWriteAsksIsApprovedAndActsConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil)
		obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		want(t, obs, runtime.ApprovalRequest, "mode supervised asks: it writes greenhouse/pump-1")
		ap := obs.Approval
		if ap == nil || ap.Status != runtime.ApprovalPending || ap.Principal != "mqtt:alice" || len(ap.Interlocks) != 1 {
			t.Fatalf("approval = %+v", ap)
		}
		if n := w.g.Count("write", "pump-1", "on"); n != 0 {
			t.Fatalf("a parked write reached the driver %d times", n)
		}
		if got := w.e.Approvals(); len(got) != 1 || got[0].ID != ap.ID {
			t.Fatalf("pending approvals = %v", got)
		}
		answered := w.answer(ap.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
		if answered.Status != runtime.ApprovalApproved || answered.Authorization == nil {
			t.Fatalf("answered approval = %+v", answered)
		}
		ev := w.outcome(obs.Run)
		if ev.Kind != runtime.KindActed || !strings.Contains(string(ev.Body), `"confirmation":"confirmed"`) {
			t.Fatalf("outcome = %s %s, want acted and confirmed", ev.Kind, ev.Body)
		}
		if !w.g.State().Pump {
			t.Fatal("the pump is not on")
		}
		if n := w.g.Count("write", "pump-1", "on"); n != 1 {
			t.Fatalf("driver writes = %d, want 1", n)
		}
		a, ok, _ := w.j.Attempt(w.ctx, "mqtt:alice/c1")
		if !ok || a.State != runtime.AttemptReceipt || a.Authorization != answered.Authorization.ID {
			t.Fatalf("attempt = %+v", a)
		}
		if _, err := w.e.Answer(w.ctx, ap.ID, runtime.Answer{By: "console:carol", Decision: runtime.Approve}); !errors.Is(err, runtime.ErrApprovalClosed) {
			t.Fatalf("second answer = %v, want ErrApprovalClosed", err)
		}
	})
}

// endHookJournal is a MemJournal that calls hook after it commits a run's
// end.
type endHookJournal struct {
	*runtimetest.MemJournal
	hook func()
}

func (j *endHookJournal) Commit(ctx context.Context, en runtime.Entry) (runtime.Event, error) {
	ev, err := j.MemJournal.Commit(ctx, en)
	if err == nil && en.Event.Kind == runtime.KindEnded && j.hook != nil {
		j.hook()
	}
	return ev, err
}

// TestARepeatOnceTheRunEndedIsToldTheAct: a request that asked for an
// approval, approved and acted, is repeated the moment its run's end is
// written: the repeat is told the act, not the approval asked first.
func TestARepeatOnceTheRunEndedIsToldTheAct(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hj := &endHookJournal{}
		w := newWorld(t, func(s *setup) {
			s.journal = func(m *runtimetest.MemJournal) runtime.Journal { hj.MemJournal = m; return hj }
		})
		obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
		want(t, obs, runtime.ApprovalRequest, "mode supervised asks")
		var repeated []runtime.Observation
		hj.hook = func() { repeated = append(repeated, w.do("mqtt:alice", "c1", "pump-1", "on", on)) }
		w.answer(obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
		if ev := w.outcome(obs.Run); ev.Kind != runtime.KindActed {
			t.Fatalf("outcome = %s %s, want acted", ev.Kind, ev.Body)
		}
		if len(repeated) != 1 || repeated[0].Kind != runtime.Acted || !repeated[0].Replayed || repeated[0].Receipt == nil {
			t.Fatalf("the repeat at the run's end was told %+v", repeated)
		}
	})
}

// approvalHookJournal is a MemJournal that calls hook with each approval
// request it has written, before Commit returns.
type approvalHookJournal struct {
	*runtimetest.MemJournal
	hook func(id string)
}

func (j *approvalHookJournal) Commit(ctx context.Context, en runtime.Entry) (runtime.Event, error) {
	ev, err := j.MemJournal.Commit(ctx, en)
	if err == nil && en.Event.Kind == runtime.KindApprovalRequested && j.hook != nil && en.Approval != nil {
		j.hook(en.Approval.ID)
	}
	return ev, err
}

// TestAnApprovalIsFoundTheMomentItsRequestIsWritten: an approval's id is
// published once its request is written, a moment before the engine files
// it; a look-up and an answer that come in that moment wait for it, and
// find it.
func TestAnApprovalIsFoundTheMomentItsRequestIsWritten(t *testing.T) {
	hj := &approvalHookJournal{}
	w := newWorld(t, func(s *setup) {
		s.journal = func(m *runtimetest.MemJournal) runtime.Journal { hj.MemJournal = m; return hj }
	})
	type result struct {
		found bool
		err   error
	}
	got := make(chan result, 1)
	hj.hook = func(id string) {
		go func() {
			_, found := w.e.Approval(id)
			_, err := w.e.Answer(w.ctx, id, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
			got <- result{found, err}
		}()
		time.Sleep(50 * time.Millisecond) // the look-up comes before the approval is filed
	}
	obs := w.do("mqtt:alice", "c1", "pump-1", "on", on)
	want(t, obs, runtime.ApprovalRequest, "mode supervised asks")
	r := <-got
	if !r.found || r.err != nil {
		t.Fatalf("the approval looked up as its request was written: found %v; answered: %v", r.found, r.err)
	}
	if ev := w.outcome(obs.Run); ev.Kind != runtime.KindActed {
		t.Fatalf("outcome = %s %s, want acted", ev.Kind, ev.Body)
	}
}
