package modbus

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/serial/port"
	"github.com/shadowgate/shadowgate/value"
)

// Type is the driver type of Modbus RTU in configuration files.
const Type = "modbus"

func init() {
	// Devices share a unit's address; oneThingOneID keeps what the
	// gateway's rule of one address, one device would.
	devices.Register(devices.Factory{Type: Type, Configure: configure, SharedAddress: true})
}

// Defaults of the driver's options.
const (
	DefaultBaud    = 9600
	DefaultTimeout = 300 * time.Millisecond
	DefaultRetries = 2
)

// Config is a Modbus driver's options in the configuration file, under the
// key modbus of the driver's entry:
//
//	drivers:
//	  - name: rs485
//	    type: modbus
//	    modbus:
//	      port: /dev/ttyUSB0
//	      baud: 9600
//	      parity: even
//	      timeout: 300ms
//	      retries: 2
//	      registers:
//	        th-1:
//	          temperature: {table: input, address: 0, type: int16, scale: 0.1}
//	        relays-1:
//	          pump: {table: coil, address: 0}
//
// A device's address is its unit id, 1 to 247. Several devices may share a
// line, and a unit id.
type Config struct {
	// The serial line: port, baud (default 9600), data_bits, parity,
	// stop_bits.
	port.Config `yaml:",inline"`
	// Timeout bounds one request, from sending it to the last byte of the
	// answer, written like 300ms. Default 300ms.
	Timeout string `yaml:"timeout"`
	// Retries is how many times a read is tried again after no answer or
	// a garbled one. Default 2. A write is never tried again: it may have
	// been carried out.
	Retries *int `yaml:"retries"`
	// Registers say where each capability lives, by device id and then
	// capability name. Every capability needs one.
	Registers map[string]map[string]RegisterConfig `yaml:"registers"`
}

// RegisterConfig is where one capability lives in its unit.
type RegisterConfig struct {
	// Table is coil (read and write, a bool), discrete (read-only bool),
	// holding (read and write registers) or input (read-only registers).
	Table string `yaml:"table"`
	// Address is the number of the coil or the first register, from 0
	// (the protocol's address, not a 40001-style reference).
	Address *int `yaml:"address"`
	// Type is bool, int16, uint16, int32, uint32 or float32. Default bool
	// for a coil or discrete input and for a bool capability, uint16 for a
	// number in a register.
	Type string `yaml:"type"`
	// WordOrder is big (the high word in the first register, the default)
	// or little, for the 32-bit types.
	WordOrder string `yaml:"word_order"`
	// Scale and Offset make the engineering value raw*scale + offset.
	// Default scale 1, offset 0.
	Scale  *float64 `yaml:"scale"`
	Offset float64  `yaml:"offset"`
}

// configure is the driver's devices.Factory.Configure.
func configure(in devices.Instance, devs []devices.Device) devices.Builder {
	var cfg Config
	if !in.Decode(&cfg) {
		return nil
	}
	at := in.Options()
	settings, ok := cfg.Config.Check(at, DefaultBaud)
	ok = ok && in.Claim("serial port", settings.Path, at.At("port"))
	timeout := DefaultTimeout
	if cfg.Timeout != "" {
		d, err := time.ParseDuration(cfg.Timeout)
		if err != nil || d <= 0 || d > time.Minute {
			at.At("timeout").Errorf("%q is not a duration between 1ms and 1m (write it like 300ms or 1s)", cfg.Timeout)
			ok = false
		}
		timeout = d
	}
	retries := DefaultRetries
	if cfg.Retries != nil {
		retries = *cfg.Retries
		if retries < 0 || retries > 10 {
			at.At("retries").Errorf("%d retries: want 0 to 10", retries)
			ok = false
		}
	}
	points := map[string]map[string]Point{}
	units := map[string]byte{}
	for i := range devs {
		d := &devs[i]
		u, err := strconv.Atoi(d.Address)
		if err != nil || u < MinUnit || u > MaxUnit {
			in.Device(i).At("address").Errorf("address %q is not a unit id (a whole number from %d to %d)", d.Address, MinUnit, MaxUnit)
			ok = false
		}
		units[d.ID] = byte(u)
		regs := cfg.Registers[d.ID]
		points[d.ID] = map[string]Point{}
		for k := range d.Capabilities {
			c := &d.Capabilities[k]
			rc, found := regs[c.Name]
			if !found {
				in.Device(i).At("capabilities").Index(k).Errorf("capability %s has no register: add it under registers.%s.%s of driver %s", c.Name, d.ID, c.Name, in.Name())
				ok = false
				continue
			}
			p, good := rc.point(at.At("registers").At(d.ID).At(c.Name), c)
			ok = ok && good
			points[d.ID][c.Name] = p
		}
	}
	// An entry for a device or capability that does not exist is a typo
	// that would leave a capability without its register.
	for _, id := range sortedKeys(cfg.Registers) {
		d := deviceByID(devs, id)
		if d == nil {
			at.At("registers").At(id).Errorf("no device %s on driver %s", id, in.Name())
			ok = false
			continue
		}
		for _, name := range sortedKeys(cfg.Registers[id]) {
			if _, found := d.Capability(name); !found {
				at.At("registers").At(id).At(name).Errorf("device %s has no capability %s", id, name)
				ok = false
			}
		}
	}
	ok = ok && oneThingOneID(in, devs, units, points)
	if !ok {
		return nil
	}
	return func(env devices.Env) (devices.Driver, error) {
		// The gateway's logger names the driver; without one (or with a
		// logger that is not a *slog.Logger) the driver logs to
		// slog.Default(), naming itself.
		log, _ := env.Logger.(*slog.Logger)
		if log == nil {
			log = slog.Default().With("component", "modbus", "driver", in.Name())
		}
		return New(Options{Name: in.Name(), Settings: settings, Timeout: timeout, Retries: retries,
			Devices: env.Devices, Units: units, Points: points, Logger: log})
	}
}

// point checks one register entry against its capability c and returns
// the point, reporting each problem at its key under at.
func (rc RegisterConfig) point(at devices.Place, c *devices.Capability) (Point, bool) {
	ok := true
	var p Point
	t, err := ParseTable(rc.Table)
	if err != nil {
		at.At("table").Errorf("%v", err)
		return p, false
	}
	p.Table = t
	if rc.Address == nil {
		at.At("address").Errorf("an address is required (the coil's or the first register's number, from 0)")
		ok = false
	} else if *rc.Address < 0 || *rc.Address > math.MaxUint16 {
		at.At("address").Errorf("address %d is outside 0..65535", *rc.Address)
		ok = false
	} else {
		p.Address = uint16(*rc.Address)
	}
	switch {
	case rc.Type != "":
		if p.Type, err = ParseDataType(rc.Type); err != nil {
			at.At("type").Errorf("%v", err)
			return p, false
		}
	case t.Bits() || c.Type == value.TypeBool:
		p.Type = Bool
	default:
		p.Type = Uint16
	}
	if p.Order, err = ParseWordOrder(rc.WordOrder); err != nil {
		at.At("word_order").Errorf("%v", err)
		ok = false
	}
	if rc.Scale != nil {
		if *rc.Scale == 0 || math.IsNaN(*rc.Scale) || math.IsInf(*rc.Scale, 0) {
			at.At("scale").Errorf("scale %v: want a finite number other than 0", *rc.Scale)
			ok = false
		}
		p.Scale = *rc.Scale
	}
	p.Offset = rc.Offset
	switch {
	case c.Type != value.TypeBool && c.Type != value.TypeNumber:
		at.Errorf("capability %s is %s %s: a register holds a bool or a number", c.Name, article(c.Type.String()), c.Type)
		ok = false
	case c.Type == value.TypeBool && p.Type != Bool:
		at.At("type").Errorf("capability %s is a bool, the register %s %s (use type bool: a register that is not 0)", c.Name, article(p.Type.String()), p.Type)
		ok = false
	case c.Type == value.TypeNumber && p.Type == Bool:
		at.At("type").Errorf("capability %s is a number, %s %s holds a bool", c.Name, article(p.Table.String()), p.Table)
		ok = false
	case c.Kind == devices.KindActuator && !t.Writable():
		at.At("table").Errorf("actuator %s on the read-only %s table (an actuator needs a coil or a holding register)", c.Name, t)
		ok = false
	}
	if err := p.Check(); ok && err != nil {
		at.Errorf("%v", err)
		ok = false
	}
	return p, ok
}

// article is "a" or "an", as word needs.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func deviceByID(devs []devices.Device, id string) *devices.Device {
	for i := range devs {
		if devs[i].ID == id {
			return &devs[i]
		}
	}
	return nil
}

// String describes a point as the configuration writes it.
func (p Point) String() string {
	s := fmt.Sprintf("%s %d %s", p.Table, p.Address, p.Type)
	if p.Type.Registers() == 2 {
		s += " " + p.Order.String() + " words"
	}
	return s
}

// oneThingOneID refuses two capabilities that reach one writable coil or
// register of one unit where either is an actuator: a second id for the
// same output would get around the first one's lock, dwell and pending
// approval. Reading one input from two devices is harmless.
func oneThingOneID(in devices.Instance, devs []devices.Device, units map[string]byte, points map[string]map[string]Point) bool {
	type span struct {
		dev, capa string
		actuator  bool
		first     int
		last      int
	}
	type key struct {
		unit  byte
		table Table
	}
	seen := map[key][]span{}
	ok := true
	for i := range devs {
		d := &devs[i]
		for k, c := range d.Capabilities {
			p, found := points[d.ID][c.Name]
			if !found || !p.Table.Writable() {
				continue
			}
			n := 1
			if !p.Table.Bits() {
				n = max(p.Type.Registers(), 1)
			}
			sp := span{d.ID, c.Name, c.Kind == devices.KindActuator, int(p.Address), int(p.Address) + n - 1}
			kk := key{units[d.ID], p.Table}
			for _, o := range seen[kk] {
				if (sp.actuator || o.actuator) && sp.first <= o.last && o.first <= sp.last {
					in.Device(i).At("capabilities").Index(k).Errorf("%s.%s reaches %s %d of unit %d, as %s.%s does; one output, one id",
						d.ID, c.Name, p.Table, p.Address, kk.unit, o.dev, o.capa)
					ok = false
				}
			}
			seen[kk] = append(seen[kk], sp)
		}
	}
	return ok
}
