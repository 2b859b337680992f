package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
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
		{[]string{"check", "--config", "../../examples/demo.yaml"}, exitOK, "ok (8 devices, 1 plan, mode supervised)"},
		{[]string{"check", "--config", bad}, exitConfiguration, bad + ":3:1: foo: unknown key \"foo\""},
		{[]string{"check", "--config", filepath.Join(dir, "missing.yaml")}, exitConfiguration, "no such file"},
		{[]string{"serve"}, exitUsage, "exactly one of --config F or --demo"},
		{[]string{"serve", "--demo", "--log-level", "loud"}, exitUsage, "--log-level"},
		{[]string{"serve", "--demo", "fixtures"}, exitUsage, "write --demo=fixtures"},
		{[]string{"serve", "--demo", "fixture"}, exitUsage, `write --demo=fixtures ("fixture" is not one)`},
		{[]string{"serve", "--demo=bogus"}, exitUsage, "want --demo or --demo=fixtures"},
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
	cfg, _, err := load("", "sim")
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

// SIGHUP reloads the configuration file: one that does not load changes
// nothing and its error names the line; a valid one is put in force and
// journaled; the gateway answers throughout, and SIGTERM then stops it
// cleanly.
func TestHangupReloadsTheConfiguration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := shadowgateBinary(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "hup.yaml")
	good := crashConfig(dir, "", "1h")
	if err := os.WriteFile(config, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, config)
	line := g.await(t, "the console to serve", has(`msg="console serving"`))
	m := regexp.MustCompile(`address=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no address in %s", line)
	}
	base := "http://" + m[1]
	// A file that does not load: nothing changes, the error names the line.
	if err := os.WriteFile(config, []byte(good+"surprise: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.await(t, "the bad file refused", has("level=ERROR", "configuration not reloaded", `unknown key \"surprise\"`, "hup.yaml:"))
	// A valid file with a new rule: journaled and in force.
	withRule := strings.Replace(good, "rules:\n", "rules:\n  - {id: heat-ok, principal: \"schedule:heat\", device: heater-1, capability: \"on\", decision: allow}\n", 1)
	if err := os.WriteFile(config, []byte(withRule), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.await(t, "the change journaled", has("msg=config_changed", "rule heat-ok added"))
	if !slices.ContainsFunc(g.all, has(`msg="configuration reloaded"`)) {
		g.await(t, "the reload logged", has(`msg="configuration reloaded"`))
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz after SIGHUP = %v, %v", resp, err)
	}
	resp.Body.Close()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	g.await(t, "a clean stop", has(`msg="gateway stopped"`))
	if err := g.cmd.Wait(); err != nil {
		t.Fatalf("the gateway exited with %v after SIGHUP and SIGTERM", err)
	}
}

// TestHashTokenHelpMakesNoToken: asking hash-token for help prints how to
// use it, not a token that would be shown and thrown away.
func TestHashTokenHelpMakesNoToken(t *testing.T) {
	for _, c := range []struct {
		arg  string
		code int
	}{{"--help", exitOK}, {"-h", exitOK}, {"--bogus", exitUsage}} {
		var out, errOut strings.Builder
		if code := run([]string{"hash-token", c.arg}, strings.NewReader(""), &out, &errOut); code != c.code || out.Len() != 0 ||
			!strings.Contains(errOut.String(), "usage: shadowgate hash-token") {
			t.Errorf("hash-token %s = %d, stdout %q, stderr %q", c.arg, code, out.String(), errOut.String())
		}
	}
	var out strings.Builder
	if code := run([]string{"hash-token"}, strings.NewReader(""), &out, &out); code != exitOK || !strings.Contains(out.String(), "token_hash: ") {
		t.Fatalf("hash-token = %d %q", code, out.String())
	}
}
