package runtime_test

import (
	"context"
	"encoding/json"
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

var off = value.Bool(false)

// guarded is a running sim greenhouse whose pump has a dead man and a
// running interlock, for the tests of safety in time.
type guarded struct {
	*world
	cancel context.CancelFunc
	done   chan error
}

// safePolicies: the pump runs only while the tank is above 5% and reverts
// after 10 minutes unless renewed; the valve is confirmed by the flow.
func safePolicies() map[string]runtime.CapPolicy {
	return map[string]runtime.CapPolicy{
		"pump-1.on": {
			Effects: &runtime.Declared{Reversible: true, Contained: true},
			Confirm: &runtime.Confirm{ReadBack: true, Within: 3 * time.Second},
			Safe:    &off,
			TTL:     10 * time.Minute,
			While:   []governance.Condition{{Sensor: "tank-1.level", Op: governance.OpGT, Value: value.Number(5), MaxAge: 10 * time.Second}},
		},
		"valve-1.open": {
			Effects: &runtime.Declared{Reversible: true, Contained: true},
			Confirm: &runtime.Confirm{Sensor: "flow-1.rate", Op: governance.OpGT, Value: value.Number(8),
				StartWithin: 2 * time.Second, Within: 3 * time.Second, Watch: 5 * time.Second},
			Safe: &off,
		},
		"heater-1.on": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Safe: &off},
	}
}

// safeDevices polls the tank every 2s and reads the actuators back every
// 2s, so drift is seen.
func safeDevices() []devices.Device {
	ds := runtimetest.Greenhouse("greenhouse")
	for i := range ds {
		for k := range ds[i].Capabilities {
			ds[i].Capabilities[k].Poll = 2 * time.Second
		}
	}
	return ds
}

// startGuarded builds and runs an engine on g (a new greenhouse when nil)
// and j (a new journal when nil). It must be called inside a synctest
// bubble.
func startGuarded(t *testing.T, g *sim.Greenhouse, j *runtimetest.MemJournal, mod func(*runtime.Options)) *guarded {
	t.Helper()
	ctx := t.Context()
	if g == nil {
		var err error
		g, err = sim.New(sim.Options{Devices: safeDevices(), Initial: &sim.State{Level: 60, Temperature: 14}})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Open(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if j == nil {
		j = runtimetest.NewMemJournal()
	}
	reg := devices.NewRegistry()
	if err := reg.Add("sim", g); err != nil {
		t.Fatal(err)
	}
	opts := runtime.Options{Registry: reg, Journal: j, Policies: safePolicies(), Mode: governance.ModeInterlocked,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	if mod != nil {
		mod(&opts)
	}
	e, err := runtime.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	gd := &guarded{world: &world{t: t, g: g, e: e, j: j, ctx: ctx}, cancel: cancel, done: make(chan error, 1)}
	go func() { gd.done <- e.Run(rctx) }()
	t.Cleanup(gd.stop)
	synctest.Wait() // the first polls are in
	return gd
}

// stop stops the engine as a crash would: no drive to safe.
func (g *guarded) stop() {
	if g.cancel != nil {
		g.cancel()
		<-g.done
		g.cancel = nil
	}
}

func (g *guarded) events(kind runtime.Kind) []runtime.Event {
	evs, _ := g.e.Events(g.ctx, 0, 0)
	var out []runtime.Event
	for _, ev := range evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func (g *guarded) safeDrives() []runtime.SafeDriveBody {
	var out []runtime.SafeDriveBody
	for _, ev := range g.events(runtime.KindSafeDrive) {
		var b runtime.SafeDriveBody
		if err := json.Unmarshal(ev.Body, &b); err != nil {
			g.t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func (g *guarded) alarm(id string) runtime.Alarm {
	g.t.Helper()
	a, ok := g.e.Alarm(id)
	if !ok {
		g.t.Fatalf("no alarm %s; alarms: %+v", id, g.e.Alarms())
	}
	return a
}

func TestTTLRevertsToSafe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		obs := g.do("mqtt:ann", "on-1", "pump-1", "on", on)
		want(t, obs, runtime.Acted, "")
		start := time.Now()
		if got := obs.Receipt.Until; !got.Equal(start.Add(10 * time.Minute)) {
			t.Fatalf("receipt until %v, want %v: the reply says until when", got, start.Add(10*time.Minute))
		}
		time.Sleep(9*time.Minute + 50*time.Second)
		if !g.g.State().Pump {
			t.Fatal("the pump stopped before its TTL ran out")
		}
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("the pump still runs 10m05s after it was started with a 10m TTL")
		}
		drives := g.safeDrives()
		if len(drives) != 1 || drives[0].Trigger != runtime.TriggerTTL || !strings.Contains(drives[0].Why, "ran out") {
			t.Fatalf("safe drives %+v, want one for the ttl", drives)
		}
		var rc runtime.Receipt
		acted := g.events(runtime.KindActed)
		if err := json.Unmarshal(acted[len(acted)-1].Body, &rc); err != nil || rc.Value != off || rc.Confirmation != runtime.Confirmed {
			t.Fatalf("last receipt %s", acted[len(acted)-1].Body)
		}
		if a, _, _ := g.j.Attempt(g.ctx, rc.Key); a.Principal != runtime.PrincipalSafety || !strings.HasPrefix(a.Reason, "ttl: ") {
			t.Fatalf("the revert's attempt %+v, want principal %s and the ttl as its reason", a, runtime.PrincipalSafety)
		}
	})
}

func TestTTLRenewedIsNotReverted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		time.Sleep(8 * time.Minute)
		renewed := g.do("mqtt:ann", "on-2", "pump-1", "on", on)
		want(t, renewed, runtime.Acted, "")
		if !renewed.Receipt.Until.Equal(time.Now().Add(10 * time.Minute)) {
			t.Fatalf("renewal until %v", renewed.Receipt.Until)
		}
		time.Sleep(9 * time.Minute)
		synctest.Wait()
		if !g.g.State().Pump || len(g.safeDrives()) != 0 {
			t.Fatalf("a renewed TTL reverted the pump at 17m: drives %+v", g.safeDrives())
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("the renewed TTL did not revert the pump at its new end")
		}
	})
}

func TestTTLThatRanOutDuringARestartIsEnforcedAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		g.stop() // a crash: nothing is driven to safe
		if !g.g.State().Pump {
			t.Fatal("the crash stopped the pump")
		}
		time.Sleep(30 * time.Minute) // the gateway is down
		if !g.g.State().Pump {
			t.Fatal("the pump stopped on its own")
		}
		g2 := startGuarded(t, g.g, g.j, nil)
		time.Sleep(time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("a TTL that ran out while the gateway was down was not enforced at start")
		}
		if d := g2.safeDrives(); len(d) != 1 || d[0].Trigger != runtime.TriggerTTL {
			t.Fatalf("safe drives %+v", d)
		}
	})
}

func TestRunningInterlockStopsThePumpAsTheTankDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		g.g.Adjust(func(s *sim.State) { s.Level, s.Valve = 7, true })
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		// 12 L/min out of 200 L: about 6% a minute, so 7% falls below 5%
		// within half a minute.
		for range 60 {
			time.Sleep(time.Second)
			if !g.g.State().Pump {
				break
			}
		}
		synctest.Wait()
		st := g.g.State()
		if st.Pump {
			t.Fatalf("the pump still runs with the tank at %.2f%%", st.Level)
		}
		if st.Level < 4 {
			t.Fatalf("the pump stopped late: the tank is at %.2f%%", st.Level)
		}
		d := g.safeDrives()
		if len(d) != 1 || d[0].Trigger != runtime.TriggerInterlock || d[0].Condition != "tank-1.level > 5" ||
			d[0].Reading == nil || d[0].Reading.Value.Num > 5 {
			t.Fatalf("safe drives %+v, want one naming the condition and the reading that broke it", d)
		}
		a := g.alarm("interlock.pump-1.on")
		if a.State != runtime.AlarmActive || a.Condition || !a.Latching {
			t.Fatalf("interlock alarm %+v, want latched active with its condition cleared once the pump is safe", a)
		}
		// A start with the tank this low is refused at the judge: the
		// running interlock is a permissive too.
		want(t, g.do("mqtt:ann", "on-2", "pump-1", "on", on), runtime.Refused, "tank-1.level > 5")
	})
}

func TestStaleRunningInterlockStopsThePump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		g.g.SetFault("tank-1", sim.Fault{ReadErr: errors.New("sensor cable cut")})
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("the pump runs on with its running interlock's sensor unreadable")
		}
		if d := g.safeDrives(); len(d) != 1 || !strings.Contains(d[0].Why, "tank-1.level") {
			t.Fatalf("safe drives %+v", d)
		}
	})
}

// pumping is a greenhouse whose pump runs from the start.
func pumping(t *testing.T) *sim.Greenhouse {
	g, err := sim.New(sim.Options{Devices: safeDevices(), Initial: &sim.State{Level: 60, Temperature: 14, Pump: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDiscrepancyClasses(t *testing.T) {
	for _, c := range []struct {
		name   string
		fault  sim.Fault
		class  runtime.Confirmation
		detail string
	}{
		{"healthy", sim.Fault{}, runtime.Confirmed, ""},
		{"stuck", sim.Fault{Stuck: true}, runtime.NotStarted, "flow-1.rate stayed at 0"},
		{"slow", sim.Fault{Travel: time.Second}, runtime.WrongFinal, "after 3s (travel_within); want > 8"},
		{"returning", sim.Fault{Returns: 3 * time.Second}, runtime.Returned, "then went back"},
		{"unreadable", sim.Fault{}, runtime.Unconfirmed, "no good reading of flow-1.rate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := startGuarded(t, pumping(t), nil, nil)
				g.g.SetFault("valve-1", c.fault)
				if c.class == runtime.Unconfirmed {
					g.g.SetFault("flow-1", sim.Fault{ReadErr: errors.New("meter unplugged")})
				}
				obs := g.do("mqtt:ann", "open-1", "valve-1", "open", on)
				want(t, obs, runtime.Acted, "")
				rc := obs.Receipt
				if rc.Confirmation != c.class || !strings.Contains(rc.Detail, c.detail) {
					t.Fatalf("receipt %s: %s, want %s with %q", rc.Confirmation, rc.Detail, c.class, c.detail)
				}
				synctest.Wait()
				switch {
				case c.class == runtime.Confirmed:
					if len(g.e.Alarms()) != 0 {
						t.Fatalf("alarms after a confirmed act: %+v", g.e.Alarms())
					}
				case c.class == runtime.Unconfirmed:
					if a := g.alarm("unconfirmed.valve-1.open"); a.State != runtime.AlarmActive {
						t.Fatalf("alarm %+v", a)
					}
				default:
					a := g.alarm("discrepancy.valve-1.open")
					if a.State != runtime.AlarmActive || !strings.HasPrefix(a.Message, string(c.class)+": ") || a.Attempt != rc.Attempt {
						t.Fatalf("alarm %+v", a)
					}
					if obs.Outcome() != "contradicted" {
						t.Fatalf("outcome %s: a discrepancy is never reported as acted", obs.Outcome())
					}
				}
			})
		})
	}
}

func TestDiscrepancyWithOnContradictionSafeDrivesToSafe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, func(o *runtime.Options) {
			p := o.Policies["valve-1.open"]
			c := *p.Confirm
			c.OnDiscrepancy = runtime.SafeDrive
			p.Confirm = &c
			o.Policies["valve-1.open"] = p
		})
		// The pump is off: the valve opens and no water flows.
		obs := g.do("mqtt:ann", "open-1", "valve-1", "open", on)
		if obs.Receipt.Confirmation != runtime.NotStarted {
			t.Fatalf("receipt %+v", obs.Receipt)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		d := g.safeDrives()
		if len(d) != 1 || d[0].Trigger != runtime.TriggerDiscrepancy || d[0].Outcome != "driving" {
			t.Fatalf("safe drives %+v", d)
		}
		if w := g.g.Written("valve-1", "open"); len(w) != 2 || w[1] != off || g.g.State().Valve {
			t.Fatalf("valve writes %v, want it opened then driven closed", w)
		}
	})
}

// TestDriftIsRecordedAndNeverFought: a valve opened by the gateway and
// closed by hand (and a heater, which nothing confirms but its read-back)
// is drift: journaled, alarmed, shown as it is, and never switched back.
func TestDriftIsRecordedAndNeverFought(t *testing.T) {
	for _, c := range []struct {
		device, capability string
		set                func(*sim.State, bool)
	}{
		{"valve-1", "open", func(s *sim.State, v bool) { s.Valve = v }},
		{"heater-1", "on", func(s *sim.State, v bool) { s.Heater = v }},
	} {
		t.Run(c.device, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := startGuarded(t, pumping(t), nil, nil)
				target := c.device + "." + c.capability
				want(t, g.do("mqtt:ann", "on-1", c.device, c.capability, on), runtime.Acted, "")
				writes := g.g.Count("write", c.device, c.capability)
				g.g.Adjust(func(s *sim.State) { c.set(s, false) }) // someone at the panel
				time.Sleep(3 * time.Second)
				synctest.Wait()
				drifts := g.events(runtime.KindDrift)
				if len(drifts) != 1 {
					t.Fatalf("%d drift events, want 1", len(drifts))
				}
				var b runtime.DriftBody
				if err := json.Unmarshal(drifts[0].Body, &b); err != nil || b.From != on || b.To != off || b.Commanded == nil || *b.Commanded != on {
					t.Fatalf("drift %s", drifts[0].Body)
				}
				if a := g.alarm("drift." + target); a.State != runtime.AlarmActive || !a.Condition {
					t.Fatalf("drift alarm %+v", a)
				}
				st := findState(g.e.States(), c.device, c.capability)
				if st.Reading == nil || st.Reading.Value != off {
					t.Fatalf("the state shown is %+v, want it off as found", st)
				}
				time.Sleep(time.Minute)
				if n := g.g.Count("write", c.device, c.capability); n != writes {
					t.Fatalf("the gateway wrote %s %d times after the drift: it fought it", target, n-writes)
				}
				g.g.Adjust(func(s *sim.State) { c.set(s, true) }) // switched back
				time.Sleep(3 * time.Second)
				synctest.Wait()
				if a := g.alarm("drift." + target); a.State != runtime.AlarmClearedUnacked {
					t.Fatalf("drift alarm after the switch back %+v, want cleared_unacknowledged", a)
				}
			})
		})
	}
}

func findState(sts []runtime.StateRecord, device, capability string) runtime.StateRecord {
	for _, s := range sts {
		if s.Device == device && s.Capability == capability {
			return s
		}
	}
	return runtime.StateRecord{}
}

func TestFailedSafeDriveAlarmsAndBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		writes := g.g.Count("write", "pump-1", "on")
		g.g.SetFault("pump-1", sim.Fault{WriteErr: devices.Refused("coil", "relay coil open")})
		time.Sleep(10 * time.Minute)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		tries := g.g.Count("write", "pump-1", "on") - writes
		// 1s, 2s, 4s, 8s, 16s backoff: six tries in the first half minute,
		// not thirty.
		if tries < 3 || tries > 7 {
			t.Fatalf("%d tries of the drive to safe in 30s, want a backoff (about 5)", tries)
		}
		a := g.alarm("safe_drive.pump-1.on")
		if a.State != runtime.AlarmActive || a.Priority != runtime.PriorityCritical || a.Count != tries || !strings.Contains(a.Message, "relay coil open") {
			t.Fatalf("safe drive alarm %+v after %d tries", a, tries)
		}
		time.Sleep(10 * time.Minute)
		if n := g.g.Count("write", "pump-1", "on") - writes; n > tries+12 {
			t.Fatalf("%d tries in 10m: the backoff does not cap at a minute", n)
		}
		g.g.SetFault("pump-1", sim.Fault{})
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("the drive to safe was not retried once the relay was mended")
		}
		a = g.alarm("safe_drive.pump-1.on")
		if a.State != runtime.AlarmActive || a.Condition {
			t.Fatalf("latching alarm %+v, want active with its condition gone until acknowledged", a)
		}
		if _, err := g.e.AckAlarm(g.ctx, a.ID, "console:ann", "relay replaced"); err != nil {
			t.Fatal(err)
		}
		if a = g.alarm(a.ID); a.State != runtime.AlarmNormal {
			t.Fatalf("after the acknowledgement %+v", a)
		}
	})
}

func TestSafeDriveOfADeviceThatComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, nil)
		want(t, g.do("mqtt:ann", "on-1", "pump-1", "on", on), runtime.Acted, "")
		g.g.SetFault("pump-1", sim.Fault{Offline: true})
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		if a := g.alarm("safe_drive.pump-1.on"); !strings.Contains(a.Message, "offline") {
			t.Fatalf("alarm %+v", a)
		}
		g.g.SetFault("pump-1", sim.Fault{})
		time.Sleep(2 * time.Second) // the sweep sees it back; the owed drive is made at once
		synctest.Wait()
		if g.g.State().Pump {
			t.Fatal("the pump was not driven to safe when it came back with its TTL run out")
		}
	})
}

func TestOnStartSafe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g0, err := sim.New(sim.Options{Devices: safeDevices(), Initial: &sim.State{Level: 60, Heater: true, Valve: true}})
		if err != nil {
			t.Fatal(err)
		}
		_ = g0.Open(t.Context())
		g := startGuarded(t, g0, nil, func(o *runtime.Options) {
			p := o.Policies["heater-1.on"]
			p.OnStart = runtime.SafeDrive
			o.Policies["heater-1.on"] = p
		})
		time.Sleep(time.Second)
		synctest.Wait()
		st := g.g.State()
		if st.Heater || !st.Valve {
			t.Fatalf("state after start %+v: want the heater (on_start: safe) off and the valve (keep) open", st)
		}
	})
}

func TestSafeStopDrivesEveryActuatorToSafe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, nil, nil, func(o *runtime.Options) {
			p := o.Policies["valve-1.open"]
			p.OnStop = runtime.SafeKeep
			o.Policies["valve-1.open"] = p
		})
		g.g.Adjust(func(s *sim.State) { s.Pump, s.Valve, s.Heater = true, true, true })
		g.e.SafeStop(t.Context())
		st := g.g.State()
		if st.Pump || st.Heater || !st.Valve {
			t.Fatalf("after SafeStop %+v: want pump and heater off, the valve (on_stop: keep) open", st)
		}
		if _, err := g.e.Do(g.ctx, runtime.Command{Principal: "mqtt:ann", Origin: "test", RequestID: "late", Device: "pump-1", Capability: "on", Value: on}); err == nil {
			t.Fatal("a command after SafeStop was taken")
		}
	})
}

func TestAlarmLife(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGuarded(t, pumping(t), nil, func(o *runtime.Options) { o.MaxShelve = time.Hour })
		g.g.SetFault("valve-1", sim.Fault{Stuck: true})
		for i := range 5 { // a flood: one alarm with a count
			g.do("mqtt:ann", "open-"+string(rune('a'+i)), "valve-1", "open", on)
		}
		as := g.e.Alarms()
		if len(as) != 1 || as[0].ID != "discrepancy.valve-1.open" || as[0].Count != 5 || as[0].State != runtime.AlarmActive {
			t.Fatalf("alarms after five stuck opens %+v", as)
		}
		id := as[0].ID
		if _, err := g.e.AckAlarm(g.ctx, id, "console:ann", "  "); !errors.Is(err, runtime.ErrBadAlarmRequest) {
			t.Fatalf("ack without a comment: %v", err)
		}
		if _, err := g.e.AckAlarm(g.ctx, "nope", "console:ann", "x"); !errors.Is(err, runtime.ErrAlarmNotFound) {
			t.Fatalf("ack of no alarm: %v", err)
		}
		a, err := g.e.AckAlarm(g.ctx, id, "console:ann", "valve actuator jammed, fitter called")
		if err != nil || a.State != runtime.AlarmActiveAcked || a.AckedBy != "console:ann" {
			t.Fatalf("ack %+v %v", a, err)
		}
		if _, err := g.e.AckAlarm(g.ctx, id, "console:bob", "again"); !errors.Is(err, runtime.ErrAlarmNotUnacknowledged) {
			t.Fatalf("second ack: %v", err)
		}
		if c := runtime.CountAlarms(g.e.Alarms(), time.Now()); c.Active != 1 || c.Unacknowledged != 0 {
			t.Fatalf("counts %+v", c)
		}
		if _, err := g.e.ShelveAlarm(g.ctx, id, "console:root", 2*time.Hour, "maintenance"); !errors.Is(err, runtime.ErrBadAlarmRequest) {
			t.Fatalf("shelving beyond max_shelve: %v", err)
		}
		if a, err = g.e.ShelveAlarm(g.ctx, id, "console:root", 30*time.Minute, "fitter on site"); err != nil || !a.Shelved(time.Now()) {
			t.Fatalf("shelve %+v %v", a, err)
		}
		if c := runtime.CountAlarms(g.e.Alarms(), time.Now()); c.Active != 0 || c.Shelved != 1 {
			t.Fatalf("counts while shelved %+v", c)
		}
		time.Sleep(31 * time.Minute)
		synctest.Wait()
		if a = g.alarm(id); a.Shelved(time.Now()) || !a.ShelvedUntil.IsZero() {
			t.Fatalf("shelving did not run out: %+v", a)
		}
		// The fitter mends it: a confirmed act clears the condition and,
		// acknowledged already, the alarm returns to normal.
		g.g.SetFault("valve-1", sim.Fault{})
		want(t, g.do("mqtt:ann", "close-1", "valve-1", "open", off), runtime.Acted, "")
		if a = g.alarm(id); a.State != runtime.AlarmNormal || a.Condition {
			t.Fatalf("after a confirmed act %+v", a)
		}
		var actions []string
		for _, ev := range g.events(runtime.KindAlarm) {
			var b runtime.AlarmBody
			_ = json.Unmarshal(ev.Body, &b)
			actions = append(actions, b.Action)
		}
		if got := strings.Join(actions, ","); got != "raised,raised,raised,raised,raised,acknowledged,shelved,unshelved,cleared" {
			t.Fatalf("alarm events %s", got)
		}
		// The record survives a restart.
		g.stop()
		g2 := startGuarded(t, g.g, g.j, nil)
		if a2, ok := g2.e.Alarm(id); !ok || a2.State != runtime.AlarmNormal || a2.Count != 5 || a2.Comment != "valve actuator jammed, fitter called" {
			t.Fatalf("after a restart %+v", a2)
		}
	})
}
