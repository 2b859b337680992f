package mqtt

// These tests drive the embedded broker with real MQTT clients: paho for
// 3.1.1 and paho.golang for v5, against an engine on a bbolt journal and
// the simulated greenhouse.

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/crypto/bcrypt"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

const prefix = "shadowgate/test/"

type testGW struct {
	t    testing.TB
	eng  *runtime.Engine
	g    *devicetest.Driver
	b    *Broker
	addr string
	stop func()
}

type gwOptions struct {
	burst      int
	perMinute  int
	anonymous  *access.Role
	dir        string // the journal's directory; default a new one
	tls        *tls.Config
	websocket  string
	maxClients int
	logger     *slog.Logger
	// wrap, if set, stands between the broker's commands and the engine.
	wrap func(command.Engine) command.Engine
	// ha and haRecord turn on Home Assistant discovery.
	ha       *HomeAssistant
	haRecord string
	// flush is the journal's flush interval; default testFlush.
	flush time.Duration
}

func hash(t testing.TB, pw string) []byte {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func greenhouse() []devices.Device {
	return runtimetest.Greenhouse("gh", "tank-1", "valve-1", "heater-1")
}

// testEngine builds an engine on a journal in dir (a new one if empty)
// and the simulated greenhouse, and the users of the tests. Its caller
// runs the engine and closes the journal.
func testEngine(t testing.TB, dir string) (*runtime.Engine, *devicetest.Driver, *journal.DB, *access.Users) {
	t.Helper()
	return testEngineFlushing(t, dir, testFlush)
}

// testEngineFlushing is testEngine whose journal writes readings every
// flush.
func testEngineFlushing(t testing.TB, dir string, flush time.Duration) (*runtime.Engine, *devicetest.Driver, *journal.DB, *access.Users) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	j, err := journal.Open(filepath.Join(dir, journal.FileName), journal.Options{FlushInterval: flush})
	if err != nil {
		t.Fatal(err)
	}
	g := runtimetest.Driver(t, greenhouse())
	reg := devices.NewRegistry()
	if err := reg.Add("sim", g); err != nil {
		t.Fatal(err)
	}
	readBack := &runtime.Confirm{ReadBack: true, Within: time.Second}
	eng, err := runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: j,
		Rules: []governance.Rule{{ID: "valve", Principal: "mqtt:*", Device: "valve-1", Capability: "open", Decision: governance.DecideAllow}},
		Policies: map[string]runtime.CapPolicy{
			"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Confirm: readBack},
			"heater-1.on":  {Effects: &runtime.Declared{Reversible: true, Contained: true, Costs: true}, Confirm: readBack},
		},
		Plans: []runtime.Plan{{Name: "flush", Steps: []runtime.PlanStep{{Op: runtime.OpWrite, Device: "valve-1", Capability: "open", Value: value.Bool(true)}}},
			{Name: "soak", Steps: []runtime.PlanStep{{Op: runtime.OpWait, Wait: time.Hour}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	users, err := access.NewUsers([]access.User{
		{Name: "alice", Role: access.Operator, Hash: hash(t, "alice-password")},
		{Name: "victor", Role: access.Viewer, Hash: hash(t, "victor-password")},
		{Name: "bob", Role: access.Operator, Hash: hash(t, "bob-password"),
			Publish: []string{prefix + "cmd/heater-1/#"}, Subscribe: []string{prefix + "reply/#"}},
		{Name: "april", Role: access.Approver, Hash: hash(t, "april-password")},
		{Name: "adam", Role: access.Admin, Hash: hash(t, "adam-password")},
		// carl may publish anything, on the gateway's topics too: the
		// gateway's own rules must still hold.
		{Name: "carl", Role: access.Operator, Hash: hash(t, "carl-password"),
			Publish: []string{"#"}, Subscribe: []string{"#"}},
		// hass is Home Assistant: it commands, says it is online, and reads
		// the discovery configs and the gateway's topics.
		{Name: "hass", Role: access.Operator, Hash: hash(t, "hass-password"),
			Publish: []string{prefix + "cmd/#", "homeassistant/status"}, Subscribe: []string{"homeassistant/#", prefix + "#"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return eng, g, j, users
}

func startGW(t testing.TB, o gwOptions) *testGW {
	t.Helper()
	eng, g, j, users := testEngineFlushing(t, o.dir, cmp.Or(o.flush, testFlush))
	opts := Options{Prefix: prefix, Listen: "127.0.0.1:0", Users: users, Anonymous: o.anonymous,
		CommandBurst: o.burst, CommandsPerMinute: o.perMinute, MaxPayload: 4096, TLS: o.tls, WebsocketListen: o.websocket, MaxClients: o.maxClients,
		Logger: o.logger, HomeAssistant: o.ha, HomeAssistantRecord: o.haRecord}
	if o.tls != nil {
		opts.TLSListen = "127.0.0.1:0"
	}
	b, err := New(eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	if o.wrap != nil {
		b.disp.Engine = o.wrap(b.disp.Engine)
	}
	if err := b.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	engDone, brokerDone := make(chan error, 1), make(chan error, 1)
	go func() { engDone <- eng.Run(ctx) }()
	go func() { brokerDone <- b.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-brokerDone
			<-engDone
			_ = j.Close()
		})
	}
	t.Cleanup(stop)
	return &testGW{t: t, eng: eng, g: g, b: b, addr: b.Addr("tcp"), stop: stop}
}

func (gw *testGW) client(user, password string) (paho.Client, error) {
	return gw.clientAt("tcp://"+gw.addr, nil, user, password)
}

func (gw *testGW) clientAt(url string, tc *tls.Config, user, password string) (paho.Client, error) {
	o := paho.NewClientOptions().AddBroker(url).SetTLSConfig(tc).SetClientID(fmt.Sprintf("%s-%d", user, time.Now().UnixNano())).
		SetUsername(user).SetPassword(password).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second).SetProtocolVersion(4)
	c := paho.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(10 * time.Second) {
		return nil, fmt.Errorf("connect timed out")
	}
	if err := tok.Error(); err != nil {
		return nil, err
	}
	gw.t.Cleanup(func() { c.Disconnect(50) })
	return c, nil
}

func (gw *testGW) mustClient(user, password string) paho.Client {
	gw.t.Helper()
	c, err := gw.client(user, password)
	if err != nil {
		gw.t.Fatalf("connect as %s: %v", user, err)
	}
	return c
}

// subscribe collects the messages on a filter.
func subscribe(t *testing.T, c paho.Client, filter string) <-chan paho.Message {
	t.Helper()
	ch := make(chan paho.Message, 256)
	tok := c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) { ch <- m })
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", filter, tok.Error())
	}
	return ch
}

func publish(t *testing.T, c paho.Client, topic string, qos byte, payload string) {
	t.Helper()
	tok := c.Publish(topic, qos, false, payload)
	if !tok.WaitTimeout(5 * time.Second) {
		t.Fatalf("publish %s timed out", topic)
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
}

func next(t *testing.T, ch <-chan paho.Message, what string) paho.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no message: %s", what)
	}
	return nil
}

func nextReply(t *testing.T, ch <-chan paho.Message, what string) command.Reply {
	t.Helper()
	m := next(t, ch, what)
	var r command.Reply
	if err := json.Unmarshal(m.Payload(), &r); err != nil {
		t.Fatalf("%s: reply %s: %v", what, m.Payload(), err)
	}
	return r
}

func quiet(t *testing.T, ch <-chan paho.Message, d time.Duration) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("unexpected message on %s: %s", m.Topic(), m.Payload())
	case <-time.After(d):
	}
}

func TestAuthentication(t *testing.T) {
	gw := startGW(t, gwOptions{})
	if _, err := gw.client("alice", "wrong"); err == nil || !strings.Contains(err.Error(), "not Authorized") {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := gw.client("mallory", "alice-password"); err == nil {
		t.Fatal("an unknown user connected")
	}
	if _, err := gw.client("", ""); err == nil {
		t.Fatal("an anonymous client connected")
	}
	gw.mustClient("alice", "alice-password")
	// A client that gave up waiting (a bcrypt run is slow under the race
	// detector on a busy machine) may have been refused after it left.
	deadline := time.Now().Add(20 * time.Second)
	for gw.b.Stats().FailedLogins < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := gw.b.Stats().FailedLogins; n != 3 {
		t.Fatalf("failed logins = %d, want 3", n)
	}
	// Guessing from one address is slowed down: after five failures in a
	// row even the right password waits.
	for range 5 {
		_, _ = gw.client("alice", "guess")
	}
	if _, err := gw.client("alice", "alice-password"); err == nil {
		t.Fatal("the right password was taken from an address that kept guessing")
	}
}

func TestAnonymousGetsItsRole(t *testing.T) {
	viewer := access.Viewer
	gw := startGW(t, gwOptions{anonymous: &viewer})
	c := gw.mustClient("", "")
	replies := subscribe(t, c, prefix+"reply/#")
	publish(t, c, prefix+"cmd/valve-1/open", 0, `true`)
	quiet(t, replies, 300*time.Millisecond)
	if gw.g.Count("write", "valve-1", "open") != 0 || gw.b.Stats().DeniedPublishes == 0 {
		t.Fatal("an anonymous viewer's command was taken")
	}
}

func TestNoClientMayPublishState(t *testing.T) {
	gw := startGW(t, gwOptions{})
	watcher := gw.mustClient("victor", "victor-password")
	state := subscribe(t, watcher, prefix+"state/#")
	alice := gw.mustClient("alice", "alice-password")
	publish(t, alice, prefix+"state/valve-1/open", 0, `{"value":true}`)
	quiet(t, state, 300*time.Millisecond)
	if n := gw.b.Stats().DeniedPublishes; n != 1 {
		t.Fatalf("denied publishes = %d, want 1", n)
	}
	// A 3.1.1 client publishing there at QoS 1 is disconnected, never delivered.
	tok := alice.Publish(prefix+"events", 1, false, `{}`)
	tok.WaitTimeout(2 * time.Second)
	quiet(t, state, 300*time.Millisecond)
	// A viewer may not command, and bob may command only the heater.
	victorCmd := gw.mustClient("victor", "victor-password")
	publish(t, victorCmd, prefix+"cmd/valve-1/open", 0, `true`)
	bob := gw.mustClient("bob", "bob-password")
	publish(t, bob, prefix+"cmd/valve-1/open", 0, `true`)
	if tok := bob.Subscribe(prefix+"state/#", 1, nil); tok.WaitTimeout(5*time.Second) && tok.Error() == nil {
		if st, ok := tok.(*paho.SubscribeToken); ok && st.Result()[prefix+"state/#"] != 0x80 {
			t.Fatalf("bob's subscription to state/# was granted: %v", st.Result())
		}
	}
	time.Sleep(200 * time.Millisecond)
	if gw.g.Count("write", "valve-1", "open") != 0 {
		t.Fatal("a denied command reached the valve")
	}
}

func TestCommandActsWithAConfirmedReceipt(t *testing.T) {
	gw := startGW(t, gwOptions{})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/valve-1/open")
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": true, "id": "c-1", "reason": "flush the line"}`)
	r := nextReply(t, replies, "the reply")
	if r.ID != "c-1" || r.Outcome != command.OutcomeActed || r.Receipt == nil || r.Receipt.Confirmation != runtime.Confirmed || r.Why != "" {
		t.Fatalf("reply = %+v", r)
	}
	// A bare value works too, and the gateway says it made the id.
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `false`)
	r = nextReply(t, replies, "the second reply")
	if r.Outcome != command.OutcomeActed || !r.IDGenerated || !strings.HasPrefix(r.ID, "mqtt-") {
		t.Fatalf("reply to a bare value = %+v", r)
	}
	// A read has no value and completes with the reading.
	tank := subscribe(t, alice, prefix+"reply/tank-1/level")
	publish(t, alice, prefix+"cmd/tank-1/level", 1, `{"id":"read-1"}`)
	if r := nextReply(t, tank, "the read"); r.Outcome != command.OutcomeCompleted || r.Reading == nil {
		t.Fatalf("read reply = %+v", r)
	}
}

func TestPendingApprovalGetsASecondReply(t *testing.T) {
	gw := startGW(t, gwOptions{})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/heater-1/on")
	approvals := subscribe(t, alice, prefix+"approvals/#")
	publish(t, alice, prefix+"cmd/heater-1/on", 1, `{"value": true, "id": "h-1"}`)
	r := nextReply(t, replies, "the first reply")
	if r.Outcome != command.OutcomePendingApproval || r.Approval == nil || !strings.Contains(r.Why, r.Approval.ID) {
		t.Fatalf("first reply = %+v", r)
	}
	m := next(t, approvals, "the retained approval")
	if m.Topic() != prefix+"approvals/"+r.Approval.ID || !strings.Contains(string(m.Payload()), `"status":"pending"`) {
		t.Fatalf("approval message %s = %s", m.Topic(), m.Payload())
	}
	if _, err := gw.eng.Answer(context.Background(), r.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve}); err != nil {
		t.Fatal(err)
	}
	r2 := nextReply(t, replies, "the second reply")
	if r2.ID != "h-1" || r2.Outcome != command.OutcomeActed || r2.Receipt == nil || r2.Receipt.Confirmation != runtime.Confirmed {
		t.Fatalf("second reply = %+v", r2)
	}
	// The answered approval is cleared from the retained topic.
	if m := next(t, approvals, "the cleared approval"); len(m.Payload()) != 0 {
		t.Fatalf("after the answer approvals/%s = %s", r.Approval.ID, m.Payload())
	}
}

func TestDuplicateIDActsOnce(t *testing.T) {
	gw := startGW(t, gwOptions{})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/valve-1/open")
	for range 2 {
		publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": true, "id": "dup"}`)
	}
	first, second := nextReply(t, replies, "first"), nextReply(t, replies, "second")
	if first.Outcome != command.OutcomeActed || second.Outcome != command.OutcomeActed || !second.Replayed || first.Receipt.Attempt != second.Receipt.Attempt {
		t.Fatalf("replies = %+v and %+v", first, second)
	}
	if n := gw.g.Count("write", "valve-1", "open"); n != 1 {
		t.Fatalf("the valve was written %d times, want 1", n)
	}
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": false, "id": "dup"}`)
	if r := nextReply(t, replies, "a different act"); r.Outcome != command.OutcomeRefused || !strings.Contains(r.Why, "mqtt:alice/dup") {
		t.Fatalf("same id, different act = %+v", r)
	}
}

func TestBadInputGetsARepliesNamingTheProblem(t *testing.T) {
	gw := startGW(t, gwOptions{})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/#")
	cases := []struct {
		topic, payload string
		outcome, want  string
	}{
		{"cmd/valve-1/open", `{"value": tru`, command.OutcomeFailed, "malformed JSON"},
		{"cmd/valve-1/open", `{"value": "yes"}`, command.OutcomeFailed, `field "value": want a bool, got a string`},
		{"cmd/valve-1/open", `"yes"`, command.OutcomeFailed, "value: want a bool, got a string"},
		{"cmd/valve-1/open", `{"valu": true}`, command.OutcomeFailed, `unknown field "valu"`},
		{"cmd/valve-1/open", `{"value": true, "id": 7}`, command.OutcomeFailed, `field "id": want a string`},
		{"cmd/valve-1/open", `{"value": true, "expires": "tomorrow"}`, command.OutcomeFailed, `field "expires"`},
		{"cmd/valve-1/open", `{"value": true, "expires": "2001-01-01T00:00:00Z"}`, command.OutcomeRefused, "stale: it expired"},
		{"cmd/valve-1/open", `{"value": true, "pad": "` + strings.Repeat("x", 5000) + `"}`, command.OutcomeFailed, "over the limit of 4096"},
		{"cmd/boiler-1/on", `true`, command.OutcomeFailed, "device boiler-1 is not online"},
		{"cmd/valve-1/speed", `true`, command.OutcomeFailed, "has no capability speed"},
		{"cmd/valve-1", `true`, command.OutcomeRefused, "is not " + prefix + "cmd/<device>/<capability>"},
		{"run/nope", `{}`, command.OutcomeFailed, `plan "nope"`},
		{"run/flush", `{"value": 1}`, command.OutcomeFailed, "a plan run takes no value"},
	}
	for _, tc := range cases {
		publish(t, alice, prefix+tc.topic, 1, tc.payload)
		r := nextReply(t, replies, tc.topic+" "+tc.payload)
		if r.Outcome != tc.outcome || !strings.Contains(r.Why, tc.want) {
			t.Errorf("%s %.40s: reply %+v; want %s naming %q", tc.topic, tc.payload, r, tc.outcome, tc.want)
		}
	}
	if n := gw.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("bad input reached the valve %d times", n)
	}
}

func TestRateLimitPerPrincipal(t *testing.T) {
	gw := startGW(t, gwOptions{burst: 2, perMinute: 1}) // no token comes back within the test
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/tank-1/level")
	for i := range 3 {
		publish(t, alice, prefix+"cmd/tank-1/level", 1, fmt.Sprintf(`{"id":"r-%d"}`, i))
	}
	outcomes := []string{nextReply(t, replies, "1").Outcome, nextReply(t, replies, "2").Outcome}
	third := nextReply(t, replies, "3")
	if outcomes[0] != command.OutcomeCompleted || outcomes[1] != command.OutcomeCompleted || third.Outcome != command.OutcomeRefused || !strings.Contains(third.Why, "rate limit") {
		t.Fatalf("outcomes %v then %+v", outcomes, third)
	}
	// Another principal is not starved.
	bob := gw.mustClient("bob", "bob-password")
	bobReplies := subscribe(t, bob, prefix+"reply/heater-1/on")
	publish(t, bob, prefix+"cmd/heater-1/on", 1, `{"value": false}`)
	if r := nextReply(t, bobReplies, "bob's command"); r.Outcome == command.OutcomeRefused && strings.Contains(r.Why, "rate limit") {
		t.Fatalf("bob was limited by alice's commands: %+v", r)
	}
}

func TestRetainedStateForALateSubscriber(t *testing.T) {
	gw := startGW(t, gwOptions{})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/valve-1/open")
	events := subscribe(t, alice, prefix+"events")
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": true}`)
	nextReply(t, replies, "the reply")
	late := gw.mustClient("victor", "victor-password")
	state := subscribe(t, late, prefix+"state/valve-1/open")
	m := next(t, state, "the retained state")
	var s struct {
		Value        bool
		Quality      string
		Confirmation string
		At           time.Time
	}
	if err := json.Unmarshal(m.Payload(), &s); err != nil || !m.Retained() || !s.Value || s.Confirmation != "confirmed" || s.Quality != "good" || s.At.IsZero() {
		t.Fatalf("retained state (retained %v) = %s", m.Retained(), m.Payload())
	}
	var kinds []string
	for len(kinds) < 20 {
		select {
		case m := <-events:
			var ev runtime.Event
			_ = json.Unmarshal(m.Payload(), &ev)
			kinds = append(kinds, string(ev.Kind))
			if ev.Kind == runtime.KindActed {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("events seen: %v, no acted", kinds)
		}
	}
}

func TestV5ResponseTopicAndCorrelationData(t *testing.T) {
	gw := startGW(t, gwOptions{})
	conn, err := net.Dial("tcp", gw.addr)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *paho5.Publish, 4)
	c := paho5.NewClient(paho5.ClientConfig{Conn: conn, OnPublishReceived: []func(paho5.PublishReceived) (bool, error){
		func(pr paho5.PublishReceived) (bool, error) { got <- pr.Packet; return true, nil },
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ca, err := c.Connect(ctx, &paho5.Connect{ClientID: "v5-client", CleanStart: true, KeepAlive: 30,
		Username: "alice", UsernameFlag: true, Password: []byte("alice-password"), PasswordFlag: true})
	if err != nil || ca.ReasonCode != 0 {
		t.Fatalf("v5 connect: %+v %v", ca, err)
	}
	defer c.Disconnect(&paho5.Disconnect{})
	inbox := prefix + "inbox/v5-client"
	if _, err := c.Subscribe(ctx, &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: inbox, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, &paho5.Publish{Topic: prefix + "cmd/valve-1/open", QoS: 1, Payload: []byte(`{"value":true}`),
		Properties: &paho5.PublishProperties{ResponseTopic: inbox, CorrelationData: []byte("corr-42")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		var r command.Reply
		_ = json.Unmarshal(p.Payload, &r)
		if p.Topic != inbox || p.Properties == nil || string(p.Properties.CorrelationData) != "corr-42" || r.Outcome != command.OutcomeActed {
			t.Fatalf("reply on %s, correlation %q: %s", p.Topic, p.Properties.CorrelationData, p.Payload)
		}
	case <-ctx.Done():
		t.Fatal("no reply on the response topic")
	}
	// A response topic the client may not read, or one the gateway owns, is refused.
	if _, err := c.Publish(ctx, &paho5.Publish{Topic: prefix + "cmd/valve-1/open", QoS: 1, Payload: []byte(`false`),
		Properties: &paho5.PublishProperties{ResponseTopic: prefix + "state/valve-1/open"}}); err != nil {
		t.Fatal(err)
	}
	if n := gw.g.Count("write", "valve-1", "open"); n != 1 {
		t.Fatalf("the valve was written %d times, want 1", n)
	}
}

func TestTLSAndWebsocketListeners(t *testing.T) {
	srv, pool := runtimetest.SelfSigned(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ws := l.Addr().String()
	l.Close()
	gw := startGW(t, gwOptions{tls: srv, websocket: ws})
	for _, url := range []string{"ssl://" + gw.b.Addr("tls"), "ws://" + ws} {
		c, err := gw.clientAt(url, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, "alice", "alice-password")
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		replies := subscribe(t, c, prefix+"reply/tank-1/level")
		publish(t, c, prefix+"cmd/tank-1/level", 1, `{}`)
		if r := nextReply(t, replies, url); r.Outcome != command.OutcomeCompleted {
			t.Fatalf("%s: %+v", url, r)
		}
	}
	// Without the certificate's authority, TLS refuses.
	if _, err := gw.clientAt("ssl://"+gw.b.Addr("tls"), &tls.Config{MinVersion: tls.VersionTLS12}, "alice", "alice-password"); err == nil {
		t.Fatal("a client that does not trust the certificate connected")
	}
}

func TestClientsAreCapped(t *testing.T) {
	gw := startGW(t, gwOptions{maxClients: 2})
	gw.mustClient("alice", "alice-password")
	gw.mustClient("victor", "victor-password")
	if _, err := gw.client("bob", "bob-password"); err == nil {
		t.Fatal("a third client connected to a broker capped at 2")
	}
}

func TestStateIsRepublishedFromTheJournalOnStart(t *testing.T) {
	dir := t.TempDir()
	gw := startGW(t, gwOptions{dir: dir})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/valve-1/open")
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": true}`)
	if r := nextReply(t, replies, "the command"); r.Outcome != command.OutcomeActed {
		t.Fatalf("command: %+v", r)
	}
	gw.stop()

	gw = startGW(t, gwOptions{dir: dir})
	late := gw.mustClient("victor", "victor-password")
	state := subscribe(t, late, prefix+"state/valve-1/open")
	m := next(t, state, "the retained state after a restart")
	if !m.Retained() || !strings.Contains(string(m.Payload()), `"value":true`) || !strings.Contains(string(m.Payload()), `"confirmation":"confirmed"`) {
		t.Fatalf("state after a restart (retained %v): %s", m.Retained(), m.Payload())
	}
}

func TestSecondReplyAfterARestart(t *testing.T) {
	dir := t.TempDir()
	gw := startGW(t, gwOptions{dir: dir})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/heater-1/on")
	publish(t, alice, prefix+"cmd/heater-1/on", 1, `{"value": true, "id": "across"}`)
	first := nextReply(t, replies, "the first reply")
	if first.Outcome != command.OutcomePendingApproval {
		t.Fatalf("first reply = %+v", first)
	}
	gw.stop()

	gw = startGW(t, gwOptions{dir: dir})
	alice = gw.mustClient("alice", "alice-password")
	replies = subscribe(t, alice, prefix+"reply/heater-1/on")
	if _, err := gw.eng.Answer(context.Background(), first.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.Approve}); err != nil {
		t.Fatal(err)
	}
	r := nextReply(t, replies, "the second reply, after a restart")
	if r.ID != "across" || r.Outcome != command.OutcomeActed || r.Receipt == nil {
		t.Fatalf("second reply after a restart = %+v", r)
	}
}

// A flood of wrong MQTT passwords costs the journal one summary for the
// address, with the count, not one event per guess.
func TestFailedLoginsAreJournaledAsOneSummary(t *testing.T) {
	gw := startGW(t, gwOptions{})
	const guesses = 30
	for range guesses {
		_, _ = gw.client("alice", "guess")
	}
	// The window is a minute: close it as the next good login from the
	// address would, and the summary is journaled.
	gw.b.limiter.Succeeded("127.0.0.1:1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var logins []runtime.Event
	for ctx.Err() == nil {
		evs, err := gw.eng.Events(ctx, 0, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		logins = logins[:0]
		for _, e := range evs {
			if e.Kind == runtime.KindLogin {
				logins = append(logins, e)
			}
		}
		if len(logins) > 0 {
			break
		}
		select { // async events are written within 100 ms
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if len(logins) != 1 {
		t.Fatalf("%d login events for %d guesses from one address, want one summary", len(logins), guesses)
	}
	var body struct {
		Surface           string `json:"surface"`
		Failures, Refused int
	}
	if err := json.Unmarshal(logins[0].Body, &body); err != nil || body.Surface != "mqtt" || body.Failures+body.Refused != guesses {
		t.Fatalf("summary = %s (%v); want surface mqtt and %d attempts", logins[0].Body, err, guesses)
	}
	if strings.Contains(string(logins[0].Body), "guess") {
		t.Fatalf("the summary carries a password: %s", logins[0].Body)
	}
}

// TestASecondRunOfAPlanIsRefusedNamingTheFirst: a plan runs one run at a
// time, whoever starts it; the reply names the run that has not ended.
func TestASecondRunOfAPlanIsRefusedNamingTheFirst(t *testing.T) {
	gw := startGW(t, gwOptions{})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/#")
	publish(t, alice, prefix+"run/soak", 1, `{"id": "f-1"}`)
	first := nextReply(t, replies, "the first start")
	if first.Outcome != command.OutcomeStarted || first.Run == "" {
		t.Fatalf("first start %+v", first)
	}
	publish(t, alice, prefix+"run/soak", 1, `{"id": "f-2"}`)
	for {
		r := nextReply(t, replies, "the second start")
		if r.ID != "f-2" {
			continue // the first run's own replies
		}
		if r.Outcome != command.OutcomeRefused || r.ErrorID != "" || !strings.Contains(r.Why, "already running as "+first.Run) {
			t.Fatalf("second start %+v; want refused, naming %s", r, first.Run)
		}
		return
	}
}

// MaxQueued bounds each client's queue of writes, and defaults to
// mochi's 8192.
func TestMaxQueuedBoundsTheClientQueue(t *testing.T) {
	for _, c := range []struct{ set, want int }{{0, 8192}, {200, 200}} {
		eng, _, _, users := testEngine(t, t.TempDir())
		b, err := New(eng, Options{Prefix: prefix, Listen: "127.0.0.1:0", Users: users, MaxQueued: c.set})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.srv.Options.Capabilities.MaximumClientWritesPending; int(got) != c.want {
			t.Errorf("MaxQueued %d: mochi's MaximumClientWritesPending = %d, want %d", c.set, got, c.want)
		}
	}
}

// testFlush is the journal's flush interval in these tests: they follow
// readings and checkpoints as they are written, and the default (30s, set
// for the card) would keep each waiting.
const testFlush = 100 * time.Millisecond
