package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

// tortureEnv sets how many times TestTorture kills the gateway.
const tortureEnv = "SHADOWGATE_TORTURE"

// tortureKills is the campaign's length: SHADOWGATE_TORTURE, or 20.
func tortureKills(t *testing.T) int {
	s := os.Getenv(tortureEnv)
	if s == "" {
		return 20
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a number of kills, at least 1", tortureEnv, s)
	}
	return n
}

// tortureReq is one request a client made: through the HTTP API, the
// gateway's MQTT broker, or the site broker and the uplink.
type tortureReq struct {
	Surface, ID, Device, Capability, Value string
}

func (r tortureReq) name() string { return r.Surface + ":" + r.ID }

// tortureClients is what the clients saw, across every kill: the acts
// they were told of, the approvals they were told wait, and the requests
// that were never answered, which they send again after the restart.
type tortureClients struct {
	mu sync.Mutex
	// first is the first reply to each request, by name.
	first map[string]matrixReply
	// sawActed maps an attempt a client was told acted to its request.
	sawActed map[string]string
	// asked are the approvals a client was told wait for a person.
	asked map[string]bool
	// unanswered are requests sent and never answered, in order.
	unanswered []tortureReq
	// answered are requests that were answered, to send again.
	answered []tortureReq
	// mismatch lists a request sent again whose reply acted as another
	// attempt than the first reply's.
	mismatch                        []string
	sent, resent, replies, approved int
}

// record keeps a reply (ok) or the lack of one.
func (tc *tortureClients) record(r tortureReq, rep matrixReply, ok, again bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.sent++
	if again {
		tc.resent++
	}
	if !ok {
		if !slices.Contains(tc.unanswered, r) {
			tc.unanswered = append(tc.unanswered, r)
		}
		return
	}
	tc.replies++
	tc.unanswered = slices.DeleteFunc(tc.unanswered, func(u tortureReq) bool { return u == r })
	if id := rep.acted(); id != "" {
		tc.sawActed[id] = r.name()
		if prev, had := tc.first[r.name()]; had && prev.acted() != "" && prev.acted() != id {
			tc.mismatch = append(tc.mismatch, fmt.Sprintf("%s acted as %s, then as %s", r.name(), prev.acted(), id))
		}
	}
	if rep.Outcome == "pending_approval" && rep.Approval != nil {
		tc.asked[rep.Approval.ID] = true
	}
	if _, had := tc.first[r.name()]; !had {
		tc.first[r.name()] = rep
		tc.answered = append(tc.answered, r)
	}
}

// next is what a client sends next: a request never answered, first;
// else, one time in five, one answered before, as a client that retries
// does; else a new one.
func (tc *tortureClients) next(rng *rand.Rand, surface string, fresh func() tortureReq) (tortureReq, bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for i, u := range tc.unanswered {
		if u.Surface == surface {
			tc.unanswered = slices.Delete(tc.unanswered, i, i+1)
			return u, true
		}
	}
	var mine []tortureReq
	for _, a := range tc.answered {
		if a.Surface == surface {
			mine = append(mine, a)
		}
	}
	if len(mine) > 0 && rng.IntN(5) == 0 {
		return mine[rng.IntN(len(mine))], true
	}
	return fresh(), false
}

// tortureTally is the campaign's summary, from the journal.
type tortureTally struct {
	kills, acts, unknowns, reconciled, failed, doubleActs, lostIntents int
}

// TestTorture kills the gateway with SIGKILL at a random moment, N times
// (SHADOWGATE_TORTURE, default 20; make torture runs 100), while clients
// send commands through the HTTP API, the gateway's MQTT broker and the
// uplink, send again the ones they never heard back from and some they
// did, and a person approves what waits. After every kill the gateway
// starts again, reads back what it found executing, and stops cleanly;
// then the promises are checked on its journal: journal verify passes;
// no request acted twice, and no actuator received more writes than acts
// were journaled executing before it, nor fewer than it was receipted;
// every act a client was told of is journaled; every intent that reached
// executing ended (receipt, failed, reconciled) or is unknown and locks
// its actuator; every approval a client was told waits is pending or
// answered. An admin resolves the locks, as on site, before the next
// round.
func TestTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the gateway many times")
	}
	kills := tortureKills(t)
	bin := shadowgateBinary(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SHADOWGATE_TORTURE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("torture: %d kills, seed %d (SHADOWGATE_TORTURE_SEED repeats it)", kills, seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(kills)*40*time.Second+time.Minute)
	defer cancel()
	dir := t.TempDir()
	c := &matrixCell{t: t, bin: bin, dir: dir}
	c.site = startSiteBroker(t)
	c.config = filepath.Join(dir, "torture.yaml")
	if err := os.WriteFile(c.config, []byte(tortureConfig(dir, c.site.addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	tc := &tortureClients{first: map[string]matrixReply{}, sawActed: map[string]string{}, asked: map[string]bool{}}
	var tally tortureTally
	for round := range kills {
		// The clients' load, killed at a random moment.
		p := startProc(ctx, t, bin, c.config)
		c.base, c.p = p.consoleBase(ctx, t), p
		if round > 0 {
			p.awaitSettled(ctx, t)
		}
		c.resolveLocks(ctx, dir)
		c.site.waitSubscribed(ctx, "shadowgate/matrix/cmd/valve-1/open")
		load, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i, surface := range []string{"http", "http", "mqtt", "uplink"} {
			wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
			wg.Go(func() { c.tortureClient(load, wrng, tc, surface, fmt.Sprintf("%d-%d", round, i), p) })
		}
		arng := rand.New(rand.NewPCG(rng.Uint64(), 9))
		wg.Go(func() { c.tortureApprover(load, arng, tc) })
		time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond))))
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(ctx)
		stop()
		wg.Wait()
		tally.kills++

		// The restart: it reads back what it found executing, and stops.
		p = startProc(ctx, t, bin, c.config)
		c.base, c.p = p.consoleBase(ctx, t), p
		p.awaitSettled(ctx, t)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(ctx); code != 0 {
			t.Fatalf("round %d: the restarted gateway exited %d; its log:\n%s", round, code, strings.Join(p.lines(), "\n"))
		}
		tally = c.tortureCheck(ctx, tc, tally.kills)
		if t.Failed() {
			t.Fatalf("round %d of %d broke a promise (seed %d)", round+1, kills, seed)
		}
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	t.Logf("torture: kills %d, acts %d, unknowns %d, reconciled %d, failed %d, double acts %d, lost intents %d; "+
		"requests %d (%d sent again, %d answered), approvals %d (seed %d)",
		tally.kills, tally.acts, tally.unknowns, tally.reconciled, tally.failed, tally.doubleActs, tally.lostIntents,
		tc.sent, tc.resent, tc.replies, tc.approved, seed)
	if tally.acts == 0 {
		t.Errorf("nothing acted in %d rounds: the load did not reach the actuators", kills)
	}
}

// tortureConfig is the crash matrix's greenhouse with an admin, who
// resolves locks, and an uplink to the site broker.
func tortureConfig(dir, site string) string {
	cfg := matrixConfig(dir)
	cfg = strings.Replace(cfg, "users:\n", "users:\n"+
		`  - {name: ann, role: admin, password_hash: "$2a$04$038CKu9anXRR/OCwhulD.u90bg.r0/pEy/nyRWhQilstFenlzuBiC"}`+"\n", 1)
	cfg = strings.Replace(cfg, "  tokens:\n", "  tokens:\n"+
		"    - {name: ann-ci, role: admin, user: ann, token_hash: fd886c77d33fdd2500cbb3763d56c28d8b3875ddb2b6db0b67fd1c6c8a55b41e}\n", 1)
	return cfg + "uplink: {url: \"tcp://" + site + "\", client_id: torture-site, user: appr}\n"
}

// tortureClient sends requests through one surface until ctx ends or one
// goes unanswered: valve writes, which run, and heater writes, which wait
// for a person.
func (c *matrixCell) tortureClient(ctx context.Context, rng *rand.Rand, tc *tortureClients, surface, tag string, p *proc) {
	var mq *tortureMQTT
	switch surface {
	case "mqtt":
		addr := regexp.MustCompile(`msg="mqtt broker serving".* tcp=(\S+)`)
		for _, l := range p.lines() {
			if m := addr.FindStringSubmatch(l); m != nil {
				mq = dialTortureMQTT(ctx, m[1], "torture-"+tag, "appr", "appr-password")
			}
		}
	case "uplink":
		mq = dialTortureMQTT(ctx, c.site.addr, "torture-"+tag, "", "")
	}
	if mq != nil {
		defer mq.close()
	} else if surface != "http" {
		return // the gateway went down before the client connected
	}
	for k := 0; ctx.Err() == nil; k++ {
		r, again := tc.next(rng, surface, func() tortureReq {
			r := tortureReq{Surface: surface, ID: fmt.Sprintf("t%s-%d", tag, k), Capability: "open",
				Device: []string{"valve-1", "valve-2"}[rng.IntN(2)], Value: strconv.FormatBool(rng.IntN(2) == 0)}
			if rng.IntN(6) == 0 {
				r.Device, r.Capability, r.Value = "heater-1", "on", "true"
			}
			return r
		})
		var rep matrixReply
		var err error
		if mq == nil {
			rep, err = c.command(ctx, "appr-ci", r.Device, r.Capability, r.Value, r.ID)
		} else {
			rep, err = mq.command(ctx, r)
		}
		tc.record(r, rep, err == nil, again)
		if err != nil {
			// Unanswered: the gateway is going down. The request is
			// sent again to the next start.
			return
		}
	}
}

// tortureApprover is a person who approves, now and then, one of the
// requests waiting for approval.
func (c *matrixCell) tortureApprover(ctx context.Context, rng *rand.Rand, tc *tortureClients) {
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(100+rng.IntN(400)) * time.Millisecond):
		}
		aps, err := c.approvals(ctx)
		if err != nil {
			continue
		}
		aps = slices.DeleteFunc(aps, func(a runtime.Approval) bool { return a.Status != runtime.ApprovalPending })
		if len(aps) == 0 {
			continue
		}
		a := aps[rng.IntN(len(aps))]
		v, _ := json.Marshal(a.Value)
		status, _, err := c.post(ctx, "carol-ci", "/api/v1/approvals/"+a.ID,
			fmt.Sprintf(`{"decision":"approve","device":%q,"capability":%q,"value":%s,"reason":"torture"}`, a.Device, a.Capability, v))
		if err == nil && status == http.StatusOK {
			tc.mu.Lock()
			tc.approved++
			tc.mu.Unlock()
		}
	}
}

// resolveLocks is an admin on site: each actuator locked by an attempt of
// unknown outcome is looked at (the sim's state file is the hardware),
// and the attempt resolved as acted if the actuator is where it asked.
func (c *matrixCell) resolveLocks(ctx context.Context, dir string) {
	t := c.t
	status, body, err := c.do(ctx, http.MethodGet, "ann-ci", "/api/v1/locks", "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /api/v1/locks = %d %s, %v", status, body, err)
	}
	var locks []runtime.Attempt
	if err := json.Unmarshal(body, &locks); err != nil {
		t.Fatalf("GET /api/v1/locks: %v: %s", err, body)
	}
	for _, a := range locks {
		file, field := "world.json", "valve"
		switch a.Device + "." + a.Capability {
		case "valve-2.open":
			file = "world2.json"
		case "heater-1.on":
			field = "heater"
		case "pump-1.on":
			field = "pump"
		}
		var w struct {
			State map[string]any `json:"state"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "state", file))
		if err == nil {
			err = json.Unmarshal(b, &w)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		want, _ := json.Marshal(a.Value)
		got, _ := json.Marshal(w.State[field])
		found := "not_acted"
		if string(want) == string(got) {
			found = "acted"
		}
		status, body, err := c.post(ctx, "ann-ci", "/api/v1/attempts/"+a.ID+"/resolve",
			fmt.Sprintf(`{"found":%q,"note":"torture: the state file shows %s"}`, found, got))
		if err != nil || status != http.StatusOK {
			t.Fatalf("resolving %s = %d %s, %v", a.ID, status, body, err)
		}
	}
}

// tortureCheck checks the promises on the stopped gateway's journal and
// returns the campaign's tally so far.
func (c *matrixCell) tortureCheck(ctx context.Context, tc *tortureClients, kills int) tortureTally {
	t := c.t
	locked := c.verify(ctx)
	world := mustWorld(t, c.dir)
	j, err := journal.Open(journal.Path(filepath.Join(c.dir, "state")), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	evs, err := j.Events(ctx, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) > 0 && evs[0].Seq != 1 {
		t.Fatalf("the journal pruned events (first %d): the campaign needs them all", evs[0].Seq)
	}
	tally := tortureTally{kills: kills}
	executing := map[string][]string{} // attempts that reached executing, by key
	perActuator := map[string]int{}    // attempts that reached executing, by actuator
	receipted := map[string]int{}      // acts receipted from a driver, by actuator
	acted := map[string]bool{}
	for _, ev := range evs {
		switch ev.Kind {
		case runtime.KindInvoked:
			var b runtime.AttemptBody
			if json.Unmarshal(ev.Body, &b) == nil && b.State == runtime.AttemptExecuting && !slices.Contains(executing[b.Key], b.Attempt) {
				executing[b.Key] = append(executing[b.Key], b.Attempt)
				perActuator[b.Device+"."+b.Capability]++
			}
		case runtime.KindRecovered:
			var b runtime.RecoveredBody
			if json.Unmarshal(ev.Body, &b) == nil && b.To == runtime.AttemptUnknown {
				tally.unknowns++
			}
		case runtime.KindReconciled:
			tally.reconciled++
		case runtime.KindActed:
			var rc runtime.Receipt
			if json.Unmarshal(ev.Body, &rc) == nil {
				acted[rc.Attempt] = true
				if rc.Driver != "unknown" && !strings.Contains(rc.Detail, "found that it acted") {
					receipted[rc.Device+"."+rc.Capability]++
				}
			}
		}
	}
	for key, ids := range executing {
		if len(ids) > 1 {
			tally.doubleActs++
			t.Errorf("request %s reached executing as %d attempts %q: it may act twice", key, len(ids), ids)
		}
		a, found, err := j.Attempt(ctx, key)
		if err != nil || !found {
			t.Errorf("attempt of %s reached executing but its record is gone (%v)", key, err)
			tally.lostIntents++
			continue
		}
		switch a.State {
		case runtime.AttemptReceipt, runtime.AttemptReconciled:
		case runtime.AttemptFailed:
			tally.failed++
		case runtime.AttemptUnknown:
			if !slices.Contains(locked, a.Device+"."+a.Capability) {
				t.Errorf("attempt %s is unknown but journal verify names no lock on %s.%s", a.ID, a.Device, a.Capability)
			}
		default:
			t.Errorf("attempt %s reached executing and is %s after the restart; want receipt, failed, reconciled or unknown", a.ID, a.State)
		}
	}
	tally.acts = len(acted)
	for actuator, n := range world.Received {
		if n > perActuator[actuator] {
			tally.doubleActs++
			t.Errorf("%s received %d writes, but only %d attempts on it were journaled executing", actuator, n, perActuator[actuator])
		}
		if n < receipted[actuator] {
			t.Errorf("%s received %d writes, but %d were receipted from its driver", actuator, n, receipted[actuator])
		}
	}
	snap, err := j.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	answered := map[string]bool{}
	for _, ev := range evs {
		if ev.Kind == runtime.KindApprovalAnswered || ev.Kind == runtime.KindApprovalExpired {
			var b runtime.AnsweredBody
			if json.Unmarshal(ev.Body, &b) == nil {
				answered[b.Approval] = true
			}
		}
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for id, req := range tc.sawActed {
		if !acted[id] {
			tally.lostIntents++
			t.Errorf("a client was told %s acted (attempt %s), but the journal has no acted event for it", req, id)
		}
	}
	for id := range tc.asked {
		if !slices.ContainsFunc(snap.Approvals, func(a runtime.Approval) bool { return a.ID == id }) && !answered[id] {
			tally.lostIntents++
			t.Errorf("a client was told approval %s waits, and it is neither pending nor answered", id)
		}
	}
	for _, m := range tc.mismatch {
		tally.doubleActs++
		t.Errorf("a request sent again: %s", m)
	}
	return tally
}

// tortureMQTT is an MQTT 3.1.1 client that sends commands under the
// gateway's topics and matches replies to them by id.
type tortureMQTT struct {
	c       paho.Client
	mu      sync.Mutex
	waiting map[string]chan matrixReply
}

// dialTortureMQTT connects to addr; nil if it cannot (the gateway may be
// going down).
func dialTortureMQTT(ctx context.Context, addr, id, user, password string) *tortureMQTT {
	m := &tortureMQTT{waiting: map[string]chan matrixReply{}}
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetUsername(user).SetPassword(password).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false)
	m.c = paho.NewClient(o)
	if waitToken(ctx, m.c.Connect()) != nil {
		return nil
	}
	err := waitToken(ctx, m.c.Subscribe("shadowgate/matrix/reply/#", 1, func(_ paho.Client, msg paho.Message) {
		var r struct {
			matrixReply
			ID string `json:"id"`
		}
		if json.Unmarshal(msg.Payload(), &r) != nil {
			return
		}
		m.mu.Lock()
		ch := m.waiting[r.ID]
		m.mu.Unlock()
		if ch != nil {
			select {
			case ch <- r.matrixReply:
			default:
			}
		}
	}))
	if err != nil {
		m.close()
		return nil
	}
	return m
}

// command publishes r and waits for its reply until ctx ends or 10s pass.
func (m *tortureMQTT) command(ctx context.Context, r tortureReq) (matrixReply, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ch := make(chan matrixReply, 1)
	m.mu.Lock()
	m.waiting[r.ID] = ch
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.waiting, r.ID)
		m.mu.Unlock()
	}()
	payload := fmt.Sprintf(`{"value":%s,"id":%q,"reason":"torture","expires":%q}`, r.Value, r.ID,
		time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano))
	if err := waitToken(ctx, m.c.Publish("shadowgate/matrix/cmd/"+r.Device+"/"+r.Capability, 1, false, payload)); err != nil {
		return matrixReply{}, err
	}
	select {
	case rep := <-ch:
		return rep, nil
	case <-ctx.Done():
		return matrixReply{}, ctx.Err()
	}
}

func (m *tortureMQTT) close() { m.c.Disconnect(50) }
