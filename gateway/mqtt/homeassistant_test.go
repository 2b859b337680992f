package mqtt

// Home Assistant discovery, met by the clients Home Assistant would be: a
// paho client as Home Assistant's MQTT user (subscribing to the discovery
// prefix, saying it is online, commanding a switch), and mosquitto_sub.
// No Home Assistant runs here; the configs are checked against the schema
// of each component in haschema_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// haOptions announces the test greenhouse (tank-1, valve-1, heater-1).
func haOptions(devs []devices.Device) *HomeAssistant {
	return &HomeAssistant{Prefix: "homeassistant", GatewayID: "test", Devices: devs,
		Models: map[string]string{"tank-1": "sim"}, ConsoleURL: "http://gateway.test:8080"}
}

// discovery collects the retained configs on homeassistant/# until it has
// want of them, or fails at the deadline.
func discovery(t *testing.T, ch <-chan paho.Message, want int) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	deadline := time.After(15 * time.Second)
	for len(got) < want {
		select {
		case m := <-ch:
			if strings.HasSuffix(m.Topic(), "/config") {
				got[m.Topic()] = m.Payload()
			}
		case <-deadline:
			t.Fatalf("%d discovery configs arrived, want %d: %v", len(got), want, slices.Sorted(mapsKeys(got)))
		}
	}
	return got
}

func mapsKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// waitFor reads ch until a message on topic satisfies ok, or fails at the
// deadline; it returns that message and the others it read on the way.
func waitFor(t *testing.T, ch <-chan paho.Message, topic, what string, ok func([]byte) bool) []paho.Message {
	t.Helper()
	deadline := time.After(15 * time.Second)
	var seen []paho.Message
	for {
		select {
		case m := <-ch:
			seen = append(seen, m)
			if m.Topic() == topic && ok(m.Payload()) {
				return seen
			}
		case <-deadline:
			var last []string
			for _, m := range seen {
				last = append(last, m.Topic()+"="+string(m.Payload()))
			}
			t.Fatalf("no %s on %s; saw %v", what, topic, last)
		}
	}
}

func outcomeIs(prefix string) func([]byte) bool {
	return func(p []byte) bool {
		var o haOutcome
		return json.Unmarshal(p, &o) == nil && strings.HasPrefix(o.Outcome, prefix)
	}
}

func TestHomeAssistantDiscoveryMeetsTheSchema(t *testing.T) {
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
	hass := gw.mustClient("hass", "hass-password")
	// The gateway device's status and mode, and per device: tank-1's level;
	// valve-1 and heater-1 each a switch and its outcome sensor.
	configs := discovery(t, subscribe(t, hass, "homeassistant/#"), 7)
	byComponent := map[string]int{}
	availability := map[string]bool{}
	ids := map[string]bool{}
	states := map[string]bool{}
	for topic, payload := range configs {
		component, cfg, bad := haConfigProblems("homeassistant", topic, payload)
		for _, b := range bad {
			t.Errorf("%s: %s\n%s", topic, b, payload)
		}
		if cfg == nil {
			continue
		}
		byComponent[component]++
		id, _ := cfg["unique_id"].(string)
		if ids[id] {
			t.Errorf("unique_id %s is given twice", id)
		}
		ids[id] = true
		// Every topic names something that exists: the status topic, a
		// capability's state, outcome or command topic.
		for k, v := range cfg {
			s, _ := v.(string)
			if !strings.HasSuffix(k, "_topic") {
				continue
			}
			rel, under := strings.CutPrefix(s, prefix)
			if !under {
				t.Errorf("%s: %s = %s is not one of the gateway's topics", topic, k, s)
				continue
			}
			r := command.ParseRoute(rel)
			parts := strings.Split(rel, "/")
			switch {
			case k == "command_topic":
				if _, c, ok := gw.eng.Capability(r.Device, r.Capability); r.Kind != "cmd" || !ok || c.Kind != devices.KindActuator {
					t.Errorf("%s: command_topic %s is not an actuator's cmd/ topic", topic, s)
				}
			case rel == TopicStatus, rel == HAModeTopic:
			case parts[0] == "state" && len(parts) == 3, parts[0] == "ha" && (len(parts) == 3 || len(parts) == 4 && parts[3] == "outcome"):
				if _, _, ok := gw.eng.Capability(parts[1], parts[2]); !ok {
					t.Errorf("%s: %s %s names no capability", topic, k, s)
				}
				if k == "state_topic" {
					states[s] = true
				}
			default:
				t.Errorf("%s: %s = %s is no topic the gateway publishes", topic, k, s)
			}
		}
		// Available while the gateway is, and the device when there is one.
		avail, _ := cfg["availability"].([]any)
		var atopics []string
		for _, a := range avail {
			at, _ := a.(map[string]any)["topic"].(string)
			atopics = append(atopics, at)
			availability[at] = true
		}
		dev, _ := cfg["device"].(map[string]any)
		ids, _ := dev["identifiers"].([]any)
		switch {
		case jsonEqual(ids, []string{"sg_test"}) && component == "binary_sensor":
			if len(atopics) != 0 {
				t.Errorf("%s: the gateway's status is available when the gateway is offline; availability %v", topic, atopics)
			}
		case jsonEqual(ids, []string{"sg_test"}):
			if !slices.Equal(atopics, []string{prefix + TopicStatus}) {
				t.Errorf("%s: availability %v, want the gateway's status", topic, atopics)
			}
		default:
			id, _ := ids[0].(string)
			device := strings.TrimPrefix(id, "sg_test_")
			if !slices.Equal(atopics, []string{prefix + TopicStatus, prefix + HADeviceTopic(device)}) || cfg["availability_mode"] != "all" {
				t.Errorf("%s: availability %v (mode %v), want the gateway's status and %s's, all", topic, atopics, cfg["availability_mode"], device)
			}
		}
		if !jsonEqual(dev["identifiers"], []string{"sg_test"}) && dev["via_device"] != "sg_test" {
			t.Errorf("%s: via_device = %v, want the gateway sg_test", topic, dev["via_device"])
		}
	}
	if want := map[string]int{"binary_sensor": 1, "sensor": 4, "switch": 2}; !mapsEqual(byComponent, want) {
		t.Errorf("components = %v, want %v", byComponent, want)
	}
	// Every availability topic holds a retained online: the gateway's
	// status (its birth message), and each device's.
	if len(availability) != 4 {
		t.Errorf("availability topics %v, want the gateway's and 3 devices'", availability)
	}
	for at := range availability {
		st := subscribe(t, hass, at)
		if m := next(t, st, at); string(m.Payload()) != "online" || !m.Retained() {
			t.Errorf("%s = %q (retained %v), want a retained online", at, m.Payload(), m.Retained())
		}
	}
	// The gateway's mode is the mode sensor's state.
	mode := subscribe(t, hass, prefix+HAModeTopic)
	if m := next(t, mode, "the mode"); !strings.Contains(string(m.Payload()), `"mode":"supervised"`) {
		t.Errorf("mode = %s, want supervised", m.Payload())
	}
	defer func() {
		// A change of mode reaches it too (observe narrows: at once).
		if _, _, err := gw.eng.SetMode(context.Background(), "console:adam", "observe", "test"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, mode, prefix+HAModeTopic, "observe", func(p []byte) bool {
			return strings.Contains(string(p), `"mode":"observe"`) && strings.Contains(string(p), `"by":"console:adam"`)
		})
	}()
	// A reading reaches the state topic Home Assistant reads, as a plain
	// number; tank-1 is read through the governed path.
	if !states[prefix+HAStateTopic("tank-1", "level")] {
		t.Fatalf("no config reads %s", HAStateTopic("tank-1", "level"))
	}
	level := subscribe(t, hass, prefix+HAStateTopic("tank-1", "level"))
	alice := gw.mustClient("alice", "alice-password")
	publish(t, alice, prefix+"cmd/tank-1/level", 1, "")
	m := next(t, level, "tank-1's level")
	var f float64
	if err := json.Unmarshal(m.Payload(), &f); err != nil {
		t.Errorf("tank-1's level on its state topic = %q: %v", m.Payload(), err)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestHomeAssistantEveryKindOfCapability checks the configs of every
// kind and type of capability against the schema, and what each says.
func TestHomeAssistantEveryKindOfCapability(t *testing.T) {
	// plc-2's setpoint has an envelope, which the number's range and step
	// come from; no device needs to be reached to announce it.
	eng, err := runtime.New(t.Context(), runtime.Options{Registry: devices.NewRegistry(), Journal: runtimetest.NewMemJournal(),
		Policies: map[string]runtime.CapPolicy{"plc-2.setpoint": {Envelope: &governance.Envelope{
			Type: value.TypeNumber, Min: 5, Max: 60, HasMin: true, HasMax: true, Step: 0.5}}}})
	if err != nil {
		t.Fatal(err)
	}
	num := func(name, unit string, kind devices.Kind) devices.Capability {
		return devices.Capability{Name: name, Kind: kind, Type: value.TypeNumber, Unit: unit, Poll: 10 * time.Second}
	}
	devs := []devices.Device{
		{ID: "probe_1", Area: "site/hall", Capabilities: []devices.Capability{
			num("temp", "°C", devices.KindSensor), num("air_humidity", "%", devices.KindSensor), num("flow", "L/min", devices.KindSensor),
			num("count", "", devices.KindSensor), num("meter", "L", devices.KindSensor), num("acidity", "pH", devices.KindSensor),
			{Name: "leak", Kind: devices.KindSensor, Type: value.TypeBool, Poll: 5 * time.Second},
			{Name: "state", Kind: devices.KindSensor, Type: value.TypeEnum, Enum: []string{"idle", "run"}, Poll: 5 * time.Second},
			{Name: "label", Kind: devices.KindSensor, Type: value.TypeString, Poll: 5 * time.Second},
		}},
		{ID: "plc-2", Label: "Kiln controller", Capabilities: []devices.Capability{
			{Name: "setpoint", Kind: devices.KindActuator, Type: value.TypeNumber, Unit: "°C"},
			{Name: "level", Kind: devices.KindActuator, Type: value.TypeNumber},
			{Name: "program", Kind: devices.KindActuator, Type: value.TypeEnum, Enum: []string{"auto", "manual", "off"}},
			{Name: "note", Kind: devices.KindActuator, Type: value.TypeString},
			{Name: "relay", Kind: devices.KindActuator, Type: value.TypeBool},
		}},
	}
	ha := haOptions(devs)
	ha.Version = "v1.2.3"
	ha.Classes = map[string]string{"probe_1.meter": "water", "probe_1.acidity": "ph", "probe_1.leak": "moisture", "plc-2.relay": "outlet"}
	b, err := New(eng, Options{Prefix: prefix, HomeAssistant: ha})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, e := range b.haEntities() {
		payload, err := json.Marshal(e.config)
		if err != nil {
			t.Fatal(err)
		}
		_, cfg, bad := haConfigProblems("homeassistant", e.topic("homeassistant"), payload)
		for _, p := range bad {
			t.Errorf("%s: %s\n%s", e.topic("homeassistant"), p, payload)
		}
		got[e.topic("homeassistant")] = cfg
	}
	want := map[string]map[string]any{
		"homeassistant/sensor/sg_test_probe__1_temp/config": {"device_class": "temperature", "unit_of_measurement": "°C", "state_class": "measurement", "expire_after": 30},
		// ph takes no unit: the capability's pH is left out.
		"homeassistant/sensor/sg_test_probe__1_acidity/config":       {"device_class": "ph", "unit_of_measurement": nil},
		"homeassistant/sensor/sg_test_probe__1_air__humidity/config": {"device_class": "humidity", "unit_of_measurement": "%"},
		"homeassistant/sensor/sg_test_probe__1_flow/config":          {"device_class": "volume_flow_rate", "unit_of_measurement": "L/min"},
		"homeassistant/sensor/sg_test_probe__1_count/config":         {"state_class": "measurement", "device_class": nil, "unit_of_measurement": nil},
		"homeassistant/sensor/sg_test_probe__1_meter/config":         {"device_class": "water", "state_class": "total_increasing"},
		// Every polled sensor expires after three polls missed.
		"homeassistant/binary_sensor/sg_test_probe__1_leak/config": {"device_class": "moisture", "payload_on": "ON", "expire_after": 15},
		"homeassistant/sensor/sg_test_probe__1_state/config":       {"device_class": "enum", "options": []any{"idle", "run"}, "expire_after": 15},
		"homeassistant/sensor/sg_test_probe__1_label/config":       {"device_class": nil, "expire_after": 15},
		"homeassistant/number/sg_test_plc-2_setpoint/config": {"min": 5, "max": 60, "step": 0.5, "mode": nil, "unit_of_measurement": "°C",
			"command_topic": prefix + "cmd/plc-2/setpoint", "optimistic": false},
		"homeassistant/number/sg_test_plc-2_level/config":         {"min": -1e9, "max": 1e9, "step": 0.001, "mode": "box"},
		"homeassistant/select/sg_test_plc-2_program/config":       {"options": []any{"auto", "manual", "off"}, "command_template": "{{ value | to_json }}"},
		"homeassistant/text/sg_test_plc-2_note/config":            {"command_topic": prefix + "cmd/plc-2/note"},
		"homeassistant/switch/sg_test_plc-2_relay/config":         {"device_class": "outlet", "payload_on": "true", "state_on": "ON", "optimistic": false},
		"homeassistant/sensor/sg_test_plc-2_relay_outcome/config": {"state_topic": prefix + "ha/plc-2/relay/outcome"},
	}
	for topic, keys := range want {
		cfg, ok := got[topic]
		if !ok {
			t.Errorf("no config on %s", topic)
			continue
		}
		for k, v := range keys {
			gotV, has := cfg[k]
			if v == nil && has || v != nil && !jsonEqual(gotV, v) {
				t.Errorf("%s: %s = %v, want %v", topic, k, gotV, v)
			}
		}
	}
	if n, want := len(got), 2+9+5*2; n != want {
		t.Errorf("%d configs, want %d", n, want)
	}
	dev := got["homeassistant/sensor/sg_test_probe__1_temp/config"]["device"].(map[string]any)
	if dev["suggested_area"] != "hall" || dev["configuration_url"] != "http://gateway.test:8080/devices/probe_1" || dev["via_device"] != "sg_test" ||
		dev["name"] != "probe_1" {
		t.Errorf("probe_1's device block = %v", dev)
	}
	gwDev := got["homeassistant/binary_sensor/sg_test_status/config"]["device"].(map[string]any)
	if gwDev["sw_version"] != "v1.2.3" {
		t.Errorf("the gateway's device block = %v, want its version v1.2.3", gwDev)
	}
	// A device with a label is named by it; its ids stay its own.
	dev = got["homeassistant/switch/sg_test_plc-2_relay/config"]["device"].(map[string]any)
	if dev["name"] != "Kiln controller" || !jsonEqual(dev["identifiers"], []any{"sg_test_plc-2"}) {
		t.Errorf("plc-2's device block = %v, want named by its label", dev)
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestHomeAssistantSwitchIsGoverned commands a switch as Home Assistant
// does: on the discovered command topic, with the discovered payload. The
// command asks; the outcome sensor says so and the switch stays off until
// a person approves and the read-back confirms it on.
func TestHomeAssistantSwitchIsGoverned(t *testing.T) {
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
	hass := gw.mustClient("hass", "hass-password")
	configs := discovery(t, subscribe(t, hass, "homeassistant/#"), 7)
	var sw map[string]any
	if err := json.Unmarshal(configs["homeassistant/switch/sg_test_heater-1_on/config"], &sw); err != nil {
		t.Fatalf("heater-1's switch: %v", err)
	}
	stateTopic, commandTopic := sw["state_topic"].(string), sw["command_topic"].(string)
	outcomeTopic := prefix + HAOutcomeTopic("heater-1", "on")
	live := subscribe(t, hass, prefix+"ha/heater-1/#")

	publish(t, hass, commandTopic, 0, sw["payload_on"].(string))
	seen := waitFor(t, live, outcomeTopic, "pending approval", outcomeIs("pending approval "))
	for _, m := range seen {
		if m.Topic() == stateTopic && string(m.Payload()) == sw["state_on"] {
			t.Fatalf("the switch went %s before anyone approved", m.Payload())
		}
	}
	var pending haOutcome
	if err := json.Unmarshal(seen[len(seen)-1].Payload(), &pending); err != nil {
		t.Fatal(err)
	}
	ap, ok := gw.eng.Approval(pending.Approval)
	if !ok || ap.Principal != "mqtt:hass" || pending.By != "mqtt:hass" || !strings.HasSuffix(pending.Outcome, ap.ID) {
		t.Fatalf("outcome %+v, approval %+v: want one asked by mqtt:hass", pending, ap)
	}
	if n := gw.g.Count("write", "heater-1", "on"); n != 0 {
		t.Fatalf("%d writes before the approval", n)
	}

	// A second command while the first waits is refused, and says so.
	publish(t, hass, commandTopic, 0, sw["payload_off"].(string))
	seen = waitFor(t, live, outcomeTopic, "a refusal", outcomeIs("refused: "))
	for _, m := range seen {
		if m.Topic() == stateTopic && string(m.Payload()) == sw["state_on"] {
			t.Fatalf("the switch went %s while its command waited for approval", m.Payload())
		}
	}

	if _, err := gw.eng.Answer(context.Background(), ap.ID, runtime.Answer{By: "console:april", Decision: runtime.Approve}); err != nil {
		t.Fatal(err)
	}
	seen = waitFor(t, live, outcomeTopic, "confirmed", outcomeIs("confirmed"))
	on := slices.IndexFunc(seen, func(m paho.Message) bool { return m.Topic() == stateTopic && string(m.Payload()) == sw["state_on"] })
	if on < 0 {
		t.Fatalf("the outcome is confirmed, and the state topic never said %v", sw["state_on"])
	}
	if n := gw.g.Count("write", "heater-1", "on"); n != 1 {
		t.Errorf("%d writes after the approval, want 1", n)
	}
}

// TestHomeAssistantRemovesWhatIsGone restarts the gateway without
// heater-1: when Home Assistant says it is online, heater-1's entities
// get empty configs, and the others are announced again.
func TestHomeAssistantRemovesWhatIsGone(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "homeassistant.json")
	first := startGW(t, gwOptions{dir: dir, ha: haOptions(greenhouse()), haRecord: record})
	discovery(t, subscribe(t, first.mustClient("hass", "hass-password"), "homeassistant/#"), 7)
	first.stop()

	second := startGW(t, gwOptions{dir: dir, ha: haOptions(greenhouse()[:2]), haRecord: record})
	hass := second.mustClient("hass", "hass-password")
	ch := subscribe(t, hass, "homeassistant/#")
	publish(t, hass, "homeassistant/status", 0, "online")
	gone := map[string]bool{"homeassistant/switch/sg_test_heater-1_on/config": true, "homeassistant/sensor/sg_test_heater-1_on_outcome/config": true}
	// What stays is announced again on the birth: a fresh publish, not the
	// retained copy handed to a new subscription.
	again := "homeassistant/switch/sg_test_valve-1_open/config"
	deadline := time.After(15 * time.Second)
	for len(gone) > 0 || again != "" {
		select {
		case m := <-ch:
			switch {
			case m.Topic() == again && !m.Retained() && len(m.Payload()) > 0:
				again = ""
			case gone[m.Topic()] && len(m.Payload()) == 0:
				delete(gone, m.Topic())
			case strings.Contains(m.Topic(), "heater"):
				t.Fatalf("%s = %q after heater-1 was removed", m.Topic(), m.Payload())
			}
		case <-deadline:
			t.Fatalf("not removed: %v; not announced again: %q", gone, again)
		}
	}
}

// TestHomeAssistantMosquittoSub reads the discovery configs with
// mosquitto_sub, a client that shares no code with the gateway.
func TestHomeAssistantMosquittoSub(t *testing.T) {
	sub := mosquittoTool(t, "mosquitto_sub")
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
	host, port, _ := net.SplitHostPort(gw.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sub, "-h", host, "-p", port, "-u", "hass", "-P", "hass-password", "-V", "mqttv311",
		"-t", "homeassistant/#", "-v", "-C", "7", "-W", "20").Output()
	if err != nil {
		t.Fatalf("mosquitto_sub: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 7 {
		t.Fatalf("mosquitto_sub read %d configs, want 7:\n%s", len(lines), out)
	}
	for _, l := range lines {
		topic, payload, _ := strings.Cut(l, " ")
		if _, _, bad := haConfigProblems("homeassistant", topic, []byte(payload)); len(bad) > 0 {
			t.Errorf("%s: %v", topic, bad)
		}
	}
}

// TestHomeAssistantConfigsCannotBeForged: while the integration is on, no
// client may publish under the discovery prefix (a forged config could
// point Home Assistant's switch past the judge), nor have a reply sent
// there; Home Assistant's own status stays open to it.
func TestHomeAssistantConfigsCannotBeForged(t *testing.T) {
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
	config := "homeassistant/switch/sg_test_heater-1_on/config"
	carl := gw.mustClient("carl", "carl-password") // carl may publish on "#"
	seen := subscribe(t, carl, "#")
	forged := `{"name":"FORGED","unique_id":"sg_test_heater-1_on","command_topic":"raw/heater"}`
	for _, topic := range []string{config, "homeassistant/switch/sg_test_new/config"} {
		tok := carl.Publish(topic, 0, true, forged)
		if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", topic, tok.Error())
		}
	}
	publish(t, carl, "homeassistant/status", 0, "online") // Home Assistant's birth: allowed
	publish(t, carl, "elsewhere/done", 0, "done")         // after the others, on one connection
	for _, m := range waitFor(t, seen, "elsewhere/done", "the end of carl's publishes", func([]byte) bool { return true }) {
		if strings.Contains(string(m.Payload()), "FORGED") {
			t.Fatalf("a forged config reached a subscriber on %s", m.Topic())
		}
	}
	fresh := subscribe(t, gw.mustClient("hass", "hass-password"), config)
	if m := next(t, fresh, "the retained config"); strings.Contains(string(m.Payload()), "FORGED") || len(m.Payload()) == 0 {
		t.Fatalf("%s = %s", config, m.Payload())
	}
	if n := gw.b.Stats().DeniedPublishes; n < 2 {
		t.Errorf("denied publishes = %d, want the 2 forged configs counted", n)
	}
	if why := gw.b.judgeResponseTopic(mustUser(t, gw, "hass"), config); !strings.Contains(why, "discovery") {
		t.Errorf("a response topic on a discovery config: %q, want it refused", why)
	}
}

func mustUser(t *testing.T, gw *testGW, name string) *access.User {
	t.Helper()
	u, ok := gw.b.userNamed(name)
	if !ok {
		t.Fatalf("no user %s", name)
	}
	return u
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestHomeAssistantGolden keeps every discovery config of the test
// greenhouse in testdata/homeassistant.golden, so that a change to what
// Home Assistant is told is reviewed as a diff. go test ./gateway/mqtt
// -run Golden -update rewrites it.
func TestHomeAssistantGolden(t *testing.T) {
	eng, _, j, users := testEngine(t, "")
	t.Cleanup(func() { _ = j.Close() })
	b, err := New(eng, Options{Prefix: prefix, Users: users, HomeAssistant: haOptions(greenhouse())})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, e := range b.haEntities() {
		payload, err := json.MarshalIndent(e.config, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "%s\n%s\n\n", e.topic("homeassistant"), payload)
	}
	golden := filepath.Join("testdata", "homeassistant.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./gateway/mqtt -run Golden -update writes it)", err)
	}
	if got := out.String(); got != string(want) {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		for i := range max(len(wl), len(gl)) {
			if i >= len(wl) || i >= len(gl) || wl[i] != gl[i] {
				t.Fatalf("discovery configs differ from %s at line %d:\nwant %q\ngot  %q\n(review, then -update)", golden, i+1,
					strings.Join(wl[i:min(i+3, len(wl))], "\n"), strings.Join(gl[i:min(i+3, len(gl))], "\n"))
			}
		}
	}
}

// TestHomeAssistantDeviceGoesUnavailable unplugs tank-1: its entities'
// availability topic says offline once the gateway sees it gone, and
// online when it is back.
func TestHomeAssistantDeviceGoesUnavailable(t *testing.T) {
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
	hass := gw.mustClient("hass", "hass-password")
	topic := prefix + HADeviceTopic("tank-1")
	ch := subscribe(t, hass, topic)
	if m := next(t, ch, "tank-1's availability"); string(m.Payload()) != "online" {
		t.Fatalf("%s = %q, want online", topic, m.Payload())
	}
	alice := gw.mustClient("alice", "alice-password")
	gw.g.SetFault("tank-1", devicetest.Fault{Offline: true})
	publish(t, alice, prefix+"cmd/tank-1/level", 1, "") // a step refreshes the registry
	waitFor(t, ch, topic, "offline", func(p []byte) bool { return string(p) == "offline" })
	gw.g.SetFault("tank-1", devicetest.Fault{})
	publish(t, alice, prefix+"cmd/tank-1/level", 1, "")
	waitFor(t, ch, topic, "online again", func(p []byte) bool { return string(p) == "online" })
}

// lastOutcome reads the retained outcome of an actuator as a new
// subscriber does.
func lastOutcome(t *testing.T, gw *testGW, device, capability string) haOutcome {
	t.Helper()
	fresh := subscribe(t, gw.mustClient("hass", "hass-password"), prefix+HAOutcomeTopic(device, capability))
	var o haOutcome
	if m := next(t, fresh, "the retained outcome"); json.Unmarshal(m.Payload(), &o) != nil {
		t.Fatalf("outcome %s is not JSON", m.Payload())
	}
	return o
}

// TestHomeAssistantApprovedCommandThatFailsSaysSo approves a command
// whose device went offline meanwhile: the write fails before it acts,
// without an attempt, and the outcome sensor says so instead of
// "approved …; acting" for ever.
func TestHomeAssistantApprovedCommandThatFailsSaysSo(t *testing.T) {
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
	hass := gw.mustClient("hass", "hass-password")
	outcome := prefix + HAOutcomeTopic("heater-1", "on")
	live := subscribe(t, hass, prefix+"ha/heater-1/#")
	replies := subscribe(t, hass, prefix+"reply/heater-1/on")
	publish(t, hass, prefix+"cmd/heater-1/on", 0, "true")
	seen := waitFor(t, live, outcome, "pending approval", outcomeIs("pending approval "))
	var pending haOutcome
	if err := json.Unmarshal(seen[len(seen)-1].Payload(), &pending); err != nil {
		t.Fatal(err)
	}
	// The reply comes once the approval can be answered.
	if r := nextReply(t, replies, "the pending reply"); r.Outcome != command.OutcomePendingApproval {
		t.Fatalf("reply %s %s, want pending approval", r.Outcome, r.Why)
	}
	gw.g.SetFault("heater-1", devicetest.Fault{Offline: true})
	if _, err := gw.eng.Answer(t.Context(), pending.Approval, runtime.Answer{By: "console:april", Decision: runtime.Approve}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, live, outcome, "failed", outcomeIs("failed: "))
	if o := lastOutcome(t, gw, "heater-1", "on"); !strings.HasPrefix(o.Outcome, "failed: ") {
		t.Errorf("retained outcome %q, want failed", o.Outcome)
	}
	if n := gw.g.Count("write", "heater-1", "on"); n != 0 {
		t.Errorf("%d writes to an offline heater", n)
	}
}

// TestHomeAssistantCommandsNotTakenAreSaid sends commands the broker
// turns away before the engine: Home Assistant reads no replies, so the
// outcome sensor of the actuator the topic names says why; a flood of
// them says so a bounded number of times.
func TestHomeAssistantCommandsNotTakenAreSaid(t *testing.T) {
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse()), burst: 2, perMinute: 1})
	hass := gw.mustClient("hass", "hass-password")
	outcome := prefix + HAOutcomeTopic("valve-1", "open")
	live := subscribe(t, hass, prefix+"ha/#")

	publish(t, hass, prefix+"cmd/valve-1/open", 0, "maybe")
	waitFor(t, live, outcome, "a malformed command said", outcomeIs("failed: payload"))
	publish(t, hass, prefix+"cmd/valve-1/open", 0, "true")
	waitFor(t, live, outcome, "confirmed", outcomeIs("confirmed"))
	publish(t, hass, prefix+"cmd/valve-1/open", 0, "false")
	seen := waitFor(t, live, outcome, "the rate limit said", outcomeIs("refused: rate limit: mqtt:hass"))
	var o haOutcome
	if err := json.Unmarshal(seen[len(seen)-1].Payload(), &o); err != nil || o.By != "mqtt:hass" {
		t.Errorf("outcome %s: by %q, want mqtt:hass", seen[len(seen)-1].Payload(), o.By)
	}
	for _, m := range seen {
		if m.Topic() != outcome && strings.HasSuffix(m.Topic(), "/outcome") {
			t.Errorf("a command to valve-1 is said on %s", m.Topic())
		}
	}

	// carl sends 40 retained commands: each is refused with a reply, and
	// only a few are said on the outcome topic that every Home Assistant
	// reads.
	carl := gw.mustClient("carl", "carl-password")
	replies := subscribe(t, carl, prefix+"reply/valve-1/open")
	const flood = 40
	for range flood {
		if tok := carl.Publish(prefix+"cmd/valve-1/open", 0, true, "true"); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	for i := range flood {
		if r := nextReply(t, replies, fmt.Sprintf("reply %d", i)); !strings.Contains(r.Why, "retained") {
			t.Fatalf("reply %d: %s %s", i, r.Outcome, r.Why)
		}
	}
	// Another user's command after the flood marks its end.
	publish(t, gw.mustClient("alice", "alice-password"), prefix+"cmd/valve-1/open", 0, "maybe")
	said := 0
	for _, m := range waitFor(t, live, outcome, "the end of the flood", outcomeIs("failed: payload")) {
		if m.Topic() == outcome && strings.Contains(string(m.Payload()), `"by":"mqtt:carl"`) {
			said++
		}
	}
	if said < 1 || said > 2 {
		t.Errorf("%d refused commands of carl said on %s, want 1 or 2 (its burst)", said, outcome)
	}
}

// TestHomeAssistantHearsOfflineAtStop stops the gateway while Home
// Assistant is subscribed to its status: it hears offline before its
// connection is closed.
func TestHomeAssistantHearsOfflineAtStop(t *testing.T) {
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
	ch := subscribe(t, gw.mustClient("hass", "hass-password"), prefix+TopicStatus)
	if m := next(t, ch, "the birth message"); string(m.Payload()) != "online" {
		t.Fatalf("%s = %q, want online", TopicStatus, m.Payload())
	}
	gw.stop()
	if m := next(t, ch, "offline"); string(m.Payload()) != "offline" {
		t.Errorf("%s = %q as the gateway stopped, want offline", TopicStatus, m.Payload())
	}
}

// TestHomeAssistantStartSaysTheLastOutcome restarts the gateway after a
// command was refused: the outcome sensor still says refused, not the
// older act's confirmed.
func TestHomeAssistantStartSaysTheLastOutcome(t *testing.T) {
	dir := t.TempDir()
	first := startGW(t, gwOptions{dir: dir, ha: haOptions(greenhouse())})
	hass := first.mustClient("hass", "hass-password")
	outcome := prefix + HAOutcomeTopic("valve-1", "open")
	live := subscribe(t, hass, prefix+"ha/valve-1/#")
	publish(t, hass, prefix+"cmd/valve-1/open", 0, "true")
	waitFor(t, live, outcome, "confirmed", outcomeIs("confirmed"))
	if _, _, err := first.eng.SetMode(t.Context(), "console:adam", "observe", "test"); err != nil {
		t.Fatal(err)
	}
	publish(t, hass, prefix+"cmd/valve-1/open", 0, "false")
	waitFor(t, live, outcome, "refused", outcomeIs("refused: "))
	first.stop()

	second := startGW(t, gwOptions{dir: dir, ha: haOptions(greenhouse())})
	if o := lastOutcome(t, second, "valve-1", "open"); !strings.HasPrefix(o.Outcome, "refused: ") {
		t.Errorf("after a restart the outcome is %q, want the refusal", o.Outcome)
	}
}

// TestHomeAssistantNumberRange announces numbers whose envelope Home
// Assistant's number could not take as it is: max must be above min.
func TestHomeAssistantNumberRange(t *testing.T) {
	env := func(lo, hi *float64, step float64) runtime.CapPolicy {
		e := &governance.Envelope{Type: value.TypeNumber, Step: step}
		if lo != nil {
			e.Min, e.HasMin = *lo, true
		}
		if hi != nil {
			e.Max, e.HasMax = *hi, true
		}
		return runtime.CapPolicy{Envelope: e}
	}
	f := func(v float64) *float64 { return &v }
	cases := []struct {
		name     string
		policy   runtime.CapPolicy
		min, max float64
		mode     any
	}{
		{"bounded", env(f(18), f(25), 0.5), 18, 25, nil},
		{"pinned", env(f(20), f(20), 0.5), 20, 20.5, "box"},
		{"pinned without a step", env(f(20), f(20), 0), 20, 21, "box"},
		{"min above the default max", env(f(2e9), nil, 0), 2e9, 4e9, "box"},
		{"max below the default min", env(nil, f(-2e9), 0), -4e9, -2e9, "box"},
		{"min only", env(f(0), nil, 0), 0, 1e9, "box"},
	}
	policies := map[string]runtime.CapPolicy{}
	var caps []devices.Capability
	for i, tc := range cases {
		name := fmt.Sprintf("n%d", i)
		policies["plc."+name] = tc.policy
		caps = append(caps, devices.Capability{Name: name, Kind: devices.KindActuator, Type: value.TypeNumber})
	}
	eng, err := runtime.New(t.Context(), runtime.Options{Registry: devices.NewRegistry(), Journal: runtimetest.NewMemJournal(), Policies: policies})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(eng, Options{Prefix: prefix, HomeAssistant: haOptions([]devices.Device{{ID: "plc", Capabilities: caps}})})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, e := range b.haEntities() {
		payload, err := json.Marshal(e.config)
		if err != nil {
			t.Fatal(err)
		}
		_, cfg, bad := haConfigProblems("homeassistant", e.topic("homeassistant"), payload)
		for _, p := range bad {
			t.Errorf("%s: %s", e.id, p)
		}
		got[e.id] = cfg
	}
	for i, tc := range cases {
		cfg := got[haID("sg", "test", "plc", fmt.Sprintf("n%d", i))]
		if !jsonEqual(cfg["min"], tc.min) || !jsonEqual(cfg["max"], tc.max) || !jsonEqual(cfg["mode"], tc.mode) {
			t.Errorf("%s: min %v, max %v, mode %v; want %v, %v, %v", tc.name, cfg["min"], cfg["max"], cfg["mode"], tc.min, tc.max, tc.mode)
		}
	}
}

func TestCheckDeviceClass(t *testing.T) {
	cases := []struct {
		class, unit string
		ok          bool
	}{
		{"temperature", "°C", true},
		{"temperature", "", false},
		// ph and aqi take no unit: the capability's is left out of the
		// announcement, not refused.
		{"ph", "pH", true},
		{"ph", "", true},
		{"aqi", "%", true},
		{"power_factor", "%", true},
		{"power_factor", "", true},
		{"power_factor", "W", false},
		{"distance", "m", true},
		{"distance", "metres", false},
		{"nitrogen_dioxide", "µg/m³", true},
		{"nitrogen_dioxide", "ppm", false},
		{"weight", "kg", true},
		{"weight", "°C", false},
		{"area", "m²", true},
		{"speed", "km/h", true},
		{"monetary", "EUR", true},
		{"colour", "", false},
	}
	for _, tc := range cases {
		c := devices.Capability{Name: "x", Kind: devices.KindSensor, Type: value.TypeNumber, Unit: tc.unit}
		if err := CheckDeviceClass(c, tc.class); (err == nil) != tc.ok {
			t.Errorf("CheckDeviceClass(unit %q, %s) = %v, want ok %v", tc.unit, tc.class, err, tc.ok)
		}
	}
	for class, want := range map[string]string{"volume": "total", "monetary": "total", "water": "total_increasing",
		"volume_storage": "measurement", "temperature": "measurement", "": "measurement"} {
		if got := haStateClass(class); got != want {
			t.Errorf("haStateClass(%q) = %s, want %s", class, got, want)
		}
	}
}

// TestHomeAssistantBirthFloodIsAnsweredOnce: a client that floods Home
// Assistant's status with "online" gets the configs announced once, and
// once more when the gap ends, not once a message.
func TestHomeAssistantBirthFloodIsAnsweredOnce(t *testing.T) {
	gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
	hass := gw.mustClient("hass", "hass-password")
	ch := subscribe(t, hass, "homeassistant/+/+/config")
	discovery(t, ch, 7) // the retained configs a new subscription is handed
	for range 300 {
		publish(t, hass, "homeassistant/status", 0, "online")
	}
	fresh := 0
	window := time.After(haAnnounceGap / 2)
	for counting := true; counting; {
		select {
		case m := <-ch:
			if !m.Retained() {
				fresh++
			}
		case <-window:
			counting = false
		}
	}
	if fresh != 7 {
		t.Errorf("%d configs announced in the %v after 300 births, want 7: one announcement", fresh, haAnnounceGap/2)
	}
}
