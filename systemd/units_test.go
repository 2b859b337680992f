package systemd_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// unit is a unit file's settings, key to every value it is given, in order.
type unit map[string][]string

// one returns the last value of key, as systemd reads a setting given twice.
func (u unit) one(key string) string {
	if v := u[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func readUnit(t *testing.T, name string) unit {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s:%d: %q is not key=value", name, n, line)
			continue
		}
		// systemd takes a trailing comment as part of the value and then
		// ignores the whole line as invalid, without failing.
		if strings.Contains(v, " #") || strings.Contains(v, "\t#") {
			t.Errorf("%s:%d: %q has a trailing comment, which systemd reads as part of the value", name, n, line)
		}
		u[k] = append(u[k], v)
	}
	return u
}

// TestUnitAgrees checks what the unit promises against the other files
// that must say the same: the sysusers and tmpfiles snippets, and the
// configuration the package installs. It needs no systemd.
func TestUnitAgrees(t *testing.T) {
	u := readUnit(t, "shadowgate.service")
	for key, want := range map[string]string{
		"Type":                     "notify",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "2", // cmd/shadowgate's exit code for a configuration error
		"ExecStart":                "/usr/bin/shadowgate serve --config /etc/shadowgate/shadowgate.yaml",
		"ExecReload":               "/bin/kill -HUP $MAINPID",
		"User":                     "shadowgate",
		"Group":                    "shadowgate",
		"SupplementaryGroups":      "gpio dialout",
		"StateDirectory":           "shadowgate",
		"StateDirectoryMode":       "0700",
		"ConfigurationDirectory":   "shadowgate",
		"CapabilityBoundingSet":    "",
		"NoNewPrivileges":          "yes",
		"ProtectSystem":            "strict",
		"DevicePolicy":             "closed",
	} {
		if got := u.one(key); got != want || len(u[key]) == 0 {
			t.Errorf("%s=%q, want %q", key, got, want)
		}
	}
	if d := u.one("WatchdogSec"); d == "" || d == "0" {
		t.Errorf("WatchdogSec=%q, want a period the gateway pings within", d)
	}
	for _, group := range []string{"char-gpiochip", "char-ttyS", "char-ttyAMA", "char-ttyUSB", "char-ttyACM", "char-bcm2835-gpiomem", "char-rpi-gpiomem"} {
		if !slices.Contains(u["DeviceAllow"], group+" rw") {
			t.Errorf("DeviceAllow=%s rw is missing", group)
		}
	}
	// Both would take the hardware away: PrivateDevices= hides
	// /dev/gpiochip* and the ttys, ProcSubset=pid hides /proc/cpuinfo.
	for _, key := range []string{"PrivateDevices", "ProcSubset"} {
		if v, ok := u[key]; ok {
			t.Errorf("%s=%v is set; the GPIO and serial drivers need it unset", key, v)
		}
	}

	user, group := u.one("User"), u.one("Group")
	stateDir := "/var/lib/" + u.one("StateDirectory")
	configDir := "/etc/" + u.one("ConfigurationDirectory")
	config := strings.Fields(u.one("ExecStart"))
	if i := slices.Index(config, "--config"); i < 0 || i+1 >= len(config) || filepath.Dir(config[i+1]) != configDir {
		t.Errorf("ExecStart=%s does not read its configuration from %s", u.one("ExecStart"), configDir)
	}

	sysusers := snippet(t, "shadowgate.sysusers")
	if !slices.ContainsFunc(sysusers, func(f []string) bool {
		return len(f) >= 4 && f[0] == "u" && f[1] == user && f[len(f)-1] == stateDir
	}) {
		t.Errorf("shadowgate.sysusers makes no user %s with home %s", user, stateDir)
	}
	tmpfiles := snippet(t, "shadowgate.tmpfiles")
	for _, want := range [][]string{
		{"d", configDir, "0750", "root", group, "-"},
		{"z", configDir + "/shadowgate.yaml", "0640", "root", group, "-"},
		{"d", stateDir, "0700", user, group, "-"},
	} {
		if !slices.ContainsFunc(tmpfiles, func(f []string) bool { return slices.Equal(f, want) }) {
			t.Errorf("shadowgate.tmpfiles has no line %q", strings.Join(want, " "))
		}
	}

	b, err := os.ReadFile("../examples/packaged.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Gateway struct {
			StateDir string `yaml:"state_dir"`
		} `yaml:"gateway"`
		Mode  string `yaml:"mode"`
		Users []any  `yaml:"users"`
		MQTT  struct {
			Enabled *bool `yaml:"enabled"`
		} `yaml:"mqtt"`
		Web struct {
			Enabled *bool `yaml:"enabled"`
		} `yaml:"web"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Gateway.StateDir != stateDir {
		t.Errorf("examples/packaged.yaml: gateway.state_dir %q, want the unit's %s", c.Gateway.StateDir, stateDir)
	}
	if c.Mode != "observe" {
		t.Errorf("examples/packaged.yaml: mode %q, want observe", c.Mode)
	}
	if len(c.Users) != 0 {
		t.Errorf("examples/packaged.yaml configures users; the first start makes the admin")
	}
	if (c.MQTT.Enabled != nil && !*c.MQTT.Enabled) || (c.Web.Enabled != nil && !*c.Web.Enabled) {
		t.Errorf("examples/packaged.yaml turns the broker or the console off")
	}
}

// snippet returns the fields of each line of a sysusers or tmpfiles file,
// a quoted field as one.
func snippet(t *testing.T, name string) [][]string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	field := regexp.MustCompile(`"[^"]*"|\S+`)
	var lines [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			lines = append(lines, field.FindAllString(line, -1))
		}
	}
	return lines
}

// stubRoot is a root directory systemd-analyze verify can load the unit
// from without the rest of the system: the targets and slices it names,
// and an empty executable at each path an Exec*= line runs (verify refuses
// a command that does not exist; the unit itself is copied unchanged).
// unitText is the unit to put there.
func stubRoot(t *testing.T, unitText []byte) string {
	t.Helper()
	var units string
	for _, d := range []string{"/lib/systemd/system", "/usr/lib/systemd/system"} {
		if _, err := os.Stat(filepath.Join(d, "sysinit.target")); err == nil {
			units = d
			break
		}
	}
	if units == "" {
		if os.Getenv("SHADOWGATE_E2E") == "1" {
			t.Fatal("no systemd unit directory with sysinit.target, and SHADOWGATE_E2E=1 needs this test to run")
		}
		t.Skip("no systemd unit directory with sysinit.target; skipping")
	}
	root := t.TempDir()
	dst := filepath.Join(root, "lib/systemd/system")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"*.target", "*.slice"} {
		files, _ := filepath.Glob(filepath.Join(units, pattern))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // a dangling alias
			}
			if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	exec := regexp.MustCompile(`(?m)^Exec[A-Za-z]*=[-@:+!]*(/\S+)`)
	for _, m := range exec.FindAllSubmatch(unitText, -1) {
		p := filepath.Join(root, string(m[1]))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dst, "shadowgate.service"), unitText, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestUnitVerifies runs systemd-analyze verify on the unit. verify exits 0
// on most mistakes (an unknown key, a bad value, a trailing comment) and
// only prints them, so any output at all fails the test; the second case
// shows a mistake does print.
func TestUnitVerifies(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	shipped, err := os.ReadFile("shadowgate.service")
	if err != nil {
		t.Fatal(err)
	}
	broken := bytes.Replace(shipped, []byte("\nNoNewPrivileges=yes\n"), []byte("\nNoNewPrivileges=yes # no\n"), 1)
	if bytes.Equal(broken, shipped) {
		t.Fatal("shadowgate.service has no NoNewPrivileges=yes line to break")
	}
	for _, tc := range []struct {
		name      string
		unit      []byte
		wantClean bool
	}{
		{"as shipped", shipped, true},
		{"with a trailing comment", broken, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := stubRoot(t, tc.unit)
			cmd := exec.CommandContext(t.Context(), analyze, "verify", "--root="+root, "--man=no", "shadowgate.service")
			out, err := cmd.CombinedOutput()
			clean := err == nil && len(bytes.TrimSpace(out)) == 0
			if clean != tc.wantClean {
				t.Errorf("systemd-analyze verify: clean = %v, want %v (err %v)\n%s", clean, tc.wantClean, err, out)
			}
		})
	}
}

// TestUnitSecurity scores the unit with systemd-analyze security, offline,
// and requires an overall exposure of 1.5 or less. The figure is logged.
func TestUnitSecurity(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	path, err := filepath.Abs("shadowgate.service")
	if err != nil {
		t.Fatal(err)
	}
	// --threshold is in tenths: it exits 1 above 1.5, and the figure is
	// read from the output either way.
	cmd := exec.CommandContext(t.Context(), analyze, "security", "--offline=true", "--threshold=15", "--no-pager", path)
	out, runErr := cmd.CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for shadowgate\.service: ([0-9.]+) (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v, no overall exposure in\n%s", runErr, out)
	}
	exposure, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("systemd-analyze security --offline=true: overall exposure %.1f %s", exposure, m[2])
	if exposure > 1.5 || runErr != nil {
		t.Errorf("overall exposure %.1f (%v), want 1.5 or less\n%s", exposure, runErr, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "ignoring") || strings.Contains(line, "Failed") {
			t.Errorf("systemd-analyze security: %s", line)
		}
	}
}
