package mqtt

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// TestHAFoldSaysWhatBecameOfACommand folds the events of an actuator's
// commands and checks what its outcome sensor and its state say after
// each: only a good reading or a confirmed act moves the state.
func TestHAFoldSaysWhatBecameOfACommand(t *testing.T) {
	on, off := value.Bool(true), value.Bool(false)
	ev := func(kind runtime.Kind, body any) runtime.Event {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.Event{Kind: kind, At: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), Body: b}
	}
	const dev, capName = "valve-1", "open"
	rc := func(c runtime.Confirmation, detail string) runtime.Receipt {
		return runtime.Receipt{Attempt: "act-1", Device: dev, Capability: capName, Value: on, Confirmation: c, Detail: detail}
	}
	steps := []struct {
		name    string
		ev      runtime.Event
		outcome string // "" when the outcome does not change
		state   string // "" when the state does not change
	}{
		{"a good reading", ev(runtime.KindObserved, runtime.ObservedBody{Device: dev, Capability: capName, Value: off, Quality: "good"}), "", "OFF"},
		{"a bad reading", ev(runtime.KindObserved, runtime.ObservedBody{Device: dev, Capability: capName, Value: on, Quality: "bad"}), "", ""},
		{"a reading of another type", ev(runtime.KindObserved, runtime.ObservedBody{Device: dev, Capability: capName, Value: value.Number(3), Quality: "good"}), "", ""},
		{"asked", ev(runtime.KindApprovalRequested, runtime.Approval{ID: "apr-1", Kind: "actuation", Device: dev, Capability: capName, Value: on, Principal: "mqtt:hass"}),
			"pending approval apr-1", ""},
		{"refused meanwhile", ev(runtime.KindRefused, runtime.RefusedBody{Device: dev, Capability: capName, Why: "valve-1.open already has a pending approval apr-1"}),
			"refused: valve-1.open already has a pending approval apr-1", ""},
		{"approved", ev(runtime.KindApprovalAnswered, runtime.AnsweredBody{Approval: "apr-1", Device: dev, Capability: capName, Status: runtime.ApprovalApproved}),
			"approved apr-1; acting", ""},
		{"a discrepancy", ev(runtime.KindActed, rc(runtime.WrongFinal, "valve-1.open is false after 5s")), "wrong final: valve-1.open is false after 5s", ""},
		{"confirmed", ev(runtime.KindActed, rc(runtime.Confirmed, "")), "confirmed", "ON"},
		{"not checked", ev(runtime.KindActed, rc(runtime.NotChecked, "")), "acted, not checked", ""},
		{"unknown", ev(runtime.KindFailed, runtime.FailedBody{Attempt: "act-2", Device: dev, Capability: capName, State: runtime.AttemptUnknown, Error: "timeout"}),
			"outcome unknown, the actuator is locked: timeout", ""},
		{"a read failed", ev(runtime.KindFailed, runtime.FailedBody{Device: dev, Capability: capName, Error: "offline"}), "", ""},
		{"asked again", ev(runtime.KindApprovalRequested, runtime.Approval{ID: "apr-2", Kind: "actuation", Device: dev, Capability: capName, Value: off}),
			"pending approval apr-2", ""},
		{"expired", ev(runtime.KindApprovalExpired, runtime.ClosedBody{Approval: "apr-2", Device: dev, Capability: capName, Status: runtime.ApprovalExpired}),
			"approval apr-2 expired", ""},
		{"a mode change asked", ev(runtime.KindApprovalRequested, runtime.Approval{ID: "apr-3", Kind: "mode_change", Mode: "maintenance"}), "", ""},
		{"another device", ev(runtime.KindActed, runtime.Receipt{Device: "pump-9", Capability: "on", Value: on, Confirmation: runtime.Confirmed}), "", ""},
	}
	f := newHAFold([]devices.Device{{ID: dev, Capabilities: []devices.Capability{{Name: capName, Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}}})
	for _, s := range steps {
		var outcome, state string
		for _, m := range f.apply(s.ev) {
			switch m.topic {
			case HAOutcomeTopic(dev, capName):
				var o haOutcome
				if err := json.Unmarshal(m.payload, &o); err != nil {
					t.Fatalf("%s: outcome %s: %v", s.name, m.payload, err)
				}
				outcome = o.Outcome
			case HAStateTopic(dev, capName):
				state = string(m.payload)
			default:
				t.Errorf("%s: a message on %s", s.name, m.topic)
			}
		}
		if outcome != s.outcome || state != s.state {
			t.Errorf("%s: outcome %q, state %q; want %q, %q", s.name, outcome, state, s.outcome, s.state)
		}
	}
	// A device that goes makes its entities unavailable; another device's
	// going says nothing.
	for _, c := range []struct {
		kind   runtime.Kind
		device string
		want   string
	}{{runtime.KindDeviceOffline, dev, "offline"}, {runtime.KindDeviceOnline, dev, "online"}, {runtime.KindDeviceOffline, "pump-9", ""}} {
		msgs := f.apply(ev(c.kind, runtime.DeviceBody{Device: c.device, Reason: "unplugged"}))
		got := ""
		for _, m := range msgs {
			if m.topic == HADeviceTopic(c.device) {
				got = string(m.payload)
			}
		}
		if got != c.want || len(msgs) > 1 {
			t.Errorf("%s of %s: %d messages, %q on %s; want %q", c.kind, c.device, len(msgs), got, HADeviceTopic(c.device), c.want)
		}
	}
	// Home Assistant keeps a state of at most 255 characters.
	long := f.apply(ev(runtime.KindRefused, runtime.RefusedBody{Device: dev, Capability: capName, Why: strings.Repeat("é", 300)}))
	var o haOutcome
	if len(long) != 1 || json.Unmarshal(long[0].payload, &o) != nil || utf8.RuneCountInString(o.Outcome) != 255 || !strings.HasSuffix(o.Outcome, "…") {
		t.Errorf("a long refusal's outcome = %d characters, want 255 ending in …", utf8.RuneCountInString(o.Outcome))
	}
}
