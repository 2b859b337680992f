package mqtt

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
)

// retainedAlarm subscribes a new client to alarms/# and returns the one
// retained alarm it is handed, failing if it is not retained or not id.
func retainedAlarm(t *testing.T, gw *testGW, id string) runtime.Alarm {
	t.Helper()
	late := subscribe(t, gw.mustClient("victor", "victor-password"), prefix+"alarms/#")
	m := next(t, late, "the retained alarm "+id)
	var a runtime.Alarm
	if err := json.Unmarshal(m.Payload(), &a); err != nil || !m.Retained() || m.Topic() != prefix+"alarms/"+id || a.ID != id {
		t.Fatalf("retained on %s (retained %v): %s (%v); want alarm %s", m.Topic(), m.Retained(), m.Payload(), err, id)
	}
	quiet(t, late, 300*time.Millisecond) // and no other
	return a
}

// An alarm is retained on alarms/<id> while it stands, republished when
// the gateway starts again, and cleared by an empty retained message once
// it is back to normal: a subscriber that comes after that finds nothing.
func TestAlarmIsRetainedWhileItStands(t *testing.T) {
	dir := t.TempDir()
	gw := startGW(t, gwOptions{dir: dir})
	gw.g.SetFault("valve-1", devicetest.Fault{WriteErr: errors.New("coil open circuit")})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/valve-1/open")
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": true, "id": "locked-1"}`)
	if r := nextReply(t, replies, "the reply to a failing valve"); r.Outcome != command.OutcomeFailed {
		t.Fatalf("reply = %+v", r)
	}
	const id = "locked.valve-1.open"
	a := retainedAlarm(t, gw, id)
	if a.State != runtime.AlarmActive || a.Kind != runtime.AlarmLocked || a.Attempt == "" || a.Count != 1 {
		t.Fatalf("retained alarm = %+v", a)
	}

	// An admin resolves the attempt: the condition is gone, but nobody has
	// acknowledged the alarm, so it stands and stays retained.
	watch := subscribe(t, gw.mustClient("victor", "victor-password"), prefix+"alarms/"+id)
	next(t, watch, "the retained alarm for the watcher")
	if _, err := gw.eng.Resolve(t.Context(), runtime.Resolution{Attempt: a.Attempt, By: "console:adam", Admin: true,
		Found: runtime.FoundNotActed, Note: "valve seen shut on site"}); err != nil {
		t.Fatal(err)
	}
	if m := next(t, watch, "the cleared alarm"); !strings.Contains(string(m.Payload()), `"state":"cleared_unacknowledged"`) {
		t.Fatalf("after the resolution alarms/%s = %s", id, m.Payload())
	}

	// A new start republishes what stands.
	gw.stop()
	gw = startGW(t, gwOptions{dir: dir})
	if a := retainedAlarm(t, gw, id); a.State != runtime.AlarmClearedUnacked {
		t.Fatalf("retained alarm after a restart = %+v", a)
	}

	// Acknowledged, it is back to normal: the retained message is cleared.
	watch = subscribe(t, gw.mustClient("victor", "victor-password"), prefix+"alarms/"+id)
	next(t, watch, "the retained alarm after the restart")
	if _, err := gw.eng.AckAlarm(t.Context(), id, "console:olga", "the coil is replaced"); err != nil {
		t.Fatal(err)
	}
	if m := next(t, watch, "the clearing message"); len(m.Payload()) != 0 {
		t.Fatalf("after the acknowledgement alarms/%s = %q, want an empty message", id, m.Payload())
	}
	late := subscribe(t, gw.mustClient("victor", "victor-password"), prefix+"alarms/#")
	quiet(t, late, 500*time.Millisecond)
}

// The same alarm raised again and again is one retained message whose
// count grows; no client can publish on alarms/, retained or not, over a
// real alarm or beside it.
func TestAlarmFloodIsOneRetainedAlarmAndClientsCannotForgeOne(t *testing.T) {
	gw := startGW(t, gwOptions{})
	gw.g.SetFault("valve-1", devicetest.Fault{Stuck: true})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/valve-1/open")
	const n = 3
	for i := range n {
		publish(t, alice, prefix+"cmd/valve-1/open", 1, fmt.Sprintf(`{"value": true, "id": "stuck-%d"}`, i))
		if r := nextReply(t, replies, "a reply to a stuck valve"); r.Outcome != command.OutcomeContradicted {
			t.Fatalf("reply %d = %+v", i, r)
		}
	}
	const id = "discrepancy.valve-1.open"
	if a := retainedAlarm(t, gw, id); a.Count != n || a.State != runtime.AlarmActive || a.Priority != runtime.PriorityHigh {
		t.Fatalf("after %d contradicted acts the retained alarm = %+v; want one active alarm counted %d times", n, a, n)
	}

	// carl may publish on "#": the gateway's alarm topics stay closed.
	carl := gw.mustClient("carl", "carl-password")
	denied := gw.b.Stats().DeniedPublishes
	for _, topic := range []string{prefix + "alarms/" + id, prefix + "alarms/forged.valve-1.open"} {
		for _, retain := range []bool{false, true} {
			tok := carl.Publish(topic, 0, retain, `{"id":"FORGED","state":"cleared"}`)
			if !tok.WaitTimeout(5 * time.Second) {
				t.Fatalf("publish on %s timed out", topic)
			}
		}
	}
	runtimetest.WaitFor(t, "the forged publishes to be denied", func() bool { return gw.b.Stats().DeniedPublishes >= denied+4 })
	a := retainedAlarm(t, gw, id)
	if a.Count != n {
		t.Fatalf("the retained alarm after the forgeries = %+v", a)
	}
}
