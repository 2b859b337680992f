package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
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

// trap panics once, when armed, from inside foreign code the engine calls
// (its clock, its journal, its person function), and notes whether the
// engine's lock was held at that moment.
type trap struct {
	e     *runtime.Engine
	armed atomic.Bool
	fired atomic.Bool
	held  atomic.Bool
	// deciding is whether the engine's decision lock was held: the journal
	// is called under it, never under e.mu.
	deciding atomic.Bool
}

func (tr *trap) spring(what string) {
	if !tr.armed.CompareAndSwap(true, false) {
		return
	}
	if runtime.LockHeld(tr.e) {
		tr.held.Store(true)
	}
	if runtime.DecideHeld(tr.e) {
		tr.deciding.Store(true)
	}
	tr.fired.Store(true)
	panic("injected panic in " + what)
}

// trapJournal is a MemJournal whose Commit springs the trap.
type trapJournal struct {
	*runtimetest.MemJournal
	tr *trap
}

func (j *trapJournal) Commit(ctx context.Context, en runtime.Entry) (runtime.Event, error) {
	j.tr.spring("the journal's commit of " + string(en.Event.Kind))
	return j.MemJournal.Commit(ctx, en)
}

// panicWorld is a sim greenhouse behind an engine whose clock, journal and
// person function can each be made to panic once.
func panicWorld(t *testing.T, mode string, drv func(*sim.Greenhouse) devices.Driver) (*runtime.Engine, *sim.Greenhouse, *trap, *trap, *trap) {
	t.Helper()
	devs := []devices.Device{
		{ID: "tank-1", Area: "greenhouse", Driver: "sim", Address: "tank",
			Capabilities: []devices.Capability{{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber}}},
		{ID: "valve-1", Area: "greenhouse", Driver: "sim", Address: "valve",
			Capabilities: []devices.Capability{{Name: "open", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}},
	}
	g, err := sim.New(sim.Options{Devices: devs})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	var d devices.Driver = g
	if drv != nil {
		d = drv(g)
	}
	reg := devices.NewRegistry()
	if err := reg.Add("sim", d); err != nil {
		t.Fatal(err)
	}
	clock, journal, person := &trap{}, &trap{}, &trap{}
	e, err := runtime.New(t.Context(), runtime.Options{
		Registry: reg,
		Journal:  &trapJournal{MemJournal: runtimetest.NewMemJournal(), tr: journal},
		Policies: map[string]runtime.CapPolicy{"valve-1.open": {
			Effects: &runtime.Declared{Reversible: true, Contained: true},
			Confirm: &runtime.Confirm{ReadBack: true, Within: time.Second},
		}},
		Plans: []runtime.Plan{{Name: "look", Steps: []runtime.PlanStep{{Op: runtime.OpRead, Device: "tank-1", Capability: "level"}}}},
		Mode:  mode,
		Now: func() time.Time {
			clock.spring("the clock")
			return time.Now()
		},
		Person: func(principal string) string {
			person.spring("the person function")
			return runtime.PersonAfterColon(principal)
		},
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.e, journal.e, person.e = e, e, e
	t.Cleanup(func() { _ = e.Close() })
	return e, g, clock, journal, person
}

// recovered calls fn and returns what it panicked with, as echo's Recover
// middleware would catch it in a handler.
func recovered(fn func()) (v any) {
	defer func() { v = recover() }()
	fn()
	return nil
}

// within runs fn and fails the test if it does not return before ctx's
// deadline.
func within(ctx context.Context, t *testing.T, what string, fn func()) {
	t.Helper()
	limit := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		limit = time.Until(d)
	}
	runtimetest.Within(t, what, limit, fn)
}

// TestAdversarialPanicLeavesNoLockHeld injects a panic into foreign code the
// engine calls while it holds a lock (its clock and its person function
// under e.mu; its journal under the decision lock, never under e.mu),
// recovers it as echo does, and shows that the next commands still
// complete.
func TestAdversarialPanicLeavesNoLockHeld(t *testing.T) {
	tests := []struct {
		name string
		mode string
		trap func(clock, journal, person *trap) *trap
		// journal is true when the trap is the journal: it must fire with
		// the decision lock held and e.mu free.
		journal bool
		// prepare runs before the trap is armed; call panics through it.
		prepare func(ctx context.Context, t *testing.T, e *runtime.Engine) string
		call    func(ctx context.Context, e *runtime.Engine, arg string)
	}{
		{
			name: "clock while Do files the request",
			trap: func(clock, _, _ *trap) *trap { return clock },
			call: func(ctx context.Context, e *runtime.Engine, _ string) {
				_, _ = e.Do(ctx, runtime.Command{Principal: "api:ann", Origin: "api", Device: "tank-1", Capability: "level"})
			},
		},
		{
			name: "clock while StartPlan files the run",
			trap: func(clock, _, _ *trap) *trap { return clock },
			call: func(ctx context.Context, e *runtime.Engine, _ string) {
				_, _ = e.StartPlan(ctx, runtime.StartPlan{Plan: "look", Principal: "api:ann", Origin: "api", RequestID: "p1"})
			},
		},
		{
			name:    "journal while SetMode journals a narrowing",
			trap:    func(_, journal, _ *trap) *trap { return journal },
			journal: true,
			call: func(ctx context.Context, e *runtime.Engine, _ string) {
				_, _, _ = e.SetMode(ctx, "console:ann", governance.ModeObserve, "closing up")
			},
		},
		{
			name:    "person while Answer counts approvers",
			trap:    func(_, _, person *trap) *trap { return person },
			prepare: pendingValve,
			call: func(ctx context.Context, e *runtime.Engine, id string) {
				_, _ = e.Answer(ctx, id, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
			},
		},
		{
			name:    "journal while Answer journals the answer",
			trap:    func(_, journal, _ *trap) *trap { return journal },
			journal: true,
			prepare: pendingValve,
			call: func(ctx context.Context, e *runtime.Engine, id string) {
				_, _ = e.Answer(ctx, id, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			mode := tc.mode
			if mode == "" {
				mode = governance.ModeSupervised
			}
			e, g, clock, journal, person := panicWorld(t, mode, nil)
			arg := ""
			if tc.prepare != nil {
				arg = tc.prepare(ctx, t, e)
			}
			tr := tc.trap(clock, journal, person)
			tr.armed.Store(true)
			var v any
			within(ctx, t, "the call that panics", func() { v = recovered(func() { tc.call(ctx, e, arg) }) })
			if v == nil || !tr.fired.Load() {
				t.Fatalf("the call did not panic through the trap (recovered %v)", v)
			}
			switch {
			case tc.journal && tr.held.Load():
				t.Fatalf("the journal was called with e.mu held: a slow commit would stall every step")
			case tc.journal && !tr.deciding.Load():
				t.Fatalf("the journal's trap fired without the decision lock held; it tests nothing")
			case !tc.journal && !tr.held.Load():
				t.Fatalf("the trap fired without e.mu held; it tests nothing")
			}
			within(ctx, t, "the next read command", func() {
				obs, err := e.Do(ctx, runtime.Command{Principal: "api:ann", Origin: "api", Device: "tank-1", Capability: "level"})
				if err != nil || obs.Kind != runtime.Completed {
					t.Errorf("Do(read tank-1.level) after the panic = %v (%q), %v, want completed", obs.Kind, obs.Why, err)
				}
			})
			within(ctx, t, "the next write command", func() {
				obs, err := e.Do(ctx, runtime.Command{Principal: "api:ann", Origin: "api", Device: "valve-1", Capability: "open", Value: value.Bool(true)})
				if err != nil || obs.Kind == runtime.Failed {
					t.Errorf("Do(write valve-1.open) after the panic = %v (%q), %v, want it judged", obs.Kind, obs.Why, err)
				}
			})
			within(ctx, t, "the engine's views", func() {
				_ = e.Mode(ctx)
				_ = e.Approvals()
				_ = e.Runs()
				_ = e.States()
				_ = e.Locks()
			})
			if n := g.Count("write", "valve-1", "open"); n != 0 {
				t.Errorf("driver writes = %d, want 0: nothing was approved", n)
			}
			within(ctx, t, "Close", func() { _ = e.Close() })
		})
	}
}

// pendingValve asks to open the valve in supervised mode and returns the
// id of the approval it waits for.
func pendingValve(ctx context.Context, t *testing.T, e *runtime.Engine) string {
	t.Helper()
	obs, err := e.Do(ctx, runtime.Command{Principal: "mqtt:ann", Origin: "mqtt", Device: "valve-1", Capability: "open", Value: value.Bool(true)})
	if err != nil || obs.Kind != runtime.ApprovalRequest {
		t.Fatalf("Do(write valve-1.open) = %v (%q), %v, want an approval request", obs.Kind, obs.Why, err)
	}
	return obs.Approval.ID
}

// panicDriver is the sim greenhouse with a Read or Write that panics once,
// when armed; a write may first reach the device.
type panicDriver struct {
	*sim.Greenhouse
	read, write, writeAfter atomic.Bool
}

func (d *panicDriver) Read(ctx context.Context, device, capability string) (devices.Reading, error) {
	if d.read.CompareAndSwap(true, false) {
		panic("injected panic in Read")
	}
	return d.Greenhouse.Read(ctx, device, capability)
}

func (d *panicDriver) Write(ctx context.Context, device, capability string, v value.Value) error {
	if d.write.CompareAndSwap(true, false) {
		panic("injected panic in Write")
	}
	err := d.Greenhouse.Write(ctx, device, capability, v)
	if d.writeAfter.CompareAndSwap(true, false) {
		panic(fmt.Sprintf("injected panic in Write after %v", err))
	}
	return err
}

// TestAdversarialDriverPanic shows that a driver panicking inside a step
// neither crashes the gateway nor leaves a lock held: a panicking read
// fails, and a panicking write is an unknown outcome that locks the
// actuator exactly as a timeout does, unless one read-back shows the act.
func TestAdversarialDriverPanic(t *testing.T) {
	open := value.Bool(true)
	write := runtime.Command{Principal: "api:ann", Origin: "api", Device: "valve-1", Capability: "open", Value: open}
	read := runtime.Command{Principal: "api:ann", Origin: "api", Device: "tank-1", Capability: "level"}
	t.Run("read", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var d *panicDriver
			e, _, _, _, _ := panicWorld(t, governance.ModeInterlocked, func(g *sim.Greenhouse) devices.Driver {
				d = &panicDriver{Greenhouse: g}
				return d
			})
			d.read.Store(true)
			obs, err := e.Do(t.Context(), read)
			if err != nil || obs.Kind != runtime.Failed || !strings.Contains(obs.Why, "the driver panicked") {
				t.Fatalf("Do(read) with a panicking driver = %v (%q), %v, want failed naming the panic", obs.Kind, obs.Why, err)
			}
			if obs, err := e.Do(t.Context(), read); err != nil || obs.Kind != runtime.Completed {
				t.Fatalf("the next Do(read) = %v (%q), %v, want completed", obs.Kind, obs.Why, err)
			}
		})
	})
	t.Run("write before the device", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var d *panicDriver
			e, g, _, _, _ := panicWorld(t, governance.ModeInterlocked, func(g *sim.Greenhouse) devices.Driver {
				d = &panicDriver{Greenhouse: g}
				return d
			})
			d.write.Store(true)
			obs, err := e.Do(t.Context(), write)
			if err != nil || obs.Kind != runtime.Failed || !strings.Contains(obs.Why, "the driver panicked") || !strings.Contains(obs.Why, "is locked") {
				t.Fatalf("Do(write) with a panicking driver = %v (%q), %v, want failed, unknown and locked", obs.Kind, obs.Why, err)
			}
			locks := e.Locks()
			if len(locks) != 1 || locks[0].State != runtime.AttemptUnknown || locks[0].Device != "valve-1" {
				t.Fatalf("Locks() = %+v, want the valve's attempt, unknown", locks)
			}
			if n := g.Received("valve-1", "open"); n != 0 {
				t.Fatalf("writes received = %d, want 0", n)
			}
			if obs, err := e.Do(t.Context(), read); err != nil || obs.Kind != runtime.Completed {
				t.Fatalf("the next Do(read) = %v (%q), %v, want completed", obs.Kind, obs.Why, err)
			}
			again := write
			again.RequestID = "again"
			obs, err = e.Do(t.Context(), again)
			if err != nil || obs.Kind != runtime.Refused || !strings.Contains(obs.Why, "is locked") {
				t.Fatalf("the next Do(write) = %v (%q), %v, want refused while locked", obs.Kind, obs.Why, err)
			}
			if n := g.Received("valve-1", "open"); n != 0 {
				t.Fatalf("writes received = %d, want 0", n)
			}
		})
	})
	t.Run("write after the device", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var d *panicDriver
			e, g, _, _, _ := panicWorld(t, governance.ModeInterlocked, func(g *sim.Greenhouse) devices.Driver {
				d = &panicDriver{Greenhouse: g}
				return d
			})
			d.writeAfter.Store(true)
			obs, err := e.Do(t.Context(), write)
			if err != nil || obs.Kind != runtime.Acted || obs.Receipt == nil || obs.Receipt.Confirmation != runtime.Confirmed {
				t.Fatalf("Do(write) whose driver panicked after acting = %v (%q), %v, want acted and confirmed by the read-back", obs.Kind, obs.Why, err)
			}
			if locks := e.Locks(); len(locks) != 0 {
				t.Fatalf("Locks() = %+v, want none: the read-back reconciled the attempt", locks)
			}
			if !g.State().Valve {
				t.Fatal("the valve is closed, want open")
			}
			a, found, err := e.Attempt(t.Context(), "api:ann/"+obs.RequestID)
			if err != nil || !found || a.State != runtime.AttemptReconciled {
				t.Fatalf("Attempt = %+v, %v, %v, want reconciled", a, found, err)
			}
		})
	})
}
