package modbus

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/drivers/serial/port"
	"github.com/shadowgate/shadowgate/value"
)

func TestRegisteredAsModbus(t *testing.T) {
	if f, ok := devices.LookupFactory(Type); !ok || f.Type != "modbus" {
		t.Fatalf("LookupFactory(%q) = %+v, %v", Type, f, ok)
	}
}

func intp(i int) *int           { return &i }
func floatp(f float64) *float64 { return &f }

func goodConfig() *Config {
	return &Config{Config: port.Config{Port: "/dev/ttyUSB0", Parity: "even"}, Timeout: "250ms",
		Registers: map[string]map[string]RegisterConfig{
			"th-1": {
				"temperature": {Table: "input", Address: intp(0), Type: "int16", Scale: floatp(0.1)},
				"humidity":    {Table: "input", Address: intp(1), Type: "uint16", Scale: floatp(0.1)},
			},
			"relays-1": {
				"pump":          {Table: "coil", Address: intp(0)},
				"pump_feedback": {Table: "discrete", Address: intp(0)},
			},
		}}
}

func configDevices() []devices.Device {
	return []devices.Device{
		{ID: "th-1", Address: "1", Capabilities: []devices.Capability{
			{Name: "temperature", Kind: devices.KindSensor, Type: value.TypeNumber},
			{Name: "humidity", Kind: devices.KindSensor, Type: value.TypeNumber},
		}},
		{ID: "relays-1", Address: "247", Capabilities: []devices.Capability{
			{Name: "pump", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true},
			{Name: "pump_feedback", Kind: devices.KindSensor, Type: value.TypeBool},
		}},
	}
}

func TestConfigureBuilds(t *testing.T) {
	in := &devicetest.Config{Driver: "rs485", Settings: goodConfig()}
	devs := configDevices()
	b := configure(in, devs)
	if b == nil || in.Problems() != nil {
		t.Fatalf("configure = %v, problems %q", b != nil, in.Problems())
	}
	var logged strings.Builder
	drv, err := b(devices.Env{Devices: devs, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	d := drv.(*Driver)
	if d.o.Timeout.String() != "250ms" || d.o.Retries != DefaultRetries || d.o.Settings.Baud != DefaultBaud || d.o.Settings.Parity != port.EvenParity {
		t.Errorf("options = timeout %v, retries %d, %v", d.o.Timeout, d.o.Retries, d.o.Settings)
	}
	if p := d.o.Points["th-1"]["temperature"]; p != (Point{Table: Input, Address: 0, Type: Int16, Scale: 0.1}) {
		t.Errorf("th-1.temperature = %+v", p)
	}
	if p := d.o.Points["relays-1"]["pump"]; p != (Point{Table: Coil, Type: Bool}) {
		t.Errorf("relays-1.pump = %+v", p)
	}
	if d.o.Units["relays-1"] != 247 {
		t.Errorf("relays-1's unit = %d", d.o.Units["relays-1"])
	}
	d.log.Info("probe")
	if !strings.Contains(logged.String(), "msg=probe") {
		t.Errorf("the driver does not log through the gateway's logger: %q", logged.String())
	}
	if err := d.Close(); err != nil { // never opened
		t.Fatal(err)
	}
}

// Every problem is reported at its place, and nothing is built.
func TestConfigureReportsEveryProblemAtItsPlace(t *testing.T) {
	c := goodConfig()
	c.Timeout = "soon"
	c.Retries = intp(-1)
	c.Baud = 7
	c.Registers["th-1"]["temperature"] = RegisterConfig{Table: "input", Address: intp(0), Type: "bool"}
	c.Registers["th-1"]["humidity"] = RegisterConfig{Table: "input", Address: intp(70000), Type: "uint16", Scale: floatp(0)}
	c.Registers["relays-1"]["pump"] = RegisterConfig{Table: "discrete", Address: intp(0)}
	c.Registers["relays-1"]["pump_feedback"] = RegisterConfig{Table: "coil", Address: intp(0), Type: "int16"}
	c.Registers["relays-1"]["valve"] = RegisterConfig{Table: "coil", Address: intp(1)}
	c.Registers["pump-9"] = map[string]RegisterConfig{"on": {Table: "coil", Address: intp(2)}}
	devs := configDevices()
	devs[0].Address = "0"
	devs[1].Address = "x"
	devs[1].Capabilities = append(devs[1].Capabilities,
		devices.Capability{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber},
		devices.Capability{Name: "mode", Kind: devices.KindActuator, Type: value.TypeEnum, Enum: []string{"a", "b"}})
	c.Registers["relays-1"]["mode"] = RegisterConfig{Table: "holding", Address: intp(3)}
	in := &devicetest.Config{Driver: "rs485", Settings: c}
	if b := configure(in, devs); b != nil {
		t.Fatal("a bad configuration built a driver")
	}
	want := []string{
		"options.baud: baud 7",
		"options.timeout: \"soon\" is not a duration",
		"options.retries: -1 retries",
		"devices[0].address: address \"0\" is not a unit id",
		"options.registers.th-1.temperature.type: capability temperature is a number, an input holds a bool",
		"options.registers.th-1.humidity.address: address 70000 is outside 0..65535",
		"options.registers.th-1.humidity.scale: scale 0",
		"devices[1].address: address \"x\" is not a unit id",
		"options.registers.relays-1.pump.table: actuator pump on the read-only discrete table",
		"options.registers.relays-1.pump_feedback.type: capability pump_feedback is a bool, the register an int16",
		"devices[1].capabilities[2]: capability level has no register",
		"options.registers.relays-1.mode: capability mode is an enum",
		"options.registers.pump-9: no device pump-9 on driver rs485",
		"options.registers.relays-1.valve: device relays-1 has no capability valve",
	}
	got := in.Problems()
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("no problem %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}
