package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/access"
)

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("gateway: {id: x}\nmode: turbo\nfoo: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args   []string
		code   int
		output string
	}{
		{nil, exitUsage, "usage: shadowgate"},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"version"}, exitOK, "shadowgate dev"},
		{[]string{"check"}, exitUsage, "give --config F"},
		{[]string{"check", "--config", "../../examples/demo.yaml"}, exitOK, "ok (6 devices, 1 plans, mode supervised)"},
		{[]string{"check", "--config", bad}, exitConfiguration, bad + ":3:1: foo: unknown key \"foo\""},
		{[]string{"check", "--config", filepath.Join(dir, "missing.yaml")}, exitConfiguration, "no such file"},
		{[]string{"serve"}, exitUsage, "exactly one of --config F or --demo"},
		{[]string{"serve", "--demo", "--log-level", "loud"}, exitUsage, "--log-level"},
		{[]string{"serve", "--config", bad}, exitConfiguration, `unknown key "foo"`},
	}
	for _, tc := range tests {
		var out, errOut bytes.Buffer
		code := run(tc.args, strings.NewReader(""), &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.output) {
			t.Errorf("shadowgate %q = %d, %q%q; want %d and output containing %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.output)
		}
	}
}

// TestDemoLoginMatchesTheDemoConfiguration keeps the login the demo prints
// in step with the hash in examples/demo.yaml.
func TestDemoLoginMatchesTheDemoConfiguration(t *testing.T) {
	cfg, err := load("", true)
	if err != nil {
		t.Fatal(err)
	}
	users, err := access.NewUsers(cfg.Users)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := users.Check(demoUser, []byte(demoPassword)); !ok {
		t.Fatalf("the demo login %s / %s does not match examples/demo.yaml", demoUser, demoPassword)
	}
	if cfg.MQTT == nil || cfg.MQTT.Listen != "127.0.0.1:1883" {
		t.Fatalf("the demo broker listens on %+v, want loopback", cfg.MQTT)
	}
}
