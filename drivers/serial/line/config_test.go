package line

import (
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/drivers/serial/port"
	"github.com/shadowgate/shadowgate/value"
)

func TestConfigureNamesEachProblemAtItsPlace(t *testing.T) {
	in := &devicetest.Config{Driver: "arduino", Settings: &Config{Config: port.Config{Port: "/dev/ttyACM0"}, Timeout: "2h"}}
	devs := []devices.Device{
		{ID: "mode-1", Address: "mode", Capabilities: []devices.Capability{{Name: "set", Kind: devices.KindActuator, Type: value.TypeEnum, Enum: []string{"closed", "half open"}}}},
		{ID: "bad-1", Address: "no good", Capabilities: []devices.Capability{{Name: "x", Kind: devices.KindSensor, Type: value.TypeString}}},
		{ID: "two-1", Address: "two", Capabilities: []devices.Capability{{Name: "a", Kind: devices.KindSensor, Type: value.TypeBool}, {Name: "b", Kind: devices.KindSensor, Type: value.TypeBool}}},
	}
	if configure(in, devs) != nil {
		t.Fatal("a bad configuration was built")
	}
	got := strings.Join(in.Problems(), "\n")
	for _, want := range []string{
		`options.timeout: "2h" is not a duration`,
		`devices[0].capabilities[0].enum[1]: "half open" cannot be sent on the line protocol`,
		`devices[1].address: "no good" is not a capability name`,
		`devices[1].capabilities[0].type: the line protocol carries bool, number and enum, not string`,
		`devices[2].capabilities: a device on the line protocol has one capability`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems\n%s\nmiss %q", got, want)
		}
	}
}
