package mqtt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"log/slog"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/crypto/bcrypt"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

func benchClient(b *testing.B, addr, id, user, pw string) paho.Client {
	b.Helper()
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetUsername(user).SetPassword(pw).
		SetProtocolVersion(4).SetAutoReconnect(false).SetOrderMatters(false).SetMaxResumePubInFlight(1000)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		b.Fatalf("connect %s: %v", id, tok.Error())
	}
	b.Cleanup(func() { c.Disconnect(10) })
	return c
}

// fanIn publishes b.N messages from 4 clients to one subscriber and waits
// until it has them all.
func fanIn(b *testing.B, addr, user, pw string, qos byte) {
	var got atomic.Int64
	done := make(chan struct{})
	want := int64(b.N)
	sub := benchClient(b, addr, "sub", user, pw)
	if tok := sub.Subscribe("bench/#", qos, func(_ paho.Client, _ paho.Message) {
		if got.Add(1) == want {
			close(done)
		}
	}); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.Fatal(tok.Error())
	}
	const publishers = 4
	pubs := make([]paho.Client, publishers)
	for i := range pubs {
		pubs[i] = benchClient(b, addr, fmt.Sprintf("pub-%d", i), user, pw)
	}
	payload := []byte(`{"value":21.5,"quality":"good"}`)
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for i := range publishers {
		go func() {
			n := b.N / publishers
			if i < b.N%publishers {
				n++
			}
			var last paho.Token
			for range n {
				last = pubs[i].Publish("bench/"+strconv.Itoa(i), qos, false, payload)
				if qos > 0 && n > 0 {
					last.Wait()
				}
			}
			if last != nil {
				last.Wait()
			}
		}()
	}
	if qos > 0 {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			b.Fatalf("the subscriber got %d of %d at QoS 1", got.Load(), b.N)
		}
	} else {
		// QoS 0 may drop under overload, by design: count what arrived
		// until nothing more comes.
		for prev := int64(-1); prev != got.Load(); {
			prev = got.Load()
			select {
			case <-done:
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(got.Load())/b.Elapsed().Seconds(), "msgs/s")
	// The process's CPU time per message delivered (broker and clients
	// alike, the same clients for every broker) says what the hooks cost
	// even on a busy machine, where the rate says mostly what the other
	// processes left.
	if n, cpu := got.Load(), cpuTime(b)-cpu0; n > 0 && cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/msg")
	}
	b.ReportMetric(100*float64(got.Load())/float64(b.N), "%delivered")
}

// BenchmarkFanIn compares the broker with the gateway's hooks to bare
// mochi, under the same load in the same process.
func BenchmarkFanIn(b *testing.B) {
	for _, qos := range []byte{0, 1} {
		b.Run(fmt.Sprintf("bare/qos=%d", qos), func(b *testing.B) {
			s := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
			_ = s.AddHook(new(auth.AllowHook), nil)
			l := listeners.NewTCP(listeners.Config{ID: "t", Address: "127.0.0.1:0"})
			if err := s.AddListener(l); err != nil {
				b.Fatal(err)
			}
			_ = s.Serve()
			defer s.Close()
			fanIn(b, l.Address(), "", "", qos)
		})
		b.Run(fmt.Sprintf("shadowgate/qos=%d", qos), func(b *testing.B) {
			h, _ := bcrypt.GenerateFromPassword([]byte("bench-password"), bcrypt.MinCost)
			users, _ := access.NewUsers([]access.User{{Name: "bench", Role: access.Operator, Hash: h,
				Publish: []string{"bench/#"}, Subscribe: []string{"bench/#"}}})
			g := runtimetest.Driver(b, nil)
			reg := devices.NewRegistry()
			_ = reg.Add("sim", g)
			eng, err := runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: runtimetest.NewMemJournal()})
			if err != nil {
				b.Fatal(err)
			}
			br, err := New(eng, Options{Prefix: "shadowgate/bench/", Listen: "127.0.0.1:0", Users: users})
			if err != nil {
				b.Fatal(err)
			}
			if err := br.Listen(); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- br.Run(ctx) }()
			defer func() { cancel(); <-done }()
			fanIn(b, br.Addr("tcp"), "bench", "bench-password", qos)
		})
	}
}

// BenchmarkCommandRoundTrip measures a command from its publish to its
// reply: judged, journaled (its intent and its receipt each a durable
// point of the log), acted on the sim valve, read back, receipted. It
// reports p50 and p99, the journal's mean time to write a durable point
// (µs/fsync), and in the same run the floor: a durable point as the disk
// gives it, against which a governed write's two are measured.
func BenchmarkCommandRoundTrip(b *testing.B) {
	j, err := journal.Open(filepath.Join(b.TempDir(), journal.FileName), journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	g := runtimetest.Driver(b, greenhouse())
	reg := devices.NewRegistry()
	_ = reg.Add("sim", g)
	eng, err := runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: j,
		Rules:        []governance.Rule{{ID: "v", Principal: "mqtt:bench", Device: "valve-1", Capability: "open", Decision: governance.DecideAllow}},
		Policies:     map[string]runtime.CapPolicy{"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Confirm: &runtime.Confirm{ReadBack: true, Within: time.Second}}},
		CommandLease: runtime.Lease{MaxSteps: 1, MaxActuations: 1, MaxWall: time.Minute}})
	if err != nil {
		b.Fatal(err)
	}
	h, _ := bcrypt.GenerateFromPassword([]byte("bench-password"), bcrypt.MinCost)
	users, _ := access.NewUsers([]access.User{{Name: "bench", Role: access.Operator, Hash: h}})
	br, err := New(eng, Options{Prefix: prefix, Listen: "127.0.0.1:0", Users: users, CommandsPerMinute: 1 << 30, CommandBurst: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Listen(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, engDone := make(chan error, 1), make(chan error, 1)
	go func() { engDone <- eng.Run(ctx) }()
	go func() { done <- br.Run(ctx) }()
	defer func() { cancel(); <-done; <-engDone }()
	report := func(b *testing.B, lat []time.Duration, before journal.Stats) {
		slices.Sort(lat)
		st := j.Stats()
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		if n := st.Batches - before.Batches; n > 0 {
			b.ReportMetric(float64((st.CommitTime-before.CommitTime).Microseconds())/float64(n), "µs/fsync")
		}
	}
	// The floor: a durable point as the disk gives it, 1 KiB written at
	// the end of a file written whole beforehand and fdatasync'd, in the
	// journal's directory, in the same run. A governed write makes two.
	b.Run("floor", func(b *testing.B) {
		lat := floorPoints(b, filepath.Dir(j.Path()), b.N)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	})
	seq := 0
	// The same command through the engine's Go API, without MQTT.
	b.Run("engine", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		before := j.Stats()
		for range b.N {
			seq++
			t0 := time.Now()
			obs, err := eng.Do(ctx, runtime.Command{Principal: "mqtt:bench", Origin: "bench", RequestID: "go-" + strconv.Itoa(seq),
				Device: "valve-1", Capability: "open", Value: value.Bool(seq%2 == 0)})
			if err != nil || obs.Kind != runtime.Acted {
				b.Fatalf("%+v %v", obs, err)
			}
			lat = append(lat, time.Since(t0))
		}
		report(b, lat, before)
	})
	c := benchClient(b, br.Addr("tcp"), "rt", "bench", "bench-password")
	replies := make(chan string, 1)
	if tok := c.Subscribe(prefix+"reply/valve-1/open", 1, func(_ paho.Client, m paho.Message) { replies <- string(m.Payload()) }); !tok.WaitTimeout(5 * time.Second) {
		b.Fatal("subscribe")
	}
	tl := &timeline{cmd: prefix + "cmd/valve-1/open", reply: prefix + "reply/valve-1/open"}
	if err := br.srv.AddHook(tl, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("mqtt", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		var in, broker, out []time.Duration
		before := j.Stats()
		for range b.N {
			seq++
			t0 := time.Now()
			c.Publish(prefix+"cmd/valve-1/open", 1, false, fmt.Sprintf(`{"value": %v, "id": "rt-%d"}`, seq%2 == 0, seq))
			select {
			case r := <-replies:
				if !strings.Contains(r, `"outcome":"acted"`) {
					b.Fatalf("command %d: %s", seq, r)
				}
			case <-time.After(10 * time.Second):
				b.Fatalf("no reply to command %d", seq)
			}
			t3 := time.Now()
			lat = append(lat, t3.Sub(t0))
			read, sent := time.Unix(0, tl.read.Load()), time.Unix(0, tl.sent.Load())
			in, broker, out = append(in, read.Sub(t0)), append(broker, sent.Sub(read)), append(out, t3.Sub(sent))
		}
		report(b, lat, before)
		// Where a round trip goes: from the client's publish to the
		// broker reading it, from there to the reply written to the
		// client (the governed step and its commits inside), and from
		// there to the client's handler; and the journal's batches (one
		// bbolt commit, two fdatasyncs, each) per command.
		for _, m := range []struct {
			unit string
			d    []time.Duration
		}{{"in-p50-µs", in}, {"broker-p50-µs", broker}, {"out-p50-µs", out}} {
			slices.Sort(m.d)
			b.ReportMetric(float64(m.d[len(m.d)/2].Microseconds()), m.unit)
		}
		b.ReportMetric(float64(j.Stats().Batches-before.Batches)/float64(b.N), "batches/op")
	})
}

// floorPoints makes n durable points of 1 KiB appended to a file of dir
// written whole with zeros first (as the log's segments are), each one
// pwrite and one fdatasync, and returns their times, sorted.
func floorPoints(b *testing.B, dir string, n int) []time.Duration {
	f, err := os.OpenFile(filepath.Join(dir, "floor"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const point = 1 << 10
	size := int64(n+1) * point
	if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	buf := bytes.Repeat([]byte{0x5a}, point)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i)*point); err != nil {
			b.Fatal(err)
		}
		if err := datasync(f); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat
}

// timeline is a hook that notes when the broker read the last command on
// cmd and when it wrote the last reply on reply, in Unix nanoseconds (one
// command at a time: the wall clock is read in the same process).
type timeline struct {
	mochi.HookBase
	cmd, reply string
	read, sent atomic.Int64
}

func (h *timeline) ID() string { return "timeline" }

func (h *timeline) Provides(b byte) bool { return b == mochi.OnPacketRead || b == mochi.OnPacketSent }

func (h *timeline) OnPacketRead(_ *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Type == packets.Publish && pk.TopicName == h.cmd {
		h.read.Store(time.Now().UnixNano())
	}
	return pk, nil
}

func (h *timeline) OnPacketSent(_ *mochi.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type == packets.Publish && pk.TopicName == h.reply {
		h.sent.Store(time.Now().UnixNano())
	}
}
