package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/examples"
	"github.com/shadowgate/shadowgate/runtime"
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
	if len(b.Devices) != 6 || len(b.Plans) != 1 || b.Mode != "supervised" || b.Plans[0].Every != time.Minute {
		t.Fatalf("demo = %d devices, %d plans, mode %s", len(b.Devices), len(b.Plans), b.Mode)
	}
	pol := b.Policies["pump-1.on"]
	if pol.Effects == nil || !pol.Effects.Costs || len(pol.Interlocks) != 1 || pol.Confirm == nil || !pol.Confirm.ReadBack || pol.Safe == nil {
		t.Fatalf("pump-1.on policy = %+v", pol)
	}
}

// badConfigs are edits of minimal with the error each must give.
var badConfigs = []struct {
	name, yaml, want string
}{
	{"unknown key", strings.Replace(minimal, "address: tank", "adress: tank", 1), "c.yaml:6: field adress not found in type gateway.DeviceConfig"},
	{"syntax", "gateway: {id: t\n", "c.yaml:1: did not find expected ',' or '}'"},
	{"empty", "", "c.yaml:1: the configuration is empty"},
	{"string bool", strings.Replace(minimal, "value: 10", `value: "10"`, 1), `c.yaml:17: devices[1].capabilities[0].interlocks[0].value: want a number, got a string`},
	{"huge number", strings.Replace(minimal, "value: 10", "value: 1e400", 1), `c.yaml:17: devices[1].capabilities[0].interlocks[0].value: want a number: number "1e400" is out of range`},
	{"unknown sensor", strings.Replace(minimal, "sensor: tank-1.level", "sensor: tank-2.level", 1), `c.yaml:17: devices[1].capabilities[0].interlocks[0].sensor: unknown reading "tank-2.level" (write device.capability)`},
	{"bad op", strings.Replace(minimal, `op: ">"`, `op: "=>"`, 1), `devices[1].capabilities[0].interlocks[0].op: unknown operator "=>"`},
	{"unknown driver", strings.Replace(minimal, "    driver: sim\n    address: pump", "    driver: gpio\n    address: pump", 1), `c.yaml:9: devices[1].driver: unknown driver "gpio"; define it under drivers`},
	{"bad kind", strings.Replace(minimal, "kind: sensor", "kind: meter", 1), `c.yaml:7: devices[0].capabilities[0].kind: unknown capability kind "meter" (want sensor or actuator)`},
	{"sim misfit", strings.Replace(minimal, "address: tank", "address: boiler", 1), `c.yaml:6: devices[0].address: sim device tank-1: unknown address "boiler"`},
	{"duplicate device", strings.Replace(minimal, "id: pump-1", "id: tank-1", 1), `devices[1].id: device tank-1 is defined twice`},
	{"bad duration", minimal + "approvals: {timeout: soon}\n", `c.yaml:18: approvals.timeout: "soon" is not a positive duration`},
	{"unknown mode", minimal + "mode: turbo\n", `c.yaml:18: mode: unknown mode "turbo"`},
	{"mode widens base", minimal + "modes: [{name: wild, base: observe, ceiling: {reads: ['**'], writes: ['**']}}]\n",
		`c.yaml:18: modes[0]: mode wild does not narrow its base observe: its ceiling is wider than observe's in writes`},
	{"mode bad base", minimal + "modes: [{name: x, base: turbo}]\n", `modes[0].base: base "turbo" is not a shipped mode`},
	{"rule bad decision", minimal + "rules: [{id: r, principal: '*', device: pump-1, capability: 'on', decision: maybe}]\n", `rules[0]: rule r has decision "maybe"`},
	{"plan write to sensor", minimal + "plans: [{name: p, steps: [{write: tank-1.level, value: 3}]}]\n", `plans[0].steps[0].write: "tank-1.level" is not an actuator device.capability`},
	{"plan two ops", minimal + "plans: [{name: p, steps: [{wait: 1s, read: tank-1.level}]}]\n", `plans[0].steps[0]: a step is exactly one of read, write, wait or expect`},
	{"plan bool as yes", minimal + "plans: [{name: p, steps: [{write: pump-1.on, value: yes}]}]\n", `plans[0].steps[0].value: want a bool, got a string`},
	{"confirm without read-back", strings.Replace(minimal, "        read_back: true\n", "", 1) + "        confirm: {read_back: true}\n", `confirm.read_back: pump-1.on has no read-back`},
	{"two documents", minimal + "---\ngateway: {id: u}\n", "more than one YAML document"},
	{"journal bad size", minimal + "journal: {max_bytes: 12MB}\n", `c.yaml:18: journal.max_bytes: "12MB" is not a size (write it like 128MiB`},
	{"journal tiny file", minimal + "journal: {max_file_size: 4KiB}\n", `c.yaml:18: journal.max_file_size: 4KiB is too small for a journal`},
	{"journal bad keep", minimal + "journal: {keep_records: 30d}\n", `c.yaml:18: journal.keep_records: "30d" is not a positive duration`},
	{"sim fault unknown device", strings.Replace(minimal, "drivers: [{name: sim, type: sim}]", "drivers: [{name: sim, type: sim, sim: {faults: {boiler-1: {stuck: true}}}}]", 1),
		`c.yaml:2: drivers[0].sim.faults.boiler-1: no device boiler-1 on driver sim`},
	{"sim fault bad delay", strings.Replace(minimal, "drivers: [{name: sim, type: sim}]", "drivers: [{name: sim, type: sim, sim: {faults: {pump-1: {ack_delay: forever}}}}]", 1),
		`drivers[0].sim.faults.pump-1.ack_delay: "forever" is not a positive duration`},
}

func TestJournalAndSimOptions(t *testing.T) {
	y := strings.Replace(minimal, "drivers: [{name: sim, type: sim}]",
		"drivers: [{name: sim, type: sim, sim: {state_file: world.json, faults: {pump-1: {write_delay: 2s, write_error: relay welded}}}}]", 1) +
		"journal: {max_events: 1000, max_bytes: 64MiB, keep_records: 48h, max_file_size: 1GiB}\n"
	b, err := Load("c.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if j := b.Journal; j.MaxEvents != 1000 || j.MaxBytes != 64<<20 || j.KeepRecords != 48*time.Hour || j.MaxFileSize != 1<<30 {
		t.Fatalf("journal options = %+v", j)
	}
	so := b.Sim["sim"]
	if f := so.Faults["pump-1"]; so.StateFile != "world.json" || f.WriteDelay != 2*time.Second || f.WriteErr == nil || f.WriteErr.Error() != "relay welded" {
		t.Fatalf("sim options = %+v", so)
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
	y := strings.Replace(minimal, "kind: sensor", "kind: meter", 1) + "mode: turbo\napprovals: {timeout: soon}\n"
	_, err := Load("c.yaml", []byte(y))
	for _, want := range []string{"c.yaml:7: devices[0].capabilities[0].kind", "c.yaml:18: mode: unknown", "c.yaml:19: approvals.timeout"} {
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
	for _, tc := range badConfigs {
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
		_, err = runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: runtime.NewMemJournal(),
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
