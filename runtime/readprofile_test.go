package runtime_test

import (
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// TestReadProfileReaches: an actuator's floor is its write's, so reading
// it back does not reach; a sensor whose own floor reaches is read as
// reaching.
func TestReadProfileReaches(t *testing.T) {
	d := &devices.Device{ID: "pump-1", Area: "plant"}
	act := &devices.Capability{Name: "on", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true, Floor: devices.Floor{Reaches: true}}
	if runtime.ReadProfile(d, act).Reaches {
		t.Error("reading back an actuator whose write reaches was judged as reaching")
	}
	sen := &devices.Capability{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber, Floor: devices.Floor{Reaches: true}}
	if !runtime.ReadProfile(d, sen).Reaches {
		t.Error("a sensor whose floor reaches was read as not reaching")
	}
}
