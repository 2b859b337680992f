package loadgen

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted
// durations: the smallest one that at least p of them do not exceed. It
// returns 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Latency summarizes the latencies of a load.
type Latency struct {
	N             int
	P50, P99, Max time.Duration
}

// Summarize sorts lat in place and summarizes it.
func Summarize(lat []time.Duration) Latency {
	slices.Sort(lat)
	s := Latency{N: len(lat), P50: Percentile(lat, 0.50), P99: Percentile(lat, 0.99)}
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
	}
	return s
}

func (l Latency) String() string {
	if l.N == 0 {
		return "no latencies"
	}
	return fmt.Sprintf("p50 %s  p99 %s  max %s  (%d samples)", ms(l.P50), ms(l.P99), ms(l.Max), l.N)
}

// ms shows a duration in milliseconds with three decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// recorder collects latencies from several goroutines.
type recorder struct {
	// mu guards lat.
	mu  sync.Mutex
	lat []time.Duration
}

func (r *recorder) add(d time.Duration) {
	r.mu.Lock()
	r.lat = append(r.lat, d)
	r.mu.Unlock()
}

func (r *recorder) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lat
	r.lat = nil
	return l
}

// Result is what a load measured.
type Result struct {
	Mode string // "pubsub", "commands", "echo" or "idle"
	// Sent counts messages (commands) published; Received counts the
	// deliveries (replies) that came back. Expected is what should have
	// come back: Sent times the subscribers, or Sent.
	Sent, Received, Expected int64
	// Elapsed is how long publishing lasted; SendRate and RecvRate are
	// per second of it (receiving up to the last delivery).
	Elapsed            time.Duration
	SendRate, RecvRate float64
	// Latency is publish → delivery, or cmd → reply.
	Latency Latency
	// Outcomes counts the replies by outcome (commands only).
	Outcomes map[string]int64
	// Connected counts idle connections that were up (idle only), and
	// ConnectTime how long opening them all took.
	Connected   int
	ConnectTime time.Duration
	// Errors counts publishes that failed and connections lost; FirstError
	// is the first of them.
	Errors     int64
	FirstError string
}

// Loss is the share of expected deliveries that did not arrive, 0 to 1.
func (r Result) Loss() float64 {
	if r.Expected == 0 {
		return 0
	}
	return max(0, 1-float64(r.Received)/float64(r.Expected))
}

func (r Result) String() string {
	var b strings.Builder
	switch r.Mode {
	case "idle":
		fmt.Fprintf(&b, "idle: %d connections up in %s, held %s", r.Connected, r.ConnectTime.Round(time.Millisecond), r.Elapsed.Round(time.Millisecond))
	default:
		what := "messages"
		if r.Mode != "pubsub" {
			what = "commands"
		}
		fmt.Fprintf(&b, "%s: %d %s sent in %s: %.0f/s sent, %.0f/s received, loss %.2f%% (%d of %d)\n  latency %s",
			r.Mode, r.Sent, what, r.Elapsed.Round(time.Millisecond), r.SendRate, r.RecvRate,
			100*r.Loss(), r.Expected-r.Received, r.Expected, r.Latency)
		if len(r.Outcomes) > 0 {
			keys := make([]string, 0, len(r.Outcomes))
			for k := range r.Outcomes {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteString("\n  outcomes:")
			for _, k := range keys {
				fmt.Fprintf(&b, " %s %d", k, r.Outcomes[k])
			}
		}
	}
	if r.Errors > 0 {
		fmt.Fprintf(&b, "\n  %d errors, the first: %s", r.Errors, r.FirstError)
	}
	return b.String()
}

// errCount counts errors and keeps the first.
type errCount struct {
	// mu guards n and first.
	mu    sync.Mutex
	n     int64
	first string
}

func (e *errCount) add(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if e.first == "" {
		e.first = err.Error()
	}
}

func (e *errCount) into(r *Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r.Errors, r.FirstError = e.n, e.first
}
