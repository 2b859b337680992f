package devices

import (
	"errors"
	"strconv"
	"time"

	"github.com/shadowgate/shadowgate/value"
)

// Kind says whether a capability observes or changes the world.
type Kind uint8

// The two kinds of capability.
const (
	KindSensor Kind = iota + 1
	KindActuator
)

// ParseKind parses "sensor" or "actuator".
func ParseKind(s string) (Kind, error) {
	switch s {
	case "sensor":
		return KindSensor, nil
	case "actuator":
		return KindActuator, nil
	}
	return 0, errors.New("unknown capability kind " + strconv.Quote(s) + " (want sensor or actuator)")
}

// String returns "sensor" or "actuator".
func (k Kind) String() string {
	switch k {
	case KindSensor:
		return "sensor"
	case KindActuator:
		return "actuator"
	}
	return "unknown"
}

// Floor is the least effect a driver knows its capability has, whatever
// the configuration declares: an OPC-UA write reaches a PLC, a dosing pump
// cannot be undone. Configuration may declare more, never less; the
// gateway refuses a declaration narrower than the floor. The zero value
// says the driver knows of no effect beyond the kind's own. A read changes
// nothing, so for a sensor only Reaches counts; an actuator's floor speaks
// of its write, and reading it back is judged as a read that does not
// reach.
type Floor struct {
	Reaches      bool
	Irreversible bool
	Uncontained  bool
	Costs        bool
}

// Capability is one thing a device can read or do.
type Capability struct {
	Name string
	Kind Kind
	Type value.Type
	Unit string
	// Enum lists the values of an enum capability.
	Enum []string
	// ReadBack is true when an actuator's current state can be read, so a
	// write can be confirmed by reading it back.
	ReadBack bool
	// Poll is how often a sensor is read on a schedule; zero means never.
	Poll time.Duration
	// Floor is the driver's effect floor for this capability.
	Floor Floor
}

// Readable reports whether the capability can be read: every sensor, and
// an actuator with read-back.
func (c *Capability) Readable() bool { return c.Kind == KindSensor || c.ReadBack }

// Device is a thing a driver reaches, with its capabilities.
type Device struct {
	// ID is unique within the gateway: "pump-1".
	ID string
	// Label is the name people call the device by, "Pump 1"; "" when
	// the configuration gives none, and the ID is its name. It is at most
	// MaxLabel runes of printable text without line breaks.
	Label string
	// Area places the device in the world: "greenhouse/zone-a". Its scope
	// is the area followed by the id.
	Area string
	// Driver names the driver instance that reaches the device.
	Driver string
	// Address is the driver's own name for the device (a pin, a node id).
	Address      string
	Capabilities []Capability
}

// MaxLabel bounds a device's Label, in runes.
const MaxLabel = 40

// Name returns what people call the device: its label, or its id.
func (d *Device) Name() string {
	if d.Label != "" {
		return d.Label
	}
	return d.ID
}

// Scope returns the device's scope: its area and its id.
func (d *Device) Scope() string {
	if d.Area == "" {
		return d.ID
	}
	return d.Area + "/" + d.ID
}

// Capability returns the named capability of d.
func (d *Device) Capability(name string) (*Capability, bool) {
	for i := range d.Capabilities {
		if d.Capabilities[i].Name == name {
			return &d.Capabilities[i], true
		}
	}
	return nil, false
}

// Quality says how far a reading can be trusted.
type Quality uint8

// The qualities of a reading.
const (
	QualityGood Quality = iota + 1
	QualityStale
	QualityBad
)

// String returns "good", "stale" or "bad".
func (q Quality) String() string {
	switch q {
	case QualityGood:
		return "good"
	case QualityStale:
		return "stale"
	case QualityBad:
		return "bad"
	}
	return "unknown"
}

// MarshalText writes the quality as its name.
func (q Quality) MarshalText() ([]byte, error) { return []byte(q.String()), nil }

// UnmarshalText reads a quality by name.
func (q *Quality) UnmarshalText(b []byte) error {
	switch string(b) {
	case "good":
		*q = QualityGood
	case "stale":
		*q = QualityStale
	case "bad":
		*q = QualityBad
	default:
		return errors.New("unknown quality " + strconv.Quote(string(b)) + " (want good, stale or bad)")
	}
	return nil
}

// Reading is one observation of a capability.
type Reading struct {
	Value   value.Value `json:"value"`
	At      time.Time   `json:"at"`
	Quality Quality     `json:"quality"`
}

// Age returns how old the reading is at now.
func (r Reading) Age(now time.Time) time.Duration { return now.Sub(r.At) }
