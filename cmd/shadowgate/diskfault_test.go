package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/internal/failpoint"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

// smallFS mounts a tmpfs of size (mount's size=, as "1m") on a new
// directory for the test, unmounted when the test ends. Mounting needs
// root (CAP_SYS_ADMIN): without it the test skips, unless SHADOWGATE_E2E=1
// demands it.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		if os.Getenv("SHADOWGATE_E2E") == "1" {
			t.Fatalf("mounting a %s tmpfs for a full disk: %v; SHADOWGATE_E2E=1 needs this test to run (as root)", size, err)
		}
		t.Skipf("mounting a %s tmpfs for a full disk needs root: %v; skipping", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// diskConfig is a gateway whose state is on fs, the small filesystem,
// and whose simulated hardware keeps its state file in hw, elsewhere, as
// real hardware does not share the gateway's disk. The tank's level is
// polled often, so that a reading can be seen to be taken after the
// journal failed; the pump declares no effects, so its writes ask.
func diskConfig(fs, hw string) string {
	return `gateway:
  id: disk
  state_dir: ` + filepath.Join(fs, "state") + `
mode: interlocked
users:
  - {name: appr, role: approver, password_hash: "$2a$04$6R65H3gQGrIAb3Mwptc9JuTNMdfGoqFaZE5tpY15q854t7qyQrPoa"}
  - {name: carol, role: approver, password_hash: "$2a$04$0gCHboXg9EGEHIRY0Y/Tm.Hzb04510N1zeXzWmjPloezHWHkj4YyC"}
mqtt: {listen: "127.0.0.1:0"}
web:
  listen: "127.0.0.1:0"
  tokens:
    - {name: appr-ci, role: approver, user: appr, token_hash: 851053361a8bdfef82a330b5975be6665b3da46550ba22f911340372698d06d0}
    - {name: carol-ci, role: approver, user: carol, token_hash: 31490ebeddd3fce409c0f2931220f0e13f7ad7bf31a4e3bec886d5298060a1b4}
drivers:
  - name: sim
    type: sim
    sim:
      state_file: ` + filepath.Join(hw, "world.json") + `
devices:
  - id: tank-1
    driver: sim
    address: tank
    capabilities:
      - {name: level, kind: sensor, type: number, unit: "%", poll: 200ms}
  - id: pump-1
    driver: sim
    address: pump
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true}
  - id: valve-1
    driver: sim
    address: valve
    capabilities:
      - name: open
        kind: actuator
        type: bool
        read_back: true
        effects: {reversible: true, contained: true}
        confirm: {read_back: true, within: 2s}
`
}

// tankReadAt returns when the gateway last read tank-1.level, as
// GET /api/v1/devices shows it.
func (c *matrixCell) tankReadAt(ctx context.Context) (time.Time, error) {
	status, body, err := c.do(ctx, http.MethodGet, "appr-ci", "/api/v1/devices", "")
	if err != nil {
		return time.Time{}, err
	}
	if status != http.StatusOK {
		return time.Time{}, fmt.Errorf("GET /api/v1/devices = %d %s", status, body)
	}
	var devs []struct {
		ID           string `json:"id"`
		Capabilities []struct {
			Name    string `json:"name"`
			Reading *struct {
				At time.Time `json:"at"`
			} `json:"reading"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(body, &devs); err != nil {
		return time.Time{}, fmt.Errorf("GET /api/v1/devices: %w: %s", err, body)
	}
	for _, d := range devs {
		for _, cp := range d.Capabilities {
			if d.ID == "tank-1" && cp.Name == "level" && cp.Reading != nil {
				return cp.Reading.At, nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("GET /api/v1/devices has no reading of tank-1.level: %s", body)
}

// TestDiskFullFailsClosed keeps the journal on a 1 MiB filesystem and
// sends a burst of valve writes until the disk is full. From the first
// commit that cannot be written, the gateway refuses every act and says
// why (the reply, the log, /readyz), writes nothing more to the valve,
// and goes on reading the tank. Stopped, given room, and started again,
// its journal verifies, holds every act a client was told of and the
// approval that waited, and the valve acts again.
func TestDiskFullFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary on a small filesystem")
	}
	fs := smallFS(t, "1m")
	d := startDiskFault(t, shadowgateBinary(t), fs)
	ctx := d.ctx

	// The burst: writes with long reasons, until one is not acted.
	reason := strings.Repeat("filling the disk ", 60)
	for i := 0; ; i++ {
		if i == 20000 {
			t.Fatalf("20000 writes and the 1 MiB disk is not full; the log:\n%s", strings.Join(d.p.lines(), "\n"))
		}
		status, body, err := d.post(ctx, "appr-ci", "/api/v1/commands",
			fmt.Sprintf(`{"device":"valve-1","capability":"open","value":%t,"id":"burst-%d","reason":%q}`, i%2 == 0, i, reason))
		if err != nil {
			t.Fatalf("write %d: no answer: %v; the log:\n%s", i, err, strings.Join(d.p.lines(), "\n"))
		}
		var r matrixReply
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("write %d = %d %s", i, status, body)
		}
		if id := r.acted(); id != "" {
			d.acted = append(d.acted, id)
			continue
		}
		t.Logf("the disk filled at write %d, after %d acts: %s: %s", i, len(d.acted), r.Outcome, r.Why)
		d.checkFailedClosed(r, "no space left on device")
		break
	}
	d.stop()
	if err := syscall.Mount("tmpfs", fs, "tmpfs", syscall.MS_REMOUNT, "size=64m,mode=0700"); err != nil {
		t.Fatalf("giving the filesystem room: %v", err)
	}
	d.restart()
}

// TestFsyncErrorFailsClosed arms the group commit to fail, as an fsync
// that returns an I/O error would, and checks what the full disk's test
// checks: the gateway refuses to act, says why, writes nothing, reads its
// sensors; after a restart its journal verifies and it acts again (or, if
// the failed commit's executing record was on disk, locks the valve for an
// admin: failing closed).
func TestFsyncErrorFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with failpoints and runs it")
	}
	bin := failpointBinary(t)
	armFile := filepath.Join(t.TempDir(), "arm")
	d := startDiskFault(t, bin, t.TempDir(), failpoint.EnvSpec+"="+failpoint.JournalAfterWrite+"=error(input/output error)",
		failpoint.EnvArm+"="+armFile)
	if err := os.WriteFile(armFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := d.command(d.ctx, "appr-ci", "valve-1", "open", "true", "req-1")
	if err != nil || r.Outcome != "failed" {
		t.Fatalf("valve-1.open with the journal failing = %+v, %v; want failed", r, err)
	}
	d.checkFailedClosed(r, "input/output error")
	d.stop()
	d.restart()
}

// diskFault is a gateway on diskConfig whose journal is made to fail.
type diskFault struct {
	*matrixCell
	ctx context.Context
	// fs holds the state; hw the sim's state file.
	fs, hw string
	// acted are the acts a client was told of.
	acted []string
	// received is what the valve had received when the journal failed.
	received int
}

// startDiskFault starts bin on a diskConfig whose state is on fs, with env
// added to its environment, asks for an approval that must survive, and
// makes one write that acts.
func startDiskFault(t *testing.T, bin, fs string, env ...string) *diskFault {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	d := &diskFault{matrixCell: &matrixCell{t: t, bin: bin, dir: dir}, ctx: ctx, fs: fs, hw: t.TempDir()}
	d.config = filepath.Join(dir, "disk.yaml")
	if err := os.WriteFile(d.config, []byte(diskConfig(fs, d.hw)), 0o600); err != nil {
		t.Fatal(err)
	}
	d.p = startProc(ctx, t, bin, d.config, env...)
	d.base = d.p.consoleBase(ctx, t)
	by := d.awaitCommand(ctx, "appr-ci", "pump-1", "on", "true", "bystander")
	if by.Outcome != "pending_approval" || by.Approval == nil {
		t.Fatalf("the bystander's command = %+v, want pending_approval", by)
	}
	d.asked = append(d.asked, by.Approval.ID)
	if r, err := d.command(ctx, "appr-ci", "valve-1", "open", "false", "first"); err != nil || r.acted() == "" {
		t.Fatalf("the first write = %+v, %v; want acted", r, err)
	} else {
		d.acted = append(d.acted, r.acted())
	}
	return d
}

// checkFailedClosed checks a gateway whose journal just failed with
// cause, as the reply first shows: every write is refused, saying why,
// and none reaches the valve; /readyz says not ready and why; the log
// says why; the tank is still read.
func (d *diskFault) checkFailedClosed(first matrixReply, cause string) {
	t, ctx := d.t, d.ctx
	failedAt := time.Now()
	d.received = mustWorldIn(t, d.hw).Received["valve-1.open"]
	if first.acted() != "" || !strings.Contains(first.Why, "journal") || !strings.Contains(first.Why, cause) {
		t.Errorf("the write the journal failed = %+v; want it not acted, naming the journal and %q", first, cause)
	}
	for i := range 5 {
		r, err := d.command(ctx, "appr-ci", "valve-1", "open", fmt.Sprint(i%2 == 0), fmt.Sprintf("after-%d", i))
		if err != nil || r.acted() != "" || !strings.Contains(r.Why, cause) {
			t.Errorf("a write with the journal failed = %+v, %v; want it refused, saying %q", r, err, cause)
		}
	}
	if n := mustWorldIn(t, d.hw).Received["valve-1.open"]; n != d.received {
		t.Errorf("valve-1.open received %d writes after the journal failed (from %d to %d), want none", n-d.received, d.received, n)
	}
	status, body, err := d.do(ctx, http.MethodGet, "appr-ci", "/readyz", "")
	if err != nil || status == http.StatusOK || !strings.Contains(string(body), cause) {
		t.Errorf("/readyz with the journal failed = %d %s, %v; want not ready, saying %q", status, body, err, cause)
	}
	if !d.p.awaitLine(ctx, cause) {
		t.Errorf("the log never says %q; the log:\n%s", cause, strings.Join(d.p.lines(), "\n"))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		at, err := d.tankReadAt(ctx)
		if err == nil && at.After(failedAt) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reading of the tank after the journal failed (last %v, %v)", at, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop stops the gateway whose journal failed, which must not hang.
func (d *diskFault) stop() {
	t := d.t
	if err := d.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := d.p.wait(d.ctx)
	if code < 0 {
		t.Fatalf("the gateway with a failed journal did not stop on SIGTERM; its log:\n%s", strings.Join(d.p.lines(), "\n"))
	}
	t.Logf("the gateway with a failed journal stopped with %d", code)
}

// restart starts the gateway again with a journal that can write: the
// journal verifies, the approval still waits, the valve acts (or is
// locked by the write the journal failed, whose executing record was
// written: failing closed), and every act a client was told of is in the
// journal, no write more than the acts reached the valve.
func (d *diskFault) restart() {
	t, ctx := d.t, d.ctx
	state := filepath.Join(d.fs, "state")
	out, err := exec.CommandContext(ctx, d.bin, "journal", "verify", "--state-dir", state).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": ok\n") {
		t.Fatalf("journal verify after the failure = %v:\n%s", err, out)
	}
	d.p = startProc(ctx, t, d.bin, d.config)
	d.base = d.p.consoleBase(ctx, t)
	d.p.awaitSettled(ctx, t)
	r := d.awaitCommand(ctx, "appr-ci", "valve-1", "open", "true", "after-restart")
	locked := r.Outcome == "refused" && strings.Contains(r.Why, "is locked")
	switch id := r.acted(); {
	case id != "":
		d.acted = append(d.acted, id)
	case locked:
		t.Logf("the failed write's executing record was durable: valve-1.open is locked for an admin: %s", r.Why)
	default:
		t.Errorf("valve-1.open after the restart = %+v, want acted, or locked by the failed write's unknown effect", r)
	}
	if pending := d.pendingApprovals(ctx); !slices.Equal(pending, d.asked) {
		t.Errorf("pending approvals after the restart = %q, want the bystander's %q", pending, d.asked)
	}
	if err := d.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := d.p.wait(ctx); code != 0 {
		t.Fatalf("the restarted gateway exited %d; its log:\n%s", code, strings.Join(d.p.lines(), "\n"))
	}
	d.dir = d.fs
	d.verify(ctx)
	j, err := journal.Open(journal.Path(state), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	evs, err := j.Events(ctx, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	journaled := map[string]bool{}
	for _, ev := range evs {
		if ev.Kind == runtime.KindActed {
			var rc runtime.Receipt
			if json.Unmarshal(ev.Body, &rc) == nil {
				journaled[rc.Attempt] = true
			}
		}
	}
	for _, id := range d.acted {
		if !journaled[id] {
			t.Errorf("a client was told attempt %s acted, and the journal does not have it", id)
		}
	}
	// Each act wrote once; the write the journal failed, if its
	// executing record was durable, may have been counted too.
	if n := mustWorldIn(t, d.hw).Received["valve-1.open"]; n < len(d.acted) || n > len(d.acted)+1 {
		t.Errorf("valve-1.open received %d writes; %d acts were answered acted", n, len(d.acted))
	}
}

// mustWorldIn reads a sim's state file in dir; none means no write yet.
func mustWorldIn(t *testing.T, dir string) deviceWorld {
	t.Helper()
	w, err := loadWorld(filepath.Join(dir, "world.json"))
	if errors.Is(err, os.ErrNotExist) {
		return deviceWorld{Received: map[string]int{}}
	}
	if err != nil {
		t.Fatal(err)
	}
	return w
}
