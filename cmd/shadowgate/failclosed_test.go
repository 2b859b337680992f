package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/internal/failpoint"
)

// TestFailpointErrorFailsClosed arms the group commit to fail, as an
// fsync that returns an I/O error would: the gateway refuses to act, says
// it is not ready, and after a restart its journal verifies and nothing
// acted.
func TestFailpointErrorFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with failpoints and runs it")
	}
	bin := failpointBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c := &matrixCell{t: t, bin: bin, dir: dir, fp: failpoint.JournalAfterWrite}
	c.config = filepath.Join(dir, "matrix.yaml")
	if err := os.WriteFile(c.config, []byte(c.configText()), 0o600); err != nil {
		t.Fatal(err)
	}
	armFile := filepath.Join(dir, "arm")
	p := startProc(ctx, t, bin, c.config, failpoint.EnvSpec+"="+failpoint.JournalAfterWrite+"=error(input/output error)",
		failpoint.EnvArm+"="+armFile)
	c.base, c.p = p.consoleBase(ctx, t), p
	if r := c.awaitCommand(ctx, "appr-ci", "pump-1", "on", "true", "bystander"); r.Outcome != "pending_approval" {
		t.Fatalf("the bystander's command = %+v, want pending_approval", r)
	}
	if err := os.WriteFile(armFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := c.command(ctx, "appr-ci", "valve-1", "open", "true", "req-1")
	if err != nil || r.Outcome != "failed" {
		t.Fatalf("valve-1.open with the journal failing = %+v, %v; want failed", r, err)
	}
	status, body, err := c.do(ctx, http.MethodGet, "carol-ci", "/readyz", "")
	if err != nil || status == http.StatusOK {
		t.Errorf("/readyz with the journal failing = %d %s, %v; want not ready", status, body, err)
	}
	if r, err := c.command(ctx, "appr-ci", "valve-1", "open", "true", "req-2"); err != nil || r.Outcome == "acted" {
		t.Errorf("a second command with the journal failed = %+v, %v; want it refused", r, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := p.wait(ctx)
	t.Logf("the gateway with a failing journal exited %d", code)
	if n := mustWorld(t, dir).Received["valve-1.open"]; n != 0 {
		t.Fatalf("valve-1.open received %d writes with the journal failing, want none", n)
	}
	// Restarted with a journal that works, it verifies and acts again.
	p = startProc(ctx, t, bin, c.config)
	c.base, c.p = p.consoleBase(ctx, t), p
	p.awaitSettled(ctx, t)
	// Which commit the failpoint failed first depends on the batching:
	// if it was the one that made req-1's attempt executing, that record
	// is on disk (the failure came after bbolt's write), nothing was
	// written to the valve, and the restart finds an act whose effect is
	// unknown: it locks the valve for an admin, failing closed. Else the
	// valve acts.
	r = c.awaitCommand(ctx, "appr-ci", "valve-1", "open", "true", "req-3")
	switch locked := r.Outcome == "refused" && strings.Contains(r.Why, "is locked") && strings.Contains(r.Why, "api:appr-ci/req-1"); {
	case locked:
		t.Logf("req-1's executing record was durable: valve-1.open is locked for an admin: %s", r.Why)
		if status, body, err := c.do(ctx, http.MethodGet, "carol-ci", "/readyz", ""); err != nil || status != http.StatusOK {
			t.Errorf("/readyz after the restart = %d %s, %v; want ready", status, body, err)
		}
	case r.acted() == "":
		t.Errorf("valve-1.open after the restart = %+v, want acted, or locked by req-1's unknown effect", r)
	}
	if pending := c.pendingApprovals(ctx); len(pending) != 1 {
		t.Errorf("pending approvals after the restart = %q, want the bystander's", pending)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(ctx); code != 0 {
		t.Fatalf("the restarted gateway exited %d; its log:\n%s", code, strings.Join(p.lines(), "\n"))
	}
	c.verify(ctx)
}
