package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/shadowgate/shadowgate/governance"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// watching is a driver that tells of changes: the greenhouse, with
// notices a test sends.
type watching struct {
	*sim.Greenhouse
	notices chan devices.Notice
}

func (w *watching) Watch(ctx context.Context, fn func(devices.Notice)) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-w.notices:
			fn(n)
		}
	}
}

// TestWatcherNoticesAreJournaled: a reading a device gives of its own
// accord is a judged, journaled read step; a device its driver lost goes
// offline with the driver's reason, its readings turn bad, a step on it
// fails naming the reason, and it comes back online when found.
func TestWatcherNoticesAreJournaled(t *testing.T) {
	var wd *watching
	w := newWorld(t, func(s *setup) {
		s.driver = func(g *sim.Greenhouse) devices.Driver {
			wd = &watching{Greenhouse: g, notices: make(chan devices.Notice)}
			return wd
		}
	})
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- w.e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	at := w.e.LastSeq()
	wd.notices <- devices.Notice{Device: "tank-1", Capability: "level", Reading: &devices.Reading{Value: value.Number(42)}}
	ev := waitEvent(t, w, at, runtime.KindObserved, func(ev runtime.Event) bool {
		var b runtime.ObservedBody
		return json.Unmarshal(ev.Body, &b) == nil && b.Principal == "gateway:watch" && b.Value == value.Number(42)
	})
	if ev.Device != "tank-1" {
		t.Fatalf("observed event %+v", ev)
	}

	at = w.e.LastSeq()
	w.g.SetFault("tank-1", sim.Fault{Offline: true})
	wd.notices <- devices.Notice{Device: "tank-1", Lost: errors.New("the port closed")}
	ev = waitEvent(t, w, at, runtime.KindDeviceOffline, func(ev runtime.Event) bool { return ev.Device == "tank-1" })
	var body runtime.DeviceBody
	if err := json.Unmarshal(ev.Body, &body); err != nil || body.Reason != "the port closed" {
		t.Fatalf("device_offline body %s, %v: want the driver's reason", ev.Body, err)
	}
	for _, r := range w.e.Readings() {
		if r.Device == "tank-1" && r.Reading.Quality != devices.QualityBad {
			t.Fatalf("tank-1's reading is %v after it went offline, want bad", r.Reading.Quality)
		}
	}
	obs, err := w.e.Read(w.ctx, "test:alice", "tank-1", "level")
	if err != nil || obs.Kind != runtime.Failed || !strings.Contains(obs.Why, "device tank-1 is offline: the port closed") {
		t.Fatalf("read of a lost device = %+v, %v; want failed naming the reason", obs, err)
	}

	at = w.e.LastSeq()
	w.g.SetFault("tank-1", sim.Fault{})
	wd.notices <- devices.Notice{Device: "tank-1", Found: true}
	waitEvent(t, w, at, runtime.KindDeviceOnline, func(ev runtime.Event) bool { return ev.Device == "tank-1" })
	// Found again, it is read at once: what it holds now is known, not the
	// reading from before it went.
	waitEvent(t, w, at, runtime.KindObserved, func(ev runtime.Event) bool {
		var b runtime.ObservedBody
		return ev.Device == "tank-1" && json.Unmarshal(ev.Body, &b) == nil && b.Principal == "gateway:found" && b.Quality == "good"
	})
	if obs, _ := w.e.Read(w.ctx, "test:alice", "tank-1", "level"); obs.Kind != runtime.Completed {
		t.Fatalf("read after the device was found = %+v", obs)
	}
}

// TestVanishedDeviceIsNoticedWithoutAStep: a driver that does not tell
// still has its lost device journaled offline, by the engine's sweep.
func TestVanishedDeviceIsNoticedWithoutAStep(t *testing.T) {
	w := newWorld(t, nil)
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- w.e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	runtimetest.WaitFor(t, "the first refresh", func() bool { return len(w.e.Devices()) > 0 })
	at := w.e.LastSeq()
	w.g.SetFault("valve-1", sim.Fault{Offline: true})
	ev := waitEvent(t, w, at, runtime.KindDeviceOffline, func(ev runtime.Event) bool { return ev.Device == "valve-1" })
	if !strings.Contains(string(ev.Body), "offline by an injected fault") {
		t.Fatalf("device_offline body %s does not say why", ev.Body)
	}
}

// waitEvent waits for an event of kind after seq at that match accepts.
func waitEvent(t *testing.T, w *world, at uint64, kind runtime.Kind, match func(runtime.Event) bool) runtime.Event {
	t.Helper()
	var found runtime.Event
	runtimetest.WaitFor(t, "a "+string(kind)+" event", func() bool {
		evs, _ := w.e.Events(w.ctx, at, 0)
		for _, ev := range evs {
			if ev.Kind == kind && match(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// TestReadBackContradictsAnotherConfirmation: an actuator confirmed by a
// sensor is still read back after the act, and a read-back that disagrees
// with the command contradicts it, whatever the sensor said.
func TestReadBackContradictsAnotherConfirmation(t *testing.T) {
	w := newWorld(t, func(s *setup) {
		s.opts.Policies["valve-1.open"] = runtime.CapPolicy{
			Effects: &runtime.Declared{Reversible: true, Contained: true},
			Confirm: &runtime.Confirm{Sensor: "tank-1.level", Op: governance.OpGT, Value: value.Number(0), Within: time.Second},
		}
	})
	w.g.SetFault("valve-1", sim.Fault{Stuck: true})
	obs := w.do("test:alice", "stuck-1", "valve-1", "open", value.Bool(true))
	if obs.Kind == runtime.ApprovalRequest {
		w.answer(obs.Approval.ID, runtime.Answer{By: "test:bob", Decision: runtime.Approve})
	}
	ev := w.outcome(obs.Run)
	var rc runtime.Receipt
	if err := json.Unmarshal(ev.Body, &rc); err != nil || rc.Confirmation != runtime.WrongFinal ||
		!strings.Contains(rc.Detail, "the read-back of valve-1.open is false, not the commanded true") {
		t.Fatalf("act on a stuck valve confirmed by a sensor = %s (%v); want contradicted by the read-back", ev.Body, err)
	}
}
