package plc

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	Quiet() // the gopcua server prints through the standard logger
	os.Exit(m.Run())
}

// One certificate for every test: an RSA 2048 key takes a while under -race.
var testCert = sync.OnceValues(func() ([]byte, error) {
	der, key, err := NewCertificate(ApplicationURI)
	testKey = key
	return der, err
})

var testKey *rsa.PrivateKey

// start starts a PLC for a test and closes it in a cleanup. Call it after
// registering goleak's cleanup, so that Close runs first.
func start(t *testing.T, opts Options) *PLC {
	t.Helper()
	if opts.Certificate == nil {
		der, err := testCert()
		if err != nil {
			t.Fatal(err)
		}
		opts.Certificate, opts.PrivateKey = der, testKey
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	p, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// connect connects a gopcua client and closes it in a cleanup.
func connect(t *testing.T, url string, opts ...opcua.Option) *opcua.Client {
	t.Helper()
	opts = append([]opcua.Option{
		opcua.SecurityMode(ua.MessageSecurityModeNone),
		opcua.RequestTimeout(3 * time.Second),
		opcua.DialTimeout(2 * time.Second),
		opcua.AutoReconnect(false),
	}, opts...)
	c, err := opcua.NewClient(url, opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("Connect(%s): %v", url, err)
	}
	t.Cleanup(func() { closeClient(c) })
	return c
}

func closeClient(c *opcua.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

func nodeID(t *testing.T, tag Tag) *ua.NodeID {
	t.Helper()
	n, err := ua.ParseNodeID(NodeID(tag))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func read(t *testing.T, c *opcua.Client, tag Tag, attr ua.AttributeID) *ua.DataValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	resp, err := c.Read(ctx, &ua.ReadRequest{
		NodesToRead:        []*ua.ReadValueID{{NodeID: nodeID(t, tag), AttributeID: attr}},
		TimestampsToReturn: ua.TimestampsToReturnBoth,
	})
	if err != nil {
		t.Fatalf("Read(%s): %v", tag, err)
	}
	if len(resp.Results) != 1 {
		t.Fatalf("Read(%s): %d results", tag, len(resp.Results))
	}
	return resp.Results[0]
}

func value(t *testing.T, c *opcua.Client, tag Tag) any {
	t.Helper()
	dv := read(t, c, tag, ua.AttributeIDValue)
	if dv.Status != ua.StatusOK {
		t.Fatalf("Read(%s) status = %v", tag, dv.Status)
	}
	return dv.Value.Value()
}

func writeReq(tag Tag, v any) (*ua.WriteRequest, error) {
	n, err := ua.ParseNodeID(NodeID(tag))
	if err != nil {
		return nil, err
	}
	vv, err := ua.NewVariant(v)
	if err != nil {
		return nil, err
	}
	return &ua.WriteRequest{NodesToWrite: []*ua.WriteValue{{
		NodeID: n, AttributeID: ua.AttributeIDValue,
		Value: &ua.DataValue{EncodingMask: ua.DataValueValue, Value: vv},
	}}}, nil
}

func write(t *testing.T, c *opcua.Client, tag Tag, v any) ua.StatusCode {
	t.Helper()
	req, err := writeReq(tag, v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	resp, err := c.Write(ctx, req)
	if err != nil {
		t.Fatalf("Write(%s, %v): %v", tag, v, err)
	}
	if len(resp.Results) != 1 {
		t.Fatalf("Write(%s, %v): %d results", tag, v, len(resp.Results))
	}
	return resp.Results[0]
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReadEveryTag(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: -1})
	c := connect(t, p.URL())

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	idx, err := c.FindNamespace(ctx, NamespaceURI)
	if err != nil || idx != NamespaceIndex {
		t.Fatalf("FindNamespace(%q) = %d, %v, want %d", NamespaceURI, idx, err, NamespaceIndex)
	}

	want := map[Tag]struct {
		v        any
		dataType uint32
		access   byte
	}{
		TankLevel:   {float64(50), 11, 1},
		PumpCommand: {false, 1, 3},
		PumpRunning: {false, 1, 1},
		ValveOpen:   {false, 1, 3},
		Setpoint:    {float64(60), 11, 3},
		MixerSpeed:  {int32(0), 6, 3},
		HeaterPower: {float32(0), 10, 3},
		DrainLock:   {false, 1, 3},
	}
	if len(want) != len(Tags()) {
		t.Fatalf("the test covers %d tags, the PLC has %d", len(want), len(Tags()))
	}
	for _, tag := range Tags() {
		w := want[tag]
		if got := value(t, c, tag); got != w.v {
			t.Errorf("value of %s = %v (%T), want %v (%T)", tag, got, got, w.v, w.v)
		}
		dt := read(t, c, tag, ua.AttributeIDDataType)
		if n, ok := dt.Value.Value().(*ua.NodeID); !ok || n.IntID() != w.dataType {
			t.Errorf("DataType of %s = %v, want i=%d", tag, dt.Value.Value(), w.dataType)
		}
		for _, a := range []ua.AttributeID{ua.AttributeIDAccessLevel, ua.AttributeIDUserAccessLevel} {
			if got := read(t, c, tag, a).Value.Value(); got != w.access {
				t.Errorf("attribute %v of %s = %v, want %v", a, tag, got, w.access)
			}
		}
	}
	// The tags are browsable under the PLC's folder.
	folder := ua.NewNumericNodeID(NamespaceIndex, 85)
	bres, err := c.Browse(ctx, &ua.BrowseRequest{NodesToBrowse: []*ua.BrowseDescription{{
		NodeID: folder, BrowseDirection: ua.BrowseDirectionForward,
		ReferenceTypeID: ua.NewNumericNodeID(0, 0), IncludeSubtypes: true, ResultMask: uint32(ua.BrowseResultMaskAll),
	}}})
	if err != nil {
		t.Fatalf("Browse: %v", err)
	}
	var browsed []Tag
	for _, r := range bres.Results[0].References {
		browsed = append(browsed, Tag(r.BrowseName.Name))
	}
	if !slices.Equal(browsed, Tags()) {
		t.Errorf("Browse(%v) = %v, want %v", folder, browsed, Tags())
	}

	if got := read(t, c, "No.Such.Tag", ua.AttributeIDValue).Status; got != ua.StatusBadNodeIDUnknown {
		t.Errorf("read of an unknown node: status %v, want %v", got, ua.StatusBadNodeIDUnknown)
	}
}

func TestWrites(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: -1})
	c := connect(t, p.URL())

	tests := []struct {
		name string
		tag  Tag
		v    any
		want ua.StatusCode
		read any // the value read back
	}{
		{"pump on", PumpCommand, true, ua.StatusOK, true},
		{"valve open", ValveOpen, true, ua.StatusOK, true},
		{"setpoint", Setpoint, 42.5, ua.StatusOK, 42.5},
		{"setpoint above range", Setpoint, 100.5, ua.StatusBadOutOfRange, 42.5},
		{"setpoint as int32", Setpoint, int32(40), ua.StatusBadTypeMismatch, 42.5},
		{"mixer int32", MixerSpeed, int32(1200), ua.StatusOK, int32(1200)},
		{"mixer as double", MixerSpeed, float64(1300), ua.StatusBadTypeMismatch, int32(1200)},
		{"mixer as int16", MixerSpeed, int16(1300), ua.StatusBadTypeMismatch, int32(1200)},
		{"mixer below range", MixerSpeed, int32(-1), ua.StatusBadOutOfRange, int32(1200)},
		{"heater float", HeaterPower, float32(12.5), ua.StatusOK, float32(12.5)},
		{"heater as double", HeaterPower, 12.5, ua.StatusBadTypeMismatch, float32(12.5)},
		{"pump as string", PumpCommand, "on", ua.StatusBadTypeMismatch, true},
		{"level is read-only", TankLevel, 10.0, ua.StatusBadNotWritable, 50.0},
		{"running is read-only", PumpRunning, true, ua.StatusBadNotWritable, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := write(t, c, tc.tag, tc.v); got != tc.want {
				t.Errorf("Write(%s, %v) = %v, want %v", tc.tag, tc.v, got, tc.want)
			}
			if got := value(t, c, tc.tag); got != tc.read {
				t.Errorf("read back %s = %v, want %v", tc.tag, got, tc.read)
			}
		})
	}
	if got := p.Writes(MixerSpeed); got != 1 {
		t.Errorf("Writes(MixerSpeed) = %d, want 1", got)
	}
	if got := p.Rejected(MixerSpeed); got != 3 {
		t.Errorf("Rejected(MixerSpeed) = %d, want 3", got)
	}
	if !p.PumpCommand() || !p.Valve() {
		t.Errorf("PumpCommand, Valve = %v, %v, want true, true", p.PumpCommand(), p.Valve())
	}
}

func TestLockedTag(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: -1})
	c := connect(t, p.URL())

	if got := write(t, c, DrainLock, true); got != ua.StatusOK {
		t.Fatalf("Write(DrainLock) while writable = %v, want OK", got)
	}
	if err := p.SetWritable(DrainLock, false); err != nil {
		t.Fatal(err)
	}
	if got := write(t, c, DrainLock, false); got != ua.StatusBadNotWritable {
		t.Errorf("Write(DrainLock) while locked = %v (0x%08X), want %v", got, uint32(got), ua.StatusBadNotWritable)
	}
	if got := read(t, c, DrainLock, ua.AttributeIDAccessLevel).Value.Value(); got != byte(1) {
		t.Errorf("AccessLevel while locked = %v, want 1 (CurrentRead)", got)
	}
	if got := p.Value(DrainLock); got != true {
		t.Errorf("DrainLock = %v after a refused write, want true", got)
	}
	if w, r := p.Writes(DrainLock), p.Rejected(DrainLock); w != 1 || r != 1 {
		t.Errorf("Writes, Rejected = %d, %d, want 1, 1", w, r)
	}
	if err := p.SetWritable(DrainLock, true); err != nil {
		t.Fatal(err)
	}
	if got := write(t, c, DrainLock, false); got != ua.StatusOK {
		t.Errorf("Write(DrainLock) after unlocking = %v, want OK", got)
	}
	if err := p.SetWritable("Nope", false); !errors.Is(err, ErrUnknownTag) {
		t.Errorf("SetWritable(unknown) = %v, want ErrUnknownTag", err)
	}
}

// subscribe subscribes to tags and returns a channel of their values.
func subscribe(t *testing.T, c *opcua.Client, interval time.Duration, tags ...Tag) <-chan struct {
	tag Tag
	v   any
} {
	t.Helper()
	notes := make(chan *opcua.PublishNotificationData, 64)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx, &opcua.SubscriptionParameters{Interval: interval}, notes)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	var reqs []*ua.MonitoredItemCreateRequest
	for i, tag := range tags {
		reqs = append(reqs, opcua.NewMonitoredItemCreateRequestWithDefaults(nodeID(t, tag), ua.AttributeIDValue, uint32(i)))
	}
	res, err := sub.Monitor(ctx, ua.TimestampsToReturnBoth, reqs...)
	if err != nil || res.Results[0].StatusCode != ua.StatusOK {
		t.Fatalf("Monitor: %v, %v", err, res)
	}
	out := make(chan struct {
		tag Tag
		v   any
	}, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-t.Context().Done():
				return
			case n := <-notes:
				dc, ok := n.Value.(*ua.DataChangeNotification)
				if !ok {
					continue
				}
				for _, it := range dc.MonitoredItems {
					select {
					case out <- struct {
						tag Tag
						v   any
					}{tags[it.ClientHandle], it.Value.Value.Value()}:
					default:
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = sub.Cancel(ctx)
		<-done
	})
	return out
}

// await waits for tag to be reported with value v.
func await(t *testing.T, ch <-chan struct {
	tag Tag
	v   any
}, within time.Duration, tag Tag, v any) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case n := <-ch:
			if n.tag == tag && n.v == v {
				return
			}
		case <-timer.C:
			t.Fatalf("no notification of %s = %v within %v", tag, v, within)
		}
	}
}

func TestSubscriptionDeliversServerSideChanges(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: -1, FeedbackDelay: 100 * time.Millisecond})
	c := connect(t, p.URL())
	notes := subscribe(t, c, 50*time.Millisecond, TankLevel, PumpRunning, Setpoint)

	await(t, notes, time.Second, TankLevel, 50.0) // the initial value
	p.SetLevel(73.5)
	await(t, notes, time.Second, TankLevel, 73.5)
	if err := p.Set(Setpoint, 12.0); err != nil {
		t.Fatal(err)
	}
	await(t, notes, time.Second, Setpoint, 12.0)

	// A client write is reported too, and the feedback follows the command.
	if got := write(t, c, PumpCommand, true); got != ua.StatusOK {
		t.Fatalf("Write(PumpCommand) = %v", got)
	}
	p.Advance(100 * time.Millisecond)
	await(t, notes, time.Second, PumpRunning, true)
}

func TestPhysics(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: -1, FeedbackDelay: time.Second, FillRate: 10, DrainRate: 4})

	p.SetLevel(50)
	if err := p.Set(PumpCommand, true); err != nil {
		t.Fatal(err)
	}
	p.Advance(999 * time.Millisecond)
	if p.PumpRunning() || p.Level() != 50 {
		t.Fatalf("before the feedback delay: running %v level %v, want false 50", p.PumpRunning(), p.Level())
	}
	p.Advance(time.Millisecond)
	if !p.PumpRunning() {
		t.Fatal("Pump.Running did not follow the command after the feedback delay")
	}
	p.Advance(2 * time.Second) // +20
	if got := p.Level(); got != 70 {
		t.Errorf("level after 2s of filling = %v, want 70", got)
	}
	p.SetValve(true)
	p.Advance(time.Second) // +10 -4
	if got := p.Level(); got != 76 {
		t.Errorf("level after 1s of filling and draining = %v, want 76", got)
	}
	p.Advance(10 * time.Second)
	if got := p.Level(); got != 100 {
		t.Errorf("level = %v, want bounded at 100", got)
	}

	// A stuck pump takes its command but keeps running.
	p.StuckPump(true)
	if err := p.Set(PumpCommand, false); err != nil {
		t.Fatal(err)
	}
	p.Advance(5 * time.Second)
	if !p.PumpRunning() || p.PumpCommand() {
		t.Errorf("stuck: command %v running %v, want false true", p.PumpCommand(), p.PumpRunning())
	}
	p.StuckPump(false)
	p.Advance(time.Second)
	if p.PumpRunning() {
		t.Error("freed pump did not follow its command")
	}
	p.Advance(100 * time.Second)
	if got := p.Level(); got != 0 {
		t.Errorf("level = %v, want bounded at 0", got)
	}
}

func TestPhysicsTicker(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: 10 * time.Millisecond, FeedbackDelay: 20 * time.Millisecond, FillRate: 50})
	c := connect(t, p.URL())
	p.SetLevel(10)
	if got := write(t, c, PumpCommand, true); got != ua.StatusOK {
		t.Fatalf("Write(PumpCommand) = %v", got)
	}
	eventually(t, 2*time.Second, "level rising", func() bool { return value(t, c, TankLevel).(float64) > 20 })
	if !p.PumpRunning() {
		t.Error("level rose with the pump not running")
	}
}

func TestStalledWrite(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: -1})
	c := connect(t, p.URL())

	// A late response: the client waits for it, and the write is applied
	// before the response comes.
	p.StallWrites(1, 300*time.Millisecond)
	begin := time.Now()
	if got := write(t, c, Setpoint, 10.0); got != ua.StatusOK {
		t.Fatalf("stalled Write = %v, want OK", got)
	}
	if d := time.Since(begin); d < 300*time.Millisecond {
		t.Errorf("stalled Write answered after %v, want >= 300ms", d)
	}

	// A lost response: the client times out, the write is applied.
	p.StallWrites(1, NoResponse)
	req, err := writeReq(Setpoint, 20.0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := c.Write(ctx, req); err == nil {
		t.Fatal("Write with a lost response returned no error")
	}
	if got := p.Value(Setpoint); got != 20.0 {
		t.Errorf("Setpoint = %v after a write whose response was lost, want 20", got)
	}
	if got := p.Writes(Setpoint); got != 2 {
		t.Errorf("Writes(Setpoint) = %d, want 2", got)
	}
	// Other requests are answered while a response is held; a held response
	// is dropped at Close.
	p.StallWrites(1, time.Hour)
	held := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Write(ctx, req)
		held <- err
	}()
	eventually(t, 2*time.Second, "held write applied", func() bool { return p.Writes(Setpoint) == 3 })
	begin = time.Now()
	if got := value(t, c, Setpoint); got != 20.0 {
		t.Errorf("Setpoint = %v", got)
	}
	if got := write(t, c, Setpoint, 30.0); got != ua.StatusOK {
		t.Errorf("Write after the stalled ones = %v, want OK", got)
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("a read and a write took %v while a response was held", d)
	}
	if err := <-held; err == nil {
		t.Error("Write whose response is held an hour returned no error")
	}
}

// serverGoroutines returns the stacks of goroutines running gopcua's
// server package.
func serverGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/gopcua/opcua/server.") {
			out = append(out, g)
		}
	}
	return out
}

func TestCloseWithClientsConnected(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: 10 * time.Millisecond})
	states := make(chan opcua.ConnState, 16)
	c := connect(t, p.URL(), opcua.StateChangedCh(states))
	notes := subscribe(t, c, 20*time.Millisecond, TankLevel)
	await(t, notes, time.Second, TankLevel, 50.0)
	p.StallWrites(1, time.Hour)
	req, err := writeReq(Setpoint, 1.0)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	go func() {
		defer close(held)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = c.Write(ctx, req)
	}()
	eventually(t, 2*time.Second, "held write applied", func() bool { return p.Writes(Setpoint) == 1 })

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Nothing of the server is left, though the client has not hung up.
	// gopcua's connection monitor ends on its own once its context is
	// cancelled, a moment after Close: it is given two seconds.
	deadline := time.Now().Add(2 * time.Second)
	g := serverGoroutines()
	for len(g) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		g = serverGoroutines()
	}
	if len(g) != 0 {
		t.Errorf("after Close, %d goroutines of the gopcua server:\n%s", len(g), strings.Join(g, "\n\n"))
	}
	// The client is told: its connection was closed under it.
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for told := false; !told; {
		select {
		case s := <-states:
			told = s == opcua.Disconnected || s == opcua.Closed
		case <-timer.C:
			t.Fatal("the client was not disconnected by Close")
		}
	}
	<-held
}

func TestRestartSamePort(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: -1})
	url := p.URL()
	states := make(chan opcua.ConnState, 16)
	c := connect(t, url, opcua.AutoReconnect(true), opcua.ReconnectInterval(100*time.Millisecond), opcua.StateChangedCh(states))

	if got := write(t, c, Setpoint, 33.0); got != ua.StatusOK {
		t.Fatalf("Write = %v", got)
	}
	notes := subscribe(t, c, 50*time.Millisecond, TankLevel)
	await(t, notes, time.Second, TankLevel, 50.0)
	if err := p.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if p.URL() != url {
		t.Fatalf("URL after Restart = %s, want %s", p.URL(), url)
	}
	// The state survives; the client reconnects and reads it.
	eventually(t, 10*time.Second, "client reconnected", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		v, err := c.Node(nodeID(t, Setpoint)).Value(ctx)
		return err == nil && v.Value() == 33.0
	})
	// The client's subscription is restored (the gopcua client creates it
	// again on the new server) and delivers server-side changes.
	p.SetLevel(12.5)
	await(t, notes, 10*time.Second, TankLevel, 12.5)

	// A fresh client connects too.
	c2 := connect(t, url)
	if got := value(t, c2, Setpoint); got != 33.0 {
		t.Errorf("Setpoint after Restart = %v, want 33", got)
	}
	// Close the clients first: the gopcua client's Close races with its own
	// reconnect loop (client.go:645 reads c.conn, client.go:598 writes it),
	// which a closed PLC would start.
	closeClient(c)
	closeClient(c2)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(); !errors.Is(err, ErrClosed) {
		t.Errorf("Restart after Close = %v, want ErrClosed", err)
	}
}

func TestCertificate(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	p := start(t, Options{Tick: -1})
	sum := sha256.Sum256(p.CertificateDER())
	if got, want := p.Thumbprint(), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Thumbprint = %s, want %s", got, want)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	eps, err := opcua.GetEndpoints(ctx, p.URL())
	if err != nil {
		t.Fatalf("GetEndpoints: %v", err)
	}
	if len(eps) != 1 || eps[0].SecurityPolicyURI != ua.SecurityPolicyURINone {
		t.Fatalf("endpoints = %v, want one with policy None", eps)
	}
	if string(eps[0].ServerCertificate) != string(p.CertificateDER()) {
		t.Error("the endpoint does not advertise the PLC's certificate")
	}
	if got := eps[0].Server.ApplicationURI; got != ApplicationURI {
		t.Errorf("ApplicationURI = %q, want %q", got, ApplicationURI)
	}
}

func TestSecurityUnsupported(t *testing.T) {
	for _, s := range []Security{SecurityBasic256Sha256Sign, SecurityBasic256Sha256SignAndEncrypt} {
		_, err := Start(Options{Security: []Security{SecurityNone, s}})
		if !errors.Is(err, ErrSecurityUnsupported) {
			t.Errorf("Start(%v) = %v, want ErrSecurityUnsupported", s, err)
		}
	}
}
