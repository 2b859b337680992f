package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// explainConfig has a sensor, an actuator whose declared cost its driver's
// floor also says, one that leaves the cost to the floor, and one that
// declares nothing.
const explainConfig = `gateway: {id: t}
drivers: [{name: sim, type: sim}]
devices:
  - id: tank-1
    area: greenhouse
    driver: sim
    address: tank
    capabilities: [{name: level, kind: sensor, type: number}]
  - id: pump-1
    area: greenhouse
    driver: sim
    address: pump
    capabilities:
      - {name: "on", kind: actuator, type: bool, effects: {reversible: true, contained: true, costs: true}}
  - id: heater-1
    driver: sim
    address: heater
    capabilities:
      - {name: "on", kind: actuator, type: bool, effects: {contained: true}}
  - id: valve-1
    driver: sim
    address: valve
    capabilities: [{name: open, kind: actuator, type: bool}]
`

const explained = `: ok (4 devices, 0 plans, mode supervised)

Effect profiles: what a step on each capability is judged as. A field wider than the safest says where it came from.

tank-1.level: sensor on driver sim
  reads       greenhouse/tank-1  from the kind (a sensor reads its own scope)
  writes      nothing
  reaches     false
  reversible  true
  contained   true
  costs       false

pump-1.on: actuator on driver sim
  reads       nothing
  writes      greenhouse/pump-1  from the kind (an actuator writes its own scope)
  reaches     false
  reversible  true
  contained   true
  costs       true               from the driver's floor (sim); the configuration (effects.costs: true)

heater-1.on: actuator on driver sim
  reads       nothing
  writes      heater-1  from the kind (an actuator writes its own scope)
  reaches     false
  reversible  false     from the configuration (effects does not declare reversible: true)
  contained   true
  costs       true      from the driver's floor (sim)

valve-1.open: actuator on driver sim
  reads       **     from the configuration (no effects declared: the worst case)
  writes      **     from the configuration (no effects declared: the worst case)
  reaches     true   from the configuration (no effects declared: the worst case)
  reversible  false  from the configuration (no effects declared: the worst case)
  contained   false  from the configuration (no effects declared: the worst case)
  costs       true   from the configuration (no effects declared: the worst case)
`

func writeConfig(t *testing.T, y string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckExplainsEffectProfiles(t *testing.T) {
	p := writeConfig(t, explainConfig)
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--config", p, "--explain"}, strings.NewReader(""), &out, &errOut); code != exitOK || errOut.Len() != 0 {
		t.Fatalf("check --explain = %d, stderr %q", code, errOut.String())
	}
	if got, want := out.String(), p+explained; got != want {
		t.Errorf("check --explain printed\n%s\nwant\n%s", got, want)
	}
	// Without --explain, check prints its one line, as it always has.
	out.Reset()
	if code := run([]string{"check", "--config", p}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("check = %d, stderr %q", code, errOut.String())
	}
	if got, want := out.String(), p+": ok (4 devices, 0 plans, mode supervised)\n"; got != want {
		t.Errorf("check printed %q, want %q", got, want)
	}
}

// The demo's profile is explained too, every capability of it.
func TestCheckExplainsTheDemo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--explain", "--config", "../../examples/demo.yaml"}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("check --explain of the demo = %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"\npump-1.on: actuator on driver sim\n", "\ntank-1.level: sensor on driver sim\n",
		"  costs       true                      from the driver's floor (sim); the configuration (effects.costs: true)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check --explain of the demo lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), " on driver sim\n"); n != 8 {
		t.Errorf("the demo's explanation has %d capabilities, want 8", n)
	}
}

// A configuration in error explains nothing: the errors, with their
// places, and the configuration exit code.
func TestCheckExplainOfABadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"floor narrowed", strings.Replace(explainConfig, "costs: true}}", "costs: false}}", 1),
			`:14:102: devices[1].capabilities[0].effects.costs: driver sim says pump-1.on spends something (costs)`},
		{"unknown driver type", strings.Replace(explainConfig, "type: sim}", "type: canbus}", 1),
			`:2:29: drivers[0].type: unknown driver type "canbus" (this build has: gpio, line, modbus, opcua, sim)`},
		{"driver's options as a list", strings.Replace(explainConfig, "type: sim}", "type: sim, sim: [faults]}", 1),
			`:2:39: drivers[0].sim: expected a mapping of keys (key: value), found a list`},
		{"an address the driver does not have", strings.Replace(explainConfig, "address: valve", "address: gpio17", 1),
			`:22:14: devices[3].address: sim device valve-1: unknown address "gpio17"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, tc.yaml)
			var out, errOut bytes.Buffer
			code := run([]string{"check", "--config", p, "--explain"}, strings.NewReader(""), &out, &errOut)
			if code != exitConfiguration || out.Len() != 0 || !strings.Contains(errOut.String(), p+tc.want) {
				t.Fatalf("check --explain = %d, stdout %q, stderr %q; want %d and an error containing %q", code, out.String(), errOut.String(), exitConfiguration, p+tc.want)
			}
		})
	}
}
