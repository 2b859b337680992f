// Command compare runs the same MQTT load, in one run, against the
// gateway (built from this checkout and started as `shadowgate serve`), a
// bare mochi broker (mochi's defaults and an allow-all hook, in a process
// of its own) and, where it is installed, mosquitto (no Nagle delay, no
// queue limit), and prints the ratios against bare mochi:
//
//   - fan-in throughput and latency at QoS 0 and QoS 1;
//   - a governed command's cmd → reply round trip on the gateway (sync
//     journal) against a QoS 1 echo through mochi and mosquitto, and one
//     fdatasync on the gateway's disk;
//   - the resident memory each broker takes per idle connection.
//
// Every figure is repeated (-repeat, default 3) with the brokers taking
// turns, so that a busy machine slows them alike; the tables give the
// median and the range.
//
//	go run ./bench/compare [-duration 5s] [-repeat 3] [-pubs 4] [-subs 1] [-idle 1000]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/shadowgate/shadowgate/bench/load/loadgen"
)

// options are compare's flags.
type options struct {
	duration, rtDuration time.Duration
	repeat               int
	pubs, subs, size     int
	rate, latencyRate    float64
	inflight             int
	idle                 int
	mosquitto            string
	keep                 bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long each throughput load runs")
	fs.DurationVar(&o.rtDuration, "rt-duration", 5*time.Second, "how long each round-trip load runs")
	fs.IntVar(&o.repeat, "repeat", 3, "how many times each figure is measured, the brokers taking turns")
	fs.IntVar(&o.pubs, "pubs", 4, "publishers of the fan-in")
	fs.IntVar(&o.subs, "subs", 1, "subscribers of the fan-in")
	fs.IntVar(&o.size, "size", 64, "payload bytes")
	fs.Float64Var(&o.rate, "rate", 0, "messages a second per publisher; 0 is as fast as each broker takes them")
	fs.Float64Var(&o.latencyRate, "latency-rate", 500, "messages a second per publisher of the steady load that latency is read from; 0 skips it")
	fs.IntVar(&o.inflight, "inflight", 16, "publishes a publisher may have not complete")
	fs.IntVar(&o.idle, "idle", 1000, "idle connections for the memory figure; 0 skips it")
	fs.StringVar(&o.mosquitto, "mosquitto", "/usr/sbin/mosquitto", "mosquitto's path; skipped when absent")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (configurations, logs, the gateway's journal)")
	serve := fs.String("serve-mochi", "", "internal: serve a bare mochi broker on this address")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if *serve != "" {
		if err := serveMochi(*serve); err != nil {
			fmt.Fprintln(stderr, "compare: mochi:", err)
			return 5
		}
		return 0
	}
	if fs.NArg() > 0 || o.repeat < 1 || o.pubs < 1 || o.subs < 1 || o.idle < 0 {
		fmt.Fprintln(stderr, "compare: want no arguments, -repeat, -pubs and -subs of at least 1, -idle of 0 or more")
		return 1
	}
	if err := compare(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "compare:", err)
		return 5
	}
	return 0
}

// compare starts the brokers, measures and prints.
func compare(ctx context.Context, o options, stdout, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "shadowgate-compare-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(stderr, "compare: keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	fmt.Fprintln(stderr, "compare: building and starting the gateway, mochi and mosquitto")
	gw, err := startGateway(ctx, dir, o.idle+100)
	if err != nil {
		return err
	}
	defer gw.stop()
	mo, err := startMochi(ctx, dir)
	if err != nil {
		return err
	}
	defer mo.stop()
	mq, err := startMosquitto(ctx, dir, o.mosquitto)
	if err != nil {
		return err
	}
	brokers := []*broker{gw, mo}
	if mq != nil {
		defer mq.stop()
		brokers = append(brokers, mq)
	} else {
		fmt.Fprintf(stderr, "compare: no mosquitto at %s; comparing the gateway with mochi alone\n", o.mosquitto)
	}
	fmt.Fprintf(stdout, "Brokers: gateway %s (log %s), mochi %s, mosquitto %s. Machine: %d CPUs.\n\n",
		gw.addr, filepath.Base(gw.log), mo.addr, addrOf(mq), numCPU())

	// Memory first, while every broker is fresh.
	if o.idle > 0 {
		var rows []rssRow
		for _, b := range brokers {
			row, err := idleRSS(ctx, b, o.idle, stderr)
			if err != nil {
				return err
			}
			rows = append(rows, row)
		}
		printRSS(stdout, o.idle, rows)
	}

	tp, steady := newSamples(), newSamples()
	for round := range o.repeat {
		for _, qos := range []byte{0, 1} {
			for _, b := range brokers {
				for _, load := range []struct {
					rate float64
					into *samples
				}{{o.rate, tp}, {o.latencyRate, steady}} {
					if load.into == steady && o.latencyRate <= 0 {
						continue
					}
					fmt.Fprintf(stderr, "compare: round %d, QoS %d fan-in at %s, %s\n", round+1, qos, rateText(load.rate), b.name)
					r, err := loadgen.Run(ctx, loadgen.Config{Broker: b.addr, User: b.user, Password: b.pw,
						Pubs: o.pubs, Subs: o.subs, QoS: qos, Size: o.size, Rate: load.rate, Inflight: o.inflight,
						Duration: o.duration, Topic: "bench"})
					if err != nil {
						return fmt.Errorf("fan-in on %s: %w", b.name, err)
					}
					warnErrors(stderr, b, r)
					load.into.add(key{b.name, qos}, round, r)
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	printThroughput(stdout, o, o.rate, brokers, tp)
	if o.latencyRate > 0 {
		printThroughput(stdout, o, o.latencyRate, brokers, steady)
	}

	rt := newSamples()
	for round := range o.repeat {
		for _, b := range brokers {
			fmt.Fprintf(stderr, "compare: round %d, command round trip, %s\n", round+1, b.name)
			c := loadgen.Config{Broker: b.addr, User: b.user, Password: b.pw, QoS: 1, Duration: o.rtDuration,
				Commands: true, Prefix: b.prefix, Device: "valve-1", Capability: "open", Echo: b != gw}
			r, err := loadgen.Run(ctx, c)
			if err != nil {
				return fmt.Errorf("round trip on %s: %w", b.name, err)
			}
			warnErrors(stderr, b, r)
			if b == gw && r.Outcomes["acted"] != r.Received {
				fmt.Fprintf(stderr, "compare: not every command acted on the gateway: %v (its log: %s)\n", r.Outcomes, gw.log)
			}
			rt.add(key{b.name, 1}, round, r)
		}
	}
	sync, err := fdatasyncLatency(filepath.Join(dir, "state"), 200)
	if err != nil {
		return fmt.Errorf("timing fdatasync: %w", err)
	}
	printRoundTrip(stdout, brokers, rt, sync)
	return nil
}

func addrOf(b *broker) string {
	if b == nil {
		return "(not installed)"
	}
	return b.addr
}

// warnErrors says on stderr that a load met errors.
func warnErrors(stderr io.Writer, b *broker, r loadgen.Result) {
	if r.Errors > 0 {
		fmt.Fprintf(stderr, "compare: %s: %d errors, the first: %s\n", b.name, r.Errors, r.FirstError)
	}
}

// rssRow is one broker's resident memory with and without idle clients.
type rssRow struct {
	name          string
	before, after int64
	connectTime   time.Duration
}

// idleRSS opens n idle connections to b and reads its VmRSS before and
// while they are open.
func idleRSS(ctx context.Context, b *broker, n int, stderr io.Writer) (rssRow, error) {
	fmt.Fprintf(stderr, "compare: %d idle connections to %s\n", n, b.name)
	row := rssRow{name: b.name}
	settle(ctx, time.Second)
	before, err := vmRSS(b.pid())
	if err != nil {
		return row, err
	}
	row.before = before
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	type outcome struct {
		r   loadgen.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() { // owned here: the function waits for done below
		r, err := loadgen.Run(ictx, loadgen.Config{Broker: b.addr, User: b.user, Password: b.pw, Idle: n,
			Duration: time.Hour, OnReady: func() { close(ready) }})
		done <- outcome{r, err}
	}()
	select {
	case <-ready:
	case out := <-done:
		return row, fmt.Errorf("%d idle connections to %s: %w", n, b.name, errors.Join(out.err, errors.New("ended before they were all up")))
	}
	settle(ctx, 2*time.Second)
	row.after, err = vmRSS(b.pid())
	cancel()
	out := <-done
	if err != nil {
		return row, err
	}
	if out.err != nil {
		return row, out.err
	}
	row.connectTime = out.r.ConnectTime
	if out.r.Connected != n {
		fmt.Fprintf(stderr, "compare: %s: %d of %d idle connections still up at the end\n", b.name, out.r.Connected, n)
	}
	return row, nil
}

// settle waits d, or until ctx ends.
func settle(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
