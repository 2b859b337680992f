package governance

import (
	"math"
	"strconv"
	"time"

	"github.com/shadowgate/shadowgate/value"
)

// Envelope bounds the values an actuator capability may be given and how
// often it may change. The zero value permits any value of any type.
type Envelope struct {
	// Type is the type every value must have; TypeNone accepts any.
	Type value.Type
	// Min and Max bound numbers when HasMin and HasMax are set.
	Min, Max       float64
	HasMin, HasMax bool
	// Step, when above zero, requires a number to be Min (or 0) plus a whole
	// multiple of Step.
	Step float64
	// Allowed, when not empty, lists every permitted value.
	Allowed []value.Value
	// MaxRate is the most changes in any minute; zero means no limit.
	MaxRate int
	// MinDwell is the least time between two changes; zero means none.
	MinDwell time.Duration
}

// History is what the runtime knows of a capability's recent changes, for
// the rate and dwell limits of an envelope.
type History struct {
	// Current is the last value the capability had; Type is TypeNone when
	// unknown.
	Current value.Value
	// LastChange is when it last changed by our command; zero means never.
	LastChange time.Time
	// ChangesLastMinute counts our commanded changes in the past minute.
	ChangesLastMinute int
}

// Check reports whether v fits the envelope at now, and if not, why.
// Writing the value a capability already has is not a change, so the rate
// and dwell limits do not apply to it.
func (e *Envelope) Check(v value.Value, h History, now time.Time) (bool, string) {
	if e.Type != value.TypeNone && v.Type != e.Type {
		return false, "value " + v.String() + " is a " + v.Type.String() + ", want " + e.Type.String()
	}
	if v.Type == value.TypeNumber {
		if math.IsNaN(v.Num) || math.IsInf(v.Num, 0) {
			return false, "value is not a finite number"
		}
		if e.HasMin && v.Num < e.Min {
			return false, "value " + v.String() + " is below the minimum " + value.Number(e.Min).String()
		}
		if e.HasMax && v.Num > e.Max {
			return false, "value " + v.String() + " is above the maximum " + value.Number(e.Max).String()
		}
		if e.Step > 0 {
			k := (v.Num - e.Min) / e.Step
			if math.Abs(k-math.Round(k)) > 1e-9 {
				return false, "value " + v.String() + " is not on a step of " + value.Number(e.Step).String()
			}
		}
	}
	if len(e.Allowed) > 0 {
		found := false
		for _, a := range e.Allowed {
			if a.Equal(v) {
				found = true
				break
			}
		}
		if !found {
			return false, "value " + v.String() + " is not one of the allowed values"
		}
	}
	if h.Current.Type != value.TypeNone && h.Current.Equal(v) {
		return true, ""
	}
	if e.MinDwell > 0 && !h.LastChange.IsZero() {
		if since := now.Sub(h.LastChange); since < e.MinDwell {
			return false, "it changed " + since.Round(time.Millisecond).String() + " ago; the minimum dwell is " + e.MinDwell.String()
		}
	}
	if e.MaxRate > 0 && h.ChangesLastMinute >= e.MaxRate {
		return false, "it changed " + strconv.Itoa(h.ChangesLastMinute) + " times in the last minute; the maximum rate is " + strconv.Itoa(e.MaxRate)
	}
	return true, ""
}
