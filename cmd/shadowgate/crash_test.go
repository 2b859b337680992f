package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

// buildBinary builds shadowgate once per test binary.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "shadowgate-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "shadowgate")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return bin, nil
})

func shadowgateBinary(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("SHADOWGATE_E2E") == "1" {
			t.Fatal("go is not on PATH, and SHADOWGATE_E2E=1 needs this test to run")
		}
		t.Skip("go is not on PATH")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatalf("building shadowgate: %v", err)
	}
	return bin
}

// crashConfig is a sim greenhouse whose valve writes are allowed for the
// open-valve plan and whose heater writes ask. extra is appended to the
// valve's fault; every is how often each plan runs.
func crashConfig(dir, fault, every string) string {
	faults := ""
	if fault != "" {
		faults = "      faults:\n        valve-1: {" + fault + "}\n"
	}
	return `gateway:
  id: crash
  state_dir: ` + filepath.Join(dir, "state") + `
mode: supervised
mqtt: {listen: "127.0.0.1:0"}
web: {listen: "127.0.0.1:0"}
drivers:
  - name: sim
    type: sim
    sim:
      state_file: world.json
` + faults + `devices:
  - id: tank-1
    driver: sim
    address: tank
    capabilities:
      - {name: level, kind: sensor, type: number, poll: 1s}
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
  - id: heater-1
    driver: sim
    address: heater
    capabilities:
      - name: "on"
        kind: actuator
        type: bool
        read_back: true
        effects: {reversible: true, contained: true, costs: true}
rules:
  - {id: valve-by-plan, principal: "schedule:open-valve", device: valve-1, capability: open, decision: allow}
plans:
  - name: heat
    every: ` + every + `
    steps:
      - {write: heater-1.on, value: true}
  - name: open-valve
    every: ` + every + `
    steps:
      - {write: valve-1.open, value: true}
`
}

// gatewayProc is a running shadowgate serve and the lines of its log.
type gatewayProc struct {
	cmd   *exec.Cmd
	lines chan string
	all   []string
}

func startGateway(t *testing.T, bin, config string) *gatewayProc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", config, "--log-level", "debug")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A debug log is long: a test that awaits no line for a while must
	// not stall the gateway on a full pipe (see tail).
	g := &gatewayProc{cmd: cmd, lines: make(chan string, 1<<16)}
	go func() {
		defer close(g.lines)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			g.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return g
}

// await reads log lines until match returns true, failing after 30s.
func (g *gatewayProc) await(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-g.lines:
			if !ok {
				t.Fatalf("the gateway exited before %s; its log:\n%s", what, strings.Join(g.all, "\n"))
			}
			g.all = append(g.all, l)
			if match(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s; the log so far:\n%s", what, strings.Join(g.all, "\n"))
		}
	}
}

// awaitEver is await for a line that may already have been read: the
// gateway logs from several goroutines, so a line awaited after another
// may have come before it.
func (g *gatewayProc) awaitEver(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	for _, l := range g.all {
		if match(l) {
			return l
		}
	}
	return g.await(t, what, match)
}

// logTail keeps reading a gateway's log, so that a test that stops
// awaiting lines never stalls the gateway on a full pipe (its logger
// blocks then, and with it what logs), and can still look at them.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

// tail reads the rest of g's log in the background, after what await
// already read.
func (g *gatewayProc) tail() *logTail {
	lt := &logTail{lines: slices.Clone(g.all)}
	go func() { // ends when the gateway's stderr closes
		for l := range g.lines {
			lt.mu.Lock()
			lt.lines = append(lt.lines, l)
			lt.mu.Unlock()
		}
	}()
	return lt
}

// String is the log read so far.
func (lt *logTail) String() string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return strings.Join(lt.lines, "\n")
}

// await waits up to 30s for a line that match accepts.
func (lt *logTail) await(t *testing.T, what string, match func(string) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		lt.mu.Lock()
		found := slices.ContainsFunc(lt.lines, match)
		lt.mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; the log:\n%s", what, lt)
		}
	}
}

func has(subs ...string) func(string) bool {
	return func(l string) bool {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				return false
			}
		}
		return true
	}
}

var approvalID = regexp.MustCompile(`\\"id\\":\\"(apr-[0-9a-f]+)\\"`)

// deviceWorld is what the devices of the test configurations keep in
// their state file, which outlives the gateway as hardware would: the
// valve's position, and how many writes reached each actuator.
type deviceWorld struct {
	State struct {
		Valve bool `json:"valve"`
	} `json:"state"`
	Received map[string]int `json:"received"`
}

// loadWorld reads a state file.
func loadWorld(path string) (deviceWorld, error) {
	var w deviceWorld
	b, err := os.ReadFile(path)
	if err != nil {
		return w, err
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return w, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

func world(t *testing.T, dir string) deviceWorld {
	t.Helper()
	w, err := loadWorld(filepath.Join(dir, "state", "world.json"))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestCrashDuringActuation kills a gateway with SIGKILL while a valve write
// is executing in the driver, restarts it, and checks that nothing was lost
// and nothing repeated.
func TestCrashDuringActuation(t *testing.T) {
	bin := shadowgateBinary(t)
	cases := []struct {
		name  string
		fault string
		// valve is the valve's state after the crash; the read-back decides.
		valve bool
		want  runtime.AttemptState
	}{
		{"the ack was lost, the read-back reconciles", "ack_delay: 1h", true, runtime.AttemptReconciled},
		{"the write hung, the actuator stays locked", "write_delay: 1h", false, runtime.AttemptUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			c1 := filepath.Join(dir, "crash.yaml")
			if err := os.WriteFile(c1, []byte(crashConfig(dir, tc.fault, "1s")), 0o600); err != nil {
				t.Fatal(err)
			}
			g := startGateway(t, bin, c1)
			// The two plans start in either order.
			var asked string
			executing := false
			g.await(t, "the heater's approval request and the valve attempt executing", func(l string) bool {
				if has("msg=approval_requested", "heater-1")(l) {
					asked = l
				}
				if has("msg=invoked", "valve-1", `\"state\":\"executing\"`)(l) {
					executing = true
				}
				return asked != "" && executing
			})
			m := approvalID.FindStringSubmatch(asked)
			if m == nil {
				t.Fatalf("no approval id in %s", asked)
			}
			apr := m[1]
			// The device has the command in hand once its world says so.
			deadline := time.Now().Add(10 * time.Second)
			for {
				// With a lost ack, the valve has moved before the answer.
				if w, err := loadWorld(filepath.Join(dir, "state", "world.json")); err == nil &&
					w.Received["valve-1.open"] == 1 && w.State.Valve == tc.valve {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the valve never received the write")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = g.cmd.Wait()
			if w := world(t, dir); w.State.Valve != tc.valve || w.Received["valve-1.open"] != 1 {
				t.Fatalf("the world after the crash = %+v", w)
			}

			// Restart without the fault. Only the locked case schedules the
			// valve again, to see the lock refuse it.
			c2 := filepath.Join(dir, "restart.yaml")
			every := "1h"
			if tc.want == runtime.AttemptUnknown {
				every = "1s"
			}
			if err := os.WriteFile(c2, []byte(crashConfig(dir, "", every)), 0o600); err != nil {
				t.Fatal(err)
			}
			g = startGateway(t, bin, c2)
			// Events and the engine's own log lines may interleave in any order.
			var recovered, settled bool
			settle := has("msg=reconciled", "valve-1")
			if tc.want == runtime.AttemptUnknown {
				settle = has("msg=\"actuator stays locked\"")
			}
			g.await(t, "the recovery of the attempt and its outcome", func(l string) bool {
				recovered = recovered || has("msg=recovered", `\"to\":\"unknown\"`)(l)
				settled = settled || settle(l)
				return recovered && settled
			})
			if tc.want == runtime.AttemptUnknown {
				g.await(t, "a new valve write to be refused", has("msg=refused", "valve-1.open is locked: attempt"))
			}
			if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			g.await(t, "a clean stop", has(`msg="gateway stopped"`))
			if err := g.cmd.Wait(); err != nil {
				t.Fatalf("the restarted gateway exited with %v", err)
			}

			out, err := exec.Command(bin, "journal", "verify", "--state-dir", filepath.Join(dir, "state")).CombinedOutput()
			if err != nil || !strings.Contains(string(out), ": ok\n") || !strings.Contains(string(out), "pending approvals: 1\n") {
				t.Fatalf("journal verify = %v:\n%s", err, out)
			}
			if locked := strings.Contains(string(out), "locked: valve-1.open by attempt"); locked != (tc.want == runtime.AttemptUnknown) {
				t.Fatalf("journal verify on the lock:\n%s", out)
			}

			j, err := journal.Open(journal.Path(filepath.Join(dir, "state")), journal.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			ctx := context.Background()
			snap, err := j.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Approvals) != 1 || snap.Approvals[0].ID != apr || snap.Approvals[0].Status != runtime.ApprovalPending {
				t.Fatalf("pending approvals after the crash = %+v, want %s", snap.Approvals, apr)
			}
			evs, err := j.Events(ctx, 0, 10000)
			if err != nil {
				t.Fatal(err)
			}
			var key string
			for _, ev := range evs {
				if ev.Kind == runtime.KindRecovered {
					var b struct{ Key, To string }
					_ = json.Unmarshal(ev.Body, &b)
					if b.To == string(runtime.AttemptUnknown) {
						key = b.Key
					}
				}
			}
			a, found, err := j.Attempt(ctx, key)
			if err != nil || !found || a.State != tc.want || a.Device != "valve-1" {
				t.Fatalf("the valve attempt %q = %+v (found %v, %v), want %s", key, a, found, err, tc.want)
			}
			if n := world(t, dir).Received["valve-1.open"]; n != 1 {
				t.Fatalf("the valve received %d writes in all, want exactly 1", n)
			}
		})
	}
}
