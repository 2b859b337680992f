package command_test

// This test runs both surfaces on one engine, through their real paths:
// the embedded broker to a paho subscriber, and the uplink through its
// outbox to an upstream broker. For the same events they must publish the
// same bytes on every topic they share.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/crypto/bcrypt"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/gateway/mqtt"
	"github.com/shadowgate/shadowgate/gateway/uplink"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

const (
	localPrefix    = "shadowgate/gh/"
	upstreamPrefix = "site/gh/"
)

// seen collects the messages of one surface, with their topics relative
// to its prefix, in the order they arrived.
type seen struct {
	prefix string

	// mu guards log.
	mu  sync.Mutex
	log []message
}

type message struct {
	topic   string
	payload string
}

func newSeen(prefix string) *seen { return &seen{prefix: prefix} }

func (s *seen) add(topic string, payload []byte) {
	rel, ok := strings.CutPrefix(topic, s.prefix)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, message{rel, string(payload)})
}

// since returns what arrived after the event seq on the events topic, or
// nil if it has not arrived.
func (s *seen) since(seq uint64) []message {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range s.log {
		var ev runtime.Event
		if m.topic == command.TopicEvents && json.Unmarshal([]byte(m.payload), &ev) == nil && ev.Seq == seq {
			return slices.Clone(s.log[i+1:])
		}
	}
	return nil
}

// on returns the payloads of msgs on a topic.
func on(msgs []message, topic string) []string {
	var out []string
	for _, m := range msgs {
		if m.topic == topic {
			out = append(out, m.payload)
		}
	}
	return out
}

// under returns the topics of msgs that start with first, once each.
func under(msgs []message, first string) []string {
	var out []string
	for _, m := range msgs {
		if strings.HasPrefix(m.topic, first) && !slices.Contains(out, m.topic) {
			out = append(out, m.topic)
		}
	}
	return out
}

func TestBrokerAndUplinkPublishTheSameBytes(t *testing.T) {
	dir := t.TempDir()
	j, err := journal.Open(filepath.Join(dir, journal.FileName), journal.Options{FlushInterval: testFlush})
	if err != nil {
		t.Fatal(err)
	}
	g := runtimetest.Driver(t, runtimetest.Greenhouse("gh", "tank-1", "valve-1", "heater-1"))
	reg := devices.NewRegistry()
	if err := reg.Add("sim", g); err != nil {
		t.Fatal(err)
	}
	readBack := &runtime.Confirm{ReadBack: true, Within: time.Second}
	eng, err := runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: j,
		Rules: []governance.Rule{{ID: "valve", Principal: "*", Device: "valve-1", Capability: "open", Decision: governance.DecideAllow}},
		Policies: map[string]runtime.CapPolicy{
			"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Confirm: readBack},
			"heater-1.on":  {Effects: &runtime.Declared{Reversible: true, Contained: true, Costs: true}, Confirm: readBack},
		}})
	if err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("alice-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users, err := access.NewUsers([]access.User{{Name: "alice", Role: access.Operator, Hash: hash}})
	if err != nil {
		t.Fatal(err)
	}

	// The upstream broker, and what reaches it.
	up := newSeen(upstreamPrefix)
	site := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	_ = site.AddHook(new(auth.AllowHook), nil)
	if err := site.Subscribe(upstreamPrefix+"#", 1, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
		up.add(pk.TopicName, pk.Payload)
	}); err != nil {
		t.Fatal(err)
	}
	siteTCP := listeners.NewTCP(listeners.Config{ID: "site", Address: "127.0.0.1:0"})
	if err := site.AddListener(siteTCP); err != nil {
		t.Fatal(err)
	}
	if err := site.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = site.Close() })

	b, err := mqtt.New(eng, mqtt.Options{Prefix: localPrefix, Listen: "127.0.0.1:0", Users: users})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Listen(); err != nil {
		t.Fatal(err)
	}
	link, err := uplink.New(eng, j.Outbox(), uplink.Options{URL: "tcp://" + siteTCP.Address(), ClientID: "gh", Prefix: upstreamPrefix,
		ReconnectMax: 200 * time.Millisecond, Forward: uplink.Forward{Events: true, State: true, Receipts: true, Approvals: true, Alarms: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Run(ctx) })
	wg.Go(func() { _ = b.Run(ctx) })
	wg.Go(func() { _ = link.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = j.Close()
	})

	// What the broker's subscribers see.
	local := newSeen(localPrefix)
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + b.Addr("tcp")).SetClientID("watcher").
		SetUsername("alice").SetPassword("alice-password").SetAutoReconnect(false).SetOrderMatters(true))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(50) })
	if tok := c.Subscribe(localPrefix+"#", 1, func(_ paho.Client, m paho.Message) { local.add(m.Topic(), m.Payload()) }); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}

	// Both surfaces have published what happened so far once each has the
	// event of this note; from there, they must publish the same.
	mark := func(state string) uint64 {
		t.Helper()
		ev, err := eng.Note(ctx, runtime.KindLink, "", runtime.LinkBody{Link: "test", State: state})
		if err != nil {
			t.Fatal(err)
		}
		runtimetest.WaitFor(t, "the "+state+" marker on both surfaces", func() bool { return local.since(ev.Seq) != nil && up.since(ev.Seq) != nil })
		return ev.Seq
	}
	runtimetest.WaitFor(t, "the uplink to connect", func() bool { return link.Stats().Connected })
	start := mark("start")

	// Events that change state, approvals and receipts: an act, a read, an
	// act that asks and is approved, and one by a command from upstream.
	do := func(cmd runtime.Command) runtime.Observation {
		t.Helper()
		obs, err := eng.Do(ctx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	if obs := do(runtime.Command{Principal: "mqtt:alice", Origin: "mqtt", Device: "valve-1", Capability: "open", Value: value.Bool(true)}); obs.Kind != runtime.Acted {
		t.Fatalf("valve: %+v", obs)
	}
	if obs := do(runtime.Command{Principal: "mqtt:alice", Origin: "mqtt", Device: "tank-1", Capability: "level"}); obs.Kind != runtime.Completed {
		t.Fatalf("tank: %+v", obs)
	}
	ask := do(runtime.Command{Principal: "mqtt:alice", Origin: "mqtt", Device: "heater-1", Capability: "on", Value: value.Bool(true)})
	if ask.Kind != runtime.ApprovalRequest || ask.Approval == nil {
		t.Fatalf("heater: %+v", ask)
	}
	if _, err := eng.Answer(ctx, ask.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve}); err != nil {
		t.Fatal(err)
	}
	if _, rec, err := eng.Outcome(ctx, ask.Run); err != nil || rec.End != runtime.EndCompleted {
		t.Fatalf("the approved heater run: %+v %v", rec, err)
	}
	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + siteTCP.Address()).SetClientID("fleet").SetAutoReconnect(false))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect upstream: %v", tok.Error())
	}
	t.Cleanup(func() { pub.Disconnect(50) })
	at := time.Now().UTC().Format(time.RFC3339Nano)
	if tok := pub.Publish(upstreamPrefix+"cmd/valve-1/open", 1, false, fmt.Sprintf(`{"value":false,"id":"up-1","at":%q}`, at)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish upstream: %v", tok.Error())
	}
	runtimetest.WaitFor(t, "the upstream command's reply", func() bool { return len(on(up.since(start), "reply/valve-1/open")) > 0 })
	// An act the world does not follow raises an alarm, which a person
	// acknowledges.
	g.SetFault("valve-1", devicetest.Fault{Stuck: true})
	do(runtime.Command{Principal: "mqtt:alice", Origin: "mqtt", Device: "valve-1", Capability: "open", Value: value.Bool(true)})
	const alarmID = "discrepancy.valve-1.open"
	if a, ok := eng.Alarm(alarmID); !ok || !a.Standing() {
		t.Fatalf("alarm %s after a stuck valve: %+v, %v", alarmID, a, ok)
	}
	if _, err := eng.AckAlarm(ctx, alarmID, "console:bob", "valve seen stuck"); err != nil {
		t.Fatal(err)
	}
	// Freed, the valve is closed again.
	g.SetFault("valve-1", devicetest.Fault{})
	if obs := do(runtime.Command{Principal: "mqtt:alice", Origin: "mqtt", Device: "valve-1", Capability: "open", Value: value.Bool(false)}); obs.Kind != runtime.Acted {
		t.Fatalf("valve after the fault: %+v", obs)
	}
	end := mark("end")
	cut := func(msgs []message) []message { // up to and with the end marker
		for i, m := range msgs {
			if m.topic == command.TopicEvents && strings.Contains(m.payload, fmt.Sprintf(`"seq":%d,`, end)) {
				return msgs[:i+1]
			}
		}
		return msgs
	}
	localMsgs, upMsgs := cut(local.since(start)), cut(up.since(start))

	shared := []string{command.TopicEvents, command.ApprovalTopic(ask.Approval.ID), command.AlarmTopic(alarmID)}
	for _, d := range runtimetest.Greenhouse("gh", "tank-1", "valve-1", "heater-1") {
		shared = append(shared, command.StateTopic(d.ID, d.Capabilities[0].Name))
	}
	for _, topic := range shared {
		l, u := on(localMsgs, topic), on(upMsgs, topic)
		if len(l) == 0 {
			t.Errorf("nothing on %s", topic)
		}
		if !slices.Equal(l, u) {
			t.Errorf("%s: broker and uplink differ:\nbroker: %q\nuplink: %q", topic, l, u)
		}
	}
	if l, u := under(localMsgs, "state/"), under(upMsgs, "state/"); len(l) != 3 || len(u) != 3 {
		t.Errorf("state topics: broker %v, uplink %v; want the three capabilities on each", l, u)
	}

	// The state payload is the documented one: the valve was opened, read
	// back, closed from upstream, stayed closed when stuck, and was closed
	// again once freed.
	states := on(localMsgs, command.StateTopic("valve-1", "open"))
	var last command.State
	if err := json.Unmarshal([]byte(states[len(states)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Device != "valve-1" || last.Capability != "open" || last.Value == nil || last.Value.Bool || last.Quality != "good" ||
		last.Confirmation != runtime.Confirmed || last.Attempt == "" || last.At.IsZero() {
		t.Errorf("last state of valve-1.open = %s", states[len(states)-1])
	}
	// The approval was retained while pending, then cleared.
	if aps := on(localMsgs, command.ApprovalTopic(ask.Approval.ID)); len(aps) < 2 || !strings.Contains(aps[0], `"status":"pending"`) || aps[len(aps)-1] != "" {
		t.Errorf("approvals/%s = %q; want the request, then an empty message", ask.Approval.ID, aps)
	}
	// The alarm was retained as raised, then as acknowledged: it still
	// stands, for its condition holds.
	if as := on(localMsgs, command.AlarmTopic(alarmID)); len(as) < 2 || !strings.Contains(as[0], `"state":"active_unacknowledged"`) ||
		!strings.Contains(as[1], `"state":"active_acknowledged"`) || !strings.Contains(as[1], `"comment":"valve seen stuck"`) {
		t.Errorf("alarms/%s = %q; want the raised alarm, then the acknowledged one", alarmID, as)
	}
}

// testFlush is the journal's flush interval in these tests: they follow
// readings and checkpoints as they are written, and the default (30s, set
// for the card) would keep each waiting.
const testFlush = 100 * time.Millisecond
