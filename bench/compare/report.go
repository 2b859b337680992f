package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shadowgate/shadowgate/bench/load/loadgen"
)

func numCPU() int { return goruntime.NumCPU() }

// key names a series: a broker at a QoS.
type key struct {
	broker string
	qos    byte
}

// samples holds each series' results, by round.
type samples struct {
	m map[key][]loadgen.Result
}

func newSamples() *samples { return &samples{m: map[key][]loadgen.Result{}} }

func (s *samples) add(k key, round int, r loadgen.Result) {
	for len(s.m[k]) <= round {
		s.m[k] = append(s.m[k], loadgen.Result{})
	}
	s.m[k][round] = r
}

// spread is the median and range of a figure over rounds.
type spread struct{ med, lo, hi float64 }

// spreadOf returns the median (the lower middle of an even count) and the
// range of xs.
func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return spread{med: s[(len(s)-1)/2], lo: s[0], hi: s[len(s)-1]}
}

// of applies f to each round of series k.
func (s *samples) of(k key, f func(loadgen.Result) float64) []float64 {
	var out []float64
	for _, r := range s.m[k] {
		out = append(out, f(r))
	}
	return out
}

// ratios divides series a by series b round by round.
func (s *samples) ratios(a, b key, f func(loadgen.Result) float64) []float64 {
	ra, rb := s.m[a], s.m[b]
	var out []float64
	for i := range min(len(ra), len(rb)) {
		if d := f(rb[i]); d > 0 {
			out = append(out, f(ra[i])/d)
		}
	}
	return out
}

func recvRate(r loadgen.Result) float64 { return r.RecvRate }
func p50(r loadgen.Result) float64      { return msOf(r.Latency.P50) }
func p99(r loadgen.Result) float64      { return msOf(r.Latency.P99) }
func loss(r loadgen.Result) float64     { return 100 * r.Loss() }
func msOf(d time.Duration) float64      { return float64(d) / float64(time.Millisecond) }

// format shows a spread with verb, as "med (lo–hi)".
func (sp spread) format(verb string) string {
	return fmt.Sprintf(verb+" ("+verb+"–"+verb+")", sp.med, sp.lo, sp.hi)
}

func printThroughput(w io.Writer, o options, rate float64, brokers []*broker, s *samples) {
	fmt.Fprintf(w, "Fan-in: %d publishers to %d subscriber(s), %d-byte payloads, %s, %s each, %d rounds (median (range)):\n\n",
		o.pubs, o.subs, o.size, rateText(rate), o.duration, o.repeat)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "broker\tQoS\tdelivered msgs/s\tp50 ms\tp99 ms\tloss %\tvs bare mochi\t")
	for _, qos := range []byte{0, 1} {
		for _, b := range brokers {
			k := key{b.name, qos}
			ratio := "1"
			if b.name != "mochi" {
				ratio = spreadOf(s.ratios(k, key{"mochi", qos}, recvRate)).format("%.2f×")
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", b.name, qos,
				spreadOf(s.of(k, recvRate)).format("%.0f"), spreadOf(s.of(k, p50)).format("%.2f"),
				spreadOf(s.of(k, p99)).format("%.2f"), spreadOf(s.of(k, loss)).format("%.1f"), ratio)
		}
	}
	tw.Flush()
	if rate <= 0 {
		fmt.Fprintln(w, "\nAs fast as each broker takes them: latency is mostly queueing; the ratio is the delivered rate over bare mochi's in the same round.")
	} else {
		fmt.Fprintln(w, "\nA steady load under every broker's capacity: the latencies compare; the rates should all be the offered load.")
	}
	fmt.Fprintln(w)
}

func rateText(r float64) string {
	if r <= 0 {
		return "as fast as each broker takes them"
	}
	return fmt.Sprintf("%.0f msgs/s per publisher", r)
}

func printRoundTrip(w io.Writer, brokers []*broker, s *samples, sync spread) {
	fmt.Fprintln(w, "Round trip at QoS 1, one command at a time (median (range)):")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "what\tp50 ms\tp99 ms\tmax ms\tper second\t")
	for _, b := range brokers {
		what := b.name + ": a QoS 1 echo by a client"
		if b.name == "gateway" {
			what = "gateway: governed write, cmd → reply (acted, sync journal)"
		}
		k := key{b.name, 1}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", what, spreadOf(s.of(k, p50)).format("%.2f"), spreadOf(s.of(k, p99)).format("%.2f"),
			spreadOf(s.of(k, func(r loadgen.Result) float64 { return msOf(r.Latency.Max) })).format("%.1f"),
			spreadOf(s.of(k, recvRate)).format("%.0f"))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nOne 4 KiB write and fdatasync on the gateway's disk: p50 %s ms over the rounds' samples.\n", sync.format("%.3f"))
	fmt.Fprintln(w, "A governed write waits for two journal commits (intent, receipt), each a bbolt commit of two fdatasyncs.")
	gw := spreadOf(s.of(key{"gateway", 1}, p50)).med
	floor := 4 * sync.med
	fmt.Fprintf(w, "The gateway's p50 is %.2f ms: %.2f ms over four fdatasyncs (target: at most 0.3 ms over the two commits).\n", gw, gw-floor)
}

func printRSS(w io.Writer, n int, rows []rssRow) {
	fmt.Fprintf(w, "Resident memory (VmRSS) with %d idle MQTT connections:\n\n", n)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "broker\tbefore MiB\twith them MiB\tper connection KiB\tconnecting them took\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%s\t\n", r.name, mib(r.before), mib(r.after),
			float64(r.after-r.before)/1024/float64(n), r.connectTime.Round(time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// fdatasyncLatency times n writes of 4 KiB, each followed by fdatasync, in
// a file in dir, and returns the spread of thirds of them.
func fdatasyncLatency(dir string, n int) (spread, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return spread{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := []byte(strings.Repeat("x", 4096))
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i%16)*4096); err != nil {
			return spread{}, err
		}
		if err := fdatasync(f); err != nil {
			return spread{}, fmt.Errorf("fdatasync %s: %w", filepath.Base(f.Name()), err)
		}
		lat = append(lat, time.Since(t0))
	}
	// Three medians, of each third, show how steady the disk was.
	var meds []float64
	for third := range 3 {
		part := slices.Clone(lat[third*n/3 : (third+1)*n/3])
		meds = append(meds, msOf(loadgen.Summarize(part).P50))
	}
	return spreadOf(meds), nil
}
