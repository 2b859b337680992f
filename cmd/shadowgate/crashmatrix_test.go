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
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/internal/failpoint"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

// buildFailpointBinary builds shadowgate with the failpoints tag once per
// test binary, into a temporary directory.
var buildFailpointBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "shadowgate-failpoints-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "shadowgate")
	out, err := exec.Command("go", "build", "-tags", "failpoints", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build -tags failpoints: %w\n%s", err, out)
	}
	return bin, nil
})

func failpointBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("SHADOWGATE_E2E") == "1" {
			t.Fatal("go is not on PATH, and SHADOWGATE_E2E=1 needs this test to run")
		}
		t.Skip("go is not on PATH")
	}
	bin, err := buildFailpointBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestShippedBinaryHasNoFailpoints: the binary built without the tag holds
// none of the failpoints' names, nor the variable that arms them; the one
// built with it holds them all, so the check can fail.
func TestShippedBinaryHasNoFailpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	shipped, err := os.ReadFile(shadowgateBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := os.ReadFile(failpointBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(slices.Clone(failpoint.All), "SHADOWGATE_FAILPOINTS") {
		if strings.Contains(string(shipped), s) {
			t.Errorf("the shipped binary holds %q", s)
		}
		if !strings.Contains(string(tagged), s) {
			t.Errorf("the binary built with -tags failpoints lacks %q", s)
		}
	}
}

// matrixPoints are the rows of the matrix: every failpoint at its first
// hit once armed, and the group commit's at later hits too, which the
// request's later commits reach (its executing record, its receipt).
func matrixPoints() []string {
	out := slices.Clone(failpoint.All)
	for _, fp := range []string{failpoint.JournalBeforeWrite, failpoint.JournalAfterWrite} {
		i := slices.Index(out, fp)
		out = slices.Insert(out, i+1, fp+"@2", fp+"@3", fp+"@4")
	}
	return out
}

// fpExit is the exit code a matrix failpoint exits with, so that its exit
// is told from any other.
const fpExit = 86

// matrixConfig is a sim greenhouse in the interlocked mode: the valves'
// writes (reversible, contained) run (valve-2 is a second greenhouse's,
// so that a plan writes two actuators that both run); the heater's (not contained) ask;
// the pump declares no effects, gets the worst case and asks. No sensor is polled and no plan is
// scheduled, so that once it is up, the gateway writes only what a request
// makes it write. The sims' state files count every write an actuator
// receives, across restarts, as hardware would. The tokens are those of
// testdata/foureyes.yaml: appr-ci asks, carol-ci approves.
func matrixConfig(dir string) string {
	return `gateway:
  id: matrix
  state_dir: ` + filepath.Join(dir, "state") + `
mode: interlocked
approvals: {timeout: 5m, operate_within: 15s}
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
      state_file: world.json
  - name: sim2
    type: sim
    sim:
      state_file: world2.json
devices:
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
  - id: valve-2
    driver: sim2
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
        effects: {reversible: true, contained: false, costs: true}
        confirm: {read_back: true, within: 2s}
  - id: pump-1
    driver: sim
    address: pump
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true}
plans:
  - name: two
    steps:
      - {write: valve-1.open, value: true}
      - {write: valve-2.open, value: true}
`
}

// A matrix request kind: what a client asks of the gateway while a
// failpoint is armed.
type matrixKind struct {
	name string
	// targets are the actuators the request writes.
	targets []string
	// send makes the request, the failpoint armed by arm() at the moment
	// the kind chooses. It returns the acts the client saw (attempt ids)
	// and whether the gateway answered to the end: if not, it went down.
	send func(ctx context.Context, c *matrixCell, arm func()) (seen []string, answered bool)
	// again sends the request again after the restart, as a client that
	// never heard back would, and returns the acts it saw.
	again func(ctx context.Context, c *matrixCell) []string
	// uplink is set for a request that comes through the uplink.
	uplink bool
}

// commandAgain sends the command req-1 to target again.
func commandAgain(target string) func(ctx context.Context, c *matrixCell) []string {
	return func(ctx context.Context, c *matrixCell) []string {
		dev, capab, _ := strings.Cut(target, ".")
		if id := c.awaitCommand(ctx, "appr-ci", dev, capab, "true", "req-1").acted(); id != "" {
			return []string{id}
		}
		return nil
	}
}

var matrixKinds = []matrixKind{
	{name: "write runs", targets: []string{"valve-1.open"}, again: commandAgain("valve-1.open"),
		send: func(ctx context.Context, c *matrixCell, arm func()) ([]string, bool) {
			arm()
			r, err := c.command(ctx, "appr-ci", "valve-1", "open", "true", "req-1")
			if err != nil {
				return nil, false
			}
			if id := r.acted(); id != "" {
				return []string{id}, true
			}
			return nil, true
		}},
	{name: "parked, approved", targets: []string{"heater-1.on"}, again: commandAgain("heater-1.on"),
		send: func(ctx context.Context, c *matrixCell, arm func()) ([]string, bool) {
			r, err := c.command(ctx, "appr-ci", "heater-1", "on", "true", "req-1")
			if err != nil || r.Outcome != "pending_approval" || r.Approval == nil {
				c.t.Fatalf("heater-1.on before the failpoint was armed = %+v, %v; want pending_approval", r, err)
			}
			c.asked = append(c.asked, r.Approval.ID)
			arm()
			status, body, err := c.post(ctx, "carol-ci", "/api/v1/approvals/"+r.Approval.ID,
				`{"decision":"approve","device":"heater-1","capability":"on","value":true,"reason":"crash matrix"}`)
			if err != nil {
				return nil, false
			}
			if status != http.StatusOK {
				c.t.Fatalf("approving %s = %d %s", r.Approval.ID, status, body)
			}
			// The act runs after the answer: what it came to is in the
			// run's events, as any viewer of the API sees them.
			return c.awaitRun(ctx, r.Approval.Run)
		}},
	{name: "plan, two writes", targets: []string{"valve-1.open", "valve-2.open"},
		send: func(ctx context.Context, c *matrixCell, arm func()) ([]string, bool) {
			arm()
			run, ok := c.startPlan(ctx)
			if !ok {
				return nil, false
			}
			return c.awaitRun(ctx, run)
		},
		// Sent again with the same id after the restart: it is the run it
		// started (ended, if the crash cut it short), and writes nothing
		// again; a start the crash lost before it was journaled is a new
		// run, the first to act.
		again: func(ctx context.Context, c *matrixCell) []string {
			run, ok := c.startPlan(ctx)
			if !ok {
				c.t.Errorf("the plan start sent again after the restart got no answer")
				return nil
			}
			if run == "" {
				return nil
			}
			seen, _ := c.awaitRun(ctx, run)
			return seen
		}},
	{name: "upstream command", targets: []string{"valve-1.open"}, uplink: true,
		send: func(ctx context.Context, c *matrixCell, arm func()) ([]string, bool) {
			// Armed once the uplink listens: the uplink's own journaling
			// as it connects (its link event) would otherwise crash the
			// gateway before there is a command to serve.
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			c.site.waitSubscribed(wctx, "shadowgate/matrix/cmd/valve-1/open")
			cancel()
			arm()
			return c.upstream(ctx)
		},
		again: func(ctx context.Context, c *matrixCell) []string {
			seen, answered := c.upstream(ctx)
			if !answered {
				c.t.Errorf("the upstream command sent again after the restart got no reply")
			}
			return seen
		}},
	{name: "console login", send: func(ctx context.Context, c *matrixCell, arm func()) ([]string, bool) {
		arm()
		return nil, c.login(ctx, "carol")
	}, again: func(ctx context.Context, c *matrixCell) []string {
		if !c.login(ctx, "carol") {
			c.t.Errorf("logging in after the restart failed")
		}
		return nil
	}},
	{name: "reload", send: func(ctx context.Context, c *matrixCell, arm func()) ([]string, bool) {
		arm()
		// A new rule, which a reload may put in force at once.
		rule := "rules:\n  - {id: heat-ok, principal: \"api:appr-ci\", device: heater-1, capability: \"on\", decision: allow}\n"
		if err := os.WriteFile(c.config, []byte(c.configText()+rule), 0o600); err != nil {
			c.t.Fatal(err)
		}
		if err := c.p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			c.t.Fatal(err)
		}
		return nil, c.p.awaitLine(ctx, `msg="configuration reloaded"`)
	}, again: func(context.Context, *matrixCell) []string { return nil }},
}

// TestCrashMatrix crashes the gateway at each failpoint while it serves
// each kind of request, restarts it without the failpoint and checks the
// promises: every intent that reached executing is receipted, failed,
// reconciled, or unknown and locked; no actuator received a write twice,
// not even when the client sends the same request again after the
// restart; every act a client saw is in the journal; journal verify
// passes; pending approvals survive.
func TestCrashMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with failpoints and runs it twice per cell")
	}
	bin := failpointBinary(t)
	// The cells run in parallel, after this function returns: the
	// context ends with the test's cleanup, not with the function.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	var mu sync.Mutex
	rows := map[string]map[string]string{}
	t.Cleanup(func() {
		// The matrix, as it came out.
		var b strings.Builder
		fmt.Fprintf(&b, "%-30s", "failpoint")
		for _, k := range matrixKinds {
			fmt.Fprintf(&b, " | %-34s", k.name)
		}
		for _, fp := range matrixPoints() {
			fmt.Fprintf(&b, "\n%-30s", fp)
			for _, k := range matrixKinds {
				fmt.Fprintf(&b, " | %-34s", rows[fp][k.name])
			}
		}
		t.Logf("crash matrix:\n%s", b.String())
	})
	for _, fp := range matrixPoints() {
		for _, kind := range matrixKinds {
			t.Run(fp+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				c := &matrixCell{t: t, bin: bin, dir: t.TempDir(), fp: fp, kind: kind}
				res := c.run(ctx)
				t.Logf("%-30s × %-18s %s", fp, kind.name, res)
				mu.Lock()
				defer mu.Unlock()
				if rows[fp] == nil {
					rows[fp] = map[string]string{}
				}
				rows[fp][kind.name] = res
			})
		}
	}
}

// matrixCell is one failpoint × one request kind.
type matrixCell struct {
	t   *testing.T
	bin string
	dir string
	// fp is the failpoint, with @N for its Nth hit.
	fp   string
	kind matrixKind
	base string
	// config is the configuration file; p the gateway running on it.
	config string
	p      *proc
	// uplink, if set, is the site broker's address the uplink forwards to;
	// site is that broker, when the test runs it.
	uplink string
	site   *siteBroker
	// asked are the approvals asked for before the crash: each must be
	// pending or answered after it, never gone.
	asked []string
}

// configText is the cell's configuration: the matrix's, with a journal
// that keeps a few events, or ended records for a millisecond, or signs
// every few events, only where pruning or checkpoints are the point, so
// that the request's own writes are pruned or signed.
func (c *matrixCell) configText() string {
	cfg := matrixConfig(c.dir)
	// What the gateway queues as it starts is written before a row is
	// armed, so that a row's first write is the request's.
	journal := "flush_interval: 100ms"
	switch {
	case strings.HasPrefix(c.fp, failpoint.JournalPruneEvents):
		journal += ", max_events: 12, store_interval: 200ms"
	case strings.HasPrefix(c.fp, failpoint.JournalPruneRecords):
		journal += ", keep_records: 1ms"
	case strings.HasPrefix(c.fp, failpoint.JournalCheckpoint):
		// A checkpoint every few events, so that the request's own
		// events are signed.
		journal += ", checkpoint_every: 3"
	case strings.HasPrefix(c.fp, failpoint.JournalStoreBatch), strings.HasPrefix(c.fp, failpoint.JournalLogRemove):
		// The store follows the log within the request, not at the stop.
		journal += ", store_interval: 200ms"
	}
	cfg += "journal: {" + journal + "}\n"
	if c.uplink != "" {
		// The outbox's rows forward to a site broker: a live one, whose
		// acknowledgements delete what was delivered, or, for the trim, a
		// dead address and a small backlog, so that telemetry is dropped.
		cfg += "uplink: {url: \"tcp://" + c.uplink + "\", client_id: matrix-site, user: appr"
		if strings.HasPrefix(c.fp, failpoint.OutboxTrim) {
			cfg += ", max_backlog: 2KiB"
		}
		cfg += "}\n"
	}
	return cfg
}

// run crashes, restarts and checks; it returns the cell's line of the
// matrix.
func (c *matrixCell) run(ctx context.Context) string {
	t := c.t
	config := filepath.Join(c.dir, "matrix.yaml")
	c.config = config
	switch {
	case c.kind.uplink || (strings.HasPrefix(c.fp, "outbox:") && !strings.HasPrefix(c.fp, failpoint.OutboxTrim)):
		c.site = startSiteBroker(t)
		c.uplink = c.site.addr
	case strings.HasPrefix(c.fp, failpoint.OutboxTrim):
		c.uplink = "127.0.0.1:1"
	}
	if err := os.WriteFile(config, []byte(c.configText()), 0o600); err != nil {
		t.Fatal(err)
	}
	armFile := filepath.Join(c.dir, "arm")
	name, nth, _ := strings.Cut(c.fp, "@")
	if nth != "" {
		nth = "@" + nth
	}
	armed := []string{failpoint.EnvSpec + "=" + name + fmt.Sprintf("=exit(%d)", fpExit) + nth, failpoint.EnvArm + "=" + armFile}
	p := startProc(ctx, t, c.bin, config, armed...)
	c.base, c.p = p.consoleBase(ctx, t), p
	// A bystander: an approval asked for before the crash, never answered.
	by := c.awaitCommand(ctx, "appr-ci", "pump-1", "on", "true", "bystander")
	if by.Outcome != "pending_approval" || by.Approval == nil {
		t.Fatalf("the bystander's command = %+v, want pending_approval", by)
	}
	c.asked = append(c.asked, by.Approval.ID)
	seen, answered := c.kind.send(ctx, c, func() {
		if err := os.WriteFile(armFile, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if answered {
		// Not reached by this request: it may still be reached on the way
		// down, by the stop's own commits.
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	code := p.wait(ctx)
	hit := slices.ContainsFunc(p.lines(), func(l string) bool { return strings.HasPrefix(l, "failpoint "+name+" fired") })
	if name == failpoint.JournalPruneRecords && !hit && code == 0 && len(c.kind.targets) > 0 {
		// Records that ended before the retention window are pruned when
		// the journal opens: start again, armed, over the records this
		// request ended (keep_records is a millisecond in this row).
		p = startProc(ctx, t, c.bin, config, armed...)
		code = p.wait(ctx)
		hit = slices.ContainsFunc(p.lines(), func(l string) bool { return strings.HasPrefix(l, "failpoint "+name+" fired") })
	}
	if hit != (code == fpExit) {
		t.Fatalf("the gateway exited %d, failpoint fired %v; its log:\n%s", code, hit, strings.Join(p.lines(), "\n"))
	}
	if !hit && code != 0 {
		t.Fatalf("the gateway exited %d with no failpoint fired; its log:\n%s", code, strings.Join(p.lines(), "\n"))
	}
	before := mustWorld(t, c.dir)

	// Restart without the failpoint; the client sends its request again,
	// as one that never heard back would.
	p = startProc(ctx, t, c.bin, config)
	c.base, c.p = p.consoleBase(ctx, t), p
	p.awaitSettled(ctx, t)
	// Not sent again where retention prunes ended records within a
	// millisecond: a request id is recognised for as long as its
	// attempt's record is kept (keep_records), and after that a request
	// sent again is a new one.
	var again []string
	if name != failpoint.JournalPruneRecords {
		again = c.kind.again(ctx, c)
	}
	for _, id := range again {
		if len(seen) > 0 && !slices.Contains(seen, id) {
			t.Errorf("the request sent again acted as attempt %s; the client had seen attempts %q act", id, seen)
		}
	}
	pending := c.pendingApprovals(ctx)
	if !slices.Contains(pending, c.asked[0]) {
		t.Errorf("the bystander's approval %s is not pending after the restart; pending: %q", c.asked[0], pending)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(ctx); code != 0 {
		t.Fatalf("the restarted gateway exited %d; its log:\n%s", code, strings.Join(p.lines(), "\n"))
	}
	after := mustWorld(t, c.dir)
	locked := c.verify(ctx)
	st := c.checkJournal(ctx, seen, locked)
	for _, a := range []string{"valve-1.open", "valve-2.open", "heater-1.on", "pump-1.on"} {
		if n := after.Received[a]; n > 1 {
			t.Errorf("%s received %d writes (%d before the restart), want at most 1", a, n, before.Received[a])
		}
	}
	if n := after.Received["pump-1.on"]; n != 0 {
		t.Errorf("the bystander pump-1.on received %d writes, want none", n)
	}
	where := "not reached"
	if hit {
		where = "crashed"
	}
	var writes []string
	for _, target := range c.kind.targets {
		writes = append(writes, fmt.Sprintf("%d→%d", before.Received[target], after.Received[target]))
	}
	if len(writes) == 0 {
		return where + "; " + st
	}
	return fmt.Sprintf("%s; %s; writes %s", where, st, strings.Join(writes, ","))
}

// verify runs shadowgate journal verify on the cell's state, and returns
// the actuators it names as locked.
func (c *matrixCell) verify(ctx context.Context) []string {
	c.t.Helper()
	out, err := exec.CommandContext(ctx, c.bin, "journal", "verify", "--state-dir", filepath.Join(c.dir, "state")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": ok\n") {
		c.t.Fatalf("journal verify = %v:\n%s", err, out)
	}
	var locked []string
	for _, m := range regexp.MustCompile(`locked: (\S+) by attempt`).FindAllStringSubmatch(string(out), -1) {
		locked = append(locked, m[1])
	}
	return locked
}

// checkJournal checks the journal after the restart: every intent that
// reached executing is settled or locked, the act the client saw is
// there, and every approval asked for is pending or answered. It returns
// where the request's attempt ended, in words.
func (c *matrixCell) checkJournal(ctx context.Context, seen []string, locked []string) string {
	t := c.t
	j, err := journal.Open(journal.Path(filepath.Join(c.dir, "state")), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	evs, err := j.Events(ctx, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	executing := map[string]bool{}
	acted := map[string]bool{}
	for _, ev := range evs {
		switch ev.Kind {
		case runtime.KindInvoked:
			var b runtime.AttemptBody
			if json.Unmarshal(ev.Body, &b) == nil && b.State == runtime.AttemptExecuting {
				executing[b.Key] = true
			}
		case runtime.KindActed:
			var rc runtime.Receipt
			if json.Unmarshal(ev.Body, &rc) == nil {
				acted[rc.Attempt] = true
			}
		}
	}
	// Where retention pruned the oldest events (the pruning row), an event
	// that is not there may have been pruned: the records, which the
	// prune carried and verify checked, say the rest.
	pruned := len(evs) > 0 && evs[0].Seq > 1
	byID := map[string]runtime.AttemptState{}
	states := map[string]runtime.AttemptState{}
	for _, key := range []string{"api:appr-ci/req-1"} {
		if a, found, err := j.Attempt(ctx, key); err == nil && found && a.State != runtime.AttemptRefused {
			byID[a.ID], states[a.Device+"."+a.Capability] = a.State, a.State
		}
	}
	for key := range executing {
		a, found, err := j.Attempt(ctx, key)
		if err == nil && !found && strings.HasPrefix(c.fp, failpoint.JournalPruneRecords) {
			continue // ended, and pruned after keep_records; verify checked the pruning
		}
		if err != nil || !found {
			t.Errorf("attempt %s reached executing but its record is gone (%v)", key, err)
			continue
		}
		states[a.Device+"."+a.Capability] = a.State
		byID[a.ID] = a.State
		switch a.State {
		case runtime.AttemptReceipt, runtime.AttemptReconciled, runtime.AttemptFailed:
		case runtime.AttemptUnknown:
			if !slices.Contains(locked, a.Device+"."+a.Capability) {
				t.Errorf("attempt %s is unknown but journal verify names no lock on %s.%s", a.ID, a.Device, a.Capability)
			}
		default:
			t.Errorf("attempt %s reached executing and is %s after the restart; want receipt, failed, reconciled or unknown", a.ID, a.State)
		}
	}
	for _, id := range seen {
		switch st := byID[id]; {
		case acted[id]:
		case pruned && (st == runtime.AttemptReceipt || st == runtime.AttemptReconciled):
			// Its acted event was pruned; its record says it acted.
		default:
			t.Errorf("the client saw attempt %s act, but the journal has no acted event for it (record: %q)", id, st)
		}
	}
	snap, err := j.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	answered := map[string]bool{}
	for _, ev := range evs {
		if ev.Kind == runtime.KindApprovalAnswered {
			var b runtime.AnsweredBody
			if json.Unmarshal(ev.Body, &b) == nil {
				answered[b.Approval] = true
			}
		}
	}
	for _, id := range c.asked {
		if !slices.ContainsFunc(snap.Approvals, func(a runtime.Approval) bool { return a.ID == id }) && !answered[id] {
			if pruned {
				t.Logf("approval %s is not pending, and its answer is not among the events retention kept", id)
				continue
			}
			t.Errorf("approval %s was asked for before the crash and is neither pending nor answered", id)
		}
	}
	var out []string
	for _, target := range c.kind.targets {
		if s, ok := states[target]; ok {
			out = append(out, string(s))
		} else {
			out = append(out, "none")
		}
	}
	if len(out) == 0 {
		return "no act asked"
	}
	return "executed: " + strings.Join(out, ",")
}

// mustWorld reads the sims' state files and returns their counts of
// writes received; no file means no write yet.
func mustWorld(t *testing.T, dir string) deviceWorld {
	t.Helper()
	all := deviceWorld{Received: map[string]int{}}
	for _, f := range []string{"world.json", "world2.json"} {
		w, err := loadWorld(filepath.Join(dir, "state", f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for k, n := range w.Received {
			all.Received[k] += n
		}
	}
	return all
}
