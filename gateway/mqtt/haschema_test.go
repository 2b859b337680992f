package mqtt

// A check of Home Assistant MQTT discovery configs against the schema of
// each component, as Home Assistant's MQTT discovery documentation gives
// it: required keys, the keys each component knows, the types of values,
// device classes and the units each takes. No Home Assistant runs here,
// so this is the peer: its tables are written from the documentation, not
// taken from the code under test.

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

var (
	haCommonKeys = []string{"name", "unique_id", "object_id", "default_entity_id", "device", "origin", "availability",
		"availability_topic", "payload_available", "payload_not_available", "availability_mode", "availability_template",
		"json_attributes_topic", "json_attributes_template", "qos", "encoding", "entity_category", "enabled_by_default",
		"icon", "entity_picture"}
	haComponentKeys = map[string][]string{
		"sensor": {"state_topic", "value_template", "unit_of_measurement", "device_class", "state_class",
			"suggested_display_precision", "expire_after", "force_update", "last_reset_value_template", "options"},
		"binary_sensor": {"state_topic", "value_template", "payload_on", "payload_off", "device_class", "off_delay",
			"expire_after", "force_update"},
		"switch": {"command_topic", "state_topic", "payload_on", "payload_off", "state_on", "state_off", "value_template",
			"optimistic", "retain", "command_template", "device_class"},
		"number": {"command_topic", "state_topic", "min", "max", "step", "mode", "unit_of_measurement", "device_class",
			"command_template", "value_template", "optimistic", "payload_reset", "retain"},
		"select": {"command_topic", "options", "state_topic", "value_template", "command_template", "optimistic", "retain"},
		// text is not in the stored notes; its keys are Home Assistant's
		// text platform as remembered.
		"text": {"command_topic", "state_topic", "min", "max", "mode", "pattern", "command_template", "value_template", "retain"},
	}
	haRequired = map[string][]string{
		"sensor":        {"state_topic"},
		"binary_sensor": {"state_topic"},
		"switch":        {"command_topic"},
		"number":        {"command_topic"},
		"select":        {"command_topic", "options"},
		"text":          {"command_topic"},
	}
	pressureUnits = []string{"Pa", "kPa", "hPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi"}
	volumeUnits   = []string{"L", "mL", "gal", "fl. oz.", "m³", "ft³", "CCF"}
	energyUnits   = []string{"J", "kJ", "MJ", "GJ", "mWh", "Wh", "kWh", "MWh", "GWh", "TWh", "cal", "kcal", "Mcal", "Gcal"}
	// docSensorUnits are the sensor device classes whose units the
	// documentation lists.
	docSensorUnits = map[string][]string{
		"temperature": {"°C", "°F", "K"}, "humidity": {"%"}, "moisture": {"%"}, "battery": {"%"},
		"pressure": pressureUnits, "atmospheric_pressure": pressureUnits,
		"volume_flow_rate": {"m³/h", "ft³/min", "L/min", "gal/min", "mL/s"},
		"water":            {"L", "gal", "m³", "ft³", "CCF"}, "volume": volumeUnits, "volume_storage": volumeUnits,
		"power": {"mW", "W", "kW", "MW", "GW", "TW"}, "energy": energyUnits, "energy_storage": energyUnits,
		"voltage": {"V", "mV", "µV", "kV", "MV"}, "current": {"A", "mA"}, "frequency": {"Hz", "kHz", "MHz", "GHz"},
		"duration": {"d", "h", "min", "s", "ms"}, "signal_strength": {"dB", "dBm"}, "apparent_power": {"VA"},
		"reactive_power": {"var"}, "gas": {"m³", "ft³", "CCF"}, "illuminance": {"lx"},
		"carbon_dioxide": {"ppm"}, "carbon_monoxide": {"ppm"},
		// The classes the documentation names without units, from Home
		// Assistant's sensor constants (DEVICE_CLASS_UNITS); "" is no unit.
		"power_factor": {"%", ""}, "distance": {"mm", "cm", "m", "km", "in", "ft", "yd", "mi", "nmi"},
		"nitrogen_dioxide": {"µg/m³"}, "ozone": {"µg/m³"}, "pm25": {"µg/m³"}, "pm10": {"µg/m³"},
		"volatile_organic_compounds_parts": {"ppb", "ppm"}, "weight": {"g", "kg", "mg", "µg", "oz", "lb", "st"},
		"precipitation": {"cm", "in", "mm"}, "sound_pressure": {"dB", "dBA"},
	}
	// docSensorUnitless take no unit at all (DEVICE_CLASS_UNITS: {None}).
	docSensorUnitless = []string{"aqi", "ph"}
	// docSensorOther are the other sensor device classes it names.
	docSensorOther = []string{"aqi", "area", "blood_glucose_concentration", "data_rate", "data_size",
		"date", "enum", "irradiance", "monetary", "nitrogen_monoxide", "nitrous_oxide",
		"ph", "pm1", "precipitation_intensity", "speed",
		"sulphur_dioxide", "timestamp", "volatile_organic_compounds", "wind_speed"}
	// docTotalOnly are the classes whose state class may not be
	// measurement (DEVICE_CLASS_STATE_CLASSES).
	docTotalOnly     = []string{"energy", "water", "gas", "volume", "monetary"}
	docBinaryClasses = []string{"battery", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door",
		"garage_door", "gas", "heat", "light", "lock", "moisture", "motion", "moving", "occupancy", "opening", "plug",
		"power", "presence", "problem", "running", "safety", "smoke", "sound", "tamper", "update", "vibration", "window"}
	haObjectID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// haConfigProblems checks one discovery message: its topic
// (<prefix>/<component>/<object_id>/config) and its JSON config. It
// returns what is wrong, and the component and config when they could be
// read.
func haConfigProblems(haPrefix, topic string, payload []byte) (string, map[string]any, []string) {
	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	rest, ok := strings.CutPrefix(topic, haPrefix+"/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[2] != "config" {
		return "", nil, []string{"topic " + topic + " is not " + haPrefix + "/<component>/<object_id>/config"}
	}
	component, objectID := parts[0], parts[1]
	allowed, known := haComponentKeys[component]
	if !known {
		return component, nil, []string{"unknown component " + component}
	}
	if !haObjectID.MatchString(objectID) {
		badf("object id %q is not [a-zA-Z0-9_-]", objectID)
	}
	var cfg map[string]any
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.UseNumber()
	if err := dec.Decode(&cfg); err != nil {
		return component, nil, []string{"payload is not a JSON object: " + err.Error()}
	}
	for _, k := range haRequired[component] {
		if _, ok := cfg[k]; !ok {
			badf("required key %s is missing", k)
		}
	}
	for k, v := range cfg {
		if !slices.Contains(allowed, k) && !slices.Contains(haCommonKeys, k) {
			badf("key %s is not one %s knows", k, component)
		}
		if strings.HasSuffix(k, "_topic") {
			if s, ok := v.(string); !ok || s == "" || strings.ContainsAny(s, "#+") {
				badf("%s = %v is not a topic name", k, v)
			}
		}
		if strings.HasSuffix(k, "_template") {
			if _, ok := v.(string); !ok {
				badf("%s is not text", k)
			}
		}
	}
	if id, _ := cfg["unique_id"].(string); id != objectID {
		badf("unique_id %q is not the object id %q", id, objectID)
	}
	if _, ok := cfg["name"].(string); !ok {
		badf("name is not text")
	}
	if v, ok := cfg["optimistic"]; ok && v != false {
		badf("optimistic is %v; the gateway's entities are never optimistic", v)
	}
	if v, ok := cfg["retain"]; ok && v != false {
		badf("retain is %v; a retained command is refused", v)
	}
	if ec, ok := cfg["entity_category"]; ok && ec != "config" && ec != "diagnostic" {
		badf("entity_category %v is not config or diagnostic", ec)
	}
	if av, ok := cfg["availability"]; ok {
		list, ok := av.([]any)
		if !ok || len(list) == 0 {
			badf("availability is not a list of topics")
		}
		for _, a := range list {
			m, ok := a.(map[string]any)
			if t, _ := m["topic"].(string); !ok || t == "" {
				badf("availability entry %v has no topic", a)
			}
		}
		if m, ok := cfg["availability_mode"]; ok && m != "all" && m != "any" && m != "latest" {
			badf("availability_mode %v is not all, any or latest", m)
		}
		if _, both := cfg["availability_topic"]; both {
			badf("availability and availability_topic are both given")
		}
	}
	bad = append(bad, haDeviceProblems(cfg)...)
	bad = append(bad, haClassProblems(component, cfg)...)
	if component == "number" {
		lo, _ := num(cfg["min"])
		hi, _ := num(cfg["max"])
		if _, ok := cfg["min"]; ok && lo >= hi {
			badf("min %v is not below max %v", lo, hi)
		}
		if step, ok := num(cfg["step"]); ok && step < 0.001 {
			badf("step %v is under 0.001", step)
		}
		if m, ok := cfg["mode"]; ok && m != "auto" && m != "box" && m != "slider" {
			badf("mode %v is not auto, box or slider", m)
		}
	}
	if component == "select" {
		opts, ok := cfg["options"].([]any)
		if !ok || len(opts) == 0 {
			badf("options is not a list of choices")
		}
	}
	return component, cfg, bad
}

func num(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// haDeviceProblems checks the device block: identifiers and a name, a
// configuration_url Home Assistant opens, a via_device given as text.
func haDeviceProblems(cfg map[string]any) []string {
	var bad []string
	dev, ok := cfg["device"].(map[string]any)
	if !ok {
		return []string{"no device block"}
	}
	ids, ok := dev["identifiers"].([]any)
	if !ok || len(ids) == 0 {
		bad = append(bad, "device has no identifiers")
	}
	for _, id := range ids {
		if s, ok := id.(string); !ok || s == "" {
			bad = append(bad, fmt.Sprintf("device identifier %v is not text", id))
		}
	}
	if n, ok := dev["name"].(string); !ok || n == "" {
		bad = append(bad, "device has no name")
	}
	if u, ok := dev["configuration_url"]; ok {
		s, _ := u.(string)
		pu, err := url.Parse(s)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https" && pu.Scheme != "homeassistant") {
			bad = append(bad, fmt.Sprintf("configuration_url %v is not http://, https:// or homeassistant://", u))
		}
	}
	if v, ok := dev["via_device"]; ok {
		if s, ok := v.(string); !ok || s == "" {
			bad = append(bad, "via_device is not an identifier")
		}
	}
	return bad
}

// haClassProblems checks device_class, unit_of_measurement, state_class
// and options against the documentation's lists.
func haClassProblems(component string, cfg map[string]any) []string {
	var bad []string
	class, hasClass := cfg["device_class"].(string)
	unit, hasUnit := cfg["unit_of_measurement"].(string)
	stateClass, hasState := cfg["state_class"].(string)
	switch component {
	case "binary_sensor":
		if hasClass && !slices.Contains(docBinaryClasses, class) {
			bad = append(bad, "device_class "+class+" is not a binary sensor's")
		}
	case "switch":
		if hasClass && class != "outlet" && class != "switch" {
			bad = append(bad, "device_class "+class+" is not a switch's")
		}
	case "sensor", "number":
		units, listed := docSensorUnits[class]
		if hasClass && !listed && !slices.Contains(docSensorOther, class) {
			bad = append(bad, "device_class "+class+" is not a sensor's")
		}
		if hasClass && hasUnit && slices.Contains(docSensorUnitless, class) {
			bad = append(bad, fmt.Sprintf("device class %s takes no unit, and has %q", class, unit))
		}
		if hasClass && listed && !slices.Contains(units, unit) {
			bad = append(bad, fmt.Sprintf("unit %q is not one of device class %s's: %s", unit, class, strings.Join(units, ", ")))
		}
	}
	if hasState {
		if !slices.Contains([]string{"measurement", "total", "total_increasing"}, stateClass) {
			bad = append(bad, "state_class "+stateClass+" is not measurement, total or total_increasing")
		}
		if stateClass == "measurement" && slices.Contains(docTotalOnly, class) {
			bad = append(bad, "device class "+class+" is a total; its state_class cannot be measurement")
		}
		if class == "monetary" && stateClass != "total" {
			bad = append(bad, "device class monetary takes only the state_class total")
		}
	}
	if _, ok := cfg["options"]; ok && component == "sensor" {
		if class != "enum" {
			bad = append(bad, "options without device_class enum")
		}
		if hasUnit || hasState {
			bad = append(bad, "options with a unit or a state_class")
		}
	}
	return bad
}
