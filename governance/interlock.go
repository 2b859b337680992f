package governance

import (
	"errors"
	"time"

	"github.com/shadowgate/shadowgate/value"
)

// Op compares a reading with a value in an interlock or a confirmation.
type Op string

// The comparison operators. Ordering operators apply to numbers only.
const (
	OpGT Op = ">"
	OpGE Op = ">="
	OpLT Op = "<"
	OpLE Op = "<="
	OpEQ Op = "=="
	OpNE Op = "!="
)

// ParseOp checks s and returns it as an Op.
func ParseOp(s string) (Op, error) {
	switch op := Op(s); op {
	case OpGT, OpGE, OpLT, OpLE, OpEQ, OpNE:
		return op, nil
	}
	return "", errors.New("unknown operator \"" + s + "\" (want one of > >= < <= == !=)")
}

// Holds reports whether "got op want" is true. Ordering a non-number is false.
func (op Op) Holds(got, want value.Value) bool {
	switch op {
	case OpEQ:
		return got.Equal(want)
	case OpNE:
		return got.Type == want.Type && !got.Equal(want)
	}
	if got.Type != value.TypeNumber || want.Type != value.TypeNumber {
		return false
	}
	switch op {
	case OpGT:
		return got.Num > want.Num
	case OpGE:
		return got.Num >= want.Num
	case OpLT:
		return got.Num < want.Num
	case OpLE:
		return got.Num <= want.Num
	}
	return false
}

// Condition is a comparison of another capability's reading with a value,
// such as "tank-1.level > 10", trusted only while the reading is younger
// than MaxAge.
type Condition struct {
	// Sensor names the reading as "device.capability".
	Sensor string
	Op     Op
	Value  value.Value
	// MaxAge is the oldest reading the condition trusts. Zero means 30s.
	MaxAge time.Duration
}

// DefaultMaxAge is the MaxAge of a condition that sets none.
const DefaultMaxAge = 30 * time.Second

// String writes the condition as it appears in configuration.
func (c Condition) String() string {
	return c.Sensor + " " + string(c.Op) + " " + c.Value.String()
}

// Fact is the latest reading of a sensor as the runtime knows it.
type Fact struct {
	Value value.Value
	At    time.Time
	// Good is false when the device reported the reading stale or bad.
	Good bool
}

// Facts gives the judge the latest reading of a sensor named
// "device.capability". It reports false when no reading is known.
type Facts interface {
	Fact(sensor string) (Fact, bool)
}

// MaxAgeOrDefault is how old a reading the condition accepts.
func (c Condition) MaxAgeOrDefault() time.Duration {
	if c.MaxAge <= 0 {
		return DefaultMaxAge
	}
	return c.MaxAge
}

// Eval reports whether the condition holds on the facts at now, and if
// not, why. A missing, bad or stale reading never holds.
func (c Condition) Eval(facts Facts, now time.Time) (bool, string) {
	if facts == nil {
		return false, "no reading of " + c.Sensor
	}
	f, ok := facts.Fact(c.Sensor)
	if !ok {
		return false, "no reading of " + c.Sensor
	}
	if !f.Good {
		return false, "the reading of " + c.Sensor + " is not good"
	}
	maxAge := c.MaxAgeOrDefault()
	if age := now.Sub(f.At); age > maxAge {
		return false, "the reading of " + c.Sensor + " is " + age.Round(time.Millisecond).String() + " old (max_age " + maxAge.String() + ")"
	}
	if !c.Op.Holds(f.Value, c.Value) {
		return false, "reading " + f.Value.String() + " is not " + string(c.Op) + " " + c.Value.String()
	}
	return true, ""
}
