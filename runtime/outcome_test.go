package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
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

// outcomeDriver is the simulated greenhouse answering one device's calls
// with a typed driver outcome. A write may reach the device first (a lost
// acknowledgement) or not (a refusal, an offline link).
type outcomeDriver struct {
	*sim.Greenhouse
	mu        sync.Mutex
	device    string
	readErr   error
	writeErr  error
	passWrite bool // the write reaches the device before the error
}

func (d *outcomeDriver) set(device string, readErr, writeErr error, passWrite bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.device, d.readErr, d.writeErr, d.passWrite = device, readErr, writeErr, passWrite
}

func (d *outcomeDriver) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	d.mu.Lock()
	err := d.readErr
	hit := device == d.device
	d.mu.Unlock()
	if hit && err != nil {
		return devices.Reading{}, &devices.OpError{Op: "read", Device: device, Capability: capability, Err: err}
	}
	return d.Greenhouse.Read(ctx, device, capability)
}

func (d *outcomeDriver) Write(ctx context.Context, device, capability string, v value.Value) error {
	d.mu.Lock()
	err, pass := d.writeErr, d.passWrite
	hit := device == d.device
	d.mu.Unlock()
	if !hit || err == nil {
		return d.Greenhouse.Write(ctx, device, capability, v)
	}
	if pass {
		if werr := d.Greenhouse.Write(ctx, device, capability, v); werr != nil {
			return werr
		}
	}
	return &devices.OpError{Op: "write", Device: device, Capability: capability, Err: err}
}

func outcomeWorld(t *testing.T) (*world, *outcomeDriver) {
	t.Helper()
	var od *outcomeDriver
	w := newWorld(t, func(s *setup) {
		s.opts.Mode = governance.ModeInterlocked
		s.driver = func(g *sim.Greenhouse) devices.Driver { od = &outcomeDriver{Greenhouse: g}; return od }
	})
	return w, od
}

// failedBody returns the body of the last failed event about device.
func failedBody(t *testing.T, w *world, device string) runtime.FailedBody {
	t.Helper()
	evs, err := w.e.Events(w.ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == runtime.KindFailed && evs[i].Device == device {
			var b runtime.FailedBody
			if err := json.Unmarshal(evs[i].Body, &b); err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no failed event about %s", device)
	return runtime.FailedBody{}
}

// An unknown outcome that is not a context error (a lost acknowledgement,
// a session dropped mid-write) locks the actuator and reads it back, as a
// timeout does: where the read-back shows the value the lock lifts; where
// it does not, the actuator stays locked and nothing is retried.
func TestUnknownOutcomeLocksAndReadsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, od := outcomeWorld(t)
		lostAck := devices.UnknownOutcome(errors.New("no acknowledgement within 200ms"))

		od.set("valve-1", nil, lostAck, true) // the valve moved; its answer was lost
		obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, obs, runtime.Acted, "")
		if obs.Receipt.Confirmation != runtime.Confirmed || !strings.Contains(obs.Receipt.Driver, "no acknowledgement") || !strings.Contains(obs.Receipt.Detail, "could not tell") {
			t.Fatalf("receipt = %+v, want confirmed by the read-back, naming the lost acknowledgement", obs.Receipt)
		}
		if a, _, _ := w.j.Attempt(w.ctx, "mqtt:alice/c1"); a.State != runtime.AttemptReconciled {
			t.Fatalf("attempt = %s, want reconciled", a.State)
		}
		if fb := failedBody(t, w, "valve-1"); fb.Outcome != "unknown" || fb.State != runtime.AttemptUnknown {
			t.Fatalf("failed event = %+v, want outcome unknown, state unknown", fb)
		}
		reads := w.g.Count("read", "valve-1", "open")

		od.set("valve-1", nil, lostAck, false) // this time it did not move
		obs = w.do("mqtt:alice", "c2", "valve-1", "open", value.Bool(false))
		want(t, obs, runtime.Failed, "valve-1.open is locked until an admin resolves attempt")
		if got := w.g.Count("read", "valve-1", "open"); got <= reads {
			t.Fatalf("valve-1 was not read back after the unknown outcome (reads %d, then %d)", reads, got)
		}
		locks := w.e.Locks()
		if len(locks) != 1 || locks[0].Key != "mqtt:alice/c2" {
			t.Fatalf("locks = %+v, want the second attempt", locks)
		}
		od.set("", nil, nil, false)
		writes := w.g.Count("write", "valve-1", "open")
		again := w.do("mqtt:alice", "c3", "valve-1", "open", value.Bool(false))
		want(t, again, runtime.Refused, "valve-1.open is locked: attempt "+locks[0].ID)
		if got := w.g.Count("write", "valve-1", "open"); got != writes {
			t.Fatalf("a locked actuator was written (%d writes, then %d)", writes, got)
		}
	})
}

// An offline device gives a Failed observation that names it, for a read
// and for a write, and a write to it is not locked: nothing reached it.
func TestOfflineDeviceFailsNamingIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, od := outcomeWorld(t)
		down := devices.Offline(errors.New("serial port /dev/ttyUSB0 closed"))
		od.set("tank-1", down, down, false)
		obs := w.do("mqtt:alice", "r1", "tank-1", "level", value.Value{})
		want(t, obs, runtime.Failed, "device tank-1 is offline")
		if fb := failedBody(t, w, "tank-1"); fb.Outcome != "offline" || !strings.Contains(fb.Error, "ttyUSB0") {
			t.Fatalf("failed event = %+v, want outcome offline with the cause", fb)
		}

		od.set("valve-1", down, down, false)
		obs = w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, obs, runtime.Failed, "device valve-1 is offline")
		if a, _, _ := w.j.Attempt(w.ctx, "mqtt:alice/c1"); a.State != runtime.AttemptFailed {
			t.Fatalf("attempt = %s, want failed", a.State)
		}
		if locks := w.e.Locks(); len(locks) != 0 {
			t.Fatalf("an offline write locked the actuator: %+v", locks)
		}
	})
}

// A device's refusal is journaled with its code, and locks nothing.
func TestRefusalIsJournaledWithItsCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, od := outcomeWorld(t)
		od.set("valve-1", nil, devices.Refused("0x02", "illegal data address"), false)
		obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, obs, runtime.Failed, `device valve-1 refused: write valve-1.open: the device refused with code "0x02" (illegal data address)`)
		fb := failedBody(t, w, "valve-1")
		if fb.Outcome != "refused" || fb.Code != "0x02" || fb.Receipt == nil {
			t.Fatalf("failed event = %+v, want outcome refused, code 0x02 and the receipt", fb)
		}
		if a, _, _ := w.j.Attempt(w.ctx, "mqtt:alice/c1"); a.State != runtime.AttemptFailed {
			t.Fatalf("attempt = %s, want failed", a.State)
		}
		if locks := w.e.Locks(); len(locks) != 0 {
			t.Fatalf("a refusal locked the actuator: %+v", locks)
		}
		if n := w.g.Count("write", "valve-1", "open"); n != 0 {
			t.Fatalf("the refused write reached the valve %d times", n)
		}
	})
}

// failingJournal is an in-memory journal that says it cannot witness.
type failingJournal struct {
	*runtimetest.MemJournal
	err error
}

func (j *failingJournal) Err() error { return j.err }

// When the gateway itself cannot witness, the refusal says so in public
// words with an error id; the detail (a path, an I/O error) is only in the
// log, under that id.
func TestInternalFailureIsPublicWithAnID(t *testing.T) {
	var logs runtimetest.LogBuffer
	w := newWorld(t, func(s *setup) {
		s.opts.Mode = governance.ModeInterlocked
		s.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		s.journal = func(m *runtimetest.MemJournal) runtime.Journal {
			return &failingJournal{MemJournal: m, err: errors.New("write /var/lib/shadowgate/journal.db: input/output error")}
		}
	})
	obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
	want(t, obs, runtime.Refused, "not acting: the journal cannot witness")
	if !regexp.MustCompile(`^err-[0-9a-f]+$`).MatchString(obs.ErrorID) {
		t.Fatalf("error id %q", obs.ErrorID)
	}
	if strings.Contains(obs.Why, "/var/lib") || strings.Contains(obs.Why, "input/output") {
		t.Fatalf("the refusal gives the detail away: %q", obs.Why)
	}
	if l := logs.String(); !strings.Contains(l, obs.ErrorID) || !strings.Contains(l, "input/output error") {
		t.Fatalf("the log lacks the id or the detail:\n%s", l)
	}
	if n := w.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("the valve was written %d times while the journal could not witness", n)
	}
}

// A library's timeout that the driver passes on unplaced ("i/o timeout"
// after the request went out) is not a definite failure: the valve may
// have moved. It is unknown, and the read-back settles it.
func TestUnplacedTimeoutAfterSendingIsUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, od := outcomeWorld(t)
		timeout := &net.OpError{Op: "read", Net: "tcp", Err: fmt.Errorf("modbus response: %w", os.ErrDeadlineExceeded)}
		od.set("valve-1", nil, timeout, true)
		obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, obs, runtime.Acted, "")
		if obs.Receipt.Confirmation != runtime.Confirmed {
			t.Fatalf("receipt = %+v, want confirmed by the read-back", obs.Receipt)
		}
		if a, _, _ := w.j.Attempt(w.ctx, "mqtt:alice/c1"); a.State != runtime.AttemptReconciled {
			t.Fatalf("attempt = %s, want reconciled", a.State)
		}
		// The confirmed receipt is the actuator's state in the journal too.
		st := w.e.States()
		found := false
		for _, s := range st {
			found = found || (s.Device == "valve-1" && s.Receipt != nil && s.Receipt.Attempt == obs.Receipt.Attempt && s.Receipt.Confirmation == runtime.Confirmed)
		}
		if !found {
			t.Fatalf("states = %+v, want valve-1 with the confirmed receipt", st)
		}
		snap, err := w.j.Load(w.ctx)
		if err != nil {
			t.Fatal(err)
		}
		journaled := false
		for _, s := range snap.States {
			journaled = journaled || (s.Device == "valve-1" && s.Receipt != nil && s.Receipt.Attempt == obs.Receipt.Attempt)
		}
		if !journaled {
			t.Fatalf("the journal's states = %+v, want valve-1 with the reconciled receipt", snap.States)
		}
	})
}

// A driver that says the device is offline is taken at its word even when
// its error wraps a timeout (a dial that timed out): nothing was sent, so
// nothing locks.
func TestOfflineWrappingATimeoutIsDefinite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, od := outcomeWorld(t)
		od.set("valve-1", nil, devices.Offline(fmt.Errorf("dial 10.0.0.5:502: %w", context.DeadlineExceeded)), false)
		obs := w.do("mqtt:alice", "c1", "valve-1", "open", on)
		want(t, obs, runtime.Failed, "device valve-1 is offline")
		if locks := w.e.Locks(); len(locks) != 0 {
			t.Fatalf("an offline device locked the actuator: %+v", locks)
		}
	})
}

// A run cancelled while its executing record is being made durable does
// not call the driver: the attempt fails, and nothing locks.
func TestCancelledBeforeTheDriverIsNotUnknown(t *testing.T) {
	ej := &executingStall{entered: make(chan struct{}), release: make(chan struct{})}
	w := newWorld(t, func(s *setup) {
		s.opts.Mode = governance.ModeInterlocked
		s.journal = func(m *runtimetest.MemJournal) runtime.Journal { ej.MemJournal = m; return ej }
	})
	done := make(chan runtime.Observation, 1)
	go func() { done <- w.do("mqtt:alice", "c1", "valve-1", "open", on) }()
	select {
	case <-ej.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the executing record was never committed")
	}
	for _, r := range w.e.Runs() {
		if r.Status != runtime.RunEnded {
			if err := w.e.Cancel(r.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(ej.release)
	obs := <-done
	want(t, obs, runtime.Failed, "cancelled before the driver was called")
	if a, _, _ := w.j.Attempt(w.ctx, "mqtt:alice/c1"); a.State != runtime.AttemptFailed {
		t.Fatalf("attempt = %s, want failed", a.State)
	}
	if locks := w.e.Locks(); len(locks) != 0 {
		t.Fatalf("a write that never reached the driver locked the actuator: %+v", locks)
	}
	if n := w.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("the driver was called %d times", n)
	}
}

// executingStall holds the commit of an executing record until released.
type executingStall struct {
	*runtimetest.MemJournal
	entered, release chan struct{}
	once             sync.Once
}

func (j *executingStall) Commit(ctx context.Context, en runtime.Entry) (runtime.Event, error) {
	if en.Attempt != nil && en.Attempt.State == runtime.AttemptExecuting {
		j.once.Do(func() {
			close(j.entered)
			<-j.release
		})
	}
	return j.MemJournal.Commit(ctx, en)
}

// A stop while the driver writes does not tear the write: the driver gets
// its time (up to the driver timeout), the act completes, and nothing is
// left locked for an admin.
func TestStopDuringAWriteLetsTheDriverFinish(t *testing.T) {
	w := newWorld(t, func(s *setup) { s.opts.Mode = governance.ModeInterlocked })
	w.g.SetFault("valve-1", sim.Fault{WriteDelay: 300 * time.Millisecond})
	done := make(chan runtime.Observation, 1)
	go func() { done <- w.do("mqtt:alice", "c1", "valve-1", "open", on) }()
	runtimetest.WaitFor(t, "the driver to have the write", func() bool { return w.g.Count("write", "valve-1", "open") > 0 })
	runtimetest.Within(t, "the engine's stop", 30*time.Second, func() { _ = w.e.Close() })
	obs := <-done
	want(t, obs, runtime.Acted, "")
	if a, _, _ := w.j.Attempt(context.Background(), "mqtt:alice/c1"); a.State != runtime.AttemptReceipt {
		t.Fatalf("attempt = %s (%s), want receipt", a.State, a.Why)
	}
	if !w.g.State().Valve {
		t.Fatal("the valve did not open")
	}
}
