package devicetest

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/shadowgate/shadowgate/devices"
)

// Config is a devices.Instance held in memory, to test a driver's factory
// without a configuration file. It keeps every problem the factory reports,
// as "place: message", the place written the way the gateway writes key
// paths, from the driver's options or the device: "options.faults.pump-1",
// "devices[1].address". It is not safe for concurrent use.
type Config struct {
	// Driver is the driver's name.
	Driver string
	// Settings are the driver's options as they would be decoded: a value
	// of, or a pointer to, the type the factory decodes into. Nil means the
	// driver has no options.
	Settings any

	problems []string
	claims   map[string]bool
}

// Claim records a claim. One driver may claim a thing again; a claim by
// another driver is the gateway's to see.
func (c *Config) Claim(kind, key string, _ devices.Place) bool {
	if c.claims == nil {
		c.claims = map[string]bool{}
	}
	c.claims[kind+" "+key] = true
	return true
}

// Claims returns what the factory claimed, as "kind key", sorted.
func (c *Config) Claims() []string {
	out := make([]string, 0, len(c.claims))
	for k := range c.claims {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Name returns c.Driver.
func (c *Config) Name() string { return c.Driver }

// Decode copies c.Settings into v, which must point to a value of the same
// type; a mismatch is reported as a problem of the test.
func (c *Config) Decode(v any) bool {
	if c.Settings == nil {
		return true
	}
	dst := reflect.ValueOf(v)
	src := reflect.ValueOf(c.Settings)
	if src.Kind() == reflect.Pointer {
		src = src.Elem()
	}
	if dst.Kind() != reflect.Pointer || dst.IsNil() || dst.Elem().Type() != src.Type() {
		c.problems = append(c.problems, fmt.Sprintf("options: the test gave a %s, the factory decodes into a %T", src.Type(), v))
		return false
	}
	dst.Elem().Set(src)
	return true
}

// Options returns the place of the driver's options.
func (c *Config) Options() devices.Place { return place{c, "options"} }

// Device returns the place of the i-th device given to Configure.
func (c *Config) Device(i int) devices.Place { return place{c, "devices[" + strconv.Itoa(i) + "]"} }

// Problems returns the problems reported so far, in order.
func (c *Config) Problems() []string { return c.problems }

type place struct {
	c    *Config
	path string
}

func (p place) At(key string) devices.Place { return place{p.c, p.path + "." + key} }

func (p place) Index(i int) devices.Place { return place{p.c, p.path + "[" + strconv.Itoa(i) + "]"} }

func (p place) Errorf(format string, args ...any) {
	p.c.problems = append(p.c.problems, p.path+": "+fmt.Sprintf(format, args...))
}
