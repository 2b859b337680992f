package mqtt

// The adversarial suite: every gateway output topic attacked by every role
// with every way a client can make the broker publish, and every number a
// client can put in a payload. No case may panic, hang or act.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/gateway/command"
)

// role is a way to log in: a user, or anonymous.
type role struct{ name, user, password string }

var roles = []role{
	{"viewer", "victor", "victor-password"},
	{"operator", "alice", "alice-password"},
	{"approver", "april", "april-password"},
	{"admin", "adam", "adam-password"},
	{"operator-publishing-everywhere", "carl", "carl-password"},
	{"anonymous-operator", "", ""},
}

// numbers are the extremes every numeric field is tried with.
var numbers = []string{"0", "-1", "2147483648", "9007199254740993", "9223372036854775807", "9223372036854775808",
	"18446744073709551615", "1e400", "-0", `"12"`, "NaN"}

func TestAdversarialMQTTOutputTopics(t *testing.T) {
	operator := access.Operator
	gw := startGW(t, gwOptions{anonymous: &operator, burst: 1000, perMinute: 100000})
	live := collect(t, gw.mustClient("adam", "adam-password"), prefix+"#")
	for ri, r := range roles {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			v, err := gw.v5(ctx, paho5.Connect{ClientID: fmt.Sprintf("adv-%d", ri), CleanStart: true, Username: r.user, Password: []byte(r.password)})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			v3, err := gw.client(r.user, r.password)
			if err != nil {
				t.Fatalf("connect 3.1.1: %v", err)
			}
			for ti, rel := range outputTopics {
				mark := fmt.Sprintf("FORGED-%s-%d", r.name, ti)
				topic := prefix + rel
				// Plain and retained publishes, v5 at QoS 0 and 1, 3.1.1 at QoS 0.
				for _, retain := range []bool{false, true} {
					for _, qos := range []byte{0, 1} {
						pr, err := v.c.Publish(ctx, &paho5.Publish{Topic: topic, QoS: qos, Retain: retain, Payload: []byte(mark)})
						if qos == 1 && (err == nil && pr != nil && pr.ReasonCode < 0x80) {
							t.Errorf("v5 publish on %s (retain %v) acknowledged with %+v", rel, retain, pr)
						}
					}
					tok := v3.Publish(topic, 0, retain, mark)
					if !tok.WaitTimeout(5 * time.Second) {
						t.Fatalf("3.1.1 publish on %s timed out", rel)
					}
				}
				// Wills, retained and not: the connection is refused.
				for _, retain := range []bool{false, true} {
					w, err := gw.v5(ctx, paho5.Connect{ClientID: fmt.Sprintf("adv-will-%d-%d-%v", ri, ti, retain), CleanStart: true,
						Username: r.user, Password: []byte(r.password),
						WillMessage: &paho5.WillMessage{Topic: topic, Payload: []byte(mark), QoS: 1, Retain: retain}})
					if err == nil || w.ack == nil || w.ack.ReasonCode != 0x87 {
						t.Errorf("will on %s (retain %v): connack %+v, %v; want 0x87", rel, retain, w.ack, err)
					}
					w.conn.Close()
				}
				// A command whose v5 Response Topic points at the output topic.
				_, _ = v.c.Publish(ctx, &paho5.Publish{Topic: prefix + "cmd/valve-1/open", QoS: 1,
					Payload:    []byte(fmt.Sprintf(`{"value": true, "id": %q}`, mark)),
					Properties: &paho5.PublishProperties{ResponseTopic: topic, CorrelationData: []byte(mark)}})
			}
			if ctx.Err() != nil {
				t.Fatal("the attacks did not finish in time")
			}
		})
	}
	// Refusals of the response topics arrive on the default reply topic and
	// carry the mark as the id; nothing else may.
	time.Sleep(300 * time.Millisecond)
	live.mu.Lock()
	for _, m := range live.msgs {
		if !strings.Contains(string(m.Payload()), "FORGED") {
			continue
		}
		var rep command.Reply
		if m.Topic() != prefix+"reply/valve-1/open" || json.Unmarshal(m.Payload(), &rep) != nil || rep.Outcome != command.OutcomeRefused ||
			!strings.Contains(rep.Why, "response topic") {
			t.Errorf("forged message on %s: %s", m.Topic(), m.Payload())
		}
	}
	live.mu.Unlock()
	late := collect(t, gw.mustClient("adam", "adam-password"), prefix+"#")
	time.Sleep(300 * time.Millisecond)
	for _, s := range late.containing("FORGED") {
		if !strings.Contains(s, "(retained false)") {
			t.Errorf("a forged message stayed retained: %s", s)
		}
	}
	for _, a := range []string{"valve-1 open", "heater-1 on"} {
		d, c, _ := strings.Cut(a, " ")
		if n := gw.g.Count("write", d, c); n != 0 {
			t.Errorf("%s was written %d times", a, n)
		}
	}
}

func TestAdversarialMQTTNumbers(t *testing.T) {
	gw := startGW(t, gwOptions{burst: 1000, perMinute: 100000})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/#")
	type tc struct{ topic, payload string }
	var cases []tc
	for _, n := range numbers {
		if n == `"12"` { // a string: the right type for an id or a reason
			cases = append(cases, tc{"cmd/valve-1/open", n}, tc{"cmd/valve-1/open", `{"value": ` + n + `}`},
				tc{"cmd/tank-1/level", n}, tc{"cmd/valve-1/open", `{"value": true, "expires": ` + n + `}`},
				tc{"cmd/valve-1/open", `{"value": true, "at": ` + n + `}`}, tc{"run/flush", `{"expires": ` + n + `}`}, tc{"run/flush", n})
			continue
		}
		cases = append(cases,
			tc{"cmd/valve-1/open", n},                                       // a bool capability
			tc{"cmd/valve-1/open", `{"value": ` + n + `}`},                  // in the object form
			tc{"cmd/tank-1/level", n},                                       // a number capability (a sensor: never written)
			tc{"cmd/tank-1/level", `{"value": ` + n + `, "id": "n"}`},       // with an id
			tc{"cmd/valve-1/open", `{"value": true, "id": ` + n + `}`},      // the id
			tc{"cmd/valve-1/open", `{"value": true, "expires": ` + n + `}`}, // expiry and age
			tc{"cmd/valve-1/open", `{"value": true, "at": ` + n + `}`},
			tc{"cmd/valve-1/open", `{"value": true, "reason": ` + n + `}`},
			tc{"run/flush", `{"id": ` + n + `}`},
			tc{"run/flush", `{"expires": ` + n + `}`},
			tc{"run/flush", n},
		)
	}
	for _, c := range cases {
		publish(t, alice, prefix+c.topic, 1, c.payload)
		r := nextReply(t, replies, c.topic+" "+c.payload)
		if (r.Outcome != command.OutcomeFailed && r.Outcome != command.OutcomeRefused) || r.Why == "" {
			t.Errorf("%s %s: reply %+v, want failed or refused saying why", c.topic, c.payload, r)
		}
	}
	// Numbers in the MQTT packets themselves: expiry intervals, delays.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range []uint32{0, 1<<31 - 1, 1 << 31, 1<<32 - 1} {
		v, err := gw.v5(ctx, paho5.Connect{ClientID: fmt.Sprintf("num-%d", n), CleanStart: true, Username: "alice", Password: []byte("alice-password"),
			Properties:     &paho5.ConnectProperties{SessionExpiryInterval: &n},
			WillMessage:    &paho5.WillMessage{Topic: prefix + "state/valve-1/open", Payload: []byte("FORGED")},
			WillProperties: &paho5.WillProperties{WillDelayInterval: &n, MessageExpiry: &n}})
		if err == nil || v.ack == nil || v.ack.ReasonCode != 0x87 {
			t.Errorf("will with intervals %d: %+v %v", n, v.ack, err)
		}
		v.conn.Close()
		v, err = gw.v5(ctx, paho5.Connect{ClientID: fmt.Sprintf("num-ok-%d", n), CleanStart: true, Username: "alice", Password: []byte("alice-password"),
			Properties: &paho5.ConnectProperties{SessionExpiryInterval: &n}})
		if err != nil {
			t.Fatalf("session expiry %d: %v", n, err)
		}
		if _, err := v.c.Publish(ctx, &paho5.Publish{Topic: prefix + "cmd/valve-1/open", QoS: 1, Payload: []byte(`"on"`),
			Properties: &paho5.PublishProperties{MessageExpiry: &n}}); err != nil {
			t.Fatalf("publish with message expiry %d: %v", n, err)
		}
		if r := nextReply(t, replies, fmt.Sprintf("message expiry %d", n)); r.Outcome != command.OutcomeFailed {
			t.Errorf("message expiry %d: %+v", n, r)
		}
		_ = v.c.Disconnect(&paho5.Disconnect{})
	}
	for _, a := range []string{"valve-1 open", "tank-1 level", "heater-1 on"} {
		d, c, _ := strings.Cut(a, " ")
		if n := gw.g.Count("write", d, c); n != 0 {
			t.Errorf("%s was written %d times", a, n)
		}
	}
	// The broker still serves.
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": true, "id": "after"}`)
	if r := nextReply(t, replies, "a good command after the attacks"); r.Outcome != command.OutcomeActed {
		t.Fatalf("after the attacks: %+v", r)
	}
}
