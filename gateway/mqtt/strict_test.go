package mqtt

import (
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/gateway/command"
)

// A command whose payload names a key twice is refused, whichever value
// the sender meant: encoding/json would take the last one silently (and
// matches keys in any letter case). Nothing acts, and the reply names the
// key.
func TestAdversarialMQTTRepeatedKeysAreRefused(t *testing.T) {
	gw := startGW(t, gwOptions{})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/#")
	for _, tc := range []struct{ topic, payload, key string }{
		{"cmd/valve-1/open", `{"value":false,"id":"e3","value":true}`, `"value"`},
		{"cmd/valve-1/open", `{"value":false,"id":"e4","Value":true}`, `"Value"`},
		{"cmd/valve-1/open", `{"value":true,"id":"e5","reason":"a","reason":"b"}`, `"reason"`},
		{"cmd/valve-1/open", `{"value":true,"id":"e6","\u0076alue":false}`, `"value"`},
		{"cmd/valve-1/open", `{"id":"e7","ID":"e8","value":true}`, `"ID"`},
		{"cmd/valve-1/open", `{"value":true,"expires":"2099-01-01T00:00:00Z","expires":"2099-01-01T00:00:00Z"}`, `"expires"`},
		{"run/flush", `{"id":"r1","reason":"x","reason":"y"}`, `"reason"`},
	} {
		publish(t, alice, prefix+tc.topic, 1, tc.payload)
		r := nextReply(t, replies, tc.payload)
		if r.Outcome != command.OutcomeFailed || !strings.Contains(r.Why, "key "+tc.key+" appears twice") {
			t.Errorf("%s %s: reply %+v; want failed, naming key %s", tc.topic, tc.payload, r, tc.key)
		}
	}
	if n := gw.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("payloads with a repeated key moved the valve %d times", n)
	}
}

// A payload that is not valid UTF-8 is refused as a whole: decoded, each
// bad byte would read as U+FFFD, so that different ids (or reasons) would
// collide. Nothing acts, and the reply carries no id made of U+FFFD.
func TestAdversarialMQTTInvalidUTF8IsRefused(t *testing.T) {
	gw := startGW(t, gwOptions{})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/#")
	for _, tc := range []struct{ topic, payload string }{
		{"cmd/valve-1/open", "{\"value\":true,\"id\":\"\xff\xfe\"}"},
		{"cmd/valve-1/open", "{\"value\":true,\"id\":\"ok-1\",\"reason\":\"\xc0\xaf\"}"},
		{"cmd/valve-1/open", "{\"value\":true,\"id\":\"ok-2\"}\xff"},
		{"cmd/valve-1/open", "true\xff"},
		{"run/flush", "{\"id\":\"\xed\xa0\x80\"}"},
	} {
		publish(t, alice, prefix+tc.topic, 1, tc.payload)
		r := nextReply(t, replies, tc.payload)
		if r.Outcome != command.OutcomeFailed || !strings.Contains(r.Why, "not valid UTF-8") || strings.ContainsRune(r.ID, '\uFFFD') {
			t.Errorf("%s %q: reply %+v; want failed, saying the payload is not valid UTF-8", tc.topic, tc.payload, r)
		}
	}
	if n := gw.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("payloads of invalid UTF-8 moved the valve %d times", n)
	}
}

// A client with an account of its own cannot reset its address's count of
// failed logins by logging in between guesses at another's password: the
// fifth wrong guess locks the address out, its own good password too.
func TestAdversarialMQTTOwnLoginDoesNotResetTheLimiter(t *testing.T) {
	gw := startGW(t, gwOptions{})
	wrong := 0
	deadline := time.Now().Add(time.Minute)
	for round := 0; round < 5 && time.Now().Before(deadline); round++ {
		for range 4 {
			if _, err := gw.client("adam", "guess"); err == nil {
				t.Fatal("a wrong password connected")
			}
			wrong++
		}
		c, err := gw.client("victor", "victor-password")
		if err != nil {
			if wrong < 5 {
				t.Fatalf("victor refused after %d wrong guesses: %v", wrong, err)
			}
			return // locked out: the good logins did not reset the count
		}
		c.Disconnect(50)
	}
	t.Fatalf("%d wrong guesses at adam's password, each four followed by a good login as victor, and never locked out", wrong)
}
