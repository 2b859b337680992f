// Command load drives a running gateway (or any MQTT broker) with a
// measured load and prints msgs/s, loss and end-to-end latency.
//
//	go run ./bench/load -broker 127.0.0.1:1883 -user demo -password greenhouse-demo \
//	    -pubs 4 -subs 1 -qos 1 -size 64 -rate 0 -duration 10s -topic bench
//	go run ./bench/load -commands -prefix shadowgate/demo/ -device valve-1 -capability open ...
//	go run ./bench/load -idle 1000 -duration 30s ...
//
// Ctrl-C stops the load and prints what it measured so far.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/shadowgate/shadowgate/bench/load/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its outputs and exit code: 0 ok, 1 usage, 5 when the
// load could not run (the broker is unavailable).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseArgs(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "load:", err)
		}
		return 1
	}
	r, err := loadgen.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(stderr, "load:", err)
		return 5
	}
	fmt.Fprintln(stdout, r)
	return 0
}

// parseArgs reads the flags into a Config and checks it.
func parseArgs(args []string, stderr io.Writer) (loadgen.Config, error) {
	var c loadgen.Config
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	qos := fs.Uint("qos", 0, "QoS of every publish and subscription: 0, 1 or 2")
	fs.StringVar(&c.Broker, "broker", "127.0.0.1:1883", "the broker's host:port")
	fs.StringVar(&c.User, "user", "", "username (empty: anonymous)")
	fs.StringVar(&c.Password, "password", "", "password")
	fs.IntVar(&c.Pubs, "pubs", 1, "publishers (with -commands: clients sending commands, one at a time each)")
	fs.IntVar(&c.Subs, "subs", 1, "subscribers, each to every publisher's topic")
	fs.IntVar(&c.Size, "size", 64, fmt.Sprintf("payload bytes (at least %d: the timestamp)", loadgen.PayloadMin))
	fs.Float64Var(&c.Rate, "rate", 0, "messages (or commands) a second per publisher; 0 is as fast as possible")
	fs.IntVar(&c.Inflight, "inflight", 16, "publishes a publisher may have not complete (QoS 0: written, QoS 1: acked)")
	fs.DurationVar(&c.Duration, "duration", 10e9, "how long the load runs (with -idle, how long the connections are held)")
	fs.StringVar(&c.Topic, "topic", "bench", "topic prefix: publisher i publishes on <topic>/i, subscribers take <topic>/#")
	fs.BoolVar(&c.Commands, "commands", false, "send governed commands to <prefix>cmd/<device>/<capability> and time each reply")
	fs.StringVar(&c.Prefix, "prefix", "shadowgate/demo/", "the gateway's topic prefix (with -commands)")
	fs.StringVar(&c.Device, "device", "valve-1", "the device commanded (with -commands)")
	fs.StringVar(&c.Capability, "capability", "open", "the capability commanded (with -commands)")
	fs.StringVar(&c.Value, "value", "toggle", "the command's value as JSON; toggle alternates true and false")
	fs.BoolVar(&c.Echo, "echo", false, "with -commands: answer them with an echo client (a broker's floor, for a broker with no gateway)")
	fs.DurationVar(&c.Timeout, "timeout", 10e9, "how long to wait for one command's reply before counting it lost")
	fs.IntVar(&c.Idle, "idle", 0, "open this many idle connections and hold them for -duration")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q: every setting is a flag", fs.Args())
	}
	if *qos > 2 {
		return c, fmt.Errorf("-qos %d: want 0, 1 or 2", *qos)
	}
	c.QoS = byte(*qos)
	return c, c.Validate()
}
