package opcua

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/value"
	"go.uber.org/goleak"
)

func float64p(f float64) *float64 { return &f }

func plcDevices() []devices.Device {
	act := func(name string, t value.Type, rb bool) devices.Capability {
		return devices.Capability{Name: name, Kind: devices.KindActuator, Type: t, ReadBack: rb}
	}
	return []devices.Device{
		{ID: "tank-1", Address: "plc-1", Capabilities: []devices.Capability{{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber}}},
		{ID: "pump-1", Address: "plc-1", Capabilities: []devices.Capability{act("command", value.TypeBool, true)}},
		{ID: "valve-1", Address: "plc-1", Capabilities: []devices.Capability{act("open", value.TypeBool, true)}},
		{ID: "sp-1", Address: "plc-1", Capabilities: []devices.Capability{act("setpoint", value.TypeNumber, true)}},
		{ID: "lock-1", Address: "plc-1", Capabilities: []devices.Capability{act("value", value.TypeNumber, true)}},
		{ID: "mode-1", Address: "plc-1", Capabilities: []devices.Capability{{Name: "mode", Kind: devices.KindActuator, Type: value.TypeEnum, Enum: []string{"auto", "manual"}, ReadBack: true}}},
		{ID: "speed-1", Address: "plc-1", Capabilities: []devices.Capability{act("speed", value.TypeString, true)}},
	}
}

func plcConfig(p *testPLC) *Config {
	return &Config{URL: p.URL(), Timeout: "1s", Nodes: map[string]map[string]NodeConfig{
		"tank-1":  {"level": {Node: p.node("Tank.Level"), Sampling: "20ms", Deadband: float64p(0.1)}},
		"pump-1":  {"command": {Node: p.node("Pump.Command"), ReadBack: p.node("Pump.Running")}},
		"valve-1": {"open": {Node: p.node("Valve.Open")}},
		"sp-1":    {"setpoint": {Node: p.node("Setpoint")}},
		"lock-1":  {"value": {Node: p.node("Locked")}},
		"mode-1":  {"mode": {Node: p.node("Mode")}},
		"speed-1": {"speed": {Node: p.node("Speed")}},
	}}
}

// rig is a driver open on a test PLC, with its notices.
type rig struct {
	d       *Driver
	mu      sync.Mutex
	notices []devices.Notice
	more    chan struct{}
}

func startDriver(t *testing.T, p *testPLC, cfg *Config) *rig {
	t.Helper()
	return startDriverWith(t, cfg, plcDevices())
}

// startDriverWith opens the driver on devs, as configured.
func startDriverWith(t *testing.T, cfg *Config, devs []devices.Device) *rig {
	t.Helper()
	in := &devicetest.Config{Driver: "plc-1", Settings: cfg}
	b := configure(in, devs)
	if b == nil {
		t.Fatalf("configure: %q", in.Problems())
	}
	drv, err := b(devices.Env{StateDir: t.TempDir(), Devices: devs, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	d := drv.(*Driver)
	d.o.check = 20 * time.Millisecond
	d.o.backoffMin, d.o.backoffMax = 20*time.Millisecond, 200*time.Millisecond
	r := &rig{d: d, more: make(chan struct{}, 1)}
	if err := d.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		d.Watch(ctx, func(n devices.Notice) {
			r.mu.Lock()
			r.notices = append(r.notices, n)
			r.mu.Unlock()
			select {
			case r.more <- struct{}{}:
			default:
			}
		})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return r
}

// waitFor waits up to 5s for a notice that ok accepts, among those after
// the first from.
func (r *rig) waitFor(t *testing.T, what string, from int, ok func(devices.Notice) bool) int {
	t.Helper()
	// A liveness bound, not a measure: on a loaded machine the PLC
	// fixture's subscriptions time out, and a loss is seen a retry later.
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for i := from; i < len(r.notices); i++ {
			if ok(r.notices[i]) {
				r.mu.Unlock()
				return i + 1
			}
		}
		r.mu.Unlock()
		select {
		case <-r.more:
		case <-deadline.C:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("no notice of %s within 20s; notices: %+v", what, r.notices)
		}
	}
}

func TestWriteRefusedWithItsStatus(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	p := startPLC(t)
	r := startDriver(t, p, plcConfig(p))
	err := r.d.Write(t.Context(), "lock-1", "value", value.Number(3))
	if code, ok := devices.RefusalCode(err); !ok || code != "BadNotWritable" {
		t.Fatalf("Write to a read-only node = %v; want a refusal with code BadNotWritable", err)
	}
	if o := devices.Classify(err); o != devices.OutcomeRefused {
		t.Errorf("Classify(%v) = %v, want refused", err, o)
	}
}

// A value that does not fit the node is refused before anything is sent.
func TestMismatchRefusedBeforeSending(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	p := startPLC(t)
	r := startDriver(t, p, plcConfig(p))
	before := p.writes.Load()
	for _, tc := range []struct {
		dev, capa string
		v         value.Value
		want      []string
	}{
		{"sp-1", "setpoint", value.Number(1.5), []string{"1.5", "not a whole number", "Int32"}},
		{"sp-1", "setpoint", value.Number(3e9), []string{"3e+09", "out of the range", "Int32"}},
		{"sp-1", "setpoint", value.Text("warm"), []string{"takes a number", "not a string"}},
		{"speed-1", "speed", value.Text("fast"), []string{"speed is a string", "Float"}},
		{"mode-1", "mode", value.Enum("off"), []string{`"off" is not a value`}},
	} {
		err := r.d.Write(t.Context(), tc.dev, tc.capa, tc.v)
		if !errors.Is(err, devices.ErrBadRequest) {
			t.Errorf("Write(%s.%s, %v) = %v; want a bad request", tc.dev, tc.capa, tc.v, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Write(%s.%s, %v) = %q; want it to say %q", tc.dev, tc.capa, tc.v, err, w)
			}
		}
	}
	if n := p.writes.Load() - before; n != 0 {
		t.Errorf("the PLC saw %d writes; want none", n)
	}
	if _, err := r.d.Read(t.Context(), "speed-1", "speed"); !errors.Is(err, devices.ErrBadRequest) {
		t.Errorf("Read of a string capability on a Float node = %v; want a bad request", err)
	}
}

func TestSubscriptionDeliversChange(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	p := startPLC(t)
	r := startDriver(t, p, plcConfig(p))
	isLevel := func(v float64) func(devices.Notice) bool {
		return func(n devices.Notice) bool {
			return n.Device == "tank-1" && n.Capability == "level" && n.Reading != nil && n.Reading.Value.Equal(value.Number(v))
		}
	}
	from := r.waitFor(t, "the first level", 0, isLevel(1.5))
	p.Set("Tank.Level", 3.25)
	r.waitFor(t, "the level 3.25", from, isLevel(3.25))
}

func TestThumbprintMismatchRefusesTheServer(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	p := startPLC(t)
	cfg := plcConfig(p)
	wrong := strings.Repeat("ab", 32)
	cfg.ServerThumbprint = wrong
	r := startDriver(t, p, cfg)
	err := r.d.Health(t.Context())
	if !errors.Is(err, ErrThumbprintMismatch) || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), p.Thumbprint()) {
		t.Fatalf("Health = %v; want a thumbprint mismatch naming %s and %s", err, p.Thumbprint(), wrong)
	}
	if devs := r.d.Devices(); len(devs) != 0 {
		t.Errorf("Devices() = %d devices on a server that is not trusted", len(devs))
	}
	before := p.writes.Load()
	werr := r.d.Write(t.Context(), "sp-1", "setpoint", value.Number(1))
	if devices.Classify(werr) != devices.OutcomeOffline || !errors.Is(werr, ErrThumbprintMismatch) {
		t.Errorf("Write = %v; want offline, saying the thumbprint does not match", werr)
	}
	if r.d.Why("sp-1") == nil {
		t.Error("Why(sp-1) = nil on a server that is not trusted")
	}
	if p.writes.Load() != before {
		t.Error("a write reached an untrusted server")
	}

	// The right thumbprint connects.
	cfg.ServerThumbprint = strings.ToUpper(p.Thumbprint())
	r2 := startDriver(t, p, cfg)
	if err := r2.d.Health(t.Context()); err != nil {
		t.Errorf("Health with the right thumbprint = %v", err)
	}
}

func TestServerRestartIsLostThenFound(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	p := startPLC(t)
	r := startDriver(t, p, plcConfig(p))
	p.Stop()
	from := r.waitFor(t, "tank-1 lost", 0, func(n devices.Notice) bool { return n.Device == "tank-1" && n.Lost != nil })
	if err := r.d.Health(t.Context()); err == nil {
		t.Error("Health = nil while the server is stopped")
	}
	if _, err := r.d.Read(t.Context(), "tank-1", "level"); devices.Classify(err) != devices.OutcomeOffline {
		t.Errorf("Read while stopped = %v; want offline", err)
	}
	if err := r.d.Write(t.Context(), "sp-1", "setpoint", value.Number(5)); devices.Classify(err) != devices.OutcomeOffline {
		t.Errorf("Write while stopped = %v; want offline", err)
	}
	p.Restart()
	from = r.waitFor(t, "tank-1 found", from, func(n devices.Notice) bool { return n.Device == "tank-1" && n.Found })
	if rd, err := r.d.Read(t.Context(), "tank-1", "level"); err != nil || rd.Quality != devices.QualityGood {
		t.Errorf("Read after the restart = %+v, %v", rd, err)
	}
	// The subscription was built anew on the new session.
	p.Set("Tank.Level", 9.5)
	r.waitFor(t, "the level 9.5 after the restart", from, func(n devices.Notice) bool {
		return n.Device == "tank-1" && n.Reading != nil && n.Reading.Value.Equal(value.Number(9.5))
	})
}

// TestRefusedSubscriptionIsNoReconnectStorm: a server that refuses every
// subscription. gopcua's client (v0.8.0) takes any bad service result for
// a broken channel and closes, so the session is lost each time; but the
// driver's backoff starts again from its minimum only after a session that
// held, so the reconnects slow down instead of storming the PLC.
func TestRefusedSubscriptionIsNoReconnectStorm(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	p := startPLC(t, func(p *testPLC) { p.noSubscriptions = true })
	r := startDriver(t, p, plcConfig(p)) // backoff 20ms doubling to 200ms
	r.waitFor(t, "found", 0, func(n devices.Notice) bool { return n.Found })
	time.Sleep(time.Second)
	r.mu.Lock()
	found := 0
	for _, n := range r.notices {
		if n.Found {
			found++
		}
	}
	r.mu.Unlock()
	// 20+40+80+160+200+200+... ms: about 7 sessions in a second. A backoff
	// reset at every connect made one every 40ms or so (25 a second).
	if cycles := found / len(plcDevices()); cycles > 12 {
		t.Fatalf("%d sessions in about a second with a server refusing subscriptions: the reconnects do not slow down", cycles)
	}
}

// TestPanicWhileConnectingIsAFailedConnection: gopcua's client can panic on
// a misbehaving server's answers; the driver takes it for a failed
// connection, says why, and tries again, instead of ending the gateway.
func TestPanicWhileConnectingIsAFailedConnection(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	var panics atomic.Int64
	testConnectHook = func() {
		if panics.Add(1) == 1 {
			panic("nil session")
		}
	}
	t.Cleanup(func() { testConnectHook = nil })
	p := startPLC(t)
	r := startDriver(t, p, plcConfig(p))
	r.waitFor(t, "found after the panic", 0, func(n devices.Notice) bool { return n.Found })
	if panics.Load() < 2 {
		t.Fatal("the driver did not connect again after the panic")
	}
}
