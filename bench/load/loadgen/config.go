package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Config is one load. The zero value of a field means its default, where
// it has one; Validate says what is wrong with the rest.
type Config struct {
	// Broker is the broker's host:port. Default 127.0.0.1:1883.
	Broker string
	// User and Password log every client in; empty means anonymous.
	User, Password string

	// Pubs is the number of publishers (in command mode, of clients that
	// send commands, one at a time each). Default 1.
	Pubs int
	// Subs is the number of subscribers, each to every publisher's topic.
	// Zero is allowed: the load then measures publishing alone.
	Subs int
	// QoS of every publish and subscription, 0, 1 or 2.
	QoS byte
	// Size is the payload size in bytes, at least PayloadMin. Default 64.
	Size int
	// Rate is each publisher's messages (or commands) a second; zero means
	// as fast as the broker takes them.
	Rate float64
	// Inflight bounds the publishes a publisher has not seen complete (a
	// QoS 0 publish completes once written, a QoS 1 one on its PUBACK).
	// Default 16.
	Inflight int
	// Duration is how long the load runs (idle: how long the connections
	// are held). Default 10s.
	Duration time.Duration
	// Topic is the prefix of the load's topics: publisher i publishes on
	// Topic/i and subscribers subscribe to Topic/#. Default "bench".
	Topic string

	// Commands sends governed commands instead: each publisher publishes
	// {"value": ..., "id": ...} on Prefix+"cmd/"+Device+"/"+Capability and
	// waits for the reply with that id on Prefix+"reply/"+Device+"/"+Capability.
	Commands bool
	// Prefix is the gateway's topic prefix, ending in "/". Default
	// "shadowgate/demo/".
	Prefix string
	// Device and Capability name the actuator. Defaults valve-1 and open.
	Device, Capability string
	// Value is the command's value as JSON; empty (or "toggle") alternates
	// true and false.
	Value string
	// Echo answers the commands with a client of our own that republishes
	// each command's id on its reply topic at the same QoS: the floor of a
	// cmd → reply round trip through a broker with nothing behind it.
	Echo bool
	// Timeout bounds the wait for one reply; a command without a reply in
	// time counts as lost. Default 10s.
	Timeout time.Duration

	// Idle opens this many connections and holds them for Duration,
	// sending nothing but keep-alives.
	Idle int

	// OnReady, if set, is called once every client is connected (and
	// subscribed), just before the load starts: for idle connections,
	// once they are all up. It must not block for long.
	OnReady func()
}

// PayloadMin is the smallest payload: the send time and a sequence number.
const PayloadMin = stampLen

// ErrInvalid is returned (wrapped) by Validate and Run for a Config that
// cannot run.
var ErrInvalid = errors.New("invalid load")

// withDefaults returns c with its defaults filled in.
func (c Config) withDefaults() Config {
	if c.Broker == "" {
		c.Broker = "127.0.0.1:1883"
	}
	if c.Pubs == 0 {
		c.Pubs = 1
	}
	if c.Size == 0 {
		c.Size = 64
	}
	if c.Inflight == 0 {
		c.Inflight = 16
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Topic == "" {
		c.Topic = "bench"
	}
	if c.Prefix == "" {
		c.Prefix = "shadowgate/demo/"
	}
	if c.Device == "" {
		c.Device = "valve-1"
	}
	if c.Capability == "" {
		c.Capability = "open"
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	return c
}

// Validate says what is wrong with c, once its defaults are filled in, or
// returns nil. Every error wraps ErrInvalid.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if _, port, err := net.SplitHostPort(c.Broker); err != nil || port == "" {
		bad("broker %q is not host:port", c.Broker)
	}
	if c.Pubs < 0 || c.Subs < 0 || c.Idle < 0 {
		bad("pubs (%d), subs (%d) and idle (%d) cannot be negative", c.Pubs, c.Subs, c.Idle)
	}
	if c.QoS > 2 {
		bad("qos %d: want 0, 1 or 2", c.QoS)
	}
	if c.Size < PayloadMin {
		bad("size %d: a payload holds at least its %d-byte timestamp", c.Size, PayloadMin)
	}
	if c.Rate < 0 {
		bad("rate %v: want 0 (as fast as possible) or more", c.Rate)
	}
	if c.Inflight < 1 {
		bad("inflight %d: want at least 1", c.Inflight)
	}
	if c.Duration < 0 {
		bad("duration %v cannot be negative", c.Duration)
	}
	if c.Timeout < 0 {
		bad("timeout %v cannot be negative", c.Timeout)
	}
	if strings.ContainsAny(c.Topic, "#+") || strings.HasSuffix(c.Topic, "/") {
		bad("topic %q: want a prefix with no wildcard and no trailing /", c.Topic)
	}
	if c.Commands && c.Idle > 0 {
		bad("commands and idle are two modes: give one")
	}
	if c.Echo && !c.Commands {
		bad("echo answers commands: give commands too")
	}
	if c.Commands {
		if !strings.HasSuffix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, "#+") {
			bad("prefix %q: want the gateway's topic prefix, ending in / and with no wildcard", c.Prefix)
		}
		for _, s := range []string{c.Device, c.Capability} {
			if strings.ContainsAny(s, "/#+") {
				bad("device and capability are one topic level each: %q is not", s)
			}
		}
		if v := c.Value; v != "" && v != "toggle" && !json.Valid([]byte(v)) {
			bad("value %q is not JSON (a string needs quotes: '\"on\"')", v)
		}
	}
	return errors.Join(errs...)
}
