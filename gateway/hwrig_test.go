package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

// hwRig runs the whole gateway on drivers and devices a test gives, with
// the broker on a free port and a paho client logged in, so a driver is
// tried through the governed path: an MQTT command in, a reply out.
type hwRig struct {
	t      testing.TB
	Engine *runtime.Engine
	// Journal is the gateway's journal, for its figures.
	Journal *journal.DB
	prefix  string
	client  paho.Client
	stop    func() error
	// Log has everything the gateway logged.
	Log *syncBuffer

	mu      sync.Mutex
	replies map[string]chan command.Reply
	seq     int
}

// syncBuffer is a log the gateway writes and a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// hwHeader is the part of a hardware test's configuration that is not
// hardware: interlocked mode (a reversible, contained actuation acts
// without asking), one MQTT login, no console.
const hwHeader = `gateway: {id: hw}
mode: interlocked
users:
  - name: demo
    role: admin
    password_hash: "$2a$10$dfbQdJdRHw8TjUGBosHV8.72wmFeFja48Fyh9.M5VtkDHCxMBaF9O"
mqtt: {listen: "127.0.0.1:0"}
web: {enabled: false}
`

// hwOptions vary a rig for a benchmark.
type hwOptions struct {
	// Header replaces hwHeader.
	Header string
	// Quiet logs at info level, the gateway's default, instead of debug.
	Quiet bool
}

// startHardware runs the gateway on hwHeader followed by hardware (the
// drivers: and devices: sections) and connects a client. The gateway stops
// at the end of the test; r.Stop stops it earlier.
func startHardware(t testing.TB, hardware string) *hwRig {
	t.Helper()
	return startHardwareWith(t, hwOptions{}, hardware)
}

// startHardwareWith is startHardware with options.
func startHardwareWith(t testing.TB, o hwOptions, hardware string) *hwRig {
	t.Helper()
	header, level := hwHeader, slog.LevelDebug
	if o.Header != "" {
		header = o.Header
	}
	if o.Quiet {
		level = slog.LevelInfo
	}
	b, err := Load("hardware.yaml", []byte(header+hardware))
	if err != nil {
		t.Fatalf("the test's configuration: %v", err)
	}
	b.StateDir = t.TempDir()
	if _, bench := t.(*testing.B); !bench {
		b.Journal.FlushInterval = testFlush // a benchmark keeps the default
	}
	r := &hwRig{t: t, prefix: "shadowgate/hw/", replies: map[string]chan command.Reply{}, Log: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Parts, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: b, Logger: slog.New(slog.NewTextHandler(r.Log, &slog.HandlerOptions{Level: level})),
			Ready: func(p Parts) { ready <- p }})
	}()
	var p Parts
	select {
	case p = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("the gateway did not start: %v\n%s", err, r.Log)
	}
	var once sync.Once
	var stopErr error
	r.stop = func() error {
		once.Do(func() {
			if r.client != nil {
				r.client.Disconnect(100)
			}
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(20 * time.Second):
				stopErr = context.DeadlineExceeded
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("the gateway did not stop cleanly: %v", err)
		}
	})
	r.Engine, r.Journal = p.Engine, p.Journal
	opts := paho.NewClientOptions().AddBroker("tcp://" + p.MQTT.Addr("tcp")).SetClientID("hw-test").
		SetUsername("demo").SetPassword("greenhouse-demo").SetAutoReconnect(false).SetConnectTimeout(30 * time.Second)
	r.client = paho.NewClient(opts)
	// A loaded machine (the whole suite at once) can take seconds to
	// check the password: the bound is generous, not a measure.
	if tok := r.client.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v (not connected within 30s if nil)", tok.Error())
	}
	tok := r.client.Subscribe(r.prefix+"reply/#", 1, func(_ paho.Client, m paho.Message) {
		var rep command.Reply
		if err := json.Unmarshal(m.Payload(), &rep); err != nil {
			t.Errorf("reply on %s is not JSON: %v: %s", m.Topic(), err, m.Payload())
			return
		}
		r.mu.Lock()
		ch := r.replies[rep.ID]
		r.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	})
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	return r
}

// Stop stops the gateway now and returns what Run returned.
func (r *hwRig) Stop() error { return r.stop() }

// Command publishes value (JSON, or "" to read) to cmd/<device>/<capability>
// and returns the reply. It fails the test when none comes within 15s.
func (r *hwRig) Command(device, capability, value string) command.Reply {
	r.t.Helper()
	return r.CommandFor(r.t, device, capability, value)
}

// CommandFor is Command failing t, a subtest or sub-benchmark of the rig's.
func (r *hwRig) CommandFor(t testing.TB, device, capability, value string) command.Reply {
	t.Helper()
	r.mu.Lock()
	r.seq++
	id := "hw-" + strconv.Itoa(r.seq)
	ch := make(chan command.Reply, 1)
	r.replies[id] = ch
	r.mu.Unlock()
	body := `{"id": "` + id + `"}`
	if value != "" {
		body = `{"id": "` + id + `", "value": ` + value + `}`
	}
	r.client.Publish(r.prefix+"cmd/"+device+"/"+capability, 1, false, body)
	defer func() {
		r.mu.Lock()
		delete(r.replies, id)
		r.mu.Unlock()
	}()
	select {
	case rep := <-ch:
		return rep
	case <-time.After(15 * time.Second):
		t.Fatalf("no reply to %s on cmd/%s/%s within 15s\n%s", body, device, capability, r.Log)
	}
	return command.Reply{}
}

// WaitEvent waits up to 15s for an event of kind about device after seq
// since, and returns it.
func (r *hwRig) WaitEvent(since uint64, kind runtime.Kind, device string) runtime.Event {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var found runtime.Event
	stop := context.Canceled
	_ = r.Engine.Subscribe(ctx, since, func(ev runtime.Event) error {
		if ev.Kind == kind && ev.Device == device {
			found = ev
			return stop
		}
		return nil
	})
	if found.Kind == "" {
		r.t.Fatalf("no %s event for %s within 15s\n%s", kind, device, r.Log)
	}
	return found
}

// durableShare measures, around a governed sub-benchmark, what its durable
// points cost and what governance costs besides: the floor of a governed
// step is its device round trip (raw, the same step without the gateway)
// plus the log writes it waits for; the rest is judging, journaling in
// memory, confirming and answering.
type durableShare struct {
	j  *journal.DB
	s0 journal.Stats
}

func (r *hwRig) durableShare() durableShare { return durableShare{j: r.Journal, s0: r.Journal.Stats()} }

// report reports points/op (the log writes a step made, one fdatasync
// each), point-µs (their mean), and rest-%-device: the step's time beyond
// its device round trip and its points, over the device round trip. It
// returns that rest.
func (d durableShare) report(b *testing.B, raw time.Duration) (rest time.Duration) {
	s1 := d.j.Stats()
	n := s1.Batches - d.s0.Batches
	perOp := b.Elapsed() / time.Duration(b.N)
	points := float64(n) / float64(b.N)
	b.ReportMetric(points, "points/op")
	if n > 0 {
		b.ReportMetric(float64((s1.CommitTime-d.s0.CommitTime).Microseconds())/float64(n), "point-µs")
	}
	rest = perOp - raw - (s1.CommitTime-d.s0.CommitTime)/time.Duration(b.N)
	if raw > 0 {
		b.ReportMetric(100*float64(rest)/float64(raw), "rest-%-device")
	}
	return rest
}
