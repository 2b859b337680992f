package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
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

// Found by a second review: a renewal judged from a cached reading, a
// select-before-operate that let a failed read through, a clock behind the
// journal missing a dead man armed at recovery, a cancel that did not cut
// a confirmation short or raced the run's start, and a restart that fought
// a hand.

func unpolled(t *testing.T, st *sim.State) *sim.Greenhouse {
	g0, err := sim.New(sim.Options{Devices: runtimetest.Greenhouse("greenhouse"), Initial: st})
	if err != nil {
		t.Fatal(err)
	}
	_ = g0.Open(t.Context())
	return g0
}

var startPermissive = withPolicy("pump-1.on", func(p *runtime.CapPolicy) {
	p.Interlocks = []governance.Condition{{Sensor: "tank-1.level", Op: governance.OpGT, Value: value.Number(10), MaxAge: time.Minute}}
})

// A pump stopped by hand (or a contactor that dropped out) is still "on"
// in the gateway's cache when nobody polls it: commanding it on is taken
// as a renewal and the start permissive is skipped.
func TestARenewalOfAStoppedPumpIsAStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, unpolled(t, &sim.State{Level: 60, Temperature: 14, Valve: true}), nil, startPermissive)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		g.g.Adjust(func(s *sim.State) { s.Pump, s.Level, s.Valve = false, 8, false }) // stopped at the panel; tank at 8
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("setup: pump should be off")
		}
		obs := g.do("mqtt:ann", "on-2", "pump-1", "on", on)
		want(t, obs, runtime.Refused, "tank-1.level > 10")
		if g.g.State().Pump {
			t.Errorf("a stopped pump was STARTED at tank %.1f%% although its start permissive is tank-1.level > 10: the 'renewal' was judged from a cached reading", g.g.State().Level)
		}
	})
}

// Select before operate: when the read at the act fails, the approval is
// carried out, and the conds were chosen from the cache before that read.
func TestAnApprovedRenewalWithAnUnreadableActuatorIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, unpolled(t, &sim.State{Level: 60, Temperature: 14, Valve: true}), nil, startPermissive)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		if _, _, err := g.e.SetMode(g.ctx, "console:root", governance.ModeSupervised, "test"); err != nil {
			t.Fatal(err)
		}
		g.g.Adjust(func(s *sim.State) { s.Level, s.Valve = 8, false })
		time.Sleep(3 * time.Second)
		asked := g.do("mqtt:ann", "on-2", "pump-1", "on", on)
		want(t, asked, runtime.ApprovalRequest, "")
		g.g.Adjust(func(s *sim.State) { s.Pump = false }) // stopped by hand while the person thinks
		g.g.SetFault("pump-1", sim.Fault{ReadErr: errors.New("read failed: bus timeout")})
		g.answer(asked.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
		ev := g.outcome(asked.Run)
		if ev.Kind != runtime.KindRefused || !strings.Contains(string(ev.Body), "cannot be read") {
			t.Errorf("outcome %s %s, want refused: where it stands cannot be read", ev.Kind, ev.Body)
		}
		if g.g.State().Pump {
			t.Errorf("approved 'renewal' STARTED a stopped pump at tank 8%% (start permissive > 10) because the read at the act failed")
		}
	})
}

// CancelRun says the confirmation is cut short; is it?
func TestCancelRunCutsTheConfirmationShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, pumping(t), nil, withPolicy("valve-1.open", func(p *runtime.CapPolicy) {
			c := *p.Confirm
			c.Watch = 2 * time.Minute
			p.Confirm = &c
		}))
		done := make(chan runtime.Observation, 1)
		go func() {
			obs, _ := g.e.Do(g.ctx, runtime.Command{Principal: "mqtt:ann", Origin: "test", RequestID: "open-1", Device: "valve-1", Capability: "open", Value: on})
			done <- obs
		}()
		time.Sleep(5 * time.Second)
		var id string
		for _, r := range g.e.Runs() {
			id = r.ID
		}
		start := time.Now()
		if err := g.e.CancelRun(id, "console:ann", "wrong valve"); err != nil {
			t.Fatal(err)
		}
		obs := <-done
		_, _ = g.e.Wait(g.ctx, id)
		if r := g.run(id); r.End != runtime.EndCancelled || !strings.Contains(r.Why, "cancelled by console:ann: wrong valve") ||
			obs.Receipt == nil || !strings.Contains(obs.Receipt.Detail, "cut short: cancelled by console:ann") {
			t.Errorf("run %+v, receipt %+v", r, obs.Receipt)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("CancelRun's doc says the confirmation is cut short; the run went on %v", time.Since(start))
		}
	})
}

// dyingJournal is a journal that stops recording once crashed is set, as a
// process that died: nothing after that point reaches the disk.
type dyingJournal struct {
	*runtimetest.MemJournal
	crashed atomic.Bool
}

func (j *dyingJournal) Commit(ctx context.Context, e runtime.Entry) (runtime.Event, error) {
	if j.crashed.Load() {
		return runtime.Event{}, errors.New("dead")
	}
	return j.MemJournal.Commit(ctx, e)
}

func startOn(t *testing.T, g *sim.Greenhouse, j runtime.Journal, mod func(*runtime.Options)) (*runtime.Engine, func()) {
	t.Helper()
	reg := devices.NewRegistry()
	if err := reg.Add("sim", g); err != nil {
		t.Fatal(err)
	}
	opts := runtime.Options{Registry: reg, Journal: j, Policies: safePolicies(), Mode: governance.ModeInterlocked,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	if mod != nil {
		mod(&opts)
	}
	e, err := runtime.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	synctest.Wait()
	return e, stop
}

// A real crash while the driver writes: the attempt is executing in the
// journal. Restart with the clock an hour behind, 30 minutes later.
func TestACrashMidWriteWithTheClockBehind(t *testing.T) {
	for _, behind := range []time.Duration{0, time.Hour} {
		t.Run(behind.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := runtimetest.NewMemJournal()
				cj := &dyingJournal{MemJournal: mem}
				g, err := sim.New(sim.Options{Devices: safeDevices(), Initial: &sim.State{Level: 60, Temperature: 14},
					WriteHook: func(_ context.Context, device, _ string, _ value.Value) {
						if device == "pump-1" {
							cj.crashed.Store(true) // dies as the pump starts
						}
					}})
				if err != nil {
					t.Fatal(err)
				}
				_ = g.Open(t.Context())
				e1, stop1 := startOn(t, g, cj, nil)
				_, _ = e1.Do(t.Context(), runtime.Command{Principal: "mqtt:ann", Origin: "test", RequestID: "on-1", Device: "pump-1", Capability: "on", Value: on})
				stop1()
				if !g.State().Pump {
					t.Fatal("setup: pump should run")
				}
				if snap, _ := mem.Load(t.Context()); len(snap.Open) != 1 || snap.Open[0].State != runtime.AttemptExecuting {
					t.Fatalf("setup: open attempts at the crash %+v", snap.Open)
				}
				time.Sleep(30 * time.Minute)
				e2, _ := startOn(t, g, mem, func(o *runtime.Options) {
					o.Now = func() time.Time { return time.Now().Add(-behind) }
				})
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if g.State().Pump {
					start := time.Now()
					for g.State().Pump && time.Since(start) < 2*time.Hour {
						time.Sleep(10 * time.Second)
					}
					t.Errorf("clock behind by %v: 30m after a crash mid-write (ttl 10m) the pump still ran at restart; it stopped %v later; locks %+v",
						behind, time.Since(start), e2.Locks())
				}
			})
		})
	}
}

// CancelRun of a run that is listed but not yet started.
func TestCancelRunRacesStart(t *testing.T) {
	w := newWorld(t, func(s *setup) {
		s.opts.Plans = []runtime.Plan{{Name: "w", Steps: []runtime.PlanStep{{Op: runtime.OpWait, Wait: time.Millisecond}},
			Lease: runtime.Lease{MaxSteps: 5, MaxActuations: 1, MaxWall: time.Minute}}}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("CancelRun panicked: %v", r)
			}
		}()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, r := range w.e.Runs() {
				if r.Status == runtime.RunRunning {
					_ = w.e.CancelRun(r.ID, "console:ann", "x")
				}
			}
		}
	})
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		rec, err := w.e.StartPlan(t.Context(), runtime.StartPlan{Plan: "w", Principal: "mqtt:ann", Origin: "test"})
		if err != nil {
			continue
		}
		_, _ = w.e.Wait(t.Context(), rec.ID)
	}
	close(stop)
	wg.Wait()
}

// A hand after an act to safe is drift, not fought; after a restart?
func TestAHandAfterAnActToSafeIsNotFoughtAfterARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mod := withPolicy("valve-1.open", func(p *runtime.CapPolicy) {
			c := *p.Confirm
			c.OnDiscrepancy = runtime.SafeDrive
			p.Confirm = &c
		})
		g := startGuarded(t, pumping(t), nil, mod)
		g.g.Adjust(func(s *sim.State) { s.Valve = true })
		time.Sleep(10 * time.Second)
		g.g.SetFault("valve-1", sim.Fault{Returns: 3 * time.Second})
		obs := g.do("mqtt:ann", "close-1", "valve-1", "open", off)
		if obs.Receipt.Confirmation != runtime.Returned {
			t.Fatalf("receipt %+v", obs.Receipt)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		before := len(g.g.Written("valve-1", "open"))
		g.stop()
		g2 := startGuarded(t, g.g, g.j, mod)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if w := g.g.Written("valve-1", "open"); len(w) != before {
			t.Errorf("after a restart the gateway fought the hand: writes %v, drives %+v", w[before:], g2.safeDrives())
		}
	})
}
