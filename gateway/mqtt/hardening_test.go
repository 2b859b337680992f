package mqtt

// Tests of the broker's defences: wills, client ids, response topics, the
// ids of bad payloads, contradicted acts and checkpoints, through real
// clients (paho for 3.1.1, paho.golang for v5).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
)

// v5conn is a v5 client on its own connection, which a test may drop
// without a DISCONNECT, so that the broker publishes its will.
type v5conn struct {
	c    *paho5.Client
	conn net.Conn
	ack  *paho5.Connack
	got  chan *paho5.Publish
}

// v5 connects a v5 client with cp, filling in the flags.
func (gw *testGW) v5(ctx context.Context, cp paho5.Connect) (*v5conn, error) {
	gw.t.Helper()
	conn, err := net.Dial("tcp", gw.addr)
	if err != nil {
		gw.t.Fatal(err)
	}
	gw.t.Cleanup(func() { conn.Close() })
	v := &v5conn{conn: conn, got: make(chan *paho5.Publish, 256)}
	v.c = paho5.NewClient(paho5.ClientConfig{Conn: conn, OnPublishReceived: []func(paho5.PublishReceived) (bool, error){
		func(pr paho5.PublishReceived) (bool, error) {
			select {
			case v.got <- pr.Packet:
			default:
			}
			return true, nil
		},
	}})
	cp.UsernameFlag, cp.PasswordFlag = cp.Username != "", len(cp.Password) > 0
	if cp.KeepAlive == 0 {
		cp.KeepAlive = 30
	}
	v.ack, err = v.c.Connect(ctx, &cp)
	return v, err
}

// collector gathers every message a client sees on a filter.
type collector struct {
	mu   sync.Mutex
	msgs []paho.Message
}

func collect(t *testing.T, c paho.Client, filter string) *collector {
	t.Helper()
	col := &collector{}
	tok := c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) {
		col.mu.Lock()
		col.msgs = append(col.msgs, m)
		col.mu.Unlock()
	})
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", filter, tok.Error())
	}
	return col
}

// containing returns the messages whose payload holds s.
func (col *collector) containing(s string) []string {
	col.mu.Lock()
	defer col.mu.Unlock()
	var out []string
	for _, m := range col.msgs {
		if bytes.Contains(m.Payload(), []byte(s)) {
			out = append(out, fmt.Sprintf("%s (retained %v): %s", m.Topic(), m.Retained(), m.Payload()))
		}
	}
	return out
}

// noForgery fails if a live watcher saw a payload holding mark, or a late
// subscriber finds one retained anywhere under the prefix.
func noForgery(t *testing.T, gw *testGW, live *collector, mark string) {
	t.Helper()
	late := collect(t, gw.mustClient("adam", "adam-password"), prefix+"#")
	cmds := collect(t, gw.mustClient("carl", "carl-password"), "#")
	time.Sleep(300 * time.Millisecond) // retained messages arrive right after SUBACK
	for _, col := range []*collector{live, late, cmds} {
		if got := col.containing(mark); len(got) > 0 {
			t.Fatalf("forged messages reached a subscriber:\n%s", strings.Join(got, "\n"))
		}
	}
}

// outputTopics are the gateway's output topics, relative to the prefix.
var outputTopics = []string{"state/valve-1/open", "reply/valve-1/open", "reply/run/flush", "events", "events/x",
	"approvals/a-1", "alarms/al-1", "status", "checkpoints", "ha/valve-1/open", "ha/valve-1/open/outcome"}

func TestWillOnAGatewayTopicIsRefused(t *testing.T) {
	gw := startGW(t, gwOptions{})
	live := collect(t, gw.mustClient("adam", "adam-password"), prefix+"#")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, rel := range outputTopics {
		for _, retain := range []bool{false, true} {
			mark := fmt.Sprintf("FORGED-%d-%v", i, retain)
			// carl may publish on "#": the gateway's own topics stay closed.
			o := paho.NewClientOptions().AddBroker("tcp://"+gw.addr).SetClientID(fmt.Sprintf("w3-%d-%v", i, retain)).
				SetUsername("carl").SetPassword("carl-password").SetAutoReconnect(false).SetProtocolVersion(4).
				SetConnectTimeout(5*time.Second).SetWill(prefix+rel, mark+"-v3", 1, retain)
			c := paho.NewClient(o)
			tok := c.Connect()
			if !tok.WaitTimeout(10 * time.Second) {
				t.Fatal("v3 connect timed out")
			}
			if err := tok.Error(); err == nil || !strings.Contains(err.Error(), "not Authorized") {
				t.Errorf("v3 will on %s (retain %v): connect error %v, want not Authorized", rel, retain, err)
			}
			v, err := gw.v5(ctx, paho5.Connect{ClientID: fmt.Sprintf("w5-%d-%v", i, retain), CleanStart: true,
				Username: "carl", Password: []byte("carl-password"),
				WillMessage: &paho5.WillMessage{Topic: prefix + rel, Payload: []byte(mark + "-v5"), QoS: 1, Retain: retain}})
			if err == nil || v.ack == nil || v.ack.ReasonCode != 0x87 {
				t.Errorf("v5 will on %s (retain %v): connack %+v, error %v; want reason 0x87", rel, retain, v.ack, err)
			}
			v.conn.Close() // dropped without a DISCONNECT: a will, if kept, goes out now
		}
	}
	noForgery(t, gw, live, "FORGED")
	if n := gw.b.Stats().RefusedConnects; n != int64(4*len(outputTopics)) {
		t.Fatalf("refused connects = %d, want %d", n, 4*len(outputTopics))
	}
}

func TestWillThatWouldCommandIsRefused(t *testing.T) {
	gw := startGW(t, gwOptions{})
	live := collect(t, gw.mustClient("carl", "carl-password"), "#")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, user := range []string{"alice", "carl"} { // alice may publish cmd/# and run/#, carl anything
		for _, topic := range []string{"cmd/valve-1/open", "run/flush"} {
			for _, retain := range []bool{false, true} {
				v, err := gw.v5(ctx, paho5.Connect{ClientID: "will-" + user, CleanStart: true,
					Username: user, Password: []byte(user + "-password"),
					WillMessage: &paho5.WillMessage{Topic: prefix + topic, Payload: []byte(`{"value": true, "id": "FORGED"}`), QoS: 1, Retain: retain}})
				if err == nil || v.ack == nil || v.ack.ReasonCode != 0x87 {
					t.Errorf("%s: will on %s (retain %v): connack %+v, error %v; want 0x87", user, topic, retain, v.ack, err)
				}
				v.conn.Close()
			}
		}
	}
	noForgery(t, gw, live, "FORGED")
	if n := gw.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("a will moved the valve %d times", n)
	}
}

func TestWillOnAnAllowedTopicIsDelivered(t *testing.T) {
	gw := startGW(t, gwOptions{})
	live := collect(t, gw.mustClient("carl", "carl-password"), "site/#")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := gw.v5(ctx, paho5.Connect{ClientID: "carl-will", CleanStart: true, Username: "carl", Password: []byte("carl-password"),
		WillMessage: &paho5.WillMessage{Topic: "site/carl/status", Payload: []byte("offline"), QoS: 1}})
	if err != nil || v.ack.ReasonCode != 0 {
		t.Fatalf("a will on a topic carl may publish: %+v %v", v.ack, err)
	}
	v.conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(live.containing("offline")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the will on site/carl/status was not delivered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A viewer may publish nowhere, so may leave no will.
	if v, err := gw.v5(ctx, paho5.Connect{ClientID: "victor-will", CleanStart: true, Username: "victor", Password: []byte("victor-password"),
		WillMessage: &paho5.WillMessage{Topic: "site/victor/status", Payload: []byte("x")}}); err == nil || v.ack.ReasonCode != 0x87 {
		t.Fatalf("a viewer's will: %+v %v", v.ack, err)
	}
}

func TestClientIDBelongsToItsUser(t *testing.T) {
	gw := startGW(t, gwOptions{})
	queued := make(chan paho.Message, 16)
	persistent := func(user, id string, clean bool, h paho.MessageHandler) (paho.Client, error) {
		o := paho.NewClientOptions().AddBroker("tcp://" + gw.addr).SetClientID(id).SetUsername(user).SetPassword(user + "-password").
			SetCleanSession(clean).SetAutoReconnect(false).SetProtocolVersion(4).SetConnectTimeout(5 * time.Second).
			SetDefaultPublishHandler(h)
		c := paho.NewClient(o)
		tok := c.Connect()
		if !tok.WaitTimeout(10 * time.Second) {
			return nil, fmt.Errorf("connect timed out")
		}
		return c, tok.Error()
	}
	alice, err := persistent("alice", "plant-1", false, func(_ paho.Client, m paho.Message) { queued <- m })
	if err != nil {
		t.Fatal(err)
	}
	if tok := alice.Subscribe(prefix+"reply/tank-1/level", 1, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	alice.Disconnect(50) // her session stays, and collects her messages
	adam := gw.mustClient("adam", "adam-password")
	replies := subscribe(t, adam, prefix+"reply/tank-1/level")
	publish(t, adam, prefix+"cmd/tank-1/level", 1, `{"id": "for-alice"}`)
	nextReply(t, replies, "the reply queued for alice")

	stolen := make(chan paho.Message, 16)
	if _, err := persistent("victor", "plant-1", false, func(_ paho.Client, m paho.Message) { stolen <- m }); err == nil ||
		!strings.Contains(err.Error(), "identifier rejected") {
		t.Fatalf("victor with alice's client id: %v, want identifier rejected", err)
	}
	select {
	case m := <-stolen:
		t.Fatalf("victor received alice's message %s", m.Payload())
	case <-time.After(200 * time.Millisecond):
	}
	// Alice takes her session back and gets what was queued.
	alice, err = persistent("alice", "plant-1", false, func(_ paho.Client, m paho.Message) { queued <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Disconnect(50)
	if m := next(t, queued, "alice's queued reply"); !strings.Contains(string(m.Payload()), "for-alice") {
		t.Fatalf("alice's queued message = %s", m.Payload())
	}
	// Nobody else can kick her off: not with a clean session, not over v5.
	if _, err := persistent("bob", "plant-1", true, nil); err == nil {
		t.Fatal("bob connected with alice's client id")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if v, err := gw.v5(ctx, paho5.Connect{ClientID: "plant-1", CleanStart: true, Username: "victor", Password: []byte("victor-password")}); err == nil ||
		v.ack == nil || v.ack.ReasonCode != 0x85 {
		t.Fatalf("v5 victor with alice's client id: %+v %v, want 0x85", v.ack, err)
	}
	// Nor can a client take the broker's own clients' ids.
	for _, id := range []string{"inline", replierID} {
		if v, err := gw.v5(ctx, paho5.Connect{ClientID: id, CleanStart: true, Username: "carl", Password: []byte("carl-password")}); err == nil ||
			v.ack.ReasonCode != 0x85 {
			t.Fatalf("client id %q: %+v %v, want 0x85", id, v.ack, err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if !alice.IsConnectionOpen() {
		t.Fatal("alice was kicked off by another user's connection")
	}
	// The same user may take over her own session, as MQTT allows.
	again, err := persistent("alice", "plant-1", false, nil)
	if err != nil {
		t.Fatalf("alice taking over her own session: %v", err)
	}
	again.Disconnect(50)
}

func TestReplyCarriesTheIDOfABadPayload(t *testing.T) {
	gw := startGW(t, gwOptions{})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/#")
	for _, tc := range []struct{ topic, payload, id, outcome string }{
		{"cmd/valve-1/open", `{"value": "yes", "id": "bad-1"}`, "bad-1", command.OutcomeFailed},
		{"cmd/valve-1/open", `{"id": "bad-2", "value": tru`, "bad-2", command.OutcomeFailed},
		{"cmd/valve-1/open", `{"id": "bad-3", "valu": true}`, "bad-3", command.OutcomeFailed},
		{"cmd/valve-1/open", `{"id": "bad-4", "value": true, "expires": "2001-01-01T00:00:00Z"}`, "bad-4", command.OutcomeRefused},
		{"cmd/valve-1/open", `{"id": "bad-5", "value": true, "at": 12}`, "bad-5", command.OutcomeFailed},
		{"run/flush", `{"id": "bad-6", "value": 1}`, "bad-6", command.OutcomeFailed},
		{"cmd/valve-1/open", `{"id": 7, "value": true}`, "", command.OutcomeFailed},
		{"cmd/valve-1/open", `{"id": "a b", "value": true}`, "", command.OutcomeFailed},
		{"cmd/valve-1/open", `{"id": "first", "id": "", "value": 1}`, "", command.OutcomeFailed},
	} {
		publish(t, alice, prefix+tc.topic, 1, tc.payload)
		r := nextReply(t, replies, tc.payload)
		if r.ID != tc.id || r.Outcome != tc.outcome || r.IDGenerated {
			t.Errorf("%s %s: reply %+v, want id %q and %s", tc.topic, tc.payload, r, tc.id, tc.outcome)
		}
	}
	if n := gw.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("bad payloads moved the valve %d times", n)
	}
}

func TestResponseTopicMayNotPointAtGatewayOrCommandTopics(t *testing.T) {
	gw := startGW(t, gwOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v, err := gw.v5(ctx, paho5.Connect{ClientID: "rt-alice", CleanStart: true, Username: "alice", Password: []byte("alice-password")})
	if err != nil {
		t.Fatal(err)
	}
	watch := collect(t, gw.mustClient("carl", "carl-password"), "#")
	if _, err := v.c.Subscribe(ctx, &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: prefix + "reply/valve-1/open", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	targets := []string{prefix + "reply/heater-1/on", prefix + "reply/valve-1/open", prefix + "cmd/heater-1/on", prefix + "run/flush",
		prefix + "state/valve-1/open", prefix + "events", prefix + "approvals/a-1", prefix + "alarms/al-1", prefix + "status",
		prefix + "checkpoints", "$SYS/broker/x", prefix + "inbox/+", "elsewhere/x"}
	for i, rt := range targets {
		corr := fmt.Sprintf("corr-%d", i)
		if _, err := v.c.Publish(ctx, &paho5.Publish{Topic: prefix + "cmd/valve-1/open", QoS: 1, Payload: []byte(`{"value": true, "id": "rt-` + fmt.Sprint(i) + `"}`),
			Properties: &paho5.PublishProperties{ResponseTopic: rt, CorrelationData: []byte(corr)}}); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-v.got:
			var r command.Reply
			_ = json.Unmarshal(p.Payload, &r)
			if p.Topic != prefix+"reply/valve-1/open" || r.Outcome != command.OutcomeRefused || !strings.Contains(r.Why, "response topic") ||
				p.Properties == nil || string(p.Properties.CorrelationData) != corr || r.ID != fmt.Sprintf("rt-%d", i) {
				t.Errorf("response topic %s: reply on %s: %s", rt, p.Topic, p.Payload)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("response topic %s: no refusal on the default reply topic", rt)
		}
	}
	time.Sleep(200 * time.Millisecond)
	watch.mu.Lock()
	for _, m := range watch.msgs {
		// Retained messages (the gateway's status) were there before.
		if !m.Retained() && m.Topic() != prefix+"reply/valve-1/open" && !strings.HasPrefix(m.Topic(), prefix+"events") {
			t.Errorf("a reply went to %s: %s", m.Topic(), m.Payload())
		}
	}
	watch.mu.Unlock()
	if n := gw.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("commands with a refused response topic moved the valve %d times", n)
	}
}

func TestContradictedActIsNotReportedAsActed(t *testing.T) {
	gw := startGW(t, gwOptions{})
	gw.g.SetFault("valve-1", devicetest.Fault{Stuck: true}) // takes the write, never moves
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/valve-1/open")
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": true, "id": "stuck-1"}`)
	r := nextReply(t, replies, "the reply to a stuck valve")
	if r.Outcome != command.OutcomeContradicted || r.ID != "stuck-1" || r.Receipt == nil || r.Receipt.Confirmation != runtime.WrongFinal || r.Why == "" {
		t.Fatalf("reply = %+v", r)
	}
}

func TestNewestCheckpointIsRetainedAndRepublishedOnStart(t *testing.T) {
	dir := t.TempDir()
	gw := startGW(t, gwOptions{dir: dir})
	live := subscribe(t, gw.mustClient("victor", "victor-password"), prefix+"checkpoints")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last runtime.Event
	for i := range 2 {
		ev, err := gw.eng.Note(ctx, runtime.KindCheckpoint, "", runtime.CheckpointBody{
			Note: fmt.Sprintf("shadowgate/test\n%d\nAAAA\n\n— test sig\n", i+1), Size: uint64(i + 1), Hash: "ab", Key: "test+1"})
		if err != nil {
			t.Fatal(err)
		}
		if m := next(t, live, "a checkpoint"); !bytes.Equal(m.Payload(), ev.Body) {
			t.Fatalf("checkpoints = %s, want %s", m.Payload(), ev.Body)
		}
		last = ev
	}
	retained := func(what string) {
		t.Helper()
		m := next(t, subscribe(t, gw.mustClient("victor", "victor-password"), prefix+"checkpoints"), what)
		if !m.Retained() || !bytes.Equal(m.Payload(), last.Body) {
			t.Fatalf("%s: retained %v, %s; want the newest, %s", what, m.Retained(), m.Payload(), last.Body)
		}
	}
	retained("the newest checkpoint")
	gw.stop()
	gw = startGW(t, gwOptions{dir: dir})
	retained("the newest checkpoint after a restart")
}
