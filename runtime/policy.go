package runtime

import (
	"errors"
	"sync"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
)

// Declared is what the configuration declares of an actuator's effects.
// It can only add to the driver's floor, never take away.
type Declared struct {
	Reversible bool
	Contained  bool
	Costs      bool
	Reaches    bool
}

// Confirm says how an actuation is verified after the driver returns.
type Confirm struct {
	// ReadBack reads the capability itself until it equals the value.
	ReadBack bool
	// Feedback names another reading that must come to equal the value
	// commanded: a relay's auxiliary contact, a valve's limit switch.
	Feedback string
	// Sensor, Op and Value name a condition on another reading that must
	// hold, such as "flow-1.rate > 1".
	Sensor string
	Op     governance.Op
	Value  value.Value
	// When is the value whose acts the sensor's condition confirms. For a
	// bool actuator it defaults to true, and an act to false is confirmed
	// by the condition no longer holding (the valve closed, the flow
	// stopped); for another type, acts to other values are not checked by
	// the sensor. Nil for another type means every act.
	When *value.Value
	// Within (travel_within) bounds the wait for the value or condition
	// to be reached. Zero means 5s.
	Within time.Duration
	// StartWithin, if set, is how soon the confirming reading must move
	// from where it stood before the act; if it does not, the act did not
	// start (not_started).
	StartWithin time.Duration
	// Watch, if set, keeps watching for this long once the value was
	// reached: leaving it within the window is returned.
	Watch time.Duration
	// OnDiscrepancy says what follows a discrepancy besides the alarm:
	// "alarm" (nothing more) or "safe" (the actuator is driven to safe).
	OnDiscrepancy string
}

// CapPolicy is the governance of one capability: what it does to the world
// and the safety features that bound it.
type CapPolicy struct {
	// Effects is what the configuration declares; nil for an actuator means
	// nothing was declared, and the step is judged as the worst case.
	Effects    *Declared
	Envelope   *governance.Envelope
	Interlocks []governance.Condition
	Confirm    *Confirm
	// Safe is the value the gateway drives the actuator to when it must
	// make it safe: a TTL ran out, a running interlock broke, a
	// discrepancy with OnDiscrepancy "safe", a stop, or a start with
	// OnStart "safe".
	Safe *value.Value
	// TTL, if set, makes every actuation to a value other than Safe a
	// dead man: it reverts to Safe after TTL unless renewed by commanding
	// the same value again.
	TTL time.Duration
	// While holds the running interlocks: while the actuator is away from
	// Safe, they are evaluated on every new reading of their sensors and
	// on staleness; when one stops holding, the actuator is driven to
	// Safe. They are also checked, as permissives, before every act.
	While []governance.Condition
	// OnStart "safe" drives the actuator to Safe when the gateway starts;
	// "" or "keep" leaves it as it is.
	OnStart string
	// OnStop "keep" leaves the actuator as it is when the gateway stops;
	// "" or "safe" drives it to Safe (when Safe is set).
	OnStop string
}

// The values of OnStart, OnStop and Confirm.OnDiscrepancy.
const (
	SafeKeep  = "keep"
	SafeDrive = "safe"
	SafeAlarm = "alarm"
)

// Profile returns the effect profile of a step on capability c of device d:
// a sensor reads its scope; an actuator writes it, with the declared effects
// joined to the driver's floor, or the worst case when nothing is declared.
func Profile(d *devices.Device, c *devices.Capability, p *CapPolicy) governance.EffectProfile {
	scope := governance.Scopes(governance.Scope(d.Scope()))
	if c.Kind == devices.KindSensor {
		return ReadProfile(d, c)
	}
	if p == nil || p.Effects == nil {
		return governance.Worst()
	}
	decl := governance.EffectProfile{
		Writes:     scope,
		Reaches:    p.Effects.Reaches,
		Reversible: p.Effects.Reversible,
		Contained:  p.Effects.Contained,
		Costs:      p.Effects.Costs,
	}
	floor := governance.EffectProfile{
		Writes:     scope,
		Reaches:    c.Floor.Reaches,
		Reversible: !c.Floor.Irreversible,
		Contained:  !c.Floor.Uncontained,
		Costs:      c.Floor.Costs,
	}
	return decl.Join(floor)
}

// ReadProfile returns the effect profile of reading capability c of device
// d: a sensor, or an actuator's read-back. A read changes nothing.
func ReadProfile(d *devices.Device, c *devices.Capability) governance.EffectProfile {
	prof := governance.Nothing()
	prof.Reads = governance.Scopes(governance.Scope(d.Scope()))
	// An actuator's floor is its write's: reading it back acts on
	// nothing, wherever the device is. A sensor whose reading itself
	// leaves the machine says so in its own floor.
	prof.Reaches = c.Kind == devices.KindSensor && c.Floor.Reaches
	return prof
}

// Reading is a capability's latest reading as the engine knows it.
type Reading struct {
	Device     string          `json:"device"`
	Capability string          `json:"capability"`
	Reading    devices.Reading `json:"reading"`
}

// facts is the engine's cache of the latest readings. It implements
// governance.Facts and is safe for concurrent use.
type facts struct {
	// mu guards m.
	mu sync.RWMutex
	m  map[string]devices.Reading
}

func (f *facts) Fact(sensor string) (governance.Fact, bool) {
	r, ok := f.get(sensor)
	if !ok {
		return governance.Fact{}, false
	}
	return governance.Fact{Value: r.Value, At: r.At, Good: r.Quality == devices.QualityGood}, true
}

func (f *facts) get(sensor string) (devices.Reading, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.m[sensor]
	return r, ok
}

// put keeps r as sensor's reading unless it is older than the one kept.
// It reports whether it kept r, and the reading r replaced, if any.
func (f *facts) put(sensor string, r devices.Reading) (old devices.Reading, hadOld, kept bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, hadOld = f.m[sensor]
	if hadOld && r.At.Before(old.At) {
		return old, hadOld, false
	}
	f.m[sensor] = r
	return old, hadOld, true
}

// markBad keeps the last value of sensor but marks it bad, after a failed read.
func (f *facts) markBad(sensor string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.m[sensor]; ok {
		r.Quality = devices.QualityBad
		f.m[sensor] = r
	}
}

// markDevice marks every reading of a device bad, when it goes offline.
func (f *facts) markDevice(device string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, r := range f.m {
		if dev, _ := splitRef(k); dev == device {
			r.Quality = devices.QualityBad
			f.m[k] = r
		}
	}
}

// changes records when an actuator was changed by our command, for the
// envelope's dwell and rate limits.
type changes struct {
	last time.Time
	// times are the changes of the last minute, oldest first: a change
	// adds at the end, and the ones a minute old leave from the front, so
	// that neither walks all of them (at a fast rate a minute holds many).
	times []time.Time
}

func (c *changes) history(current value.Value, now time.Time) governance.History {
	c.forget(now)
	h := governance.History{LastChange: c.last, ChangesLastMinute: len(c.times)}
	if !current.IsZero() {
		h.Current = current
	}
	return h
}

func (c *changes) record(now time.Time) {
	c.forget(now)
	c.times = append(c.times, now)
	c.last = now
}

// forget drops the changes a minute or more before now from the front.
// A clock set back leaves a later change before an earlier one; it is
// counted until the ones before it have left, which can only make the
// rate limit stricter.
func (c *changes) forget(now time.Time) {
	i := 0
	for i < len(c.times) && now.Sub(c.times[i]) >= time.Minute {
		i++
	}
	c.times = c.times[i:]
}

// check says what is wrong with the safety features of the capability
// named target: each needs a safe value to drive to.
func (p *CapPolicy) check(target string) error {
	need := func(what string) error {
		return errors.New(target + ": " + what + " needs a safe value to drive to")
	}
	switch {
	case p.Safe == nil && p.TTL > 0:
		return need("a ttl")
	case p.Safe == nil && len(p.While) > 0:
		return need("a running interlock (while)")
	case p.Safe == nil && p.OnStart == SafeDrive:
		return need("on_start: safe")
	case p.Safe == nil && p.Confirm != nil && p.Confirm.OnDiscrepancy == SafeDrive:
		return need("on_contradiction: safe")
	case p.TTL < 0:
		return errors.New(target + ": a ttl cannot be negative")
	}
	for _, v := range []string{p.OnStart, p.OnStop} {
		if v != "" && v != SafeKeep && v != SafeDrive {
			return errors.New(target + `: on_start and on_stop are "safe" or "keep", not "` + v + `"`)
		}
	}
	if c := p.Confirm; c != nil && c.OnDiscrepancy != "" && c.OnDiscrepancy != SafeAlarm && c.OnDiscrepancy != SafeDrive {
		return errors.New(target + `: on_contradiction is "alarm" or "safe", not "` + c.OnDiscrepancy + `"`)
	}
	return nil
}
