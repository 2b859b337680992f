package plc

import (
	"fmt"
	"math"

	"github.com/gopcua/opcua/id"
)

// Tag names one of the PLC's variables. Its node id is
// "ns=<NamespaceIndex>;s=<Tag>", for example "ns=1;s=Tank.Level".
type Tag string

// The PLC's tags. Each is a scalar Variable in the PLC's own namespace
// ([NamespaceURI]).
const (
	// TankLevel is the tank level in percent, Double, read-only, kept in
	// 0..100 by the physics.
	TankLevel Tag = "Tank.Level"
	// PumpCommand asks the fill pump to run, Boolean, read and write.
	PumpCommand Tag = "Pump.Command"
	// PumpRunning is the pump's running feedback, Boolean, read-only. It
	// follows PumpCommand after [Options.FeedbackDelay], unless the pump
	// is stuck ([PLC.StuckPump]).
	PumpRunning Tag = "Pump.Running"
	// ValveOpen opens the drain valve, Boolean, read and write.
	ValveOpen Tag = "Valve.Open"
	// Setpoint is the level setpoint in percent, Double, read and write in
	// 0..100 (a write outside gets StatusBadOutOfRange).
	Setpoint Tag = "Setpoint"
	// MixerSpeed is the mixer speed in rpm, Int32, read and write in
	// 0..3000. A client must write an Int32 variant: a Double gets
	// StatusBadTypeMismatch, as from a real PLC.
	MixerSpeed Tag = "Mixer.Speed"
	// HeaterPower is the heater power in percent, Float (float32), read
	// and write in 0..100.
	HeaterPower Tag = "Heater.Power"
	// DrainLock is a Boolean, read and write, meant to be switched
	// between writable and not with [PLC.SetWritable] (a maintenance lock
	// taken at the panel). Any writable tag can be switched the same way.
	DrainLock Tag = "Drain.Lock"
)

// Tags lists every tag, in a fixed order. The caller may modify the
// returned slice.
func Tags() []Tag {
	out := make([]Tag, len(tagDefs))
	for i, d := range tagDefs {
		out[i] = d.tag
	}
	return out
}

// tagDef describes a tag: its OPC-UA data type, whether clients may write
// it, and the range a written number must be in.
type tagDef struct {
	tag      Tag
	dataType uint32 // a node id in namespace 0: id.Double, id.Boolean, ...
	writable bool
	min, max float64 // range for a written number; ignored for Boolean
	unit     string  // for the Description attribute
	initial  any     // float64, bool, int32 or float32
}

var tagDefs = []tagDef{
	{tag: TankLevel, dataType: id.Double, unit: "%", initial: float64(50)},
	{tag: PumpCommand, dataType: id.Boolean, writable: true, initial: false},
	{tag: PumpRunning, dataType: id.Boolean, initial: false},
	{tag: ValveOpen, dataType: id.Boolean, writable: true, initial: false},
	{tag: Setpoint, dataType: id.Double, writable: true, min: 0, max: 100, unit: "%", initial: float64(60)},
	{tag: MixerSpeed, dataType: id.Int32, writable: true, min: 0, max: 3000, unit: "rpm", initial: int32(0)},
	{tag: HeaterPower, dataType: id.Float, writable: true, min: 0, max: 100, unit: "%", initial: float32(0)},
	{tag: DrainLock, dataType: id.Boolean, writable: true, initial: false},
}

func lookupTag(t Tag) (tagDef, bool) {
	for _, d := range tagDefs {
		if d.tag == t {
			return d, true
		}
	}
	return tagDef{}, false
}

// errCode is a write outcome as an OPC-UA status code (0 is Good).
type errCode uint32

// Status codes the PLC answers a write with (values from OPC-UA Part 6).
const (
	codeGood          errCode = 0
	codeNotWritable   errCode = 0x803B0000 // Bad_NotWritable
	codeOutOfRange    errCode = 0x803C0000 // Bad_OutOfRange
	codeTypeMismatch  errCode = 0x80740000 // Bad_TypeMismatch
	codeNodeIDUnknown errCode = 0x80340000 // Bad_NodeIdUnknown
)

// check tells whether v may be written to the tag d describes: the Go type
// must match the data type exactly (no conversion, as a PLC does) and a
// number must be finite and within range.
func (d tagDef) check(v any) errCode {
	var f float64
	switch d.dataType {
	case id.Boolean:
		if _, ok := v.(bool); !ok {
			return codeTypeMismatch
		}
		return codeGood
	case id.Double:
		x, ok := v.(float64)
		if !ok {
			return codeTypeMismatch
		}
		f = x
	case id.Float:
		x, ok := v.(float32)
		if !ok {
			return codeTypeMismatch
		}
		f = float64(x)
	case id.Int32:
		x, ok := v.(int32)
		if !ok {
			return codeTypeMismatch
		}
		f = float64(x)
	default:
		return codeTypeMismatch
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return codeOutOfRange
	}
	if d.max > d.min && (f < d.min || f > d.max) {
		return codeOutOfRange
	}
	return codeGood
}

// checkGo is check for values set from Go (tests and the command), with an
// error that names the tag.
func (d tagDef) checkGo(v any) error {
	switch d.check(v) {
	case codeGood:
		return nil
	case codeTypeMismatch:
		return fmt.Errorf("setting %s to %v (%T): %w", d.tag, v, v, ErrTypeMismatch)
	default:
		return fmt.Errorf("setting %s to %v: %w", d.tag, v, ErrOutOfRange)
	}
}
