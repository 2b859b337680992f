package uplink

// These tests run the uplink against a bare mochi broker as the upstream,
// which they stop and restart on the same port. The end-to-end test with a
// real mosquitto lives with the binary's tests.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

const prefix = "site/gh-1/"

// upstream is a bare broker on a fixed address that can be stopped and
// started again. Its watcher subscribes inside the broker, before it
// serves, so that it sees everything a restarted broker receives.
type upstream struct {
	t    *testing.T
	addr string
	srv  *mochi.Server
	w    *watcher
}

// drained waits until the link is idle: it is up and has journaled that
// it is, every event is in the outbox, and every message there was
// acknowledged and deleted. Then none is in flight when a broker stops.
func drained(t *testing.T, r *rig) {
	t.Helper()
	runtimetest.WaitFor(t, "an idle link", func() bool {
		evs, err := r.eng.Events(context.Background(), 0, 100_000)
		if err != nil || !r.u.Stats().Connected {
			return false
		}
		state := ""
		for _, ev := range evs {
			var b runtime.LinkBody
			if ev.Kind == runtime.KindLink && json.Unmarshal(ev.Body, &b) == nil {
				state = b.State
			}
		}
		cursor, _, err := r.j.Outbox().Cursor()
		return err == nil && state == "connected" && cursor >= r.eng.LastSeq() && r.u.Stats().Backlog == 0
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (u *upstream) start() {
	u.t.Helper()
	s := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	_ = s.AddHook(new(auth.AllowHook), nil)
	if u.w != nil {
		w := u.w
		_ = s.Subscribe(prefix+"#", 1, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
			w.mu.Lock()
			w.msgs[pk.TopicName] = append(w.msgs[pk.TopicName], pk.Payload)
			w.mu.Unlock()
		})
	}
	var err error
	for range 50 { // the port may linger a moment after a stop
		if err = s.AddListener(listeners.NewTCP(listeners.Config{ID: "t", Address: u.addr})); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		u.t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		u.t.Fatal(err)
	}
	u.srv = s
}

func (u *upstream) stop() {
	if u.srv != nil {
		_ = u.srv.Close()
		u.srv = nil
	}
}

// subscribed waits until the uplink has subscribed to the command topics
// upstream.
func (u *upstream) subscribed() {
	u.t.Helper()
	runtimetest.WaitFor(u.t, "the uplink's subscriptions upstream", func() bool {
		for _, topic := range []string{prefix + "cmd/d/c", prefix + "run/p"} {
			if len(u.srv.Topics.Subscribers(topic).Subscriptions) == 0 {
				return false
			}
		}
		return true
	})
}

// watcher collects messages from the upstream broker.
type watcher struct {
	mu   sync.Mutex
	msgs map[string][][]byte
}

func newUpstream(t *testing.T) *upstream {
	return &upstream{t: t, addr: freeAddr(t), w: &watcher{msgs: map[string][][]byte{}}}
}

func (w *watcher) get(topic string) [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.msgs[topic]...)
}

type rig struct {
	eng *runtime.Engine
	j   *journal.DB
	u   *Uplink
	g   *devicetest.Driver
}

func startRig(t *testing.T, dir, addr string, maxBacklog int64) (*rig, func()) {
	t.Helper()
	j, err := journal.Open(filepath.Join(dir, journal.FileName), journal.Options{FlushInterval: testFlush})
	if err != nil {
		t.Fatal(err)
	}
	g := runtimetest.Driver(t, runtimetest.Greenhouse("gh", "tank-1", "valve-1"))
	reg := devices.NewRegistry()
	_ = reg.Add("sim", g)
	eng, err := runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: j,
		Rules: []governance.Rule{{ID: "up", Principal: "uplink:*", Device: "valve-1", Capability: "open", Decision: governance.DecideAllow}},
		Policies: map[string]runtime.CapPolicy{"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true},
			Confirm: &runtime.Confirm{ReadBack: true, Within: 500 * time.Millisecond}}}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := New(eng, j.Outbox(), Options{URL: "tcp://" + addr, ClientID: "gh-1", Prefix: prefix, ReconnectMax: 200 * time.Millisecond,
		MaxBacklog: maxBacklog, Forward: Forward{Events: true, State: true, Receipts: true, Approvals: true, Alarms: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	engDone, upDone := make(chan error, 1), make(chan error, 1)
	go func() { engDone <- eng.Run(ctx) }()
	go func() { upDone <- u.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-upDone
		<-engDone
		_ = j.Close()
	}
	t.Cleanup(stop)
	return &rig{eng: eng, j: j, u: u, g: g}, stop
}

func (r *rig) read(t *testing.T, n int) {
	t.Helper()
	for range n {
		if obs, err := r.eng.Read(context.Background(), "test", "tank-1", "level"); err != nil || obs.Kind != runtime.Completed {
			t.Fatalf("read: %+v %v", obs, err)
		}
	}
}

// seqs returns the journal sequences of the events seen upstream.
func seqs(w *watcher) []uint64 {
	var out []uint64
	for _, p := range w.get(prefix + "events") {
		var ev runtime.Event
		if json.Unmarshal(p, &ev) == nil {
			out = append(out, ev.Seq)
		}
	}
	return out
}

// contiguous fails unless got holds every sequence from..to, first seen in
// order, with nothing missing. A sequence seen again is a re-send, which
// QoS 1 allows for a message whose acknowledgement a dropped link cut off;
// each is reported. Every event carries its seq, so a consumer can tell.
func contiguous(t *testing.T, got []uint64, from, to uint64) {
	t.Helper()
	next, again := from, 0
	for i, s := range got {
		switch {
		case s == next:
			next++
		case s < next:
			again++ // sent again after an outage
		default:
			t.Fatalf("events upstream out of order or missing at %d: %d while %d was due", i, s, next)
		}
	}
	if len(got) == 0 || next != to+1 {
		t.Fatalf("events upstream: %d from %v to %v; want every one of %d..%d", len(got), first(got), last(got), from, to)
	}
	if again > 0 {
		t.Logf("%d events upstream were sent again after an outage", again)
	}
}

func first(s []uint64) any {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

func last(s []uint64) any {
	if len(s) == 0 {
		return "-"
	}
	return s[len(s)-1]
}

func TestForwardsInOrderThroughOutagesAndRestarts(t *testing.T) {
	up := newUpstream(t)
	up.start()
	defer up.stop()
	w := up.w
	dir := t.TempDir()
	r, stop := startRig(t, dir, up.addr, 0)
	runtimetest.WaitFor(t, "the link", func() bool { return r.u.Stats().Connected })
	r.read(t, 20)
	lastSeq := func() uint64 { return r.eng.LastSeq() }
	runtimetest.WaitFor(t, "the first events upstream", func() bool { s := seqs(w); return len(s) > 0 && s[len(s)-1] >= lastSeq() })
	firstSeq := seqs(w)[0]

	// The upstream broker goes away; the gateway keeps working. It goes
	// while the link is idle: a QoS 1 message whose PUBACK the stop cuts
	// off is sent again, as MQTT allows, and that is not what this tests.
	drained(t, r)
	up.stop()
	runtimetest.WaitFor(t, "the link to drop", func() bool { return !r.u.Stats().Connected })
	r.read(t, 30)
	runtimetest.WaitFor(t, "a backlog", func() bool { return r.u.Stats().Backlog > 0 })
	up.start()
	runtimetest.WaitFor(t, "the backlog upstream", func() bool { s := seqs(w); return len(s) > 0 && s[len(s)-1] >= lastSeq() })

	// Down again, with a backlog, and the gateway restarts meanwhile.
	drained(t, r)
	up.stop()
	runtimetest.WaitFor(t, "the link to drop", func() bool { return !r.u.Stats().Connected })
	r.read(t, 25)
	runtimetest.WaitFor(t, "a backlog", func() bool { return r.u.Stats().Backlog > 0 })
	want := lastSeq()
	stop()
	up.start()
	r, _ = startRig(t, dir, up.addr, 0)
	runtimetest.WaitFor(t, "the backlog after the restart", func() bool { s := seqs(w); return len(s) > 0 && s[len(s)-1] >= want })
	r.read(t, 5)
	runtimetest.WaitFor(t, "the newest events", func() bool { s := seqs(w); return len(s) > 0 && s[len(s)-1] >= r.eng.LastSeq() })
	contiguous(t, seqs(w), firstSeq, r.eng.LastSeq())
	if n := len(w.get(prefix + "state/tank-1/level")); n < 80 {
		t.Fatalf("%d state messages upstream, want one per reading", n)
	}
	// Each message leaves the outbox once its PUBACK is in.
	drained(t, r)
}

func TestFullOutboxDropsTelemetryNotReceipts(t *testing.T) {
	up := newUpstream(t) // never started: the link stays down
	r, _ := startRig(t, t.TempDir(), up.addr, 8<<10)
	r.read(t, 60)
	obs, err := r.eng.Do(context.Background(), runtime.Command{Principal: "uplink:gh-1", Origin: "test", RequestID: "1",
		Device: "valve-1", Capability: "open", Value: value.Bool(true)})
	if err != nil || obs.Kind != runtime.Acted {
		t.Fatalf("command: %+v %v", obs, err)
	}
	r.read(t, 60)
	last := r.eng.LastSeq()
	// Each append to the outbox is followed by a trim to the bound.
	runtimetest.WaitFor(t, "every event queued, drops, and the outbox within its bound of 8 KiB", func() bool {
		cursor, _, err := r.j.Outbox().Cursor()
		st := r.u.Stats()
		return err == nil && cursor >= last && st.Dropped > 0 && st.BacklogBytes <= 8<<10+4096
	})
	msgs, _ := r.j.Outbox().Peek(0, 10000)
	var receipts int
	for _, m := range msgs {
		if strings.HasPrefix(m.Topic, prefix+"receipts/") {
			receipts++
		}
	}
	if receipts != 1 {
		t.Fatalf("receipts in the outbox = %d, want the one kept", receipts)
	}
	// The drops are a link event too, once it is written.
	runtimetest.WaitFor(t, "a link event reporting the drops", func() bool {
		evs, _ := r.eng.Events(context.Background(), 0, 10000)
		for _, ev := range evs {
			if ev.Kind == runtime.KindLink && strings.Contains(string(ev.Body), `"state":"dropping"`) {
				return true
			}
		}
		return false
	})
}

func TestUpstreamCommands(t *testing.T) {
	up := newUpstream(t)
	up.start()
	defer up.stop()
	w := up.w
	r, _ := startRig(t, t.TempDir(), up.addr, 0)
	runtimetest.WaitFor(t, "the link", func() bool { return r.u.Stats().Connected })
	up.subscribed()
	pub := func(topic, payload string, retain bool) {
		if err := up.srv.Publish(prefix+topic, []byte(payload), retain, 1); err != nil {
			t.Fatal(err)
		}
	}
	replies := func() []map[string]any {
		var out []map[string]any
		for _, p := range w.get(prefix + "reply/valve-1/open") {
			var m map[string]any
			_ = json.Unmarshal(p, &m)
			out = append(out, m)
		}
		return out
	}
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	pub("cmd/valve-1/open", `{"value": true, "id": "u-1", "at": "`+old+`"}`, false)
	pub("cmd/valve-1/open", `{"value": true, "id": "u-2"}`, false)
	pub("cmd/valve-1/open", `{"value": true, "id": "u-3", "expires": "`+time.Now().Add(time.Minute).UTC().Format(time.RFC3339)+`"}`, false)
	runtimetest.WaitFor(t, "three replies", func() bool { return len(replies()) == 3 })
	got := replies()
	if got[0]["outcome"] != "refused" || !strings.Contains(fmt.Sprint(got[0]["why"]), "stale: sent at") {
		t.Fatalf("an hour-old command: %v", got[0])
	}
	if got[1]["outcome"] != "refused" || !strings.Contains(fmt.Sprint(got[1]["why"]), "cannot be told") {
		t.Fatalf("a command of unknown age: %v", got[1])
	}
	if got[2]["outcome"] != "acted" || got[2]["id"] != "u-3" {
		t.Fatalf("a fresh command: %v", got[2])
	}
	if n := r.g.Count("write", "valve-1", "open"); n != 1 {
		t.Fatalf("the valve was written %d times, want 1", n)
	}
	// A command waiting on the broker as a retained message when the link
	// comes back is never carried out.
	up.stop()
	runtimetest.WaitFor(t, "the link to drop", func() bool { return !r.u.Stats().Connected })
	up.start()
	pub("cmd/valve-1/open", `{"value": false, "id": "u-4", "expires": "`+time.Now().Add(time.Minute).UTC().Format(time.RFC3339)+`"}`, true)
	runtimetest.WaitFor(t, "the link again", func() bool { return r.u.Stats().Connected })
	runtimetest.WaitFor(t, "the retained command ignored", func() bool { return r.u.Stats().IgnoredRetained == 1 })
	if n := r.g.Count("write", "valve-1", "open"); n != 1 || r.u.Stats().IgnoredRetained != 1 {
		t.Fatalf("the valve was written %d times after a retained command (%d ignored), want 1", n, r.u.Stats().IgnoredRetained)
	}
}

func TestParkedUpstreamCommandIsAnsweredAfterARestart(t *testing.T) {
	up := newUpstream(t) // down: replies wait in the outbox
	dir := t.TempDir()
	r, stop := startRig(t, dir, up.addr, 0)
	// Not covered by the rig's rule, so it waits for approval.
	obs, err := r.eng.Do(context.Background(), runtime.Command{Principal: "test:other", Origin: "uplink", RequestID: "late-1",
		Device: "valve-1", Capability: "open", Value: value.Bool(true), ReplyTo: "reply/valve-1/open"})
	if err != nil || obs.Kind != runtime.ApprovalRequest {
		t.Fatalf("command: %+v %v", obs, err)
	}
	stop()
	r, _ = startRig(t, dir, up.addr, 0)
	if _, err := r.eng.Answer(context.Background(), obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve}); err != nil {
		t.Fatal(err)
	}
	runtimetest.WaitFor(t, "the reply in the outbox", func() bool {
		msgs, _ := r.j.Outbox().Peek(0, 10000)
		for _, m := range msgs {
			if m.Topic == prefix+"reply/valve-1/open" && strings.Contains(string(m.Payload), `"id":"late-1"`) &&
				strings.Contains(string(m.Payload), `"outcome":"acted"`) && m.Essential {
				return true
			}
		}
		return false
	})
}

// replies returns the replies upstream on a topic, decoded.
func replies(w *watcher, topic string) []map[string]any {
	var out []map[string]any
	for _, p := range w.get(topic) {
		var m map[string]any
		_ = json.Unmarshal(p, &m)
		out = append(out, m)
	}
	return out
}

func TestUpstreamContradictedActAndBadPayloadID(t *testing.T) {
	up := newUpstream(t)
	up.start()
	defer up.stop()
	r, _ := startRig(t, t.TempDir(), up.addr, 0)
	runtimetest.WaitFor(t, "the link", func() bool { return r.u.Stats().Connected })
	up.subscribed()
	r.g.SetFault("valve-1", devicetest.Fault{Stuck: true})
	expires := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	for _, p := range []string{
		`{"value": "yes", "id": "u-bad", "expires": "` + expires + `"}`,
		`{"value": true, "id": "u-stuck", "expires": "` + expires + `"}`,
	} {
		if err := up.srv.Publish(prefix+"cmd/valve-1/open", []byte(p), false, 1); err != nil {
			t.Fatal(err)
		}
	}
	topic := prefix + "reply/valve-1/open"
	runtimetest.WaitFor(t, "two replies", func() bool { return len(replies(up.w, topic)) == 2 })
	got := replies(up.w, topic)
	if got[0]["id"] != "u-bad" || got[0]["outcome"] != "failed" {
		t.Fatalf("reply to a bad value = %v", got[0])
	}
	if got[1]["id"] != "u-stuck" || got[1]["outcome"] != "contradicted" {
		t.Fatalf("reply to an act the read-back contradicts = %v", got[1])
	}
}

// seedCheckpoint journals a checkpoint in dir with no uplink running.
func seedCheckpoint(t *testing.T, dir string) runtime.Event {
	t.Helper()
	j, err := journal.Open(filepath.Join(dir, journal.FileName), journal.Options{FlushInterval: testFlush})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	eng, err := runtime.New(context.Background(), runtime.Options{Registry: devices.NewRegistry(), Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := eng.Note(t.Context(), runtime.KindCheckpoint, "", runtime.CheckpointBody{Note: "site/gh-1\n1\nAAAA\n", Size: 1, Hash: "ab", Key: "k+1"})
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.WaitFor(t, "the checkpoint on disk", func() bool {
		evs, _ := eng.Events(t.Context(), ev.Seq-1, 1)
		return len(evs) == 1
	})
	return ev
}

func TestCheckpointsGoUpstreamRetained(t *testing.T) {
	up := newUpstream(t)
	up.start()
	defer up.stop()
	dir := t.TempDir()
	// A checkpoint made before the uplink was configured is the first
	// thing a new uplink sends.
	seeded := seedCheckpoint(t, dir)
	r, _ := startRig(t, dir, up.addr, 0)
	topic := prefix + "checkpoints"
	runtimetest.WaitFor(t, "the seeded checkpoint upstream", func() bool { return len(up.w.get(topic)) == 1 })
	if got := up.w.get(topic)[0]; string(got) != string(seeded.Body) {
		t.Fatalf("checkpoints upstream = %s, want %s", got, seeded.Body)
	}
	ev, err := r.eng.Note(t.Context(), runtime.KindCheckpoint, "", runtime.CheckpointBody{Note: "site/gh-1\n2\nBBBB\n", Size: 2, Hash: "cd", Key: "k+1"})
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.WaitFor(t, "the new checkpoint upstream", func() bool { return len(up.w.get(topic)) == 2 })
	// The upstream broker keeps the newest one for a later subscriber.
	late := make(chan []byte, 4)
	if err := up.srv.Subscribe(topic, 9, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) { late <- pk.Payload }); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-late:
		if string(p) != string(ev.Body) {
			t.Fatalf("retained upstream = %s, want %s", p, ev.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no retained checkpoint upstream")
	}
}

func TestAdversarialUplinkNumbers(t *testing.T) {
	up := newUpstream(t)
	up.start()
	defer up.stop()
	r, _ := startRig(t, t.TempDir(), up.addr, 0)
	runtimetest.WaitFor(t, "the link", func() bool { return r.u.Stats().Connected })
	up.subscribed()
	expires := `"` + time.Now().Add(time.Minute).UTC().Format(time.RFC3339) + `"`
	var payloads []string
	for _, n := range []string{"0", "-1", "2147483648", "9007199254740993", "9223372036854775807", "9223372036854775808",
		"18446744073709551615", "1e400", `"12"`, "NaN"} {
		payloads = append(payloads,
			`{"value": true, "expires": `+n+`}`,
			`{"value": true, "at": `+n+`}`,
			`{"value": `+n+`, "expires": `+expires+`}`,
			n)
		if n != `"12"` {
			payloads = append(payloads, `{"value": true, "id": `+n+`, "expires": `+expires+`}`)
		}
	}
	topic := prefix + "reply/valve-1/open"
	for i, p := range payloads {
		if err := up.srv.Publish(prefix+"cmd/valve-1/open", []byte(p), false, 1); err != nil {
			t.Fatal(err)
		}
		runtimetest.WaitFor(t, "a reply to "+p, func() bool { return len(replies(up.w, topic)) == i+1 })
		got := replies(up.w, topic)[i]
		if (got["outcome"] != "failed" && got["outcome"] != "refused") || got["why"] == "" {
			t.Errorf("%s: reply %v, want failed or refused saying why", p, got)
		}
	}
	if n := r.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("the valve was written %d times", n)
	}
}

// seedAlarms journals alarm records as an engine would have left them
// before the uplink was configured.
func seedAlarms(t *testing.T, dir string, alarms ...runtime.Alarm) {
	t.Helper()
	j, err := journal.Open(filepath.Join(dir, journal.FileName), journal.Options{FlushInterval: testFlush})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, a := range alarms {
		rec := a
		body, err := json.Marshal(runtime.AlarmBody{Action: runtime.AlarmRaised, Alarm: rec, By: "gateway"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Commit(t.Context(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindAlarm, Device: a.Device, Body: body},
			Durability: runtime.Sync, Alarm: &rec}); err != nil {
			t.Fatal(err)
		}
	}
}

// A new uplink sends the alarms that stand at once, retained, and clears
// one upstream when it is back to normal.
func TestStandingAlarmsGoUpstreamRetained(t *testing.T) {
	up := newUpstream(t)
	up.start()
	defer up.stop()
	dir := t.TempDir()
	at := time.Now().Add(-time.Hour)
	standing := runtime.Alarm{ID: "locked.valve-1.open", Kind: runtime.AlarmLocked, Device: "valve-1", Capability: "open",
		Priority: runtime.PriorityHigh, State: runtime.AlarmClearedUnacked, Message: "attempt act-1 was reconciled", Count: 1,
		RaisedAt: at, LastAt: at, ClearedAt: at.Add(time.Minute)}
	normal := runtime.Alarm{ID: "drift.valve-1.open", Kind: runtime.AlarmDrift, Device: "valve-1", Capability: "open",
		Priority: runtime.PriorityMedium, State: runtime.AlarmNormal, Message: "switched by hand", Count: 1, RaisedAt: at, LastAt: at}
	seedAlarms(t, dir, standing, normal)
	r, _ := startRig(t, dir, up.addr, 0)
	topic := prefix + "alarms/" + standing.ID
	runtimetest.WaitFor(t, "the standing alarm upstream", func() bool { return len(up.w.get(topic)) == 1 })
	var got runtime.Alarm
	if err := json.Unmarshal(up.w.get(topic)[0], &got); err != nil || got.ID != standing.ID || got.State != runtime.AlarmClearedUnacked {
		t.Fatalf("alarms/%s upstream = %s (%v)", standing.ID, up.w.get(topic)[0], err)
	}
	if n := len(up.w.get(prefix + "alarms/" + normal.ID)); n != 0 {
		t.Fatalf("an alarm back to normal was sent upstream %d times", n)
	}
	// Acknowledged, it is back to normal: an empty retained message clears it.
	if _, err := r.eng.AckAlarm(t.Context(), standing.ID, "console:olga", "the valve was checked on site"); err != nil {
		t.Fatal(err)
	}
	runtimetest.WaitFor(t, "the cleared alarm upstream", func() bool { return len(up.w.get(topic)) == 2 })
	if p := up.w.get(topic)[1]; len(p) != 0 {
		t.Fatalf("alarms/%s upstream after the acknowledgement = %s, want an empty message", standing.ID, p)
	}
	late := make(chan string, 4)
	if err := up.srv.Subscribe(prefix+"alarms/#", 10, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
		late <- pk.TopicName + " " + string(pk.Payload)
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-late:
		t.Fatalf("an alarm back to normal is still retained upstream: %s", m)
	case <-time.After(300 * time.Millisecond):
	}
}

// testFlush is the journal's flush interval in these tests: they follow
// readings and checkpoints as they are written, and the default (30s, set
// for the card) would keep each waiting.
const testFlush = 100 * time.Millisecond
