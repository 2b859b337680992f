package runtimetest

import (
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// Greenhouse returns the devices of the simulated greenhouse the tests
// drive, placed in area: the tank level, flow rate and air temperature
// sensors, and the pump, valve and heater, each with read-back. With ids,
// it returns only those devices, in that order.
func Greenhouse(area string, ids ...string) []devices.Device {
	sensor := func(name string) []devices.Capability {
		return []devices.Capability{{Name: name, Kind: devices.KindSensor, Type: value.TypeNumber}}
	}
	actuator := func(name string) []devices.Capability {
		return []devices.Capability{{Name: name, Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}
	}
	all := []devices.Device{
		{ID: "tank-1", Area: area, Driver: "sim", Address: "tank", Capabilities: sensor("level")},
		{ID: "flow-1", Area: area, Driver: "sim", Address: "flow", Capabilities: sensor("rate")},
		{ID: "air-1", Area: area, Driver: "sim", Address: "air", Capabilities: sensor("temperature")},
		{ID: "pump-1", Area: area, Driver: "sim", Address: "pump", Capabilities: actuator("on")},
		{ID: "valve-1", Area: area, Driver: "sim", Address: "valve", Capabilities: actuator("open")},
		{ID: "heater-1", Area: area, Driver: "sim", Address: "heater", Capabilities: actuator("on")},
	}
	if len(ids) == 0 {
		return all
	}
	out := make([]devices.Device, 0, len(ids))
	for _, id := range ids {
		for _, d := range all {
			if d.ID == id {
				out = append(out, d)
			}
		}
	}
	return out
}
