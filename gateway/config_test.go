package gateway

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/examples"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

const minimal = `gateway: {id: t}
drivers: [{name: sim, type: sim}]
devices:
  - id: tank-1
    driver: sim
    address: tank
    capabilities: [{name: level, kind: sensor, type: number}]
  - id: pump-1
    driver: sim
    address: pump
    capabilities:
      - name: "on"
        kind: actuator
        type: bool
        read_back: true
        effects: {reversible: true}
        interlocks: [{sensor: tank-1.level, op: ">", value: 10}]
`

func TestDemoConfigLoads(t *testing.T) {
	b, err := Load("demo.yaml", examples.Demo)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Devices) != 8 || len(b.Plans) != 1 || b.Mode != "supervised" || b.Plans[0].Every != time.Minute {
		t.Fatalf("demo = %d devices, %d plans, mode %s", len(b.Devices), len(b.Plans), b.Mode)
	}
	// Every device has a label, carried on the device.
	for _, d := range b.Devices {
		if d.Label == "" {
			t.Errorf("demo device %s has no label", d.ID)
		}
	}
	// The number and the enum actuator, with their envelope and values.
	if env := b.Policies["thermostat-1.setpoint"].Envelope; env == nil || !env.HasMin || env.Min != 10 || env.Max != 28 || env.Step != 0.5 {
		t.Errorf("thermostat-1.setpoint envelope = %+v, want 10 to 28 by 0.5", env)
	}
	pol := b.Policies["pump-1.on"]
	if pol.Effects == nil || !pol.Effects.Costs || len(pol.Interlocks) != 1 || pol.Confirm == nil || !pol.Confirm.ReadBack || pol.Safe == nil {
		t.Fatalf("pump-1.on policy = %+v", pol)
	}
	// The simulator's floors: the pump, the heater and its thermostat
	// spend energy, the valve, the vent and the sensors nothing.
	for _, d := range b.Devices {
		want := devices.Floor{Costs: d.ID == "pump-1" || d.ID == "heater-1" || d.ID == "thermostat-1"}
		if got := d.Capabilities[0].Floor; got != want {
			t.Errorf("floor of %s.%s = %+v, want %+v", d.ID, d.Capabilities[0].Name, got, want)
		}
	}
}

// badConfigs are edits of minimal with the error each must give.
var badConfigs = []struct {
	name, yaml, want string
}{
	{"unknown key", strings.Replace(minimal, "address: tank", "adress: tank", 1), `c.yaml:6:5: devices[0].adress: unknown key "adress" (known keys here: id, label, area, driver, address, capabilities)`},
	{"syntax", "gateway: {id: t\n", "c.yaml:1: did not find expected ',' or '}'"},
	{"syntax in words", "gateway:\n  id: x\n   state_dir: /tmp\n", "c.yaml:3: mapping values are not allowed in this context"},
	{"empty", "", "c.yaml:1: the configuration is empty"},
	{"string bool", strings.Replace(minimal, "value: 10", `value: "10"`, 1), `c.yaml:17:61: devices[1].capabilities[0].interlocks[0].value: want a number, got a string`},
	{"huge number", strings.Replace(minimal, "value: 10", "value: 1e400", 1), `c.yaml:17:61: devices[1].capabilities[0].interlocks[0].value: want a number: number "1e400" is out of range`},
	{"unknown sensor", strings.Replace(minimal, "sensor: tank-1.level", "sensor: tank-2.level", 1), `c.yaml:17:31: devices[1].capabilities[0].interlocks[0].sensor: unknown reading "tank-2.level" (write device.capability)`},
	{"bad op", strings.Replace(minimal, `op: ">"`, `op: "=>"`, 1), `devices[1].capabilities[0].interlocks[0].op: unknown operator "=>"`},
	{"unknown driver", strings.Replace(minimal, "    driver: sim\n    address: pump", "    driver: gpio\n    address: pump", 1), `c.yaml:9:13: devices[1].driver: unknown driver "gpio"; define it under drivers`},
	{"bad kind", strings.Replace(minimal, "kind: sensor", "kind: meter", 1), `c.yaml:7:40: devices[0].capabilities[0].kind: unknown capability kind "meter" (want sensor or actuator)`},
	{"sim misfit", strings.Replace(minimal, "address: tank", "address: boiler", 1), `c.yaml:6:14: devices[0].address: sim device tank-1: unknown address "boiler"`},
	{"one port, two listeners", minimal + "web: {listen: \"127.0.0.1:1883\"}\n", `web.listen: 127.0.0.1:1883 is the port of mqtt.listen (:1883); each listener needs a port of its own`},
	{"one address, two ids", strings.Replace(minimal, "    address: pump", "    address: tank", 1), `c.yaml:10:14: devices[1].address: device pump-1 has the address "tank" of device tank-1 on driver sim; one device, one id`},
	{"duplicate device", strings.Replace(minimal, "id: pump-1", "id: tank-1", 1), `devices[1].id: device tank-1 is defined twice`},
	{"bad duration", minimal + "approvals: {timeout: soon}\n", `c.yaml:18:22: approvals.timeout: "soon" is not a positive duration`},
	{"unknown mode", minimal + "mode: turbo\n", `c.yaml:18:7: mode: unknown mode "turbo"`},
	{"mode widens base", minimal + "modes: [{name: wild, base: observe, ceiling: {reads: ['**'], writes: ['**']}}]\n",
		`c.yaml:18:9: modes[0]: mode wild does not narrow its base observe: its ceiling is wider than observe's in writes`},
	{"mode bad base", minimal + "modes: [{name: x, base: turbo}]\n", `modes[0].base: base "turbo" is not a shipped mode`},
	{"rule bad decision", minimal + "rules: [{id: r, principal: '*', device: pump-1, capability: 'on', decision: maybe}]\n", `rules[0]: rule r has decision "maybe"`},
	{"plan write to sensor", minimal + "plans: [{name: p, steps: [{write: tank-1.level, value: 3}]}]\n", `plans[0].steps[0].write: "tank-1.level" is not an actuator device.capability`},
	{"plan two ops", minimal + "plans: [{name: p, steps: [{wait: 1s, read: tank-1.level}]}]\n", `plans[0].steps[0]: a step is exactly one of read, write, wait or expect`},
	{"plan bool as yes", minimal + "plans: [{name: p, steps: [{write: pump-1.on, value: yes}]}]\n", `plans[0].steps[0].value: "yes" is not a boolean in YAML 1.2: write true or false`},
	{"confirm without read-back", strings.Replace(minimal, "        read_back: true\n", "", 1) + "        confirm: {read_back: true}\n", `confirm.read_back: pump-1.on has no read-back`},
	{"two documents", minimal + "---\ngateway: {id: u}\n", "more than one YAML document"},
	{"journal bad size", minimal + "journal: {max_bytes: 12MB}\n", `c.yaml:18:22: journal.max_bytes: "12MB" is not a size (write it like 128MiB`},
	{"journal tiny file", minimal + "journal: {max_file_size: 4KiB}\n", `c.yaml:18:26: journal.max_file_size: 4KiB is too small for a journal`},
	{"journal bad keep", minimal + "journal: {keep_records: 30d}\n", `c.yaml:18:25: journal.keep_records: "30d" is not a positive duration`},
	{"sim misfit capability", strings.Replace(minimal, `name: "on"`, `name: speed`, 1),
		`c.yaml:12:9: devices[1].capabilities[0]: sim device pump-1 (pump): capability speed does not fit; the pump offers on, a bool actuator`},
	{"floor narrowed", strings.Replace(minimal, "effects: {reversible: true}", "effects: {reversible: true, costs: false}", 1),
		`c.yaml:16:44: devices[1].capabilities[0].effects.costs: driver sim says pump-1.on spends something (costs); the configuration may declare more than the driver's floor, never less: write costs: true or leave it out`},
	{"label too long", strings.Replace(minimal, "  - id: pump-1\n", "  - id: pump-1\n    label: "+strings.Repeat("P", 41)+"\n", 1),
		`c.yaml:9:12: devices[1].label: the label "` + strings.Repeat("P", 41) + `" is 41 characters long; at most 40`},
	{"label not printable", strings.Replace(minimal, "  - id: pump-1\n", "  - id: pump-1\n    label: \"Pump\\t1\"\n", 1),
		`c.yaml:9:12: devices[1].label: the label "Pump\t1" holds U+0009, which is not printable (write one line of text)`},
	{"label with spaces at its end", strings.Replace(minimal, "  - id: pump-1\n", "  - id: pump-1\n    label: \"Pump 1 \"\n", 1),
		`c.yaml:9:12: devices[1].label: the label "Pump 1 " begins or ends with a space`},
	{"unknown driver type", strings.Replace(minimal, "type: sim}", "type: canbus}", 1),
		`c.yaml:2:29: drivers[0].type: unknown driver type "canbus" (this build has: `},
	{"no driver type", strings.Replace(minimal, ", type: sim}", "}", 1), `c.yaml:2:11: drivers[0]: a driver names its type (this build has: `},
	{"unknown key in a driver", strings.Replace(minimal, "type: sim}", "type: sim, sim_options: {}}", 1),
		`c.yaml:2:47: drivers[0].sim_options: unknown key "sim_options" (known keys here: name, type, sim)`},
}

// The journal's options, and a driver's own options as its factory reads
// them: the simulator's state file and faults, seen in what the driver
// built from them does.
func TestJournalAndDriverOptions(t *testing.T) {
	y := strings.Replace(minimal, "drivers: [{name: sim, type: sim}]",
		"drivers: [{name: sim, type: sim, sim: {state_file: world.json, faults: {pump-1: {write_error: relay welded}, tank-1: {read_delay: 1h}}}}]", 1) +
		"journal: {max_events: 1000, max_bytes: 64MiB, keep_records: 48h, max_file_size: 1GiB}\n"
	b, err := Load("c.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if j := b.Journal; j.MaxEvents != 1000 || j.MaxBytes != 64<<20 || j.KeepRecords != 48*time.Hour || j.MaxFileSize != 1<<30 {
		t.Fatalf("journal options = %+v", j)
	}
	dir := t.TempDir()
	reg := openedDrivers(t, b, dir)
	pump, _ := reg.Lookup("pump-1")
	if err := pump.Driver.Write(t.Context(), "pump-1", "on", value.Bool(true)); err == nil || !strings.Contains(err.Error(), "relay welded") {
		t.Fatalf("write to pump-1 = %v, want the configured write_error", err)
	}
	// The state file is in the state directory: it counted the write.
	if _, err := os.Stat(filepath.Join(dir, "world.json")); err != nil {
		t.Fatalf("the sim's state file: %v", err)
	}
	short, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	if _, err := pump.Driver.Read(short, "tank-1", "level"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read of tank-1 with a read_delay of 1h = %v, want its deadline exceeded", err)
	}
}

func TestConfigErrorsNameFileLineAndWhat(t *testing.T) {
	if _, err := Load("c.yaml", []byte(minimal)); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	for _, tc := range badConfigs {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Load("c.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("Load succeeded (%+v), want %q", b, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error =\n  %v\nwant it to contain\n  %s", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "c.yaml") {
				t.Fatalf("error %q does not start with the file name", err)
			}
		})
	}
}

func TestConfigReportsEveryError(t *testing.T) {
	y := strings.Replace(minimal, "kind: sensor", "kind: meter", 1) + "mode: turbo\napprovals: {timeout: soon}\nmqtt: {enabled: yes, max_clients: \"3\"}\nfoo: 1\n"
	_, err := Load("c.yaml", []byte(y))
	for _, want := range []string{"c.yaml:7:40: devices[0].capabilities[0].kind", "c.yaml:18:7: mode: unknown", "c.yaml:19:22: approvals.timeout",
		"c.yaml:20:17: mqtt.enabled", "c.yaml:20:35: mqtt.max_clients", "c.yaml:21:1: foo: unknown key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load = %v, want it to report %q", err, want)
		}
	}
}

// FuzzLoad checks that no input makes the loader panic, and that an
// accepted configuration is one the engine accepts too.
func FuzzLoad(f *testing.F) {
	f.Add(string(examples.Demo))
	f.Add(minimal)
	f.Add(boardConfig) // a driver of another type, with options of its own
	f.Add(guardedPump) // every safety feature in time, and alarm classes
	for _, tc := range badConfigs {
		f.Add(tc.yaml)
	}
	for _, tc := range shapeConfigs {
		f.Add(tc.yaml)
	}
	f.Fuzz(func(t *testing.T, y string) {
		b, err := Load("f.yaml", []byte(y))
		if err != nil {
			if b != nil {
				t.Fatalf("Load returned a configuration with error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		reg := devices.NewRegistry()
		_, err = runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: runtimetest.NewMemJournal(),
			Policies: b.Policies, Modes: b.Modes, Mode: b.Mode, Rules: b.Rules, Plans: b.Plans})
		if err != nil {
			t.Fatalf("Load accepted a configuration the engine refuses: %v", err)
		}
	})
}

func TestUserMQTTLists(t *testing.T) {
	y := minimal + `users:
  - {name: a, role: operator, password_hash: "$2a$04$uXVqU1Vw0mPjJ7Pt5pC8eO1jvqjL0pZ3ZKZ3S0vBsm1HnQOHmC7Sa", mqtt: {publish: ["shadowgate/t/cmd/pump-1/#"]}}
  - {name: b, role: viewer, password_hash: "$2a$04$uXVqU1Vw0mPjJ7Pt5pC8eO1jvqjL0pZ3ZKZ3S0vBsm1HnQOHmC7Sa", mqtt: {subscribe: []}}
`
	b, err := Load("c.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if a := b.Users[0]; len(a.Publish) != 1 || a.Subscribe != nil {
		t.Fatalf("user a: publish %v, subscribe %v (nil means the defaults)", a.Publish, a.Subscribe)
	}
	if u := b.Users[1]; u.Subscribe == nil || len(u.Subscribe) != 0 || u.Publish != nil {
		t.Fatalf("user b: publish %v, subscribe %#v (empty means none)", u.Publish, u.Subscribe)
	}
	if _, err := Load("c.yaml", []byte(minimal+"users: [{name: c, role: king, password_hash: x}]\n")); err == nil ||
		!strings.Contains(err.Error(), `unknown role "king"`) || !strings.Contains(err.Error(), "not a bcrypt hash") {
		t.Fatalf("a bad user = %v", err)
	}
}

// shapeConfigs are values of the wrong kind, one for every kind of field
// the file has, with the place and the words each error must give.
var shapeConfigs = []struct {
	name, yaml, want string
}{
	{"bool yes", strings.Replace(minimal, "read_back: true", "read_back: yes", 1),
		`c.yaml:15:20: devices[1].capabilities[0].read_back: "yes" is not a boolean in YAML 1.2: write true or false`},
	{"bool On", strings.Replace(minimal, "reversible: true", "reversible: On", 1),
		`c.yaml:16:31: devices[1].capabilities[0].effects.reversible: "On" is not a boolean in YAML 1.2: write true or false`},
	{"bool y", strings.Replace(minimal, "read_back: true", "read_back: y", 1), `read_back: "y" is not a boolean in YAML 1.2: write true or false`},
	{"bool NO", strings.Replace(minimal, "read_back: true", "read_back: NO", 1), `read_back: "NO" is not a boolean in YAML 1.2: write true or false`},
	{"bool quoted yes", strings.Replace(minimal, "read_back: true", "read_back: 'yes'", 1), `read_back: "yes" is not a boolean in YAML 1.2: write true or false`},
	{"optional bool off", minimal + "mqtt: {enabled: off}\n", `c.yaml:18:17: mqtt.enabled: "off" is not a boolean in YAML 1.2: write true or false`},
	{"optional bool no", minimal + "web:\n  enabled: no\n", `c.yaml:19:12: web.enabled: "no" is not a boolean in YAML 1.2: write true or false`},
	{"bool in a map", strings.Replace(minimal, "drivers: [{name: sim, type: sim}]", "drivers: [{name: sim, type: sim}, {name: board, type: fakegpio, fakegpio: {pins: {gpio21: {doses: Yes}}}}]", 1),
		`c.yaml:2:99: drivers[1].fakegpio.pins.gpio21.doses: "Yes" is not a boolean in YAML 1.2: write true or false`},
	{"bool number", strings.Replace(minimal, "read_back: true", "read_back: 1", 1), `read_back: expected true or false, found the number 1`},
	{"bool text", strings.Replace(minimal, "read_back: true", "read_back: sometimes", 1), `read_back: expected true or false, found the text "sometimes"`},
	{"int quoted", minimal + "mqtt: {max_clients: \"10\"}\n",
		`c.yaml:18:21: mqtt.max_clients: expected a whole number, found the text "10" (a quoted value is text; remove the quotes)`},
	{"int text", minimal + "mqtt: {max_clients: ten}\n", `mqtt.max_clients: expected a whole number, found the text "ten"`},
	{"int fraction", minimal + "mqtt: {max_clients: 1.5}\n", `mqtt.max_clients: expected a whole number, found the number 1.5 (out of range, or not whole)`},
	{"int too big", minimal + "mqtt: {max_clients: 99999999999999999999}\n", `mqtt.max_clients: expected a whole number, found the number 99999999999999999999 (out of range, or not whole)`},
	{"int list", minimal + "journal: {max_events: [1]}\n", `journal.max_events: expected a whole number, found a list`},
	{"number text", strings.Replace(minimal, "effects: {reversible: true}", "effects: {reversible: true}\n        envelope: {min: low}", 1),
		`devices[1].capabilities[0].envelope.min: expected a number, found the text "low"`},
	{"duration number", minimal + "approvals: {timeout: 10}\n", `c.yaml:18:22: approvals.timeout: "10" is not a positive duration (write it like 30s, 5m or 2h)`},
	{"duration list", minimal + "approvals: {timeout: [10m]}\n", `c.yaml:18:22: approvals.timeout: expected a single value (text), found a list`},
	{"string list as text", minimal + "modes: [{name: m, base: observe, ceiling: {reads: greenhouse}}]\n",
		`c.yaml:18:51: modes[0].ceiling.reads: expected a list, found the text "greenhouse"`},
	{"list as mapping", minimal + "rules: {id: r}\n", `c.yaml:18:8: rules: expected a list, found a mapping (key: value)`},
	{"map as list", strings.Replace(minimal, "drivers: [{name: sim, type: sim}]", "drivers: [{name: sim, type: sim}, {name: board, type: fakegpio, fakegpio: {pins: [gpio21]}}]", 1),
		`c.yaml:2:82: drivers[1].fakegpio.pins: expected a mapping of names to settings, found a list`},
	{"struct as text", minimal + "approvals: soon\n", `c.yaml:18:12: approvals: expected a mapping of keys (key: value), found the text "soon"`},
	{"unknown nested key", minimal + "mqtt: {commands: {per_hour: 3}}\n", `c.yaml:18:19: mqtt.commands.per_hour: unknown key "per_hour" (known keys here: per_minute, burst)`},
	{"repeated key", minimal + "mode: supervised\nmode: observe\n", `c.yaml:19:1: mode: key "mode" appears twice (first on line 18)`},
	{"token of unknown user", minimal + "web: {tokens: [{name: ci, role: operator, user: nobody, token_hash: " + strings.Repeat("a", 64) + "}]}\n",
		`c.yaml:18:49: web.tokens[0].user: unknown user "nobody" (name one of users)`},
	{"uplink of unknown user", minimal + "uplink: {url: tcp://up:1883, user: nobody}\n", `c.yaml:18:36: uplink.user: unknown user "nobody" (name one of users)`},
}

// Every kind of field reports a wrong value at its place (file, line,
// column, key path) and in words: no error names a type of the program or
// a YAML tag, and no YAML 1.1 boolean is taken for a bool.
func TestConfigErrorsSayWhatWasExpected(t *testing.T) {
	goish := []string{"gateway.", "!!", "unmarshal", " into ", "[]string", "*bool", "int64", "float64"}
	for _, tc := range shapeConfigs {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Load("c.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("Load succeeded (%+v), want %q", b, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error =\n  %v\nwant it to contain\n  %s", err, tc.want)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !fileLineColumn.MatchString(line) {
					t.Errorf("error %q does not start with file:line:column", line)
				}
				for _, g := range goish {
					if strings.Contains(line, g) {
						t.Errorf("error %q names %q, a term of the program, not of the file", line, g)
					}
				}
			}
		})
	}
}

var fileLineColumn = regexp.MustCompile(`^c\.yaml:[0-9]+:[0-9]+: `)

// The YAML 1.2 booleans in any case are still bools, and words that look
// like YAML 1.1 booleans are still text where text is meant.
func TestConfigTakesYAML12Booleans(t *testing.T) {
	for _, v := range []string{"true", "True", "TRUE"} {
		if _, err := Load("c.yaml", []byte(strings.Replace(minimal, "read_back: true", "read_back: "+v, 1))); err != nil {
			t.Errorf("read_back: %s: %v", v, err)
		}
	}
	y := strings.Replace(minimal, "capabilities: [{name: level, kind: sensor, type: number}]",
		"capabilities: [{name: level, kind: sensor, type: number, unit: on}]", 1) + "mode: supervised\nrules: [{id: r, principal: 'no', device: pump-1, capability: 'on', decision: deny, reason: off}]\n"
	if _, err := Load("c.yaml", []byte(y)); err != nil {
		t.Errorf("text fields holding on/no/off: %v", err)
	}
	// Anchors and merge keys are checked like what they stand for.
	merged := minimal + "approvals: &a {timeout: 1m}\nleases: {command: {max_wall: 1m}}\nmqtt: {commands: &r {per_minute: 5}, <<: {max_clients: 3}}\n"
	if b, err := Load("c.yaml", []byte(merged)); err != nil || b.MQTT.MaxClients != 3 {
		t.Errorf("merge keys: %v", err)
	}
	if _, err := Load("c.yaml", []byte(minimal+"approvals: &a {timeout: 1m}\njournal: {<<: *a}\n")); err == nil ||
		!strings.Contains(err.Error(), `journal.timeout: unknown key "timeout"`) {
		t.Errorf("a merged mapping with a key of another section = %v, want unknown key", err)
	}
}

// A token belongs to a user and the uplink may name one: four-eyes then
// counts the person, whatever surface they answer through. This goes
// through the configuration and the wiring the gateway gives the engine.
func TestConfigWiresPeopleForFourEyes(t *testing.T) {
	const hash = `"$2a$04$uXVqU1Vw0mPjJ7Pt5pC8eO1jvqjL0pZ3ZKZ3S0vBsm1HnQOHmC7Sa"`
	y := minimal + `mode: strict
modes: [{name: strict, base: supervised, approvals_required: 2}]
users:
  - {name: appr, role: approver, password_hash: ` + hash + `}
  - {name: carol, role: approver, password_hash: ` + hash + `}
web:
  tokens:
    - {name: appr-ci, role: approver, user: appr, token_hash: ` + strings.Repeat("a", 64) + `}
    - {name: bot, role: approver, token_hash: ` + strings.Repeat("b", 64) + `}
uplink: {url: "tcp://site:1883", client_id: site-1, user: appr}
`
	b, err := Load("c.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	for principal, want := range map[string]string{
		"mqtt:appr": "appr", "console:appr": "appr", "api:appr-ci": "appr", "uplink:site-1": "appr",
		"api:bot": "token:bot", "api:appr": "token:appr", "uplink:other": "uplink:other", "schedule:p": "schedule:p",
		// An agent acts for the token it holds, as the API does.
		"mcp:appr-ci": "appr", "mcp:appr": "token:appr",
	} {
		if got := b.Person(principal); got != want {
			t.Errorf("Person(%q) = %q, want %q", principal, got, want)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	reg, closeDrivers, err := openDrivers(ctx, b, t.TempDir(), nil)
	defer func() {
		if err := closeDrivers(); err != nil {
			t.Error(err)
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	g := reg.Drivers()[0].(interface {
		Count(op, device, capability string) int
	})
	eng, err := runtime.New(ctx, runtime.Options{Registry: reg, Journal: runtimetest.NewMemJournal(), Policies: b.Policies,
		Modes: b.Modes, Mode: b.Mode, Rules: b.Rules, Person: b.Person})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	obs, err := eng.Do(ctx, runtime.Command{Principal: "mqtt:appr", Origin: "mqtt", RequestID: "c1", Device: "pump-1", Capability: "on", Value: value.Bool(true)})
	if err != nil || obs.Kind != runtime.ApprovalRequest {
		t.Fatalf("Do = %+v, %v; want an approval request", obs, err)
	}
	for _, by := range []string{"api:appr-ci", "uplink:site-1", "console:appr"} {
		if _, err := eng.Answer(ctx, obs.Approval.ID, runtime.Answer{By: by, Decision: runtime.Approve}); !errors.Is(err, runtime.ErrNotPermitted) {
			t.Errorf("the requester approving as %s: err = %v, want ErrNotPermitted", by, err)
		}
	}
	if ap, err := eng.Answer(ctx, obs.Approval.ID, runtime.Answer{By: "api:bot", Decision: runtime.Approve}); err != nil || ap.Status != runtime.ApprovalPending {
		t.Fatalf("approval by the bot token = %+v, %v; want pending", ap, err)
	}
	if ap, err := eng.Answer(ctx, obs.Approval.ID, runtime.Answer{By: "console:carol", Decision: runtime.Approve}); err != nil || ap.Status != runtime.ApprovalApproved {
		t.Fatalf("approval by carol = %+v, %v; want approved", ap, err)
	}
	if _, err := eng.Wait(ctx, obs.Run); err != nil {
		t.Fatal(err)
	}
	if n := g.Count("write", "pump-1", "on"); n != 1 {
		t.Fatalf("driver writes = %d, want 1", n)
	}
}

// A mode's approvals_required is 1 or 2; every other number, however
// large, is an error at its place, and none panics or is cut down to fit.
func TestAdversarialConfigApprovalsRequired(t *testing.T) {
	for _, v := range []string{"-1", "3", "2147483648", "9007199254740993", "9223372036854775807", "9223372036854775808",
		"18446744073709551615", "1.5", "two", `"2"`} {
		t.Run(v, func(t *testing.T) {
			y := minimal + "modes: [{name: strict, base: supervised, approvals_required: " + v + "}]\n"
			b, err := Load("c.yaml", []byte(y))
			if err == nil {
				t.Fatalf("approvals_required: %s loaded (%+v), want an error", v, b.Modes)
			}
			if !strings.Contains(err.Error(), "c.yaml:18:") || !strings.Contains(err.Error(), "modes[0]") {
				t.Fatalf("approvals_required: %s: %v, want the place in the file", v, err)
			}
		})
	}
	for v, want := range map[string]int{"0": 1, "1": 1, "2": 2} {
		b, err := Load("c.yaml", []byte(minimal+"modes: [{name: strict, base: supervised, approvals_required: "+v+"}]\n"))
		if err != nil || b.Modes[0].ApprovalsRequired != want {
			t.Errorf("approvals_required: %s = %+v, %v; want %d", v, b, err, want)
		}
	}
}

// openedDrivers opens b's drivers in dir, refreshes their registry, and
// closes them when the test ends.
func openedDrivers(t *testing.T, b *Built, dir string) *devices.Registry {
	t.Helper()
	reg, closeDrivers, err := openDrivers(t.Context(), b, dir, nil)
	t.Cleanup(func() {
		if err := closeDrivers(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	reg.Refresh()
	return reg
}

// TestEveryExampleChecks loads every example configuration as `shadowgate
// check` does: they are what people copy.
func TestEveryExampleChecks(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v, %v", files, err)
	}
	for _, f := range files {
		if _, err := LoadFile(f); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// TestOneThingOneDriver: two drivers that reach one serial port or one GPIO
// line are refused at check time, at the second, naming the first.
func TestOneThingOneDriver(t *testing.T) {
	_, err := Load("c.yaml", []byte(`gateway: {id: gw}
drivers:
  - {name: arduino, type: line, line: {port: /dev/ttyUSB0}}
  - {name: rs485, type: modbus, modbus: {port: /dev/ttyUSB0, registers: {th-1: {t: {table: input, address: 0}}}}}
  - {name: pi, type: gpio}
  - {name: pi2, type: gpio}
devices:
  - {id: relay-1, driver: arduino, address: relay, capabilities: [{name: "on", kind: sensor, type: bool}]}
  - {id: th-1, driver: rs485, address: "1", capabilities: [{name: t, kind: sensor, type: number}]}
  - {id: pump-1, driver: pi, address: GPIO17, capabilities: [{name: "on", kind: sensor, type: bool}]}
  - {id: pump-2, driver: pi2, address: GPIO17, capabilities: [{name: "on", kind: sensor, type: bool}]}
`))
	for _, want := range []string{
		`c.yaml:4:48: drivers[1].modbus.port: serial port /dev/ttyUSB0 is reached by driver arduino already`,
		`c.yaml:11:40: devices[3].address: GPIO line GPIO17 is reached by driver pi already`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load error =\n%v\nwant it to contain\n%s", err, want)
		}
	}
}
