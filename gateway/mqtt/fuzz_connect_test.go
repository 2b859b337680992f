package mqtt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/gateway/command"
)

// fuzzUsers are the logins FuzzConnect picks from by index, with the right
// password: the fuzzer varies everything else in the CONNECT.
var fuzzUsers = []struct{ user, password string }{
	{"alice", "alice-password"}, {"victor", "victor-password"}, {"carl", "carl-password"}, {"adam", "adam-password"}, {"", ""},
}

// forbiddenForClients reports whether a client may never make anything be
// published on topic: a naive restatement of DESIGN's list of the
// gateway's output and command topics, kept apart from the code it checks.
func forbiddenForClients(topic string) bool {
	rel, under := strings.CutPrefix(topic, prefix)
	if !under {
		return false
	}
	for _, name := range []string{"state", "reply", "events", "approvals", "alarms", "status", "checkpoints", "cmd", "run"} {
		if rel == name || strings.HasPrefix(rel, name+"/") {
			return true
		}
	}
	return false
}

// readConnack reads one CONNACK from r and returns its reason code.
func readConnack(r *bufio.Reader) (byte, error) {
	h, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	var n, shift int
	for {
		c, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		n |= int(c&0x7f) << shift
		if c&0x80 == 0 {
			break
		}
		shift += 7
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	if h>>4 != packets.Connack || n < 2 {
		return 0, io.ErrUnexpectedEOF
	}
	return body[1], nil
}

// FuzzConnect connects real (in-memory) clients to the broker with fuzzed
// client ids, wills and response topics, then drops them. A client whose
// will names a gateway or command topic, or who takes the broker's own
// client ids, must be refused; no will may ever appear on those topics;
// a response topic is allowed only if the user may read it and it is not
// one of them.
func FuzzConnect(f *testing.F) {
	for _, s := range []struct {
		who           byte
		v5            bool
		id, will      string
		payload       []byte
		retain        bool
		responseTopic string
	}{
		{0, true, "c1", prefix + "state/valve-1/open", []byte(`{"value":true}`), true, prefix + "reply/valve-1/open"},
		{2, false, "c2", prefix + "cmd/valve-1/open", []byte(`true`), false, prefix + "cmd/valve-1/open"},
		{2, true, "c3", "site/carl/status", []byte("offline"), true, "site/carl/inbox"},
		{2, true, "inline", "site/x", nil, false, prefix + "inbox/c"},
		{2, true, replierID, "", nil, false, "$SYS/x"},
		{4, false, "", prefix + "events", []byte(`{"id":"x"}`), true, prefix + "#"},
		{1, true, "c4", prefix + "checkpoints", nil, true, prefix + "status"},
		{3, true, "c5", prefix + "run/flush", []byte(`{}`), false, prefix + "alarms/a"},
		{2, true, "c6", prefix + "statex", []byte("ok"), false, prefix + "statex"},
		{2, false, "c7", prefix + "state", []byte("x"), true, prefix + "state"},
		{2, true, "c8", "a/+/b", []byte("x"), false, "a/#"},
	} {
		f.Add(s.who, s.v5, s.id, s.will, s.payload, s.retain, s.responseTopic)
	}
	operator := access.Operator
	gw := startGW(f, gwOptions{anonymous: &operator})
	var mu sync.Mutex
	var forged []string
	err := gw.b.srv.Subscribe("#", 77, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
		if forbiddenForClients(pk.TopicName) && pk.Origin != mochi.InlineClientId && pk.Origin != replierID {
			mu.Lock()
			forged = append(forged, pk.TopicName+" from "+pk.Origin)
			mu.Unlock()
		}
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, who byte, v5 bool, id, will string, payload []byte, retain bool, responseTopic string) {
		login := fuzzUsers[int(who)%len(fuzzUsers)]
		version := byte(4)
		if v5 {
			version = 5
		}
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: version,
			Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30, ClientIdentifier: id,
				UsernameFlag: login.user != "", Username: []byte(login.user), PasswordFlag: login.password != "", Password: []byte(login.password),
				WillFlag: will != "", WillTopic: will, WillPayload: payload, WillRetain: retain && will != "", WillQos: 1}}
		if will == "" {
			pk.Connect.WillQos = 0
		}
		var buf bytes.Buffer
		if err := pk.ConnectEncode(&buf); err != nil {
			return // not encodable: nothing a client could send
		}
		server, client := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = gw.b.srv.EstablishConnection("tcp", server)
		}()
		_ = client.SetDeadline(time.Now().Add(5 * time.Second))
		code := byte(0xff)
		if _, err := client.Write(buf.Bytes()); err == nil {
			if c, err := readConnack(bufio.NewReader(client)); err == nil {
				code = c
			}
		}
		client.Close() // dropped without a DISCONNECT: a will, if kept, goes out now
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the broker did not let go of a dropped client")
		}
		if code == 0 {
			if will != "" && (forbiddenForClients(will) || login.user != "carl") {
				t.Fatalf("%s connected with a will on %q", login.user, will)
			}
			if id == mochi.InlineClientId || id == replierID {
				t.Fatalf("%s connected with the broker's own client id %q", login.user, id)
			}
		}
		mu.Lock()
		if len(forged) > 0 {
			t.Fatalf("a client's will was published on the gateway's topics: %v", forged)
		}
		mu.Unlock()
		u, ok := gw.b.userNamed(login.user)
		if !ok {
			t.Fatalf("no user %q", login.user)
		}
		if gw.b.judgeResponseTopic(u, responseTopic) == "" {
			// prefix+"#" matches the prefix's parent level too, as MQTT says.
			readable := strings.HasPrefix(responseTopic+"/", prefix) || login.user == "carl"
			if forbiddenForClients(responseTopic) || strings.ContainsAny(responseTopic, "#+") || strings.HasPrefix(responseTopic, "$") || !readable {
				t.Fatalf("%s may have replies sent to %q", login.user, responseTopic)
			}
		}
		if got := command.PeekID(payload); got != "" {
			asked, _ := json.Marshal(map[string]string{"id": got})
			if _, err := command.ParseRun(asked); err != nil {
				t.Fatalf("PeekID(%q) = %q, not a valid id: %v", payload, got, err)
			}
		}
	})
}
