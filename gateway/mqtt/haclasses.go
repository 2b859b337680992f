package mqtt

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// Home Assistant's device classes and the units each accepts, as its
// sensor and binary sensor documentation lists them. A class mapped to nil
// takes units this table does not hold (or none), and is not checked.
var (
	haSensorClasses = map[string][]string{
		"temperature":                      {"°C", "°F", "K"},
		"humidity":                         {"%"},
		"moisture":                         {"%"},
		"battery":                          {"%"},
		"pressure":                         {"Pa", "kPa", "hPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi"},
		"atmospheric_pressure":             {"Pa", "kPa", "hPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi"},
		"volume_flow_rate":                 {"m³/h", "ft³/min", "L/min", "gal/min", "mL/s"},
		"water":                            {"L", "gal", "m³", "ft³", "CCF"},
		"gas":                              {"m³", "ft³", "CCF"},
		"volume":                           {"L", "mL", "gal", "fl. oz.", "m³", "ft³", "CCF"},
		"volume_storage":                   {"L", "mL", "gal", "fl. oz.", "m³", "ft³", "CCF"},
		"power":                            {"mW", "W", "kW", "MW", "GW", "TW"},
		"energy":                           {"J", "kJ", "MJ", "GJ", "mWh", "Wh", "kWh", "MWh", "GWh", "TWh", "cal", "kcal", "Mcal", "Gcal"},
		"energy_storage":                   {"J", "kJ", "MJ", "GJ", "mWh", "Wh", "kWh", "MWh", "GWh", "TWh", "cal", "kcal", "Mcal", "Gcal"},
		"voltage":                          {"V", "mV", "µV", "kV", "MV"},
		"current":                          {"A", "mA"},
		"frequency":                        {"Hz", "kHz", "MHz", "GHz"},
		"duration":                         {"d", "h", "min", "s", "ms"},
		"signal_strength":                  {"dB", "dBm"},
		"apparent_power":                   {"VA"},
		"reactive_power":                   {"var"},
		"illuminance":                      {"lx"},
		"carbon_dioxide":                   {"ppm"},
		"carbon_monoxide":                  {"ppm"},
		"power_factor":                     nil,
		"aqi":                              nil,
		"area":                             nil,
		"blood_glucose_concentration":      nil,
		"data_rate":                        nil,
		"data_size":                        nil,
		"distance":                         nil,
		"irradiance":                       nil,
		"monetary":                         nil,
		"nitrogen_dioxide":                 nil,
		"nitrogen_monoxide":                nil,
		"nitrous_oxide":                    nil,
		"ozone":                            nil,
		"ph":                               nil,
		"pm1":                              nil,
		"pm25":                             nil,
		"pm10":                             nil,
		"precipitation":                    nil,
		"precipitation_intensity":          nil,
		"sound_pressure":                   nil,
		"speed":                            nil,
		"sulphur_dioxide":                  nil,
		"volatile_organic_compounds":       nil,
		"volatile_organic_compounds_parts": nil,
		"weight":                           nil,
		"wind_speed":                       nil,
	}
	haBinaryClasses = []string{"battery", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door",
		"garage_door", "gas", "heat", "light", "lock", "moisture", "motion", "moving", "occupancy", "opening", "plug",
		"power", "presence", "problem", "running", "safety", "smoke", "sound", "tamper", "update", "vibration", "window"}
	haSwitchClasses = []string{"outlet", "switch"}
	// haTotalClasses count up: their state class is total_increasing, never
	// measurement.
	haTotalClasses = []string{"energy", "water", "gas"}
)

// haUnitClasses suggest a device class for a unit that names one kind of
// quantity. "%" names several (humidity, moisture, battery) and is told
// apart by the capability's name in haClassFor.
var haUnitClasses = func() map[string]string {
	m := map[string]string{}
	for _, class := range []string{"temperature", "pressure", "volume_flow_rate", "volume_storage", "power", "energy",
		"voltage", "current", "frequency", "duration", "signal_strength", "apparent_power", "reactive_power", "illuminance"} {
		for _, u := range haSensorClasses[class] {
			if _, taken := m[u]; !taken {
				m[u] = class
			}
		}
	}
	return m
}()

// haClassFor is the device class a number sensor's unit suggests, or "".
func haClassFor(c devices.Capability) string {
	if c.Unit == "%" {
		name := strings.ToLower(c.Name)
		switch {
		case strings.Contains(name, "humid"):
			return "humidity"
		case strings.Contains(name, "moist"), strings.Contains(name, "soil"):
			return "moisture"
		case strings.Contains(name, "batt"):
			return "battery"
		}
		return ""
	}
	return haUnitClasses[c.Unit]
}

// haStateClass is the state class of a number sensor of a device class.
func haStateClass(class string) string {
	if slices.Contains(haTotalClasses, class) {
		return "total_increasing"
	}
	return "measurement"
}

// CheckDeviceClass says why a device class cannot be given to a capability
// in Home Assistant, or returns nil: a bool sensor takes a binary sensor's
// class, a bool actuator a switch's, a number one of a sensor's whose
// units include the capability's unit; other types take none.
func CheckDeviceClass(c devices.Capability, class string) error {
	switch {
	case c.Type == value.TypeBool && c.Kind == devices.KindSensor:
		if !slices.Contains(haBinaryClasses, class) {
			return fmt.Errorf("%q is not a device class of a binary sensor (%s)", class, strings.Join(haBinaryClasses, ", "))
		}
	case c.Type == value.TypeBool:
		if !slices.Contains(haSwitchClasses, class) {
			return fmt.Errorf("%q is not a device class of a switch (outlet, switch)", class)
		}
	case c.Type == value.TypeNumber:
		units, ok := haSensorClasses[class]
		if !ok {
			return fmt.Errorf("%q is not a device class of a sensor or number (temperature, humidity, pressure, ...)", class)
		}
		if units != nil && !slices.Contains(units, c.Unit) {
			unit := "no unit"
			if c.Unit != "" {
				unit = "the unit " + c.Unit
			}
			return fmt.Errorf("device class %s takes the units %s; this capability has %s", class, strings.Join(units, ", "), unit)
		}
	default:
		return fmt.Errorf("a %s capability takes no device class; only bool and number ones do", c.Type)
	}
	return nil
}
