package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// minTags are the Makefile's MINTAGS: every optional part left out.
const minTags = "shadowgate_omit_opcua shadowgate_omit_mcp shadowgate_omit_uplink shadowgate_omit_metrics"

// TestOmitTags builds the binary as make arm64-min does, for this machine,
// and checks that it starts, says what it omits, and refuses a
// configuration that uses an omitted part with a sentence naming the key,
// instead of ignoring it.
func TestOmitTags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "shadowgate-min")
	build := exec.Command("go", "build", "-trimpath", "-tags", minTags, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %q: %v\n%s", minTags, err, out)
	}
	runBin := func(args ...string) (string, int) {
		t.Helper()
		var out bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return out.String(), 0
		case errors.As(err, &exit):
			return out.String(), exit.ExitCode()
		}
		t.Fatalf("%s %v: %v", bin, args, err)
		return "", 0
	}

	out, code := runBin("version")
	want := "shadowgate dev\n" +
		"omits the OPC-UA driver (shadowgate_omit_opcua)\n" +
		"omits MCP (shadowgate_omit_mcp)\n" +
		"omits the uplink (shadowgate_omit_uplink)\n" +
		"omits the metrics (shadowgate_omit_metrics)\n"
	if code != exitOK || out != want {
		t.Errorf("shadowgate version = %d, %q; want %d, %q", code, out, exitOK, want)
	}

	const base = "gateway: {id: t}\ndrivers: [{name: sim, type: sim}]\n" +
		"devices: [{id: tank-1, driver: sim, address: tank, capabilities: [{name: level, kind: sensor, type: number}]}]\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"uplink", base + "uplink: {url: tcp://site:1883}\n", "uplink: this build omits the uplink (built with shadowgate_omit_uplink)"},
		{"mcp", base + "mcp: {enabled: true, tokens: [agent]}\n", "mcp: this build omits MCP (built with shadowgate_omit_mcp)"},
		{"opcua", strings.Replace(base, "drivers: [{name: sim, type: sim}]",
			"drivers: [{name: sim, type: sim}, {name: plc, type: opcua, opcua: {endpoint: \"opc.tcp://plc:4840\"}}]", 1),
			"drivers[1].type: this build omits the OPC-UA driver (built with shadowgate_omit_opcua)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(cfg, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, verb := range []string{"check", "serve"} {
				out, code := runBin(verb, "--config", cfg)
				if code != exitConfiguration || !strings.Contains(out, tc.want) {
					t.Errorf("shadowgate %s with %s = %d, %q; want %d and %q", verb, tc.name, code, out, exitConfiguration, tc.want)
				}
			}
		})
	}

	for _, args := range [][]string{{"mcp"}, {"opcua", "browse", "opc.tcp://plc:4840"}} {
		out, code := runBin(args...)
		if code != exitUsage || !strings.Contains(out, "this build omits") {
			t.Errorf("shadowgate %s = %d, %q; want %d saying the build omits it", strings.Join(args, " "), code, out, exitUsage)
		}
	}
}
