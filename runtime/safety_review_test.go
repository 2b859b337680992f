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

// These tests hold the gateway to what a drive to safe must never do:
// wait behind a person's act, wait behind another actuator, be skipped at a
// stop, or be forgotten.

func withPolicy(target string, mod func(*runtime.CapPolicy)) func(*runtime.Options) {
	return func(o *runtime.Options) {
		p := o.Policies[target]
		mod(&p)
		o.Policies[target] = p
	}
}

func TestADriveToSafeCutsShortAPersonsConfirmation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, withPolicy("pump-1.on", func(p *runtime.CapPolicy) {
			p.Confirm = &runtime.Confirm{ReadBack: true, Within: 3 * time.Second, Watch: 3 * time.Minute}
		}))
		g.g.Adjust(func(s *sim.State) { s.Level, s.Valve = 8, true })
		start := time.Now()
		obs := g.do("mqtt:ann", "on-1", "pump-1", "on", on) // its watch would hold the pump's lock for 3m
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatalf("the pump runs %v after the tank fell below 5%%", time.Since(start))
		}
		if elapsed := time.Since(start); elapsed > 40*time.Second {
			t.Fatalf("the pump stopped %v after it started: the watch held up the drive", elapsed)
		}
		if obs.Receipt.Confirmation != runtime.Unconfirmed || !strings.Contains(obs.Receipt.Detail, "a drive to safe took over") {
			t.Fatalf("the cut-short act's receipt %+v", obs.Receipt)
		}
		if _, ok := g.e.Alarm("unconfirmed.pump-1.on"); ok {
			t.Fatal("a confirmation cut short by a drive to safe raised an unconfirmed alarm")
		}
	})
}

func TestOneSlowDriveHoldsUpNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, pumping(t), nil, withPolicy("heater-1.on", func(p *runtime.CapPolicy) {
			p.TTL = time.Minute
			p.Confirm = &runtime.Confirm{ReadBack: true, Within: 2 * time.Minute}
		}))
		want(t, g.do("mqtt:ann", "heat-1", "heater-1", "on", on), runtime.Acted, "")
		g.g.SetFault("heater-1", sim.Fault{Stuck: true}) // its drive to off confirms for 2 minutes, in vain
		time.Sleep(61 * time.Second)
		g.g.Adjust(func(s *sim.State) { s.Level, s.Valve = 5.5, true })
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if st := g.g.State(); st.Pump {
			t.Fatalf("the pump runs on behind the heater's slow drive: tank %.2f%%", st.Level)
		}
	})
}

func TestSafeStopCutsShortRunsAndDrivesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, pumping(t), nil, withPolicy("valve-1.open", func(p *runtime.CapPolicy) {
			c := *p.Confirm
			c.Watch = 2 * time.Minute
			p.Confirm = &c
		}))
		g.g.Adjust(func(s *sim.State) { s.Heater = true })
		g.g.SetFault("heater-1", sim.Fault{Stuck: true}) // its drive ends wrong_final after 5s
		go func() {
			_, _ = g.e.Do(g.ctx, runtime.Command{Principal: "mqtt:ann", Origin: "test", RequestID: "open-1", Device: "valve-1", Capability: "open", Value: on})
		}()
		time.Sleep(5 * time.Second) // the valve's confirmation watches for 2 minutes
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		start := time.Now()
		g.e.SafeStop(ctx)
		if took := time.Since(start); took > 20*time.Second {
			t.Fatalf("SafeStop took %v", took)
		}
		if st := g.g.State(); st.Pump || st.Valve {
			t.Fatalf("after SafeStop %+v: the pump and the valve must be off", st)
		}
		if a, ok := g.e.Alarm("safe_drive.heater-1.on"); !ok || a.State != runtime.AlarmActive {
			t.Fatalf("the heater that could not be driven to safe raised no alarm: %+v", a)
		}
	})
}

func TestTTLIsArmedAfterAnUnknownOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		g.g.SetFault("pump-1", sim.Fault{LostAck: true})
		obs := g.do("mqtt:ann", "on-1", "pump-1", "on", on)
		if obs.Receipt == nil || obs.Receipt.Until.IsZero() {
			t.Fatalf("an act whose acknowledgement was lost has no dead man: %+v", obs.Receipt)
		}
		g.g.SetFault("pump-1", sim.Fault{})
		time.Sleep(10*time.Minute + 5*time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("the pump runs on past its TTL after an unknown outcome")
		}
	})
}

func TestTTLIsArmedForAnActCutShortByAStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		g.g.SetFault("pump-1", sim.Fault{AckDelay: time.Hour}) // the pump runs; the answer never comes
		go func() {
			_, _ = g.e.Do(g.ctx, runtime.Command{Principal: "mqtt:ann", Origin: "test", RequestID: "on-1", Device: "pump-1", Capability: "on", Value: on})
		}()
		time.Sleep(2 * time.Second)
		// The gateway dies while the driver writes: the attempt is executing.
		j := g.j
		g.stop()
		g.g.SetFault("pump-1", sim.Fault{})
		g2 := startGuarded(t, g.g, j, nil)
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatalf("the pump runs on 11m after an act cut short by a stop; drives %+v", g2.safeDrives())
		}
	})
}

func TestCommandingSafeIsNeverHeldUpByAPermissive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, pumping(t), nil, withPolicy("pump-1.on", func(p *runtime.CapPolicy) {
			p.Interlocks = []governance.Condition{{Sensor: "tank-1.level", Op: governance.OpGT, Value: value.Number(10), MaxAge: time.Minute}}
		}))
		g.g.Adjust(func(s *sim.State) { s.Level = 8 })
		time.Sleep(3 * time.Second) // polled
		want(t, g.do("mqtt:ann", "off-1", "pump-1", "on", off), runtime.Acted, "")
		if g.g.State().Pump {
			t.Fatal("the pump runs")
		}
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Refused, "tank-1.level > 10")
	})
}

func TestATTLDriveThatFailsIsTriedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		g.g.SetFault("pump-1", sim.Fault{Stuck: true})
		time.Sleep(10*time.Minute + 10*time.Second)
		synctest.Wait()
		if a, ok := g.e.Alarm("safe_drive.pump-1.on"); !ok || !a.Condition {
			t.Fatalf("a stuck contactor's failed drive: alarm %+v", a)
		}
		g.g.SetFault("pump-1", sim.Fault{})
		time.Sleep(70 * time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("the drive was not tried again once the contactor was freed")
		}
		if a := g.alarm("safe_drive.pump-1.on"); a.Condition || !strings.Contains(a.Message, "wrong_final") || !strings.Contains(a.ClearedWhy, "is at its safe value") {
			t.Fatalf("alarm %+v", a)
		}
	})
}

func TestARenewalJustBeforeTheEndStands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		time.Sleep(9*time.Minute + 59*time.Second)
		g.g.SetFault("pump-1", sim.Fault{ReadDelay: 2500 * time.Millisecond}) // the renewal's read-back is slow
		renewal := g.do("mqtt:ann", "on-2", "pump-1", "on", on)
		want(t, renewal, runtime.Acted, "")
		g.g.SetFault("pump-1", sim.Fault{})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if !g.g.State().Pump {
			t.Fatalf("the pump was driven off just after a renewal until %v; drives %+v", renewal.Receipt.Until, g.safeDrives())
		}
	})
}

func TestAnOwedDriveSurvivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		g.g.Adjust(func(s *sim.State) { s.Level = 4 })
		g.g.SetFault("pump-1", sim.Fault{WriteErr: devices.Refused("coil", "relay coil open")})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		g.stop()
		g.g.Adjust(func(s *sim.State) { s.Level = 50 }) // the tank refilled while the gateway was down
		g.g.SetFault("pump-1", sim.Fault{})
		g2 := startGuarded(t, g.g, g.j, nil)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatalf("a drive owed before the restart was forgotten; drives %+v", g2.safeDrives())
		}
	})
}

func TestAClockBehindTheJournalRunsEveryDeadManOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		g.stop()
		time.Sleep(30 * time.Minute)
		// The board starts with its clock an hour behind.
		g2 := startGuarded(t, g.g, g.j, func(o *runtime.Options) {
			o.Now = func() time.Time { return time.Now().Add(-time.Hour) }
		})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatalf("a TTL was trusted with the clock behind the journal; drives %+v", g2.safeDrives())
		}
	})
}

func TestAHandAfterAnActToSafeIsDriftNotFought(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, pumping(t), nil, withPolicy("valve-1.open", func(p *runtime.CapPolicy) {
			c := *p.Confirm
			c.OnDiscrepancy = runtime.SafeDrive
			p.Confirm = &c
		}))
		g.g.Adjust(func(s *sim.State) { s.Valve = true })
		time.Sleep(10 * time.Second)
		g.g.SetFault("valve-1", sim.Fault{Returns: 3 * time.Second}) // someone opens it again at the panel
		obs := g.do("mqtt:ann", "close-1", "valve-1", "open", off)
		if obs.Receipt.Confirmation != runtime.Returned {
			t.Fatalf("receipt %+v", obs.Receipt)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if w := g.g.Written("valve-1", "open"); len(w) != 2 || len(g.safeDrives()) != 0 {
			t.Fatalf("writes %v, drives %+v: a hand after an act to safe was fought", w, g.safeDrives())
		}
	})
}

func TestALateReadingIsNoDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "heater-1", "on", on), runtime.Acted, "")
		runtime.KeepReading(g.e, "heater-1", "on", devices.Reading{Value: off, At: time.Now().Add(-time.Minute), Quality: devices.QualityGood})
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(g.events(runtime.KindDrift)); n != 0 {
			t.Fatalf("%d drift events from a reading older than the one kept", n)
		}
	})
}

func TestARunningInterlockOnASensorNobodyPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		devs := runtimetest.Greenhouse("greenhouse") // nothing polled
		g0, err := sim.New(sim.Options{Devices: devs, Initial: &sim.State{Level: 6, Temperature: 14, Valve: true}})
		if err != nil {
			t.Fatal(err)
		}
		_ = g0.Open(t.Context())
		g := startGuarded(t, g0, nil, withPolicy("pump-1.on", func(p *runtime.CapPolicy) {
			p.While[0].MaxAge = time.Minute
		}))
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		start := time.Now()
		for range 120 {
			time.Sleep(time.Second)
			if !g.g.State().Pump {
				break
			}
		}
		if st := g.g.State(); st.Pump || time.Since(start) > 40*time.Second {
			t.Fatalf("pump %v stopped %v after start; the tank is at %.2f%%", st.Pump, time.Since(start), st.Level)
		}
	})
}

// TestUnknownOutcomesOfRetriedDrivesLeaveOneLock: a drive to safe whose
// writes all end unknown (a driver error it cannot place) is retried;
// each try supersedes the one before, so one attempt holds the lock and
// the journal holds one open attempt, and a drive confirmed once the relay
// is mended settles it: no lock is left behind for a later start.
func TestUnknownOutcomesOfRetriedDrivesLeaveOneLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		g.g.SetFault("pump-1", sim.Fault{WriteErr: errors.New("relay board said boom")})
		time.Sleep(10*time.Minute + 10*time.Second)
		synctest.Wait()
		open := func() int {
			snap, _ := g.j.Load(g.ctx)
			return len(snap.Open)
		}
		if n := len(g.e.Locks()); n != 1 || open() != 1 {
			t.Fatalf("%d locks and %d open attempts after retried drives, want 1 and 1", n, open())
		}
		g.g.SetFault("pump-1", sim.Fault{})
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if g.g.State().Pump || len(g.e.Locks()) != 0 || open() != 0 {
			t.Fatalf("pump %v, locks %+v, %d open attempts after a confirmed drive", g.g.State().Pump, g.e.Locks(), open())
		}
		if a := g.alarm("locked.pump-1.on"); a.Condition {
			t.Fatalf("the lock's alarm stands with its condition: %+v", a)
		}
	})
}

// TestAlarmRequestsAreChecked: what a person writes must be readable and
// bounded; a shelving is for an alarm that stands, at least a minute, and
// ends when the alarm is back to normal; the message that raised an alarm
// is kept when its condition clears.
func TestAlarmRequestsAreChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, pumping(t), nil, nil)
		g.g.SetFault("valve-1", sim.Fault{Stuck: true})
		g.do("mqtt:ann", "open-1", "valve-1", "open", on)
		id := "discrepancy.valve-1.open"
		raised := g.alarm(id).Message
		for _, c := range []struct{ comment, want string }{
			{"\x00", "needs words a person can read"},
			{"ok\u202e", "control characters"},
			{strings.Repeat("x", 501), "over 500 characters"},
		} {
			if _, err := g.e.AckAlarm(g.ctx, id, "console:ann", c.comment); !errors.Is(err, runtime.ErrBadAlarmRequest) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ack with %q: %v, want %q", c.comment, err, c.want)
			}
		}
		if _, err := g.e.ShelveAlarm(g.ctx, id, "console:root", time.Second, "a moment"); !errors.Is(err, runtime.ErrBadAlarmRequest) {
			t.Fatalf("a shelving for a second: %v", err)
		}
		if _, err := g.e.ShelveAlarm(g.ctx, id, "console:root", time.Hour, "fitter on site"); err != nil {
			t.Fatal(err)
		}
		if _, err := g.e.AckAlarm(g.ctx, id, "console:ann", "valve jammed"); err != nil {
			t.Fatal(err)
		}
		g.g.SetFault("valve-1", sim.Fault{})
		want(t, g.do("mqtt:ann", "close-1", "valve-1", "open", off), runtime.Acted, "")
		a := g.alarm(id)
		if a.State != runtime.AlarmNormal || !a.ShelvedUntil.IsZero() || a.Message != raised || !strings.Contains(a.ClearedWhy, "was confirmed") {
			t.Fatalf("back to normal %+v: want the shelving ended, the raising message kept and why it cleared", a)
		}
		if _, err := g.e.ShelveAlarm(g.ctx, id, "console:root", time.Hour, "pre-emptive"); !errors.Is(err, runtime.ErrAlarmNotStanding) {
			t.Fatalf("shelving an alarm back to normal: %v", err)
		}
	})
}

// TestARenewalIsNoStart: commanding a running pump on again renews its
// dead man even when the tank is below the start permissive, as long as
// its running interlock holds; a renewal approved after the dead man ran
// out is refused at the act, for it would start the pump.
func TestARenewalIsNoStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, withPolicy("pump-1.on", func(p *runtime.CapPolicy) {
			p.Interlocks = []governance.Condition{{Sensor: "tank-1.level", Op: governance.OpGT, Value: value.Number(10), MaxAge: time.Minute}}
		}))
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		g.g.Adjust(func(s *sim.State) { s.Level = 8 })
		time.Sleep(3 * time.Second) // polled
		renewal := g.do("mqtt:ann", "on-2", "pump-1", "on", on)
		want(t, renewal, runtime.Acted, "")
		if !renewal.Receipt.Until.After(time.Now().Add(9 * time.Minute)) {
			t.Fatalf("renewal until %v", renewal.Receipt.Until)
		}

		// Asked in supervised mode while it runs, approved after its dead
		// man ran out: refused at the act.
		if _, _, err := g.e.SetMode(g.ctx, "console:root", governance.ModeSupervised, "test"); err != nil {
			t.Fatal(err)
		}
		g.g.Adjust(func(s *sim.State) { s.Level = 60 })
		time.Sleep(9*time.Minute + 50*time.Second)
		asked := g.do("mqtt:ann", "on-3", "pump-1", "on", on)
		want(t, asked, runtime.ApprovalRequest, "")
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("the dead man did not run out")
		}
		g.answer(asked.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve})
		if ev := g.outcome(asked.Run); ev.Kind != runtime.KindRefused || !strings.Contains(string(ev.Body), "was true when approval") {
			t.Fatalf("the late renewal: %s %s", ev.Kind, ev.Body)
		}
		if g.g.State().Pump {
			t.Fatal("a renewal approved after the dead man ran out started the pump")
		}
	})
}
