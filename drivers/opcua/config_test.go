package opcua

import (
	"slices"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/value"
)

func TestRegisteredAsOPCUA(t *testing.T) {
	f, ok := devices.LookupFactory(Type)
	if !ok || f.Type != "opcua" || !f.SharedAddress {
		t.Fatalf("LookupFactory(%q) = %+v, %v", Type, f, ok)
	}
}

func goodConfig() *Config {
	return &Config{URL: "opc.tcp://192.168.1.20:4840", Timeout: "500ms",
		Security:         SecurityConfig{Policy: "Basic256Sha256"},
		ServerThumbprint: strings.Repeat("AB:", 31) + "AB",
		Nodes: map[string]map[string]NodeConfig{
			"tank-1": {"level": {Node: "ns=2;s=Tank.Level", Sampling: "100ms", Deadband: float64p(0.5)}},
			"pump-1": {"command": {Node: "ns=2;s=Pump.Command", ReadBack: "ns=2;s=Pump.Running"}},
		}}
}

func configDevices() []devices.Device {
	return []devices.Device{
		{ID: "tank-1", Address: "plc-1", Capabilities: []devices.Capability{{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber}}},
		{ID: "pump-1", Address: "plc-1", Capabilities: []devices.Capability{{Name: "command", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}},
	}
}

func TestConfigureBuilds(t *testing.T) {
	in := &devicetest.Config{Driver: "plc-1", Settings: goodConfig()}
	devs := configDevices()
	b := configure(in, devs)
	if b == nil {
		t.Fatalf("configure: %q", in.Problems())
	}
	if got := in.Claims(); !slices.Equal(got, []string{"OPC-UA server opc.tcp://192.168.1.20:4840"}) {
		t.Errorf("claims = %q", got)
	}
	// A write reaches the PLC; a read does not act on it.
	for _, d := range devs {
		c := d.Capabilities[0]
		if want := c.Kind == devices.KindActuator; c.Floor.Reaches != want {
			t.Errorf("%s.%s (%s): floor reaches %v, want %v", d.ID, c.Name, c.Kind, c.Floor.Reaches, want)
		}
	}
	drv, err := b(devices.Env{StateDir: t.TempDir(), Devices: devs})
	if err != nil {
		t.Fatal(err)
	}
	d := drv.(*Driver)
	if d.o.Thumbprint != strings.Repeat("ab", 32) || d.o.Timeout.String() != "500ms" {
		t.Errorf("options: thumbprint %q, timeout %v", d.o.Thumbprint, d.o.Timeout)
	}
	if p := d.o.points["pump-1"]["command"]; p.node.String() != "ns=2;s=Pump.Command" || p.readNode().String() != "ns=2;s=Pump.Running" || p.watch {
		t.Errorf("pump-1.command = %+v", p)
	}
	if p := d.o.points["tank-1"]["level"]; !p.watch || p.deadband != 0.5 || p.sampling.String() != "100ms" {
		t.Errorf("tank-1.level = %+v", p)
	}
	if err := d.Close(); err != nil { // never opened
		t.Fatal(err)
	}
}

func TestConfigureReportsEveryProblemAtItsPlace(t *testing.T) {
	c := goodConfig()
	c.URL = "http://plc"
	c.Security = SecurityConfig{Policy: "Basic256Sha256", Mode: "None"}
	c.ServerThumbprint = ""
	c.Certificate = "client.der"
	c.Timeout = "soon"
	c.Auth = &AuthConfig{Username: "op"}
	c.Nodes["tank-1"]["level"] = NodeConfig{Node: "ns=2;x=Tank", Sampling: "1ns", Mode: "push"}
	c.Nodes["pump-1"]["command"] = NodeConfig{Node: "ns=2;s=Pump.Command", ReadBack: "ns=99999;i=1", Deadband: float64p(1)}
	c.Nodes["pump-1"]["speed"] = NodeConfig{Node: "ns=2;s=Pump.Command"}
	c.Nodes["pump-9"] = map[string]NodeConfig{"on": {Node: "i=1"}}
	devs := configDevices()
	devs[1].Address = "plc 2"
	devs = append(devs, devices.Device{ID: "valve-1", Address: "plc-1", Capabilities: []devices.Capability{
		{Name: "open", Kind: devices.KindActuator, Type: value.TypeBool},
		{Name: "mode", Kind: devices.KindSensor, Type: value.TypeString}}})
	c.Nodes["valve-1"] = map[string]NodeConfig{"open": {Node: "ns=2;s=Pump.Command"}}
	in := &devicetest.Config{Driver: "plc-1", Settings: c}
	if b := configure(in, devs); b != nil {
		t.Fatal("a bad configuration built a driver")
	}
	want := []string{
		`options.url: "http://plc" is not an endpoint url`,
		`options.security.mode: mode "None" with policy Basic256Sha256`,
		`options.server_thumbprint: the server certificate's SHA-256 thumbprint is required`,
		`options.key: certificate and key go together`,
		`options.auth.password_file: a password file is required`,
		`options.timeout: "soon" is not a duration`,
		`devices[1].address: "plc 2" is not a name for the PLC`,
		`options.nodes.tank-1.level.node: "ns=2;x=Tank": identifier type "x"`,
		`options.nodes.tank-1.level.mode: mode "push": want subscribe or poll`,
		`options.nodes.tank-1.level.sampling: "1ns" is not a duration`,
		`options.nodes.pump-1.command.read_back: "ns=99999;i=1": namespace index "99999"`,
		`options.nodes.pump-1.command.deadband: a deadband is for numbers`,
		`devices[2].capabilities[1]: capability mode has no node`,
		`options.nodes.pump-1.speed: device pump-1 has no capability speed`,
		`options.nodes.pump-9: no device pump-9 on driver plc-1`,
	}
	got := in.Problems()
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("no problem %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}

// Two capabilities that write one node are refused: one output, one id.
func TestConfigureRefusesTwoIDsForOneOutput(t *testing.T) {
	c := goodConfig()
	c.Nodes["valve-1"] = map[string]NodeConfig{"open": {Node: "ns=2;s=Pump.Command"}, "feedback": {Node: "ns=2;s=Pump.Running"}}
	devs := append(configDevices(), devices.Device{ID: "valve-1", Address: "plc-1", Capabilities: []devices.Capability{
		{Name: "open", Kind: devices.KindActuator, Type: value.TypeBool},
		{Name: "feedback", Kind: devices.KindSensor, Type: value.TypeBool}}})
	in := &devicetest.Config{Driver: "plc-1", Settings: c}
	if configure(in, devs) != nil {
		t.Fatal("two ids for one output were built")
	}
	want := "devices[2].capabilities[0]: valve-1.open reaches node ns=2;s=Pump.Command, as pump-1.command does; one output, one id"
	if got := in.Problems(); len(got) != 1 || got[0] != want {
		t.Errorf("problems = %q, want [%q]", got, want)
	}
}

func TestConfigureRefusesAPasswordInTheClear(t *testing.T) {
	c := goodConfig()
	c.Security, c.ServerThumbprint = SecurityConfig{}, ""
	c.Auth = &AuthConfig{Username: "op", PasswordFile: "pw"}
	in := &devicetest.Config{Driver: "plc-1", Settings: c}
	if configure(in, configDevices()) != nil {
		t.Fatal("a password over policy None was built")
	}
	if got := in.Problems(); len(got) != 1 || !strings.HasPrefix(got[0], "options.auth: a password would cross the network in the clear") {
		t.Errorf("problems = %q", got)
	}
}

func TestConfigureRefusesAPasswordOverASignedOnlyChannel(t *testing.T) {
	c := goodConfig()
	c.Security = SecurityConfig{Policy: PolicyBasic256Sha256, Mode: "Sign"}
	c.Auth = &AuthConfig{Username: "op", PasswordFile: "pw"}
	in := &devicetest.Config{Driver: "plc-1", Settings: c}
	if configure(in, configDevices()) != nil {
		t.Fatal("a password over a signed-only channel was built")
	}
	if got := in.Problems(); len(got) != 1 || !strings.Contains(got[0], "use mode SignAndEncrypt") {
		t.Errorf("problems = %q", got)
	}
}
