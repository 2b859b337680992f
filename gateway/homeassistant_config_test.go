package gateway

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const haMinimal = minimal + `web: {listen: "127.0.0.1:8080"}
integrations:
  homeassistant: {enabled: true}
`

func TestHomeAssistantConfig(t *testing.T) {
	b, err := Load("c.yaml", []byte(haMinimal))
	if err != nil {
		t.Fatal(err)
	}
	ha := b.MQTT.HomeAssistant
	if ha == nil {
		t.Fatal("enabled: true announced nothing")
	}
	if ha.Prefix != "homeassistant" || ha.GatewayID != "t" || ha.ConsoleURL != "http://127.0.0.1:8080" ||
		len(ha.Devices) != 2 || ha.Models["pump-1"] != "sim" {
		t.Errorf("home assistant = %+v", ha)
	}
	// Off unless configured.
	for _, y := range []string{minimal, minimal + "integrations: {homeassistant: {enabled: false}}\n", minimal + "integrations: {}\n"} {
		b, err := Load("c.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		if b.MQTT.HomeAssistant != nil {
			t.Errorf("%s\nannounces to home assistant", y)
		}
	}
	if _, err := Load("c.yaml", []byte(minimal+`integrations:
  homeassistant:
    enabled: true
    prefix: ha/site-1
    console_url: https://gw.example/
    device_classes: {tank-1.level: moisture, pump-1.on: outlet}
`)); err == nil {
		t.Fatal("a moisture sensor without a unit was taken")
	}
	b, err = Load("c.yaml", []byte(strings.Replace(minimal, "type: number}", "type: number, unit: \"%\"}", 1)+`integrations:
  homeassistant:
    enabled: true
    prefix: ha/site-1
    console_url: https://gw.example/
    device_classes: {tank-1.level: moisture, pump-1.on: outlet}
`))
	if err != nil {
		t.Fatal(err)
	}
	if ha := b.MQTT.HomeAssistant; ha.Prefix != "ha/site-1" || ha.ConsoleURL != "https://gw.example" ||
		ha.Classes["tank-1.level"] != "moisture" || ha.Classes["pump-1.on"] != "outlet" {
		t.Errorf("home assistant = %+v", ha)
	}
	// ph takes no unit; the capability keeps its own, which the
	// announcement leaves out.
	b, err = Load("c.yaml", []byte(strings.Replace(minimal, "type: number}", "type: number, unit: pH}", 1)+
		"integrations: {homeassistant: {enabled: true, device_classes: {tank-1.level: ph}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ha := b.MQTT.HomeAssistant; ha.Classes["tank-1.level"] != "ph" {
		t.Errorf("home assistant classes = %v, want tank-1.level: ph", ha.Classes)
	}
}

// haBadConfigs are Home Assistant settings a check refuses, each with the
// error it must give: file, line, column, key and why.
var haBadConfigs = []struct {
	name, yaml, want string
}{
	{"no broker", minimal + "mqtt: {enabled: false}\nintegrations: {homeassistant: {enabled: true}}\n",
		`c.yaml:19:41: integrations.homeassistant.enabled: Home Assistant discovery needs the embedded broker`},
	{"wildcard prefix", minimal + "integrations: {homeassistant: {enabled: true, prefix: \"ha/#\"}}\n",
		`c.yaml:18:55: integrations.homeassistant.prefix: "ha/#" is not a discovery prefix`},
	{"trailing slash", minimal + "integrations:\n  homeassistant:\n    enabled: true\n    prefix: homeassistant/\n",
		`c.yaml:21:13: integrations.homeassistant.prefix: "homeassistant/" is not a discovery prefix`},
	{"the gateway's own topics", minimal + "integrations:\n  homeassistant:\n    enabled: true\n    prefix: shadowgate/t/ha\n",
		`c.yaml:21:13: integrations.homeassistant.prefix: "shadowgate/t/ha" overlaps the gateway's own topics`},
	{"console url", minimal + "integrations:\n  homeassistant:\n    enabled: true\n    console_url: gateway.local:8080\n",
		`c.yaml:21:18: integrations.homeassistant.console_url: "gateway.local:8080" is not the console's address`},
	{"unknown capability", minimal + "integrations:\n  homeassistant:\n    enabled: true\n    device_classes:\n      tank-2.level: moisture\n",
		`c.yaml:22:21: integrations.homeassistant.device_classes.tank-2.level: tank-2.level is not a capability of a configured device`},
	{"class of the wrong component", minimal + "integrations:\n  homeassistant:\n    enabled: true\n    device_classes:\n      pump-1.on: moisture\n",
		`c.yaml:22:18: integrations.homeassistant.device_classes.pump-1.on: "moisture" is not a device class of a switch`},
	{"unit of another class", minimal + "integrations:\n  homeassistant:\n    enabled: true\n    device_classes:\n      tank-1.level: temperature\n",
		`c.yaml:22:21: integrations.homeassistant.device_classes.tank-1.level: device class temperature takes the units °C, °F, K; this capability has no unit`},
	{"a unit the class does not take", strings.Replace(minimal, "type: number}", "type: number, unit: metres}", 1) +
		"integrations:\n  homeassistant:\n    enabled: true\n    device_classes:\n      tank-1.level: distance\n",
		`c.yaml:22:21: integrations.homeassistant.device_classes.tank-1.level: device class distance takes the units mm, cm, m, km, in, ft, yd, mi, nmi; this capability has the unit metres`},
	{"unknown key", minimal + "integrations:\n  homeassistant:\n    enabled: true\n    discovery: true\n",
		`c.yaml:21:5: integrations.homeassistant.discovery: unknown key "discovery"`},
	{"checked when off too", minimal + "integrations:\n  homeassistant:\n    enabled: false\n    device_classes: {pump-1.on: door}\n",
		`c.yaml:21:33: integrations.homeassistant.device_classes.pump-1.on: "door" is not a device class of a switch`},
	{"YAML 1.1 bool", minimal + "integrations:\n  homeassistant:\n    enabled: yes\n",
		`c.yaml:20:14: integrations.homeassistant.enabled: "yes" is not a boolean in YAML 1.2`},
}

func TestHomeAssistantConfigErrors(t *testing.T) {
	for _, tc := range haBadConfigs {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("c.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error =\n%v\nwant it to contain\n%s", err, tc.want)
			}
		})
	}
}

// TestHomeAssistantIsRestartOnly runs a gateway with the integration: it
// keeps its record of what it announced in the state directory, and a
// reload that changes the integration puts the rest in force and names it
// as waiting for a restart.
func TestHomeAssistantIsRestartOnly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	y := strings.Replace(reloadConfig, "gateway: {id: reload}", "gateway: {id: reload, state_dir: "+filepath.Join(dir, "state")+"}", 1) +
		"integrations:\n  homeassistant: {enabled: true}\n"
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	running, err := LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	e := runForReload(t, running)
	record := filepath.Join(dir, "state", "homeassistant.json")
	for deadline := time.Now().Add(15 * time.Second); ; {
		data, err := os.ReadFile(record)
		if err == nil && strings.Contains(string(data), "homeassistant/switch/sg_reload_valve-1_open/config") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record of what was announced: %q, %v", data, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a file the broker writes as it starts
	}
	changed := strings.Replace(y, "{enabled: true}", "{enabled: true, prefix: ha}", 1)
	if err := os.WriteFile(file, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	_, restart, err := Reload(t.Context(), e, running)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(restart, "integrations") {
		t.Errorf("reload names %v as waiting for a restart, want integrations among them", restart)
	}
}

// FuzzHomeAssistantConfig: no integrations section makes the loader panic,
// every error names the file, and an accepted one announces only
// capabilities that exist, with classes the check allowed.
func FuzzHomeAssistantConfig(f *testing.F) {
	f.Add(haMinimal)
	for _, tc := range haBadConfigs {
		f.Add(tc.yaml)
	}
	f.Fuzz(func(t *testing.T, y string) {
		b, err := Load("f.yaml", []byte(y))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if b.MQTT == nil || b.MQTT.HomeAssistant == nil {
			return
		}
		ha := b.MQTT.HomeAssistant
		for k := range ha.Classes {
			dev, capName, _ := strings.Cut(k, ".")
			found := false
			for _, d := range ha.Devices {
				for _, c := range d.Capabilities {
					found = found || d.ID == dev && c.Name == capName
				}
			}
			if !found {
				t.Fatalf("a class for %s, which is no capability", k)
			}
		}
	})
}
