package mqtt

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
)

// TestAReadingIsPublishedAsItIsTaken: with readings written only every
// hour, a reading reaches its retained state topic and Home Assistant's
// state at once; its event reaches the events topic when a durable point
// (a governed write) writes it, and the state is not published again for
// it.
func TestAReadingIsPublishedAsItIsTaken(t *testing.T) {
	gw := startGW(t, gwOptions{flush: time.Hour, ha: haOptions(greenhouse())})
	hass := gw.mustClient("hass", "hass-password")
	state := subscribe(t, hass, prefix+"state/tank-1/level")
	haState := subscribe(t, hass, prefix+HAStateTopic("tank-1", "level"))
	events := subscribe(t, hass, prefix+"events")
	quiet(t, state, 200*time.Millisecond) // nothing read yet, nothing retained
	obs, err := gw.eng.Read(t.Context(), "gateway:poller", "tank-1", "level")
	if err != nil || obs.Reading == nil {
		t.Fatalf("reading the tank: %+v, %v", obs, err)
	}
	m := next(t, state, "the reading's state, before the journal writes it")
	var st command.State
	if err := json.Unmarshal(m.Payload(), &st); err != nil || st.Value == nil || st.Value.Num != obs.Reading.Value.Num || st.Quality != "good" || !st.At.Equal(obs.Reading.At) {
		t.Fatalf("state %s after reading %+v (%v)", m.Payload(), obs.Reading, err)
	}
	if h := next(t, haState, "Home Assistant's state of the reading"); string(h.Payload()) != string(haValue(obs.Reading.Value)) {
		t.Fatalf("Home Assistant's state is %q, the reading %v", h.Payload(), obs.Reading.Value)
	}
	observed := func(what string) runtime.Event {
		t.Helper()
		for deadline := time.After(10 * time.Second); ; {
			select {
			case m := <-events:
				var ev runtime.Event
				if err := json.Unmarshal(m.Payload(), &ev); err != nil {
					t.Fatal(err)
				}
				if ev.Kind == runtime.KindObserved && ev.Device == "tank-1" {
					return ev
				}
			case <-deadline:
				t.Fatalf("no observed event on the events topic: %s", what)
			}
		}
	}
	for quietFor := time.After(300 * time.Millisecond); ; {
		select {
		case m := <-events:
			if strings.Contains(string(m.Payload()), `"kind":"observed"`) {
				t.Fatalf("a reading's event was published before a durable point wrote it: %s", m.Payload())
			}
			continue // the start's own events
		case <-quietFor:
		}
		break
	}
	// A governed write is a durable point: it writes the reading with it.
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/valve-1/open")
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": true}`)
	if r := nextReply(t, replies, "the write's reply"); r.Outcome != command.OutcomeActed {
		t.Fatalf("the write: %+v", r)
	}
	ev := observed("after the write's durable point")
	if ev.Seq >= gw.eng.LastSeq() {
		t.Fatalf("the reading's event %d is not older than the write's", ev.Seq)
	}
	quiet(t, state, 300*time.Millisecond)
	quiet(t, haState, 100*time.Millisecond)
}
