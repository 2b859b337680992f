package mqtt

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// Home Assistant's device classes and the units each accepts: those of
// its sensor documentation, and for the classes it lists without units,
// its sensor constants (DEVICE_CLASS_UNITS); newer releases may accept
// more. "" in a list is no unit: ph and aqi take none, and a unit the
// capability has is left out of their announcement. A class mapped to nil
// takes any unit (monetary: a currency).
var (
	haPressureUnits = []string{"Pa", "kPa", "hPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi"}
	haVolumeUnits   = []string{"L", "mL", "gal", "fl. oz.", "m³", "ft³", "CCF"}
	haEnergyUnits   = []string{"J", "kJ", "MJ", "GJ", "mWh", "Wh", "kWh", "MWh", "GWh", "TWh", "cal", "kcal", "Mcal", "Gcal"}
	// µ is the micro sign (U+00B5), as Home Assistant's constants spell it.
	haMicrogramsPerCubicMetre = []string{"µg/m³"}
	haSpeedUnits              = []string{"Beaufort", "ft/s", "in/s", "m/s", "km/h", "kn", "mph", "mm/s"}
	haVolumetricFluxUnits     = []string{"in/d", "in/h", "mm/d", "mm/h"}

	haSensorClasses = map[string][]string{
		"temperature":                 {"°C", "°F", "K"},
		"humidity":                    {"%"},
		"moisture":                    {"%"},
		"battery":                     {"%"},
		"pressure":                    haPressureUnits,
		"atmospheric_pressure":        haPressureUnits,
		"volume_flow_rate":            {"m³/h", "ft³/min", "L/min", "gal/min", "mL/s"},
		"water":                       {"L", "gal", "m³", "ft³", "CCF"},
		"gas":                         {"m³", "ft³", "CCF"},
		"volume":                      haVolumeUnits,
		"volume_storage":              haVolumeUnits,
		"power":                       {"mW", "W", "kW", "MW", "GW", "TW"},
		"energy":                      haEnergyUnits,
		"energy_storage":              haEnergyUnits,
		"voltage":                     {"V", "mV", "µV", "kV", "MV"},
		"current":                     {"A", "mA"},
		"frequency":                   {"Hz", "kHz", "MHz", "GHz"},
		"duration":                    {"d", "h", "min", "s", "ms"},
		"signal_strength":             {"dB", "dBm"},
		"apparent_power":              {"VA"},
		"reactive_power":              {"var"},
		"illuminance":                 {"lx"},
		"carbon_dioxide":              {"ppm"},
		"carbon_monoxide":             {"ppm"},
		"power_factor":                {"%", ""},
		"aqi":                         {""},
		"ph":                          {""},
		"area":                        {"m²", "cm²", "km²", "mm²", "in²", "ft²", "yd²", "mi²", "ac", "ha"},
		"blood_glucose_concentration": {"mg/dL", "mmol/L"},
		"data_rate":                   {"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "B/s", "kB/s", "MB/s", "GB/s", "KiB/s", "MiB/s", "GiB/s"},
		"data_size": {"bit", "kbit", "Mbit", "Gbit", "B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB",
			"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"},
		"distance":                         {"mm", "cm", "m", "km", "in", "ft", "yd", "mi", "nmi"},
		"irradiance":                       {"W/m²", "BTU/(h⋅ft²)"},
		"monetary":                         nil,
		"nitrogen_dioxide":                 haMicrogramsPerCubicMetre,
		"nitrogen_monoxide":                haMicrogramsPerCubicMetre,
		"nitrous_oxide":                    haMicrogramsPerCubicMetre,
		"ozone":                            haMicrogramsPerCubicMetre,
		"pm1":                              haMicrogramsPerCubicMetre,
		"pm25":                             haMicrogramsPerCubicMetre,
		"pm10":                             haMicrogramsPerCubicMetre,
		"sulphur_dioxide":                  haMicrogramsPerCubicMetre,
		"volatile_organic_compounds":       haMicrogramsPerCubicMetre,
		"volatile_organic_compounds_parts": {"ppb", "ppm"},
		"precipitation":                    {"cm", "in", "mm"},
		"precipitation_intensity":          haVolumetricFluxUnits,
		"sound_pressure":                   {"dB", "dBA"},
		"speed":                            append(slices.Clone(haSpeedUnits), haVolumetricFluxUnits...),
		"weight":                           {"g", "kg", "mg", "µg", "oz", "lb", "st"},
		"wind_speed":                       haSpeedUnits,
	}
	haBinaryClasses = []string{"battery", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door",
		"garage_door", "gas", "heat", "light", "lock", "moisture", "motion", "moving", "occupancy", "opening", "plug",
		"power", "presence", "problem", "running", "safety", "smoke", "sound", "tamper", "update", "vibration", "window"}
	haSwitchClasses = []string{"outlet", "switch"}
	// haTotalClasses count up: their state class is total_increasing, never
	// measurement.
	haTotalClasses = []string{"energy", "water", "gas"}
	// haTotalOnlyClasses are totals that may go down: Home Assistant
	// takes no measurement of them (volume: total or total_increasing;
	// monetary: total only).
	haTotalOnlyClasses = []string{"volume", "monetary"}
)

// haUnitless reports whether a device class takes no unit.
func haUnitless(class string) bool { return slices.Equal(haSensorClasses[class], []string{""}) }

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
	switch {
	case slices.Contains(haTotalClasses, class):
		return "total_increasing"
	case slices.Contains(haTotalOnlyClasses, class):
		return "total"
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
		// A class that takes no unit is announced without the
		// capability's (see haUnit).
		if units != nil && !haUnitless(class) && !slices.Contains(units, c.Unit) {
			unit := "no unit"
			if c.Unit != "" {
				unit = "the unit " + c.Unit
			}
			names := slices.Clone(units)
			if i := slices.Index(names, ""); i >= 0 {
				names[i] = "none"
			}
			return fmt.Errorf("device class %s takes the units %s; this capability has %s", class, strings.Join(names, ", "), unit)
		}
	default:
		return fmt.Errorf("a %s capability takes no device class; only bool and number ones do", c.Type)
	}
	return nil
}
