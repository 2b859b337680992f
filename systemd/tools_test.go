package systemd_test

import (
	"os"
	"os/exec"
	"testing"
)

// needTool returns the path of a program the test needs, skipping without
// it unless SHADOWGATE_E2E=1 demands it.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	for _, p := range []string{name, "/usr/sbin/" + name, "/usr/bin/" + name, "/sbin/" + name} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("SHADOWGATE_E2E") == "1" {
		t.Fatalf("%s is not installed, and SHADOWGATE_E2E=1 needs this test to run (apt-get install %s)", name, pkg)
	}
	t.Skipf("%s is not installed (apt-get install %s); skipping", name, pkg)
	return ""
}

// run runs a command and returns its standard output and error together,
// failing the test if it does not exit 0.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return string(out)
}
