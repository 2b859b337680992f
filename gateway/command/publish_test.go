package command

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// source is a Source with fixed records.
type source struct {
	states    []runtime.StateRecord
	approvals map[string]runtime.Approval
	alarms    []runtime.Alarm
}

func (s source) Alarms() []runtime.Alarm { return slices.Clone(s.alarms) }

func (s source) States() []runtime.StateRecord { return s.states }

func (s source) Approvals() []runtime.Approval {
	var out []runtime.Approval
	for _, ap := range s.approvals {
		if ap.Status == runtime.ApprovalPending {
			out = append(out, ap)
		}
	}
	slices.SortFunc(out, func(a, b runtime.Approval) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (s source) Approval(id string) (runtime.Approval, bool) {
	ap, ok := s.approvals[id]
	return ap, ok
}

func event(t *testing.T, seq uint64, kind runtime.Kind, body any) runtime.Event {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.Event{Seq: seq, Kind: kind, Body: b}
}

// published returns the topics and payloads of msgs but the event itself.
func published(msgs []Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Stream != StreamEvents {
			out = append(out, m.Topic+" "+string(m.Payload))
		}
	}
	return out
}

func TestFoldKeepsTheConfirmationAcrossReadings(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	src := source{states: []runtime.StateRecord{{Device: "valve-1", Capability: "open",
		Receipt: &runtime.Receipt{Confirmation: runtime.Unconfirmed, Attempt: "act-0"}}}}
	f := NewFold(src)
	on := value.Bool(true)
	steps := []struct {
		name string
		ev   runtime.Event
		want []string
	}{
		{"a reading keeps the receipt the fold started from",
			event(t, 1, runtime.KindObserved, runtime.ObservedBody{Device: "valve-1", Capability: "open", Value: value.Bool(false), Quality: "good", At: at}),
			[]string{`state/valve-1/open {"device":"valve-1","capability":"open","value":false,"at":"2026-05-01T12:00:00Z","quality":"good","confirmation":"unconfirmed","attempt":"act-0"}`}},
		{"an act with a read-back sets the value and the confirmation",
			event(t, 2, runtime.KindActed, runtime.Receipt{Device: "valve-1", Capability: "open", Attempt: "act-1", Value: on,
				Confirmation: runtime.Confirmed, Observed: &on, At: at.Add(time.Second)}),
			[]string{`receipts/valve-1/open {"key":"","attempt":"act-1","device":"valve-1","capability":"open","value":true,"driver":"","confirmation":"confirmed","observed":true,"at":"2026-05-01T12:00:01Z"}`,
				`state/valve-1/open {"device":"valve-1","capability":"open","value":true,"at":"2026-05-01T12:00:01Z","quality":"good","confirmation":"confirmed","attempt":"act-1"}`}},
		{"a later reading keeps that confirmation",
			event(t, 3, runtime.KindObserved, runtime.ObservedBody{Device: "valve-1", Capability: "open", Value: on, Quality: "stale", At: at.Add(time.Minute)}),
			[]string{`state/valve-1/open {"device":"valve-1","capability":"open","value":true,"at":"2026-05-01T12:01:00Z","quality":"stale","confirmation":"confirmed","attempt":"act-1"}`}},
		{"a sensor the fold has not seen starts empty",
			event(t, 4, runtime.KindObserved, runtime.ObservedBody{Device: "tank-1", Capability: "level", Value: value.Number(61.5), Quality: "good", At: at}),
			[]string{`state/tank-1/level {"device":"tank-1","capability":"level","value":61.5,"at":"2026-05-01T12:00:00Z","quality":"good"}`}},
		{"an event of another kind is published alone",
			event(t, 5, runtime.KindEnded, runtime.EndedBody{End: runtime.EndCompleted}), nil},
	}
	for _, st := range steps {
		msgs, err := f.Apply(st.ev)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if len(msgs) == 0 || msgs[0].Stream != StreamEvents || msgs[0].Topic != TopicEvents || !strings.Contains(string(msgs[0].Payload), `"seq":`) {
			t.Fatalf("%s: the event is not published first: %+v", st.name, msgs)
		}
		if got := published(msgs); !slices.Equal(got, st.want) {
			t.Errorf("%s:\n got %q\nwant %q", st.name, got, st.want)
		}
	}
}

func TestFoldApprovals(t *testing.T) {
	first := runtime.Approval{ID: "apr-1", Status: runtime.ApprovalPending, Required: 2,
		Answers: []runtime.AnswerRecord{{By: "console:ann"}}}
	f := NewFold(source{approvals: map[string]runtime.Approval{"apr-1": first, "apr-2": {ID: "apr-2", Status: runtime.ApprovalApproved}}})
	requested := event(t, 1, runtime.KindApprovalRequested, runtime.Approval{ID: "apr-1", Status: runtime.ApprovalPending})
	msgs, _ := f.Apply(requested)
	if got := published(msgs); len(got) != 1 || got[0] != "approvals/apr-1 "+string(requested.Body) || !msgs[1].Retain {
		t.Errorf("requested: %q", got)
	}
	// The first of two approvals republishes the request with its answer.
	msgs, _ = f.Apply(event(t, 2, runtime.KindApprovalAnswered, runtime.AnsweredBody{Approval: "apr-1", Status: runtime.ApprovalPending}))
	if got := published(msgs); len(got) != 1 || !strings.HasPrefix(got[0], "approvals/apr-1 {") || !strings.Contains(got[0], "console:ann") {
		t.Errorf("answered, still pending: %q", got)
	}
	// An answer that closes it, and an expiry, clear the retained request.
	for _, ev := range []runtime.Event{
		event(t, 3, runtime.KindApprovalAnswered, runtime.AnsweredBody{Approval: "apr-2", Status: runtime.ApprovalApproved}),
		event(t, 4, runtime.KindApprovalExpired, runtime.ClosedBody{Approval: "apr-3", Status: runtime.ApprovalExpired}),
	} {
		msgs, _ := f.Apply(ev)
		if len(msgs) != 2 || msgs[1].Stream != StreamApprovals || msgs[1].Payload != nil || !msgs[1].Retain {
			t.Errorf("%s: %+v; want the event and an empty retained approval", ev.Kind, msgs)
		}
	}
	snap, err := f.Snapshot()
	if err != nil || len(snap) != 1 || snap[0].Topic != "approvals/apr-1" {
		t.Errorf("Snapshot() = %+v, %v; want the one pending approval", snap, err)
	}
}

func TestFoldNamesAnEventItCannotRead(t *testing.T) {
	f := NewFold(source{})
	for _, ev := range []runtime.Event{
		{Seq: 7, Kind: runtime.KindObserved, Body: json.RawMessage(`{"device":1}`)},
		{Seq: 8, Kind: runtime.KindActed, Body: json.RawMessage(`{}`)},
		{Seq: 9, Kind: runtime.KindApprovalAnswered},
	} {
		msgs, err := f.Apply(ev)
		if err == nil || !strings.Contains(err.Error(), "event ") {
			t.Errorf("Apply(%s %s) error = %v, want one naming the event", ev.Kind, ev.Body, err)
		}
		if len(msgs) != 1 || msgs[0].Stream != StreamEvents {
			t.Errorf("Apply(%s %s) = %+v, want the event alone", ev.Kind, ev.Body, msgs)
		}
	}
}

func TestSnapshotOfTheEngineState(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := NewFold(source{states: []runtime.StateRecord{
		{Device: "tank-1", Capability: "level", Reading: &devices.Reading{Value: value.Number(3), At: at, Quality: devices.QualityGood}},
	}})
	snap, err := f.Snapshot()
	want := `{"device":"tank-1","capability":"level","value":3,"at":"2026-05-01T12:00:00Z","quality":"good"}`
	if err != nil || len(snap) != 1 || snap[0].Topic != "state/tank-1/level" || string(snap[0].Payload) != want || !snap[0].Retain {
		t.Errorf("Snapshot() = %+v, %v; want state/tank-1/level %s", snap, err, want)
	}
}

// A partial approval is republished as the event recorded it, whatever the
// engine holds when a fold reads the event: two folds reading the same
// event at different times publish the same bytes.
func TestFoldPartialApprovalIsTheEventsRecord(t *testing.T) {
	asRecorded := runtime.Approval{ID: "apr-1", Status: runtime.ApprovalPending, Required: 2,
		Answers: []runtime.AnswerRecord{{By: "console:bob", Decision: runtime.Approve}}}
	ev := event(t, 7, runtime.KindApprovalAnswered, runtime.AnsweredBody{Approval: "apr-1", By: "console:bob",
		Decision: runtime.Approve, Status: runtime.ApprovalPending, Record: &asRecorded})
	early := NewFold(source{approvals: map[string]runtime.Approval{"apr-1": asRecorded}})
	// Later, the second person has answered and the engine holds it approved.
	late := NewFold(source{approvals: map[string]runtime.Approval{"apr-1": {ID: "apr-1", Status: runtime.ApprovalApproved}}})
	a, err := early.Apply(ev)
	if err != nil {
		t.Fatal(err)
	}
	b, err := late.Apply(ev)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Encode(asRecorded)
	wantMsg := []string{"approvals/apr-1 " + string(want)}
	if !slices.Equal(published(a), wantMsg) || !slices.Equal(published(b), wantMsg) {
		t.Fatalf("early fold %s, late fold %s; want both %s", published(a), published(b), wantMsg)
	}
}

// The state follows what the journal says after an act or a read went
// wrong: a failed read makes the last value bad, an unknown outcome makes
// the latest act unconfirmed, and a reconciliation publishes the receipt
// it confirmed.
func TestFoldStateAfterFailures(t *testing.T) {
	t.Parallel()
	v := value.Number(60)
	f := NewFold(source{states: []runtime.StateRecord{{Device: "tank-1", Capability: "level",
		Reading: &devices.Reading{Value: v, At: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), Quality: devices.QualityGood}},
		{Device: "valve-1", Capability: "open", Receipt: &runtime.Receipt{Attempt: "act-old", Confirmation: runtime.Confirmed}}}})
	msgs, err := f.Apply(event(t, 1, runtime.KindFailed, runtime.FailedBody{Device: "tank-1", Capability: "level",
		Error: "device tank-1 is offline", Outcome: "offline"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := published(msgs); len(got) != 1 || !strings.Contains(got[0], `"value":60`) || !strings.Contains(got[0], `"quality":"bad"`) {
		t.Fatalf("after a failed read: %s", got)
	}
	msgs, err = f.Apply(event(t, 2, runtime.KindFailed, runtime.FailedBody{Device: "valve-1", Capability: "open", Attempt: "act-new",
		State: runtime.AttemptUnknown, Error: "no answer", Outcome: "unknown"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := published(msgs); len(got) != 1 || !strings.Contains(got[0], `"confirmation":"not_checked","attempt":"act-new"`) {
		t.Fatalf("after an unknown outcome: %s", got)
	}
	open := value.Bool(true)
	rc := runtime.Receipt{Attempt: "act-new", Device: "valve-1", Capability: "open", Value: open, Confirmation: runtime.Confirmed, Observed: &open}
	msgs, err = f.Apply(event(t, 3, runtime.KindReconciled, runtime.ReconciledBody{Attempt: "act-new", Device: "valve-1", Capability: "open",
		Found: runtime.FoundActed, Observed: &open, Receipt: &rc, Value: open}))
	if err != nil {
		t.Fatal(err)
	}
	got := published(msgs)
	if len(got) != 2 || !strings.HasPrefix(got[0], "receipts/valve-1/open ") || !strings.Contains(got[1], `"value":true`) ||
		!strings.Contains(got[1], `"confirmation":"confirmed","attempt":"act-new"`) {
		t.Fatalf("after the reconciliation: %s", got)
	}
}

// An alarm is retained on alarms/<id> as its record while it stands, and
// cleared by an empty retained message once it is back to normal; the
// same record gives the same bytes from an event as from a snapshot.
func TestFoldAlarms(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	raised := runtime.Alarm{ID: "discrepancy.valve-1.open", Kind: runtime.AlarmDiscrepancy, Device: "valve-1", Capability: "open",
		Priority: runtime.PriorityHigh, State: runtime.AlarmActive, Condition: true, Message: "the read-back is false", Count: 1,
		RaisedAt: at, LastAt: at}
	acked := raised
	acked.State, acked.AckedBy, acked.AckedAt, acked.Comment = runtime.AlarmActiveAcked, "console:olga", at.Add(time.Minute), "valve seen stuck"
	normal := acked
	normal.State, normal.Condition, normal.ClearedAt = runtime.AlarmNormal, false, at.Add(time.Hour)
	shelved := runtime.Alarm{ID: "drift.pump-1.on", Kind: runtime.AlarmDrift, Device: "pump-1", Capability: "on", Priority: runtime.PriorityMedium,
		State: runtime.AlarmClearedUnacked, Count: 3, RaisedAt: at, LastAt: at, ShelvedUntil: at.Add(time.Hour), ShelvedBy: "console:adam",
		ShelveReason: "pump under repair"}

	f := NewFold(source{alarms: []runtime.Alarm{shelved, normal, raised}})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// The standing ones, by id; the one back to normal is not retained.
	wantRaised, _ := Encode(raised)
	wantShelved, _ := Encode(shelved)
	want := []string{"alarms/discrepancy.valve-1.open " + string(wantRaised), "alarms/drift.pump-1.on " + string(wantShelved)}
	if got := published(snap); !slices.Equal(got, want) {
		t.Fatalf("Snapshot() alarms:\n got %q\nwant %q", got, want)
	}
	for _, m := range snap {
		if m.Stream != StreamAlarms || !m.Retain {
			t.Errorf("snapshot message %s: stream %d, retain %v; want alarms, retained", m.Topic, m.Stream, m.Retain)
		}
	}
	if only, err := f.AlarmSnapshot(); err != nil || !slices.Equal(published(only), want) {
		t.Errorf("AlarmSnapshot() = %q, %v; want %q", published(only), err, want)
	}

	for i, st := range []struct {
		action string
		alarm  runtime.Alarm
		want   string // the payload; "" for the clearing message
	}{
		{runtime.AlarmRaised, raised, string(wantRaised)},
		{runtime.AlarmAcknowledged, acked, `"state":"active_acknowledged"`},
		{runtime.AlarmCleared, normal, ""},
	} {
		msgs, err := f.Apply(event(t, uint64(i+1), runtime.KindAlarm, runtime.AlarmBody{Action: st.action, Alarm: st.alarm, By: "gateway"}))
		if err != nil {
			t.Fatalf("%s: %v", st.action, err)
		}
		if len(msgs) != 2 || msgs[1].Stream != StreamAlarms || msgs[1].Topic != "alarms/discrepancy.valve-1.open" || !msgs[1].Retain {
			t.Fatalf("%s: %+v; want the event and the retained alarm", st.action, msgs)
		}
		got := string(msgs[1].Payload)
		switch {
		case st.want == "" && msgs[1].Payload != nil:
			t.Errorf("%s: payload %s; want none, which clears the retained alarm", st.action, got)
		case st.want != "" && !strings.Contains(got, st.want):
			t.Errorf("%s: payload %s; want it to hold %s", st.action, got, st.want)
		}
	}

	// An alarm event that names no alarm, or an id that is no topic level,
	// publishes the event alone and says so.
	for _, body := range []any{runtime.AlarmBody{Action: runtime.AlarmRaised}, runtime.AlarmBody{Action: runtime.AlarmRaised,
		Alarm: runtime.Alarm{ID: "drift.a/b.on", State: runtime.AlarmActive}}} {
		msgs, err := f.Apply(event(t, 9, runtime.KindAlarm, body))
		if err == nil || len(msgs) != 1 || msgs[0].Stream != StreamEvents {
			t.Errorf("Apply(%+v) = %+v, %v; want the event alone and an error", body, msgs, err)
		}
	}
}

// TestFoldPendingReadingStandsUntilItsEventIsWritten: a reading published
// before the journal wrote it is the state from then on. An older event
// written after it (a receipt the journal wrote first) keeps the
// reading's value and adds its confirmation; the reading's own event,
// once written, says nothing new, and after it the older path resumes.
func TestFoldPendingReadingStandsUntilItsEventIsWritten(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := NewFold(source{})
	on, off := value.Bool(true), value.Bool(false)
	reading := func(seq uint64, v value.Value, sec int) runtime.Event {
		return event(t, seq, runtime.KindObserved, runtime.ObservedBody{Device: "pump-1", Capability: "on", Value: v, Quality: "good", At: at.Add(time.Duration(sec) * time.Second)})
	}
	receipt := event(t, 20, runtime.KindActed, runtime.Receipt{Device: "pump-1", Capability: "on", Attempt: "act-1", Value: on,
		Confirmation: runtime.Confirmed, Observed: &on, At: at})
	readFailed := event(t, 22, runtime.KindFailed, runtime.FailedBody{Device: "pump-1", Capability: "on", Outcome: "offline", Error: "gone"})
	state := func(v string, sec int, quality, more string) string {
		return `state/pump-1/on {"device":"pump-1","capability":"on","value":` + v + `,"at":"2026-05-01T12:00:0` + string(rune('0'+sec)) + `Z","quality":"` + quality + `"` + more + `}`
	}
	confirmed := `,"confirmation":"confirmed","attempt":"act-1"`
	steps := []struct {
		name    string
		pending bool
		ev      runtime.Event
		want    []string
	}{
		{"a reading taken is published at once", true, reading(21, off, 5), []string{state("false", 5, "good", "")}},
		{"an older receipt written later keeps the newer reading's value", false, receipt,
			[]string{`receipts/pump-1/on {"key":"","attempt":"act-1","device":"pump-1","capability":"on","value":true,"driver":"","confirmation":"confirmed","observed":true,"at":"2026-05-01T12:00:00Z"}`,
				state("false", 5, "good", confirmed)}},
		{"a failed read taken stands over the reading", true, readFailed, []string{state("false", 5, "bad", confirmed)}},
		{"the reading's event, written, says nothing new", false, reading(21, off, 5), nil},
		{"the failed read's event, written, says nothing new", false, readFailed, nil},
		{"a written event with nothing pending is published", false, reading(23, on, 7), []string{state("true", 7, "good", confirmed)}},
		{"an event that is not a reading is not pending", true, receipt, nil},
	}
	for _, s := range steps {
		msgs, err := fold(f, s.pending, s.ev)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := published(msgs); !slices.Equal(got, s.want) {
			t.Errorf("%s:\n got %q\nwant %q", s.name, got, s.want)
		}
		if !s.pending && (len(msgs) == 0 || msgs[0].Stream != StreamEvents) {
			t.Errorf("%s: the written event itself is not published first: %v", s.name, msgs)
		}
	}
}

// TestFoldPendingFailedReadKeepsTheNewestValue: a failed read taken marks
// the value believed bad and no more: written events older than it (a
// reading, a receipt that observed the actuator) still bring their value,
// bad; and with no value believed it says nothing, as its event written
// would not.
func TestFoldPendingFailedReadKeepsTheNewestValue(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	on, off := value.Bool(true), value.Bool(false)
	failed := func(seq uint64) runtime.Event {
		return event(t, seq, runtime.KindFailed, runtime.FailedBody{Device: "pump-1", Capability: "on", Outcome: "offline", Error: "gone"})
	}
	reading := func(seq uint64, v value.Value) runtime.Event {
		return event(t, seq, runtime.KindObserved, runtime.ObservedBody{Device: "pump-1", Capability: "on", Value: v, Quality: "good", At: at})
	}
	receipt := event(t, 8, runtime.KindActed, runtime.Receipt{Device: "pump-1", Capability: "on", Attempt: "act-1", Value: on,
		Confirmation: runtime.Confirmed, Observed: &on, At: at})
	state := func(v, quality, more string) string {
		return `state/pump-1/on {"device":"pump-1","capability":"on","value":` + v + `,"at":"2026-05-01T12:00:00Z","quality":"` + quality + `"` + more + `}`
	}
	confirmed := `,"confirmation":"confirmed","attempt":"act-1"`
	type step struct {
		pending bool
		ev      runtime.Event
		want    []string
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"a failed read with no value believed says nothing", []step{
			{true, failed(1), nil},
			{false, failed(1), nil},
		}},
		{"an older reading written after a failed read taken is its value, bad", []step{
			{true, failed(4), nil},
			{false, reading(2, off), []string{state("false", "bad", "")}},
			{false, failed(4), nil},
		}},
		{"an older receipt written after a failed read taken is its value, bad", []step{
			{false, reading(7, off), []string{state("false", "good", "")}},
			{true, failed(9), []string{state("false", "bad", "")}},
			{false, receipt, []string{`receipts/pump-1/on {"key":"","attempt":"act-1","device":"pump-1","capability":"on","value":true,"driver":"","confirmation":"confirmed","observed":true,"at":"2026-05-01T12:00:00Z"}`,
				state("true", "bad", confirmed)}},
			{false, failed(9), nil},
		}},
		{"a failed read taken after a reading taken keeps the reading's value", []step{
			{true, reading(3, on), []string{state("true", "good", "")}},
			{true, failed(4), []string{state("true", "bad", "")}},
			{false, reading(3, on), nil},
			{false, failed(4), nil},
		}},
	} {
		f := NewFold(source{})
		for i, s := range c.steps {
			msgs, err := fold(f, s.pending, s.ev)
			if err != nil {
				t.Fatalf("%s, step %d: %v", c.name, i, err)
			}
			if got := published(msgs); !slices.Equal(got, s.want) {
				t.Errorf("%s, step %d:\n got %q\nwant %q", c.name, i, got, s.want)
			}
		}
	}
}

// sensorConfirmed is a source whose valve-1.open is confirmed by another
// sensor (the flow it starts), not read back.
type sensorConfirmed struct{ source }

func (sensorConfirmed) ObservesItself(device, capability string) bool {
	return !(device == "valve-1" && capability == "open")
}

// TestFoldReceiptConfirmedByAnotherSensor: what another sensor observed
// (a flow rate) is never the valve's value: a confirmed act sets the value
// commanded, one the flow contradicts leaves the value the valve last
// read; both set the confirmation.
func TestFoldReceiptConfirmedByAnotherSensor(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := NewFold(sensorConfirmed{})
	flow, off := value.Number(1.42), value.Bool(false)
	steps := []struct {
		name string
		ev   runtime.Event
		want string
	}{
		{"the valve read closed", event(t, 1, runtime.KindObserved, runtime.ObservedBody{Device: "valve-1", Capability: "open", Value: off, Quality: "good", At: at}),
			`{"device":"valve-1","capability":"open","value":false,"at":"2026-05-01T12:00:00Z","quality":"good"}`},
		{"opened, the flow confirms it", event(t, 2, runtime.KindActed, runtime.Receipt{Device: "valve-1", Capability: "open", Attempt: "act-1", Value: value.Bool(true),
			Confirmation: runtime.Confirmed, Observed: &flow, At: at.Add(time.Second)}),
			`{"device":"valve-1","capability":"open","value":true,"at":"2026-05-01T12:00:01Z","quality":"good","confirmation":"confirmed","attempt":"act-1"}`},
		{"closed, the flow goes on", event(t, 3, runtime.KindActed, runtime.Receipt{Device: "valve-1", Capability: "open", Attempt: "act-2", Value: off,
			Confirmation: runtime.NotStarted, Observed: &flow, At: at.Add(2 * time.Second)}),
			`{"device":"valve-1","capability":"open","value":true,"at":"2026-05-01T12:00:01Z","quality":"good","confirmation":"not_started","attempt":"act-2"}`},
	}
	for _, s := range steps {
		msgs, err := f.Apply(s.ev)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, m := range msgs {
			if m.Stream == StreamState {
				got = string(m.Payload)
			}
		}
		if got != s.want {
			t.Errorf("%s: state\n got %s\nwant %s", s.name, got, s.want)
		}
	}
}

// fold gives ev to f as a pending event, or as one written.
func fold(f *Fold, pending bool, ev runtime.Event) ([]Message, error) {
	if pending {
		return f.Pending(ev)
	}
	return f.Apply(ev)
}

// TestFoldAReadingTakenBeforeAnActIsNotItsState: a reading taken before an
// act and journaled after its receipt (a poll that read the pump ON while
// a drive to safe switched it off) does not bring the old value back,
// whether Pending published it before the receipt was written or after;
// a reading taken after the act is the state again.
func TestFoldAReadingTakenBeforeAnActIsNotItsState(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	on, off := value.Bool(true), value.Bool(false)
	reading := func(seq uint64, v value.Value, sec int) runtime.Event {
		return event(t, seq, runtime.KindObserved, runtime.ObservedBody{Device: "pump-1", Capability: "on", Value: v, Quality: "good", At: at.Add(time.Duration(sec) * time.Second)})
	}
	receipt := event(t, 8, runtime.KindActed, runtime.Receipt{Device: "pump-1", Capability: "on", Attempt: "act-1", Value: off,
		Confirmation: runtime.Confirmed, Observed: &off, At: at.Add(2 * time.Second)})
	state := func(v string, sec int, more string) string {
		return `state/pump-1/on {"device":"pump-1","capability":"on","value":` + v + `,"at":"2026-05-01T12:00:0` + string(rune('0'+sec)) + `Z","quality":"good"` + more + `}`
	}
	const confirmed = `,"confirmation":"confirmed","attempt":"act-1"`
	receiptSaid := `receipts/pump-1/on {"key":"","attempt":"act-1","device":"pump-1","capability":"on","value":false,"driver":"","confirmation":"confirmed","observed":false,"at":"2026-05-01T12:00:02Z"}`
	type step struct {
		name    string
		pending bool
		ev      runtime.Event
		want    []string
	}
	for name, steps := range map[string][]step{
		"pending before the receipt is written": {
			{"the old reading taken", true, reading(10, on, 0), []string{state("true", 0, "")}},
			{"the receipt written", false, receipt, []string{receiptSaid, state("false", 2, confirmed)}},
			{"the old reading written", false, reading(10, on, 0), nil},
		},
		"pending after the receipt is written": {
			{"the receipt written", false, receipt, []string{receiptSaid, state("false", 2, confirmed)}},
			{"the old reading taken", true, reading(10, on, 0), nil},
			{"the old reading written", false, reading(10, on, 0), nil},
			{"a reading after the act", false, reading(11, on, 3), []string{state("true", 3, confirmed)}},
		},
	} {
		f := NewFold(source{})
		for _, s := range steps {
			msgs, err := fold(f, s.pending, s.ev)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, s.name, err)
			}
			if got := published(msgs); !slices.Equal(got, s.want) {
				t.Errorf("%s, %s:\n got %q\nwant %q", name, s.name, got, s.want)
			}
		}
	}
}
