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
	inRun := func(e runtime.Event) runtime.Event { e.Run = "run-1"; return e }
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
		// The world did not follow: the state is what the read-back saw,
		// or unknown when nothing was seen.
		{"a discrepancy", ev(runtime.KindActed, rc(runtime.WrongFinal, "valve-1.open is false after 5s")), "wrong final: valve-1.open is false after 5s", "None"},
		{"a discrepancy seen", ev(runtime.KindActed, runtime.Receipt{Attempt: "act-1", Device: dev, Capability: capName, Value: on, Observed: &off,
			Confirmation: runtime.WrongFinal, Detail: "the read-back is false"}), "wrong final: the read-back is false", "OFF"},
		{"confirmed", ev(runtime.KindActed, rc(runtime.Confirmed, "")), "confirmed", "ON"},
		{"not checked", ev(runtime.KindActed, rc(runtime.NotChecked, "")), "acted, not checked", ""},
		// Locked: the gateway no longer believes where it stands.
		{"unknown", ev(runtime.KindFailed, runtime.FailedBody{Attempt: "act-2", Device: dev, Capability: capName, State: runtime.AttemptUnknown, Error: "timeout"}),
			"outcome unknown, the actuator is locked: timeout", "None"},
		{"a poll failed", ev(runtime.KindFailed, runtime.FailedBody{Device: dev, Capability: capName, Error: "offline"}), "", ""},
		{"a read in a run failed at the driver", inRun(ev(runtime.KindFailed, runtime.FailedBody{Device: dev, Capability: capName,
			Error: "valve-1 did not answer", Outcome: "timeout"})), "", ""},
		// A write step that fails before it acts has no attempt.
		{"a write failed before acting", inRun(ev(runtime.KindFailed, runtime.FailedBody{Device: dev, Capability: capName,
			Error: "device valve-1 is offline: unplugged"})), "failed: device valve-1 is offline: unplugged", ""},
		{"cancelled waiting for the lock", inRun(ev(runtime.KindFailed, runtime.FailedBody{Device: dev, Capability: capName,
			Error: "cancelled while waiting for valve-1.open"})), "failed: cancelled while waiting for valve-1.open", ""},
		{"asked again", ev(runtime.KindApprovalRequested, runtime.Approval{ID: "apr-2", Kind: "actuation", Device: dev, Capability: capName, Value: off}),
			"pending approval apr-2", ""},
		{"expired", ev(runtime.KindApprovalExpired, runtime.ClosedBody{Approval: "apr-2", Device: dev, Capability: capName, Status: runtime.ApprovalExpired}),
			"approval apr-2 expired", ""},
		// A denial: the approval's answer, then the step's refusal, which
		// says who denied it and why.
		{"asked a third time", ev(runtime.KindApprovalRequested, runtime.Approval{ID: "apr-4", Kind: "actuation", Device: dev, Capability: capName, Value: on}),
			"pending approval apr-4", ""},
		{"denied", ev(runtime.KindApprovalAnswered, runtime.AnsweredBody{Approval: "apr-4", Device: dev, Capability: capName, Status: runtime.ApprovalDenied}),
			"denied apr-4", ""},
		{"refused for the denial", inRun(ev(runtime.KindRefused, runtime.RefusedBody{Device: dev, Capability: capName, Why: "denied by console:ann: too warm"})),
			"refused: denied by console:ann: too warm", ""},
		{"a mode change asked", ev(runtime.KindApprovalRequested, runtime.Approval{ID: "apr-3", Kind: "mode_change", Mode: "maintenance"}), "", ""},
		{"another device", ev(runtime.KindActed, runtime.Receipt{Device: "pump-9", Capability: "on", Value: on, Confirmation: runtime.Confirmed}), "", ""},
	}
	f := newHAFold([]devices.Device{{ID: dev, Capabilities: []devices.Capability{{Name: capName, Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}}})
	f.ownReadBack[dev+"/"+capName] = true
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

// TestHAFoldNumberOutsideItsRange folds the readings and receipts of a
// number whose envelope is 18 to 25: one outside is not clamped, nor
// published as the state Home Assistant would refuse, but unknown, and
// the outcome says why, once for each such value.
func TestHAFoldNumberOutsideItsRange(t *testing.T) {
	const dev, capName = "plc", "sp"
	f := newHAFold([]devices.Device{{ID: dev, Capabilities: []devices.Capability{
		{Name: capName, Kind: devices.KindActuator, Type: value.TypeNumber, ReadBack: true}}}})
	f.ranges[dev+"/"+capName] = haRange{lo: 18, hi: 25, min: 18, max: 25, hasMin: true, hasMax: true}
	f.ownReadBack[dev+"/"+capName] = true
	ev := func(kind runtime.Kind, body any) runtime.Event {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.Event{Kind: kind, At: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), Body: b}
	}
	read := func(v float64) runtime.Event {
		return ev(runtime.KindObserved, runtime.ObservedBody{Device: dev, Capability: capName, Value: value.Number(v), Quality: "good"})
	}
	seen := func(asked, got float64) runtime.Event {
		g := value.Number(got)
		return ev(runtime.KindActed, runtime.Receipt{Device: dev, Capability: capName, Value: value.Number(asked), Observed: &g,
			Confirmation: runtime.WrongFinal, Detail: "read back " + g.String()})
	}
	steps := []struct {
		name           string
		ev             runtime.Event
		outcome, state string // "" when it does not change
	}{
		{"inside", read(20), "", "20"},
		{"below", read(15), "read 15, outside the envelope 18 to 25", "None"},
		{"below again", read(15), "", "None"},
		{"further below", read(12.5), "read 12.5, outside the envelope 18 to 25", "None"},
		{"back inside", read(25), "", "25"},
		{"below once more", read(15), "read 15, outside the envelope 18 to 25", "None"},
		{"a wrong final seen inside", seen(22, 21.5), "wrong final: read back 21.5", "21.5"},
		{"a wrong final seen outside", seen(22, 30), "wrong final: read back 30", "None"},
	}
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
	// A range open on one side names only the other.
	if got, want := (haRange{lo: 2e9, hi: 4e9, min: 2e9, hasMin: true}).outside(5), "outside the envelope 2000000000 to …"; got != want {
		t.Errorf("outside(5) = %q, want %q", got, want)
	}
}

// haSource is the engine's state as a start reads it.
type haSource struct {
	states    []runtime.StateRecord
	approvals []runtime.Approval
}

func (s haSource) States() []runtime.StateRecord { return s.states }
func (s haSource) Approvals() []runtime.Approval { return s.approvals }

// TestHAFoldSnapshotSaysWhatTheLiveFoldWould starts from the engine's
// state: a stale reading is not published, as the live fold would not
// publish it; a good one is, over an older receipt.
func TestHAFoldSnapshotSaysWhatTheLiveFoldWould(t *testing.T) {
	devs := []devices.Device{{ID: "v", Capabilities: []devices.Capability{
		{Name: "open", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true},
		{Name: "leak", Kind: devices.KindSensor, Type: value.TypeBool, Poll: 5 * time.Second},
	}}}
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	src := haSource{states: []runtime.StateRecord{
		{Device: "v", Capability: "leak", Reading: &devices.Reading{Value: value.Bool(true), Quality: devices.QualityStale, At: at.Add(-48 * time.Hour)}},
		{Device: "v", Capability: "open", Receipt: &runtime.Receipt{Device: "v", Capability: "open", Value: value.Bool(true), Confirmation: runtime.Confirmed, At: at},
			Reading: &devices.Reading{Value: value.Bool(false), Quality: devices.QualityGood, At: at.Add(time.Minute)}},
	}}
	got := map[string]string{}
	for _, m := range newestOnly(newHAFold(devs).snapshot(src)) {
		got[m.topic] = string(m.payload)
	}
	if p, ok := got[HAStateTopic("v", "leak")]; ok {
		t.Errorf("a stale reading 48 hours old is published as the state: %s", p)
	}
	if p := got[HAStateTopic("v", "open")]; p != "OFF" {
		t.Errorf("v.open's state = %q, want OFF, the good reading newer than the receipt", p)
	}
	if p := got[HAOutcomeTopic("v", "open")]; !strings.Contains(p, `"outcome":"confirmed"`) {
		t.Errorf("v.open's outcome = %s, want the receipt's", p)
	}
	live := newHAFold(devs).apply(runtime.Event{Kind: runtime.KindObserved, Body: json.RawMessage(`{"device":"v","capability":"leak","value":true,"quality":"stale"}`)})
	if len(live) != 0 {
		t.Errorf("the live fold publishes a stale reading: %v", live)
	}
}

// TestHAFoldPendingReadingStandsOverOlderEvents: a reading published
// before the journal wrote it is Home Assistant's state until its event
// is folded: an older receipt written after it says its outcome but not
// its state, and the reading's own event says nothing again.
func TestHAFoldPendingReadingStandsOverOlderEvents(t *testing.T) {
	on, off := value.Bool(true), value.Bool(false)
	const dev, capName = "pump-1", "on"
	f := newHAFold([]devices.Device{{ID: dev, Capabilities: []devices.Capability{{Name: capName, Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}}})
	ev := func(seq uint64, kind runtime.Kind, body any) runtime.Event {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.Event{Seq: seq, Kind: kind, At: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), Body: b}
	}
	said := func(msgs []haMessage) (out []string) {
		for _, m := range msgs {
			out = append(out, m.topic+" "+string(m.payload))
		}
		return out
	}
	reading := ev(21, runtime.KindObserved, runtime.ObservedBody{Device: dev, Capability: capName, Value: off, Quality: "good"})
	receipt := ev(20, runtime.KindActed, runtime.Receipt{Attempt: "act-1", Device: dev, Capability: capName, Value: on, Confirmation: runtime.Confirmed})
	steps := []struct {
		name    string
		pending bool
		ev      runtime.Event
		want    string
	}{
		{"the reading taken", true, reading, "ha/pump-1/on OFF"},
		{"the older receipt written", false, receipt, `ha/pump-1/on/outcome {"outcome":"confirmed","value":true,"attempt":"act-1"}`},
		{"the reading written", false, reading, ""},
		{"a receipt after it", false, ev(22, runtime.KindActed, runtime.Receipt{Attempt: "act-2", Device: dev, Capability: capName, Value: on, Confirmation: runtime.Confirmed}),
			`ha/pump-1/on ON|ha/pump-1/on/outcome {"outcome":"confirmed","value":true,"attempt":"act-2"}`},
		{"a receipt is not pending", true, receipt, ""},
	}
	for _, s := range steps {
		var msgs []haMessage
		if s.pending {
			msgs = f.pending(s.ev)
		} else {
			msgs = f.apply(s.ev)
		}
		if got := strings.Join(said(msgs), "|"); got != s.want {
			t.Errorf("%s: said %q, want %q", s.name, got, s.want)
		}
	}
}

// TestHAFoldPendingReadingOutsideItsRangeIsSaidInOrder: a reading outside
// its range, taken before an older outcome is written, says so once its
// own event is written, after that outcome, not before it.
func TestHAFoldPendingReadingOutsideItsRangeIsSaidInOrder(t *testing.T) {
	const dev, capName = "heat-1", "setpoint"
	f := newHAFold([]devices.Device{{ID: dev, Capabilities: []devices.Capability{{Name: capName, Kind: devices.KindActuator, Type: value.TypeNumber, ReadBack: true}}}})
	f.ranges[dev+"/"+capName] = haRange{lo: 18, hi: 25, min: 18, max: 25, hasMin: true, hasMax: true}
	ev := func(seq uint64, kind runtime.Kind, body any) runtime.Event {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.Event{Seq: seq, Kind: kind, At: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), Body: b}
	}
	refused := ev(8, runtime.KindRefused, runtime.RefusedBody{Device: dev, Capability: capName, Why: "no"})
	hot := ev(9, runtime.KindObserved, runtime.ObservedBody{Device: dev, Capability: capName, Value: value.Number(30), Quality: "good"})
	var outcomes []string
	for _, msgs := range [][]haMessage{f.pending(hot), f.apply(refused), f.apply(hot)} {
		for _, m := range msgs {
			if strings.HasSuffix(m.topic, "/outcome") {
				var o haOutcome
				if err := json.Unmarshal(m.payload, &o); err != nil {
					t.Fatal(err)
				}
				outcomes = append(outcomes, o.Outcome)
			}
		}
	}
	if len(outcomes) != 2 || !strings.HasPrefix(outcomes[0], "refused") || !strings.HasPrefix(outcomes[1], "read 30, outside") {
		t.Fatalf("the outcomes said, in order: %q; want the refusal, then the reading outside its range", outcomes)
	}
}

// TestHAFoldEnumStateFromTheJournal: an enum's value comes back from the
// journal's JSON as a string; it is still the select's state, and a value
// that is none of its options is unknown.
func TestHAFoldEnumStateFromTheJournal(t *testing.T) {
	const dev, capName = "vent-1", "position"
	devs := []devices.Device{{ID: dev, Capabilities: []devices.Capability{{Name: capName, Kind: devices.KindActuator, Type: value.TypeEnum,
		Enum: []string{"closed", "half", "open"}, ReadBack: true}}}}
	for _, c := range []struct{ body, want string }{
		{`{"device":"vent-1","capability":"position","value":"open","quality":"good"}`, "open"},
		{`{"device":"vent-1","capability":"position","value":"jammed","quality":"good"}`, haNone},
	} {
		ev := runtime.Event{Seq: 1, Kind: runtime.KindObserved, Body: json.RawMessage(c.body)}
		for name, fold := range map[string]func(*haFold) []haMessage{"pending": func(f *haFold) []haMessage { return f.pending(ev) },
			"written": func(f *haFold) []haMessage { return f.apply(ev) }} {
			msgs := fold(newHAFold(devs))
			if len(msgs) != 1 || msgs[0].topic != HAStateTopic(dev, capName) || string(msgs[0].payload) != c.want {
				t.Errorf("%s %s: said %v, want %s", name, c.body, msgs, c.want)
			}
		}
	}
}

// TestHAFoldAReadingTakenBeforeAnActIsNotItsState: a poll that read the
// pump ON before a drive to safe switched it off, journaled after the
// drive's receipt, is history: Home Assistant keeps OFF, whether the
// reading came pending before the receipt was written, or after it, or
// written alone; a reading taken after the act is the state again.
func TestHAFoldAReadingTakenBeforeAnActIsNotItsState(t *testing.T) {
	on, off := value.Bool(true), value.Bool(false)
	const dev, capName = "pump-1", "on"
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ev := func(seq uint64, kind runtime.Kind, body any) runtime.Event {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.Event{Seq: seq, Kind: kind, At: t0.Add(time.Minute), Body: b}
	}
	reading := func(seq uint64, v value.Value, sec int) runtime.Event {
		return ev(seq, runtime.KindObserved, runtime.ObservedBody{Device: dev, Capability: capName, Value: v, Quality: "good", At: t0.Add(time.Duration(sec) * time.Second)})
	}
	receipt := ev(8, runtime.KindActed, runtime.Receipt{Attempt: "act-1", Device: dev, Capability: capName, Value: off, Confirmation: runtime.Confirmed,
		Observed: &off, At: t0.Add(2 * time.Second)})
	const offNow = `ha/pump-1/on OFF|ha/pump-1/on/outcome {"outcome":"confirmed","value":false,"attempt":"act-1","at":"2026-05-01T12:00:02Z"}`
	type step struct {
		name    string
		pending bool
		ev      runtime.Event
		want    string
	}
	for name, steps := range map[string][]step{
		"pending before the receipt is written": {
			{"the old reading taken", true, reading(10, on, 0), "ha/pump-1/on ON"},
			{"the receipt written", false, receipt, offNow},
			{"the old reading written", false, reading(10, on, 0), ""},
		},
		"pending after the receipt is written": {
			{"the receipt written", false, receipt, offNow},
			{"the old reading taken", true, reading(10, on, 0), ""},
			{"the old reading written", false, reading(10, on, 0), ""},
			{"a reading after the act", false, reading(11, on, 3), "ha/pump-1/on ON"},
		},
	} {
		f := newHAFold([]devices.Device{{ID: dev, Capabilities: []devices.Capability{{Name: capName, Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}}})
		for _, s := range steps {
			var msgs []haMessage
			if s.pending {
				msgs = f.pending(s.ev)
			} else {
				msgs = f.apply(s.ev)
			}
			var got []string
			for _, m := range msgs {
				got = append(got, m.topic+" "+string(m.payload))
			}
			if g := strings.Join(got, "|"); g != s.want {
				t.Errorf("%s, %s: said %q, want %q", name, s.name, g, s.want)
			}
		}
	}
}
