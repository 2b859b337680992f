package loadgen

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of two is the lower", ms(1, 2), 0.5, time.Millisecond},
		{"median of three", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of 100 is the 50th", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p100 is the max", ms(hundred...), 1, 100 * time.Millisecond},
		{"p0 is the min", ms(hundred...), 0, time.Millisecond},
		{"p99 of 10 is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	lat := []time.Duration{5, 3, 9, 1, 7}
	got := Summarize(lat)
	want := Latency{N: 5, P50: 5, P99: 9, Max: 9}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if got := Summarize(nil); got != (Latency{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", got)
	}
}

func TestStampParse(t *testing.T) {
	for _, tc := range []struct {
		sent time.Duration
		seq  uint64
	}{{0, 0}, {time.Millisecond, 1}, {90 * time.Minute, 3<<40 | 12345}, {1<<63 - 1, 1<<64 - 1}} {
		p := newPayload(64)
		Stamp(p, tc.sent, tc.seq)
		sent, seq, err := Parse(p)
		if err != nil || sent != tc.sent || seq != tc.seq {
			t.Errorf("Parse(Stamp(%v, %d)) = %v, %d, %v", tc.sent, tc.seq, sent, seq, err)
		}
		if string(p[stampLen:]) != string(newPayload(64)[stampLen:]) {
			t.Errorf("Stamp wrote past its %d bytes", stampLen)
		}
	}
	if _, _, err := Parse(make([]byte, stampLen-1)); !errors.Is(err, errShort) {
		t.Errorf("Parse of %d bytes: err = %v, want %v", stampLen-1, err, errShort)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string // a piece of the error; "" for none
	}{
		{"defaults", Config{}, ""},
		{"commands with echo", Config{Commands: true, Echo: true, QoS: 1}, ""},
		{"idle", Config{Idle: 1000}, ""},
		{"broker without port", Config{Broker: "localhost"}, `broker "localhost" is not host:port`},
		{"qos 3", Config{QoS: 3}, "qos 3: want 0, 1 or 2"},
		{"payload too small", Config{Size: 8}, "size 8: a payload holds at least its 16-byte timestamp"},
		{"negative rate", Config{Rate: -1}, "rate -1"},
		{"negative subs", Config{Subs: -1}, "cannot be negative"},
		{"wildcard topic", Config{Topic: "bench/#"}, `topic "bench/#"`},
		{"two modes", Config{Commands: true, Idle: 3}, "two modes"},
		{"echo alone", Config{Echo: true}, "echo answers commands"},
		{"prefix without slash", Config{Commands: true, Prefix: "shadowgate/demo"}, "ending in /"},
		{"device with a slash", Config{Commands: true, Device: "a/b"}, `"a/b" is not`},
		{"value not JSON", Config{Commands: true, Value: "on"}, `value "on" is not JSON`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error saying %q", err, tc.want)
			case err != nil && !errors.Is(err, ErrInvalid):
				t.Errorf("Validate() = %v, which does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestCommandPayload(t *testing.T) {
	got := string(commandPayload("true", `a"b`))
	if want := `{"value":true,"id":"a\"b"}`; got != want {
		t.Errorf("commandPayload = %s, want %s", got, want)
	}
}

// bareMochi starts a mochi broker that lets everyone in, on a free port.
func bareMochi(t *testing.T) string {
	t.Helper()
	s := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := s.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "t", Address: "127.0.0.1:0"})
	if err := s.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return l.Address()
}

// TestRunAgainstMochi runs every mode briefly against a real broker.
func TestRunAgainstMochi(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker and clients for about two seconds")
	}
	addr := bareMochi(t)
	for _, tc := range []struct {
		name  string
		c     Config
		check func(t *testing.T, r Result)
	}{
		{"qos 1 fan-in", Config{Pubs: 2, Subs: 2, QoS: 1, Rate: 500, Duration: 300 * time.Millisecond},
			func(t *testing.T, r Result) {
				if r.Sent == 0 || r.Received != 2*r.Sent || r.Loss() != 0 {
					t.Errorf("sent %d, received %d, want every one twice", r.Sent, r.Received)
				}
				if r.Latency.N != int(r.Received) || r.Latency.P50 <= 0 || r.Latency.P99 < r.Latency.P50 || r.Latency.Max < r.Latency.P99 {
					t.Errorf("latency %+v for %d deliveries", r.Latency, r.Received)
				}
			}},
		{"qos 0 as fast as it goes", Config{Pubs: 1, Subs: 1, Duration: 200 * time.Millisecond, Topic: "fast"},
			func(t *testing.T, r Result) {
				if r.Sent == 0 || r.Received == 0 || r.SendRate <= 0 {
					t.Errorf("sent %d, received %d at %.0f/s", r.Sent, r.Received, r.SendRate)
				}
			}},
		{"echoed commands", Config{Commands: true, Echo: true, QoS: 1, Duration: 200 * time.Millisecond, Prefix: "gw/"},
			func(t *testing.T, r Result) {
				if r.Sent == 0 || r.Received != r.Sent || r.Outcomes["echo"] != r.Sent {
					t.Errorf("sent %d, answered %d, outcomes %v", r.Sent, r.Received, r.Outcomes)
				}
			}},
		{"idle", Config{Idle: 20, Duration: 50 * time.Millisecond},
			func(t *testing.T, r Result) {
				if r.Connected != 20 {
					t.Errorf("%d connections up, want 20", r.Connected)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Broker = addr
			ready := false
			tc.c.OnReady = func() { ready = true }
			r, err := Run(t.Context(), tc.c)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			t.Log(r)
			if !ready {
				t.Error("OnReady was not called")
			}
			if r.Errors > 0 {
				t.Errorf("%d errors: %s", r.Errors, r.FirstError)
			}
			tc.check(t, r)
		})
	}
}

// TestRunStopsWithItsContext checks that a cancelled load returns soon,
// with what it measured.
func TestRunStopsWithItsContext(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker")
	}
	addr := bareMochi(t)
	ctx, cancel := context.WithCancel(t.Context())
	c := Config{Broker: addr, QoS: 1, Rate: 200, Duration: time.Hour, OnReady: func() { time.AfterFunc(100*time.Millisecond, cancel) }}
	done := make(chan struct{})
	var r Result
	var err error
	go func() { r, err = Run(ctx, c); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if err != nil || r.Sent == 0 {
		t.Errorf("Run = %v, %v; want what it sent before the cancel", r, err)
	}
}

func TestRunRefusesAnInvalidConfig(t *testing.T) {
	_, err := Run(t.Context(), Config{QoS: 7})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("Run(qos 7) = %v, want ErrInvalid", err)
	}
}

// TestDialFailsClearly checks the error when nothing listens.
func TestDialFailsClearly(t *testing.T) {
	_, err := Run(t.Context(), Config{Broker: "127.0.0.1:1", Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "connecting load-") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Run against a closed port = %v, want an error naming the client and the broker", err)
	}
}
