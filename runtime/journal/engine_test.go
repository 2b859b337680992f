package journal

// These tests run the engine on the bbolt journal and a simulated
// greenhouse, and look at the file itself where it matters.

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

func greenhouse() []devices.Device {
	return runtimetest.Greenhouse("gh", "tank-1", "valve-1", "heater-1")
}

// rig is an engine on a bbolt journal in dir, driving a greenhouse whose
// world lives in a state file, so that a restart finds it as it was.
type rig struct {
	t   *testing.T
	dir string
	j   *DB
	g   *sim.Greenhouse
	e   *runtime.Engine
	run context.CancelFunc
	ran chan error
	// failing is set by a test that makes the journal fail on purpose.
	failing bool
}

type rigOptions struct {
	mode   string
	rules  []governance.Rule
	faults map[string]sim.Fault
	hook   func(ctx context.Context, device, capability string, v value.Value)
	jopts  Options
}

func startRig(t *testing.T, dir string, o rigOptions) *rig {
	t.Helper()
	j, err := Open(filepath.Join(dir, FileName), o.jopts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sim.New(sim.Options{Devices: greenhouse(), StateFile: filepath.Join(dir, "world.json"), Faults: o.faults, WriteHook: o.hook})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := devices.NewRegistry()
	if err := reg.Add("sim", g); err != nil {
		t.Fatal(err)
	}
	readBack := &runtime.Confirm{ReadBack: true, Within: time.Second}
	eng, err := runtime.New(context.Background(), runtime.Options{
		Registry: reg, Journal: j, Mode: o.mode, Rules: o.rules, DriverTimeout: time.Second,
		Policies: map[string]runtime.CapPolicy{
			"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Confirm: readBack},
			"heater-1.on":  {Effects: &runtime.Declared{Reversible: true, Contained: true, Costs: true}, Confirm: readBack},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &rig{t: t, dir: dir, j: j, g: g, e: eng, run: cancel, ran: make(chan error, 1)}
	go func() { r.ran <- eng.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// stop stops the engine as a clean shutdown does, and closes the journal.
func (r *rig) stop() {
	if r.run == nil {
		return
	}
	r.run()
	r.run = nil
	<-r.ran
	_ = r.g.Close()
	if err := r.j.Close(); err != nil && !(r.failing && errors.Is(err, ErrFailed)) {
		r.t.Errorf("closing the journal: %v", err)
	}
}

// allowValve lets mqtt:alice open and close the valve without asking.
var allowValve = governance.Rule{ID: "valve-for-alice", Principal: "mqtt:alice", Device: "valve-1", Capability: "open", Decision: governance.DecideAllow}

func do(t *testing.T, e *runtime.Engine, id string, device, capability string, v value.Value) runtime.Observation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := e.Do(ctx, runtime.Command{Principal: "mqtt:alice", Origin: "mqtt", RequestID: id, Device: device, Capability: capability, Value: v})
	if err != nil {
		t.Fatalf("Do %s: %v", id, err)
	}
	return obs
}

// stored reads an attempt from the files, not from memory: the newest of
// what the log holds on disk, else what the store holds.
func stored(t *testing.T, j *DB, key string) (runtime.Attempt, bool) {
	t.Helper()
	var a runtime.Attempt
	if js, ok := logged(t, j, bEffects, key); ok {
		if err := json.Unmarshal(js, &a); err != nil {
			t.Fatal(err)
		}
		return a, true
	}
	var found bool
	err := j.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bEffects).Get([]byte(key))
		if v == nil {
			return nil
		}
		found = true
		js, err := j.backed(tx, bEffects, []byte(key), v)
		if err != nil {
			return err
		}
		return json.Unmarshal(js, &a)
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, found
}

// logged returns the newest JSON the log's files on disk hold of a
// record put, read as an open would read them.
func logged(t *testing.T, j *DB, bucket []byte, key string) ([]byte, bool) {
	t.Helper()
	_, sc, err := openWAL(walDir(j.path), DefaultSegmentSize, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	found := false
	for _, e := range sc.entries {
		it, err := itemOf(e.logEntry)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range it.records {
			if r.bucket == string(bucket) && r.key == key && r.op == opPut {
				out, found = r.js, true
			}
		}
	}
	return out, found
}

func TestExecutingIsDurableBeforeTheDriverWrites(t *testing.T) {
	var r *rig
	var seen atomic.Value
	r = startRig(t, t.TempDir(), rigOptions{rules: []governance.Rule{allowValve},
		hook: func(ctx context.Context, device, capability string, v value.Value) {
			a, found := stored(t, r.j, "mqtt:alice/cmd-1")
			seen.Store(string(a.State) + "," + map[bool]string{true: "found", false: "missing"}[found])
		}})
	obs := do(t, r.e, "cmd-1", "valve-1", "open", value.Bool(true))
	if obs.Kind != runtime.Acted || obs.Receipt.Confirmation != runtime.Confirmed {
		t.Fatalf("command = %+v", obs)
	}
	if got := seen.Load(); got != "executing,found" {
		t.Fatalf("inside Write the file held the attempt as %v, want executing", got)
	}
	if a, _ := stored(t, r.j, "mqtt:alice/cmd-1"); a.State != runtime.AttemptReceipt || a.Receipt == nil {
		t.Fatalf("after the act the file holds %+v", a)
	}
}

func TestIdempotencyHoldsAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, rigOptions{rules: []governance.Rule{allowValve}})
	first := do(t, r.e, "cmd-7", "valve-1", "open", value.Bool(true))
	again := do(t, r.e, "cmd-7", "valve-1", "open", value.Bool(true))
	if first.Kind != runtime.Acted || again.Kind != runtime.Acted || !again.Replayed {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	r.stop()

	r = startRig(t, dir, rigOptions{rules: []governance.Rule{allowValve}})
	after := do(t, r.e, "cmd-7", "valve-1", "open", value.Bool(true))
	if after.Kind != runtime.Acted || !after.Replayed || after.Receipt == nil || after.Receipt.Attempt != first.Receipt.Attempt {
		t.Fatalf("after a restart the same request got %+v, want the first receipt %+v", after, first.Receipt)
	}
	other := do(t, r.e, "cmd-7", "valve-1", "open", value.Bool(false))
	if other.Kind != runtime.Refused || !strings.Contains(other.Why, "mqtt:alice/cmd-7") || !strings.Contains(other.Why, "different act") {
		t.Fatalf("same key, different act = %+v", other)
	}
	if n := r.g.Received("valve-1", "open"); n != 1 {
		t.Fatalf("the valve received %d writes, want 1", n)
	}
}

// stage writes attempt records straight into a journal, as a gateway that
// stopped at that state would have left them.
func stage(t *testing.T, dir, key string, v value.Value, states ...runtime.AttemptState) runtime.Attempt {
	t.Helper()
	j, err := Open(filepath.Join(dir, FileName), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	a := runtime.Attempt{Key: key, ID: "act-" + strings.ReplaceAll(key, "/", "-"), Device: "valve-1", Capability: "open", Value: v,
		Principal: "mqtt:alice", Updated: time.Now()}
	for _, s := range states {
		a.State = s
		rec := a
		if _, err := j.Commit(context.Background(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindInvoked, Device: "valve-1"},
			Durability: runtime.Sync, Attempt: &rec}); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func TestRecoveryAtStart(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, "mqtt:alice/a", value.Bool(true), runtime.AttemptStaged)
	stage(t, dir, "mqtt:alice/b", value.Bool(true), runtime.AttemptStaged, runtime.AttemptAuthorized)
	// The valve is shut, so an executing "open" did not take effect.
	c := stage(t, dir, "mqtt:alice/c", value.Bool(true), runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting)

	r := startRig(t, dir, rigOptions{rules: []governance.Rule{allowValve}})
	for _, k := range []string{"mqtt:alice/a", "mqtt:alice/b"} {
		if a, _ := stored(t, r.j, k); a.State != runtime.AttemptRefused || !strings.Contains(a.Why, "abandoned before execution") {
			t.Fatalf("%s after start = %+v, want refused as abandoned", k, a)
		}
	}
	runtimetest.WaitFor(t, "the reconcile read-back", func() bool { return r.g.Count("read", "valve-1", "open") > 0 })
	if a, _ := stored(t, r.j, c.Key); a.State != runtime.AttemptUnknown {
		t.Fatalf("executing attempt after start = %+v, want unknown", a)
	}
	if locks := r.e.Locks(); len(locks) != 1 || locks[0].ID != c.ID {
		t.Fatalf("locks = %+v, want the valve locked by %s", locks, c.ID)
	}
	obs := do(t, r.e, "new", "valve-1", "open", value.Bool(false))
	if obs.Kind != runtime.Refused || !strings.Contains(obs.Why, "valve-1.open is locked") || !strings.Contains(obs.Why, c.ID) {
		t.Fatalf("a write to a locked actuator = %+v", obs)
	}
	if _, err := r.e.Resolve(context.Background(), runtime.Resolution{Attempt: c.ID, By: "console:bob", Found: runtime.FoundNotActed, Note: "checked"}); !errors.Is(err, runtime.ErrNotPermitted) {
		t.Fatalf("resolve by a non-admin = %v", err)
	}
	if _, err := r.e.Resolve(context.Background(), runtime.Resolution{Attempt: c.ID, By: "console:root", Admin: true, Found: runtime.FoundNotActed, Note: "valve found shut on site"}); err != nil {
		t.Fatal(err)
	}
	if a, _ := stored(t, r.j, c.Key); a.State != runtime.AttemptReconciled || !strings.Contains(a.Why, "console:root") {
		t.Fatalf("resolved attempt = %+v", a)
	}
	if obs := do(t, r.e, "after", "valve-1", "open", value.Bool(true)); obs.Kind != runtime.Acted {
		t.Fatalf("a write after the resolve = %+v", obs)
	}
	// Nothing was retried: the only write is the one just made.
	if n := r.g.Received("valve-1", "open"); n != 1 {
		t.Fatalf("the valve received %d writes, want 1", n)
	}
	if _, err := r.e.Resolve(context.Background(), runtime.Resolution{Attempt: c.ID, By: "console:root", Admin: true, Found: runtime.FoundNotActed, Note: "again"}); !errors.Is(err, runtime.ErrAttemptNotLocked) {
		t.Fatalf("resolving twice = %v", err)
	}
}

func TestRecoveryReconcilesByReadBack(t *testing.T) {
	dir := t.TempDir()
	// The valve is shut and the cut-short attempt was closing it: the
	// read-back shows the commanded value.
	c := stage(t, dir, "mqtt:alice/c", value.Bool(false), runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting)
	r := startRig(t, dir, rigOptions{rules: []governance.Rule{allowValve}})
	// The journal records the reconciliation first; the lock lifts once it
	// is recorded.
	runtimetest.WaitFor(t, "the reconcile", func() bool {
		a, _ := stored(t, r.j, c.Key)
		return a.State == runtime.AttemptReconciled && len(r.e.Locks()) == 0
	})
	a, _ := stored(t, r.j, c.Key)
	if !strings.Contains(a.Why, "equals the commanded value") {
		t.Fatalf("reconciled attempt = %+v", a)
	}
	var kinds []string
	evs, _ := r.j.Events(context.Background(), 0, 100)
	for _, ev := range evs {
		kinds = append(kinds, string(ev.Kind))
	}
	got := strings.Join(kinds, " ")
	if !strings.Contains(got, "recovered alarm") || !strings.Contains(got, "reconciled") {
		t.Fatalf("events = %s", got)
	}
}

func TestPendingApprovalSurvivesARestartAndTheRunResumes(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, rigOptions{})
	obs := do(t, r.e, "heat", "heater-1", "on", value.Bool(true))
	if obs.Kind != runtime.ApprovalRequest {
		t.Fatalf("command = %+v", obs)
	}
	ap := obs.Approval
	r.stop()

	r = startRig(t, dir, rigOptions{})
	aps := r.e.Approvals()
	if len(aps) != 1 || aps[0].ID != ap.ID || !aps[0].Expires.Equal(ap.Expires) || aps[0].Status != runtime.ApprovalPending {
		t.Fatalf("approvals after restart = %+v, want %s pending until %s", aps, ap.ID, ap.Expires)
	}
	// A second request for the heater is still refused, naming it.
	if o := do(t, r.e, "heat-2", "heater-1", "on", value.Bool(true)); o.Kind != runtime.Refused || !strings.Contains(o.Why, ap.ID) {
		t.Fatalf("second request = %+v", o)
	}
	if _, err := r.e.Answer(context.Background(), ap.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve}); err != nil {
		t.Fatal(err)
	}
	runtimetest.WaitFor(t, "the resumed run to act", func() bool { return r.g.State().Heater })
	ended, err := r.e.Wait(context.Background(), ap.Run)
	if err != nil || ended.End != runtime.EndCompleted || ended.Actuations != 1 {
		t.Fatalf("resumed run = %+v, %v", ended, err)
	}
	if n := r.g.Received("heater-1", "on"); n != 1 {
		t.Fatalf("the heater received %d writes, want 1", n)
	}
}

func TestStorageFaultRefusesActuationsButReadsGoOn(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, rigOptions{rules: []governance.Rule{allowValve}, jopts: Options{MaxFileSize: 1 << 20}})
	r.failing = true
	for r.j.Err() == nil {
		big := `{"pad":"` + noise(8000) + `"}`
		_, _ = r.j.Commit(context.Background(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Body: []byte(big)}, Durability: runtime.Sync})
	}
	if err := r.e.Healthy(); err == nil || !strings.Contains(err.Error(), "maximum size") {
		t.Fatalf("Healthy = %v, want the reason", err)
	}
	obs := do(t, r.e, "cmd", "valve-1", "open", value.Bool(true))
	if obs.Kind != runtime.Refused || !strings.Contains(obs.Why, "journal") || !strings.Contains(obs.Why, "reached its max_file_size") {
		t.Fatalf("a write with a failed journal = %+v", obs)
	}
	if n := r.g.Received("valve-1", "open"); n != 0 {
		t.Fatalf("the valve received %d writes with a failed journal", n)
	}
	rd, err := r.e.Read(context.Background(), "mqtt:alice", "tank-1", "level")
	if err != nil || rd.Kind != runtime.Completed || rd.Reading == nil {
		t.Fatalf("a read with a failed journal = %+v, %v", rd, err)
	}
}

func TestCorruptJournalRefusesActuations(t *testing.T) {
	g, err := sim.New(sim.Options{Devices: greenhouse()})
	if err != nil {
		t.Fatal(err)
	}
	reg := devices.NewRegistry()
	_ = reg.Add("sim", g)
	cause := &CorruptError{Path: "/x/shadowgate.db", Err: errors.New("invalid database")}
	e, err := runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: Failed(cause), Rules: []governance.Rule{allowValve}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	obs := do(t, e, "cmd", "valve-1", "open", value.Bool(true))
	if obs.Kind != runtime.Refused || !strings.Contains(obs.Why, "is corrupt") {
		t.Fatalf("a write on a corrupt journal = %+v", obs)
	}
	if rd, _ := e.Read(context.Background(), "mqtt:alice", "tank-1", "level"); rd.Kind != runtime.Completed {
		t.Fatalf("a read on a corrupt journal = %+v", rd)
	}
	if g.Count("write", "valve-1", "open") != 0 {
		t.Fatal("the driver was written")
	}
}

func TestModeAndRulesSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, rigOptions{})
	obs := do(t, r.e, "heat", "heater-1", "on", value.Bool(true))
	if obs.Kind != runtime.ApprovalRequest {
		t.Fatalf("command = %+v", obs)
	}
	if _, err := r.e.Answer(context.Background(), obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.ApproveAndRule,
		RuleFor: time.Hour}); err != nil {
		t.Fatal(err)
	}
	runtimetest.WaitFor(t, "the heater", func() bool { return r.g.State().Heater })
	// The act's read-back confirms it, and is its last reading: a stop
	// before that would cut the confirmation short, and leave the reading
	// from before the act the last.
	if _, err := r.e.Wait(context.Background(), obs.Run); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.e.SetMode(context.Background(), "console:bob", governance.ModeObserve, "leaving for the night"); err != nil {
		t.Fatal(err)
	}
	r.stop()

	r = startRig(t, dir, rigOptions{})
	if m := r.e.Mode(context.Background()); m.Name != governance.ModeObserve || m.By != "console:bob" {
		t.Fatalf("mode after restart = %+v", m)
	}
	rules := r.e.Rules()
	if len(rules) != 1 || rules[0].Rule.Principal != "mqtt:alice" || rules[0].Rule.Device != "heater-1" || rules[0].Rule.MadeBy != "console:bob" {
		t.Fatalf("rules after restart = %+v", rules)
	}
	// The last reading is known before anything is read again.
	var found bool
	for _, rd := range r.e.Readings() {
		if rd.Device == "heater-1" && rd.Capability == "on" && rd.Reading.Value.Equal(value.Bool(true)) {
			found = true
		}
	}
	if !found {
		t.Fatalf("readings after restart = %+v", r.e.Readings())
	}
}

// TestFollowGivesAReadingAtOnceAndItsEventOnceWritten: a reading is given
// to a follower's pending as it is taken, long before the flush interval
// writes it; a governed write's durable point then writes it, and the
// follower is given it again, once, in order, with the write's events.
func TestFollowGivesAReadingAtOnceAndItsEventOnceWritten(t *testing.T) {
	r := startRig(t, t.TempDir(), rigOptions{rules: []governance.Rule{allowValve}, jopts: Options{FlushInterval: time.Hour}})
	runtimetest.WaitFor(t, "the start's events written", func() bool {
		evs, err := r.e.Events(t.Context(), 0, 100)
		online := 0
		for _, ev := range evs {
			if ev.Kind == runtime.KindDeviceOnline {
				online++
			}
		}
		return err == nil && online == len(greenhouse())
	})
	do(t, r.e, "close-0", "valve-1", "open", value.Bool(false))
	since := r.e.LastSeq()
	var mu sync.Mutex
	var pending, written []runtime.Event
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- r.e.Follow(ctx, since, func(ev runtime.Event) error {
			mu.Lock()
			defer mu.Unlock()
			written = append(written, ev)
			return nil
		}, func(ev runtime.Event) {
			mu.Lock()
			defer mu.Unlock()
			pending = append(pending, ev)
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	obs, err := r.e.Read(t.Context(), "mqtt:alice", "tank-1", "level")
	if err != nil {
		t.Fatal(err)
	}
	var reading runtime.Event
	runtimetest.WaitFor(t, "the reading given as pending", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range pending {
			if ev.Kind == runtime.KindObserved && ev.Device == "tank-1" {
				reading = ev
				return true
			}
		}
		return false
	})
	mu.Lock()
	for _, ev := range written {
		if ev.Seq >= reading.Seq {
			t.Errorf("event %d (%s, %s) given as written before any durable point", ev.Seq, ev.Kind, ev.Body)
		}
	}
	mu.Unlock()
	if obs.Reading == nil || reading.Seq <= since {
		t.Fatalf("the read observed %+v as event %d, after %d", obs, reading.Seq, since)
	}
	do(t, r.e, "open-1", "valve-1", "open", value.Bool(true))
	runtimetest.WaitFor(t, "the write's receipt given as written", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(written) > 0 && written[len(written)-1].Kind == runtime.KindEnded
	})
	mu.Lock()
	defer mu.Unlock()
	seen := map[uint64]int{}
	for i, ev := range written {
		seen[ev.Seq]++
		if i > 0 && ev.Seq != written[i-1].Seq+1 {
			t.Fatalf("written events out of order or with a gap: %d after %d", ev.Seq, written[i-1].Seq)
		}
	}
	if written[0].Seq != since+1 || seen[reading.Seq] != 1 {
		t.Fatalf("the written events start at %d (want %d) and hold the reading %d times (want once)", written[0].Seq, since+1, seen[reading.Seq])
	}
	for i := 1; i < len(pending); i++ {
		if pending[i].Seq <= pending[i-1].Seq {
			t.Fatalf("a pending event given twice or out of order: %d after %d", pending[i].Seq, pending[i-1].Seq)
		}
	}
}

// TestFromNowIsBeforeWhatIsNotWritten: a follower that starts from now
// is given a reading queued and not yet written; once written, from now
// is the newest event.
func TestFromNowIsBeforeWhatIsNotWritten(t *testing.T) {
	r := startRig(t, t.TempDir(), rigOptions{rules: []governance.Rule{allowValve}, jopts: Options{FlushInterval: time.Hour}})
	do(t, r.e, "close-0", "valve-1", "open", value.Bool(false))
	runtimetest.WaitFor(t, "nothing queued", func() bool { return len(r.e.Pending(0, 1)) == 0 })
	if got, want := r.e.FromNow(), r.e.LastSeq(); got != want {
		t.Fatalf("with nothing queued, from now is %d, want the newest, %d", got, want)
	}
	before := r.e.LastSeq()
	if _, err := r.e.Read(t.Context(), "mqtt:alice", "tank-1", "level"); err != nil {
		t.Fatal(err)
	}
	if r.e.LastSeq() <= before {
		t.Fatal("the read queued no event")
	}
	if got := r.e.FromNow(); got != before {
		t.Fatalf("with a reading queued after %d, from now is %d (the newest is %d)", before, got, r.e.LastSeq())
	}
}
