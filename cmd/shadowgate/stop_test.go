package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopWithAnIdleConsoleConnection: a connection to the console that
// never sends a request (a browser opens spare ones) does not make a
// SIGTERM a failed stop; it is cut, and the gateway exits 0.
func TestStopWithAnIdleConsoleConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := shadowgateBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	config := filepath.Join(dir, "stop.yaml")
	if err := os.WriteFile(config, []byte(matrixConfig(dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(ctx, t, bin, config)
	base := p.consoleBase(ctx, t)
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// At once: the server counts a new connection idle only after 5 s,
	// by the whole second.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(ctx); code != 0 {
		t.Fatalf("the gateway exited %d; its log:\n%s", code, strings.Join(p.lines(), "\n"))
	}
}
