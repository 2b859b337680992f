package mqtt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// HomeAssistant configures Home Assistant's MQTT discovery on the broker.
// Every capability of every device is announced, retained, as an entity of
// one Home Assistant device per Shadowgate device: a sensor as a sensor or
// binary_sensor, a bool actuator as a switch, a number as a number, an enum
// as a select, a string as a text; and beside each actuator a sensor that
// says its last outcome. An entity's command topic is the governed
// cmd/<device>/<capability>, so Home Assistant's commands are judged and
// journaled like any other, as its MQTT user; its state topic carries only
// what the gateway believes (a good reading, or an act the world
// confirmed), never what was merely asked for.
type HomeAssistant struct {
	// Version is the gateway's version, told as the software's; "" takes
	// the module's from the build, if it has one.
	Version string
	// Prefix is Home Assistant's discovery prefix. Default "homeassistant".
	Prefix string
	// GatewayID names the gateway in identifiers: "sg_<id>". Default the
	// broker's topic prefix with its slashes as underscores.
	GatewayID string
	// Devices are the devices to announce: the configured ones, online or
	// not, so that an offline device is an unavailable entity, not a
	// missing one.
	Devices []devices.Device
	// Models names each device's model by id (its driver's type). A device
	// without one is a "Shadowgate device".
	Models map[string]string
	// Classes sets the device class of a capability, by
	// "device.capability", over the one its unit suggests. Each must pass
	// CheckDeviceClass.
	Classes map[string]string
	// ConsoleURL is the console's address as Home Assistant's users reach
	// it ("http://gateway.local:8080"); each device's configuration_url is
	// its page there, and the gateway's the console. Empty leaves it out.
	ConsoleURL string
}

// The topics of the Home Assistant integration, relative to the broker's
// prefix. They are output topics: no client may publish there.
const (
	// TopicStatus is the gateway's availability, retained: "online" while
	// it serves, "offline" as it stops.
	TopicStatus = "status"
)

// HAModeTopic carries, retained, the gateway's mode as JSON:
// {"mode": "supervised", "since", "by", "expires"}.
const HAModeTopic = "ha/mode"

// HADeviceTopic carries, retained, whether a device is reachable:
// "online" or "offline", as its driver says. A device's entities are
// available while both it and the gateway are online. (Device ids begin
// with a letter or digit, so "_device" is never a device's level.)
func HADeviceTopic(device string) string { return "ha/_device/" + device }

// HAStateTopic carries, retained, what the gateway believes of a
// capability as Home Assistant reads it: "ON"/"OFF" for a bool, a number
// in plain decimal, the text of an enum or a string.
func HAStateTopic(device, capability string) string { return "ha/" + device + "/" + capability }

// HAOutcomeTopic carries, retained, the last outcome of an actuator's
// commands as JSON: {"outcome": "pending approval apr-…", ...}.
func HAOutcomeTopic(device, capability string) string {
	return "ha/" + device + "/" + capability + "/outcome"
}

// haEntity is one discovery config.
type haEntity struct {
	component string
	id        string // unique_id and object_id
	config    map[string]any
}

func (e haEntity) topic(prefix string) string {
	return prefix + "/" + e.component + "/" + e.id + "/config"
}

// haID joins parts into an id of [A-Za-z0-9_-], as Home Assistant's
// object ids must be: "_" between parts, "__" for an underscore within
// one. Every part begins with a letter or digit (device ids and
// capability names do), so that two lists of parts never give one id.
func haID(parts ...string) string {
	esc := make([]string, len(parts))
	for i, p := range parts {
		var b strings.Builder
		for _, r := range p {
			switch {
			case r == '_':
				b.WriteString("__")
			case r == '-' || r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
				b.WriteRune(r)
			default:
				b.WriteString("-" + strconv.FormatInt(int64(r), 16) + "-")
			}
		}
		esc[i] = b.String()
	}
	return strings.Join(esc, "_")
}

// title makes a capability name an entity name: "air_temp" -> "Air temp".
func title(s string) string {
	s = strings.NewReplacer("_", " ", "-", " ").Replace(s)
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// haVersion is the gateway's version for the origin and the gateway
// device, from the build, or "".
func haVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return ""
}

// haEntities are the discovery configs of everything the gateway
// announces, the gateway's own first, then each device's capabilities in
// the order of the configuration. A number's range and step come from its
// envelope in the engine's policy.
func (b *Broker) haEntities() []haEntity {
	ha := b.opts.HomeAssistant
	gw := haID("sg", ha.GatewayID)
	avail := []map[string]any{{"topic": b.opts.Prefix + TopicStatus, "payload_available": "online", "payload_not_available": "offline"}}
	origin := map[string]any{"name": "Shadowgate"}
	gwDev := map[string]any{"identifiers": []string{gw}, "name": "Shadowgate " + ha.GatewayID, "manufacturer": "Shadowgate",
		"model": "Shadowgate gateway"}
	v := ha.Version
	if v == "" {
		v = haVersion()
	}
	if v != "" {
		origin["sw_version"], gwDev["sw_version"] = v, v
	}
	if ha.ConsoleURL != "" {
		gwDev["configuration_url"] = ha.ConsoleURL
	}
	statusID := haID("sg", ha.GatewayID, "status")
	out := []haEntity{{component: "binary_sensor", id: statusID, config: map[string]any{
		"name": "Gateway", "unique_id": statusID, "state_topic": b.opts.Prefix + TopicStatus, "payload_on": "online", "payload_off": "offline",
		"device_class": "connectivity", "entity_category": "diagnostic", "device": gwDev, "origin": origin,
	}}}
	modeID := haID("sg", ha.GatewayID, "mode")
	out = append(out, haEntity{component: "sensor", id: modeID, config: map[string]any{
		"name": "Mode", "unique_id": modeID, "state_topic": b.opts.Prefix + HAModeTopic, "value_template": "{{ value_json.mode }}",
		"json_attributes_topic": b.opts.Prefix + HAModeTopic, "icon": "mdi:shield-check", "availability": avail,
		"device": gwDev, "origin": origin,
	}})
	for _, d := range ha.Devices {
		model := ha.Models[d.ID]
		if model == "" {
			model = "Shadowgate device"
		}
		dev := map[string]any{"identifiers": []string{haID("sg", ha.GatewayID, d.ID)}, "name": d.Name(), "manufacturer": "Shadowgate",
			"model": model, "via_device": gw}
		if d.Area != "" {
			dev["suggested_area"] = d.Area[strings.LastIndex(d.Area, "/")+1:]
		}
		if ha.ConsoleURL != "" {
			dev["configuration_url"] = ha.ConsoleURL + "/devices/" + url.PathEscape(d.ID)
		}
		devAvail := append(slices.Clone(avail), map[string]any{"topic": b.opts.Prefix + HADeviceTopic(d.ID),
			"payload_available": "online", "payload_not_available": "offline"})
		for _, c := range d.Capabilities {
			base := func(id string, name string) map[string]any {
				return map[string]any{"name": name, "unique_id": id, "availability": devAvail, "availability_mode": "all",
					"device": dev, "origin": origin, "json_attributes_topic": b.opts.Prefix + "state/" + d.ID + "/" + c.Name}
			}
			id := haID("sg", ha.GatewayID, d.ID, c.Name)
			cfg := base(id, title(c.Name))
			cfg["state_topic"] = b.opts.Prefix + HAStateTopic(d.ID, c.Name)
			component := b.haComponent(d, c, cfg)
			out = append(out, haEntity{component: component, id: id, config: cfg})
			if c.Kind != devices.KindActuator {
				continue
			}
			oid := haID("sg", ha.GatewayID, d.ID, c.Name, "outcome")
			ocfg := base(oid, title(c.Name)+" outcome")
			ocfg["state_topic"] = b.opts.Prefix + HAOutcomeTopic(d.ID, c.Name)
			ocfg["json_attributes_topic"] = ocfg["state_topic"]
			ocfg["value_template"] = "{{ value_json.outcome }}"
			ocfg["icon"] = "mdi:gavel"
			out = append(out, haEntity{component: "sensor", id: oid, config: ocfg})
		}
	}
	return out
}

// haComponent fills in what the component of a capability needs, and
// returns the component.
func (b *Broker) haComponent(d devices.Device, c devices.Capability, cfg map[string]any) string {
	class := b.opts.HomeAssistant.Classes[d.ID+"."+c.Name]
	if c.Kind != devices.KindActuator {
		if c.Poll > 0 {
			// A reading that stops coming shows as unavailable, not as
			// the last value for ever: three polls missed.
			cfg["expire_after"] = max(1, int(3*c.Poll.Seconds()))
		}
		switch c.Type {
		case value.TypeBool:
			cfg["payload_on"], cfg["payload_off"] = "ON", "OFF"
			if class != "" {
				cfg["device_class"] = class
			}
			return "binary_sensor"
		case value.TypeNumber:
			if class == "" {
				class = haClassFor(c)
			}
			if class != "" {
				cfg["device_class"] = class
			}
			if unit := b.haUnit(d, c, class); unit != "" {
				cfg["unit_of_measurement"] = unit
			}
			cfg["state_class"] = haStateClass(class)
		case value.TypeEnum:
			cfg["device_class"], cfg["options"] = "enum", slices.Clone(c.Enum)
		}
		return "sensor"
	}
	cfg["command_topic"] = b.opts.Prefix + "cmd/" + d.ID + "/" + c.Name
	cfg["retain"] = false
	switch c.Type {
	case value.TypeBool:
		// Home Assistant sends payload_on or payload_off: a bare JSON bool
		// is a command of the protocol.
		cfg["payload_on"], cfg["payload_off"] = "true", "false"
		cfg["state_on"], cfg["state_off"] = "ON", "OFF"
		cfg["optimistic"] = false
		if class != "" {
			cfg["device_class"] = class
		}
		return "switch"
	case value.TypeNumber:
		r, step, bounded := b.haNumberRange(d.ID, c.Name)
		// Home Assistant takes no step under 0.001; the envelope still
		// refuses a value off its own steps.
		cfg["min"], cfg["max"], cfg["step"] = r.lo, r.hi, max(step, 0.001)
		if !bounded {
			cfg["mode"] = "box"
		}
		if unit := b.haUnit(d, c, class); unit != "" {
			cfg["unit_of_measurement"] = unit
		}
		if class != "" {
			cfg["device_class"] = class
		}
		cfg["optimistic"] = false
		return "number"
	case value.TypeEnum:
		// A select sends the option's text; the protocol takes a JSON string.
		cfg["options"] = slices.Clone(c.Enum)
		cfg["command_template"] = "{{ value | to_json }}"
		cfg["optimistic"] = false
		return "select"
	}
	cfg["command_template"] = "{{ value | to_json }}"
	cfg["max"] = min(255, value.MaxStringLen)
	return "text"
}

// haUnit is the unit_of_measurement of a number of a device class, or "":
// its unit, but none for a class that takes none (ph, aqi), which Home
// Assistant refuses with any unit. The unit is left out with a warning,
// and the capability keeps it everywhere else.
func (b *Broker) haUnit(d devices.Device, c devices.Capability, class string) string {
	if c.Unit != "" && haUnitless(class) {
		b.log.Warn("home assistant unit left out: the device class takes none", "device_id", d.ID, "capability", c.Name,
			"device_class", class, "unit", c.Unit)
		return ""
	}
	return c.Unit
}

// haNumberRange is the range a number actuator is announced with: its
// envelope's, and where the envelope leaves a side open, a billion beyond
// the other side. Home Assistant's number needs max above min, so an
// envelope that pins one value (min = max) is announced as that value to
// one step above it (1 without a step), in a box, not a slider: Home
// Assistant shows the value and lets a person ask for another, which the
// judge refuses and the outcome sensor says so. It reports the range, the
// envelope's step, and whether the range is the envelope's own.
func (b *Broker) haNumberRange(device, capability string) (haRange, float64, bool) {
	r := haRange{lo: -1e9, hi: 1e9}
	p, ok := b.eng.Policy(device, capability)
	if !ok || p.Envelope == nil {
		return r, 0, false
	}
	env := p.Envelope
	r.min, r.hasMin, r.max, r.hasMax = env.Min, env.HasMin, env.Max, env.HasMax
	if env.HasMin {
		r.lo = env.Min
	}
	if env.HasMax {
		r.hi = env.Max
	}
	beyond := func(x float64) float64 { return max(1e9, math.Abs(x)) }
	switch {
	case r.lo < r.hi:
	case env.HasMin && !env.HasMax:
		r.hi = r.lo + beyond(r.lo)
	case env.HasMax && !env.HasMin:
		r.lo = r.hi - beyond(r.hi)
	default: // pinned
		step := env.Step
		if step <= 0 {
			step = 1
		}
		r.hi = r.lo + step
		if r.hi <= r.lo { // too large a value for the step to tell
			r.hi = r.lo + math.Abs(r.lo)
		}
		return r, env.Step, false
	}
	return r, env.Step, env.HasMin && env.HasMax
}

// haValue is a value as Home Assistant's state topic carries it.
func haValue(v value.Value) []byte {
	switch v.Type {
	case value.TypeBool:
		if v.Bool {
			return []byte("ON")
		}
		return []byte("OFF")
	case value.TypeNumber:
		return strconv.AppendFloat(nil, v.Num, 'f', -1, 64)
	}
	return []byte(v.Text)
}

// haRecord is the file that lists the discovery topics the gateway has
// announced, so that a later start removes the entities of devices that
// are gone (and all of them when the integration is turned off).
type haRecord struct {
	Topics []string `json:"topics"`
}

// maxRecorded bounds the topics a record keeps.
const maxRecorded = 1 << 14

func readHARecord(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the home assistant record: %w", err)
	}
	var r haRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("reading the home assistant record %s: %w", path, err)
	}
	return r.Topics, nil
}

// writeHARecord replaces the record atomically; no topics removes it.
func writeHARecord(path string, topics []string) error {
	if path == "" {
		return nil
	}
	if len(topics) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the home assistant record: %w", err)
		}
		return nil
	}
	data, err := json.Marshal(haRecord{Topics: topics})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".homeassistant-*")
	if err != nil {
		return fmt.Errorf("writing the home assistant record: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the home assistant record: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the home assistant record: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the home assistant record: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the home assistant record: %w", err)
	}
	return nil
}
