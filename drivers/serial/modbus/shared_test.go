package modbus

import (
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/value"
)

// TestOneOutputOneID: devices may share a unit, but two ids for one coil
// or register that either writes are refused; two readers of one input are
// not.
func TestOneOutputOneID(t *testing.T) {
	if f, _ := devices.LookupFactory(Type); !f.SharedAddress {
		t.Fatal("the modbus factory does not let devices share a unit")
	}
	c := goodConfig()
	c.Registers["pump-2"] = map[string]RegisterConfig{"on": {Table: "coil", Address: intp(0)}}
	c.Registers["level-1"] = map[string]RegisterConfig{"raw": {Table: "holding", Address: intp(3), Type: "uint32"}}
	c.Registers["setpoint-1"] = map[string]RegisterConfig{"value": {Table: "holding", Address: intp(4), Type: "uint16"}}
	c.Registers["th-2"] = map[string]RegisterConfig{"temperature": {Table: "input", Address: intp(0), Type: "int16", Scale: floatp(0.1)}}
	devs := append(configDevices(),
		devices.Device{ID: "pump-2", Address: "247", Capabilities: []devices.Capability{{Name: "on", Kind: devices.KindActuator, Type: value.TypeBool}}},
		devices.Device{ID: "level-1", Address: "247", Capabilities: []devices.Capability{{Name: "raw", Kind: devices.KindSensor, Type: value.TypeNumber}}},
		devices.Device{ID: "setpoint-1", Address: "247", Capabilities: []devices.Capability{{Name: "value", Kind: devices.KindActuator, Type: value.TypeNumber}}},
		devices.Device{ID: "th-2", Address: "1", Capabilities: []devices.Capability{{Name: "temperature", Kind: devices.KindSensor, Type: value.TypeNumber}}},
	)
	in := &devicetest.Config{Driver: "rs485", Settings: c}
	if configure(in, devs) != nil {
		t.Fatal("two ids for one output were taken")
	}
	got := strings.Join(in.Problems(), "\n")
	for _, want := range []string{
		"devices[2].capabilities[0]: pump-2.on reaches coil 0 of unit 247, as relays-1.pump does",
		"devices[4].capabilities[0]: setpoint-1.value reaches holding 4 of unit 247, as level-1.raw does",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems\n%s\nmiss %q", got, want)
		}
	}
	if strings.Contains(got, "th-2") {
		t.Errorf("two readers of one input register were refused:\n%s", got)
	}
}

// TestOnlyWholeRefusalsAreRefusals: a write answered with an exception
// that does not say "nothing was done" is an unknown outcome.
func TestOnlyWholeRefusalsAreRefusals(t *testing.T) {
	d := &Driver{}
	for code, want := range map[byte]devices.Outcome{
		0x01: devices.OutcomeRefused, 0x02: devices.OutcomeRefused, 0x03: devices.OutcomeRefused, 0x06: devices.OutcomeRefused,
		0x04: devices.OutcomeUnknown, 0x05: devices.OutcomeUnknown, 0x0B: devices.OutcomeUnknown, 0x42: devices.OutcomeUnknown,
	} {
		err := d.outcome(t.Context(), &ExceptionError{Function: WriteSingleCoil, Code: code}, true, true)
		if got := devices.Classify(err); got != want {
			t.Errorf("a write answered 0x%02X is %v, want %v", code, got, want)
		}
		if got := devices.Classify(d.outcome(t.Context(), &ExceptionError{Function: ReadCoils, Code: code}, false, true)); got != devices.OutcomeRefused {
			t.Errorf("a read answered 0x%02X is %v, want refused (a read changes nothing)", code, got)
		}
	}
}
