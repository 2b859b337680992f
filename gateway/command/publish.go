package command

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// Stream says what a Message carries, so that a surface can choose what it
// publishes: the broker publishes every stream but receipts, the uplink
// what its configuration forwards.
type Stream uint8

// The streams.
const (
	// StreamEvents is every journal event on TopicEvents.
	StreamEvents Stream = iota + 1
	// StreamState is the retained State of a capability on StateTopic.
	StreamState
	// StreamReceipts is the receipt of an actuation on ReceiptTopic.
	StreamReceipts
	// StreamApprovals is a pending approval, retained on ApprovalTopic,
	// and the empty message that clears it once it is answered.
	StreamApprovals
	// StreamCheckpoints is the newest signed checkpoint, retained on
	// TopicCheckpoints.
	StreamCheckpoints
	// StreamAlarms is an alarm, retained on AlarmTopic while it stands
	// (active or unacknowledged), and the empty message that clears it
	// once it is back to normal.
	StreamAlarms
)

// Message is one publication of a surface.
type Message struct {
	Stream Stream
	// Topic is relative to the surface's prefix.
	Topic string
	// Payload is nil for a message that clears a retained one.
	Payload []byte
	Retain  bool
}

// State is the payload of state/<device>/<capability>, retained: the last
// known state of a capability. The broker and the uplink publish the same
// bytes for it. Value, At and Quality are the latest reading (a sensor's,
// or an actuator's read-back, which is good); Confirmation and Attempt
// are what the latest actuation's receipt said. Fields without a value
// yet are left out. For example:
//
//	{"device":"valve-1","capability":"open","value":true,"at":"2026-05-01T12:00:00Z","quality":"good","confirmation":"confirmed","attempt":"att-0f3a"}
type State struct {
	Device     string       `json:"device"`
	Capability string       `json:"capability"`
	Value      *value.Value `json:"value,omitempty"`
	At         time.Time    `json:"at,omitzero"`
	// Quality is "good", "stale" or "bad".
	Quality string `json:"quality,omitempty"`
	// Confirmation is what the last actuation's read-back found.
	Confirmation runtime.Confirmation `json:"confirmation,omitempty"`
	// Attempt names the last actuation.
	Attempt string `json:"attempt,omitempty"`
}

// Source is what a Fold reads of the engine: the state it starts from and
// the approvals and alarms it republishes. *runtime.Engine implements it.
type Source interface {
	States() []runtime.StateRecord
	Approvals() []runtime.Approval
	Approval(id string) (runtime.Approval, bool)
	Alarms() []runtime.Alarm
}

// Fold turns journal events into what a surface publishes: the one place
// where the broker and the uplink read event bodies, so that they publish
// one and the same payload for the same event. It keeps the State of every
// capability, starting from the engine's, and folds each event into it.
// Two folds made from the same state give the same bytes for the same
// events. Events older than that state (an uplink catching up on its
// outbox) are folded over it: their payloads may carry a newer receipt's
// confirmation, and the last payload of each capability is its state.
// A Fold is not safe for concurrent use: each surface has its own, used by
// the goroutine that follows the journal.
type Fold struct {
	src    Source
	states map[string]*State
	// ahead holds, by "device/capability", the reading that Pending
	// published before the journal wrote it.
	ahead map[string]*aheadReading
}

// aheadReading is what a pending event says of a capability: a reading
// (its value, time and quality), or a read that failed (bad, over the
// value believed). The state stands on it until Apply folds that event.
type aheadReading struct {
	seq     uint64
	read    bool // value and at are a reading's; else only the quality is
	value   *value.Value
	at      time.Time
	quality string
	payload []byte // the state message last published with it; nil: none
}

// over returns s as the pending event leaves it.
func (a *aheadReading) over(s State) State {
	switch {
	case a.read:
		s.Value, s.At, s.Quality = a.value, a.at, a.quality
	case s.Value != nil:
		s.Quality = a.quality
	}
	return s
}

// NewFold returns a fold that starts from the engine's current state.
func NewFold(src Source) *Fold {
	f := &Fold{src: src, states: map[string]*State{}, ahead: map[string]*aheadReading{}}
	for _, st := range src.States() {
		s := f.state(st.Device, st.Capability)
		if rd := st.Reading; rd != nil {
			v := rd.Value
			s.Value, s.At, s.Quality = &v, rd.At, rd.Quality.String()
		}
		if rc := st.Receipt; rc != nil {
			s.Confirmation, s.Attempt = rc.Confirmation, rc.Attempt
		}
	}
	return f
}

func (f *Fold) state(device, capability string) *State {
	k := device + "/" + capability
	s, ok := f.states[k]
	if !ok {
		s = &State{Device: device, Capability: capability}
		f.states[k] = s
	}
	return s
}

// Snapshot returns the retained messages of the state the fold holds: the
// State of every capability, sorted by device and capability, every
// pending approval, and every standing alarm, sorted by id. A surface
// publishes them before it follows the journal.
func (f *Fold) Snapshot() ([]Message, error) {
	var out []Message
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(f.states)) {
		m, err := stateMessage(f.states[k])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, m)
	}
	for _, ap := range f.src.Approvals() {
		payload, err := Encode(ap)
		if err != nil {
			errs = append(errs, fmt.Errorf("encoding approval %s: %w", ap.ID, err))
			continue
		}
		out = append(out, Message{Stream: StreamApprovals, Topic: ApprovalTopic(ap.ID), Payload: payload, Retain: true})
	}
	alarms := f.src.Alarms()
	slices.SortFunc(alarms, func(a, b runtime.Alarm) int { return strings.Compare(a.ID, b.ID) })
	for i := range alarms {
		if !alarms[i].Standing() {
			continue
		}
		m, err := alarmMessage(&alarms[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, m)
	}
	return out, joinErrs(errs)
}

// AlarmSnapshot returns the retained messages of the standing alarms
// alone, as Snapshot has them.
func (f *Fold) AlarmSnapshot() ([]Message, error) {
	msgs, err := f.Snapshot()
	return slices.DeleteFunc(msgs, func(m Message) bool { return m.Stream != StreamAlarms }), err
}

// alarmMessage is the retained message of an alarm: the alarm record
// while it stands, and an empty payload, which clears what the broker
// retains, once it is back to normal.
func alarmMessage(a *runtime.Alarm) (Message, error) {
	if !AlarmIDOK(a.ID) {
		return Message{}, fmt.Errorf("alarm %q: the id cannot be a topic level", a.ID)
	}
	m := Message{Stream: StreamAlarms, Topic: AlarmTopic(a.ID), Retain: true}
	if !a.Standing() {
		return m, nil
	}
	payload, err := Encode(a)
	if err != nil {
		return Message{}, fmt.Errorf("encoding alarm %s: %w", a.ID, err)
	}
	m.Payload = payload
	return m, nil
}

func stateMessage(s *State) (Message, error) {
	payload, err := Encode(s)
	if err != nil {
		return Message{}, fmt.Errorf("encoding the state of %s.%s: %w", s.Device, s.Capability, err)
	}
	return Message{Stream: StreamState, Topic: StateTopic(s.Device, s.Capability), Payload: payload, Retain: true}, nil
}

// Apply folds one event and returns what to publish for it, in order:
// the event itself, then what it changed (a capability's state, a
// receipt, an approval, an alarm, the newest checkpoint). An event whose body
// cannot be read yields the event alone and an error naming it.
func (f *Fold) Apply(ev runtime.Event) ([]Message, error) {
	payload, err := Encode(ev)
	if err != nil {
		return nil, fmt.Errorf("encoding event %d (%s): %w", ev.Seq, ev.Kind, err)
	}
	out := []Message{{Stream: StreamEvents, Topic: TopicEvents, Payload: payload}}
	more, err := f.changes(ev)
	return append(out, more...), err
}

// Pending returns the state message of a reading the journal has queued
// and not yet written, or of a read that failed, as it stands over the
// state folded so far; any other event yields nothing. The state stands on
// that reading until Apply folds the event itself: a surface shows a
// reading as soon as it is taken, and publishes the event once it is
// witnessed. Events come to Pending in order, each before Apply folds it
// (Apply may not yet have folded older ones); one may skip Pending.
func (f *Fold) Pending(ev runtime.Event) ([]Message, error) {
	var device, capability string
	a := &aheadReading{seq: ev.Seq}
	switch ev.Kind {
	case runtime.KindObserved:
		var o runtime.ObservedBody
		if err := ev.DecodeBody(&o); err != nil || o.Device == "" {
			return nil, bodyErr(ev, err)
		}
		device, capability = o.Device, o.Capability
		if f.older(device, capability, o.At) {
			return nil, nil // taken before what stands: an act's receipt came first
		}
		v := o.Value
		a.read, a.value, a.at, a.quality = true, &v, o.At, o.Quality
	case runtime.KindFailed:
		var fb runtime.FailedBody
		if err := ev.DecodeBody(&fb); err != nil || fb.Device == "" {
			return nil, bodyErr(ev, err)
		}
		if !fb.ReadFailed() {
			return nil, nil
		}
		device, capability = fb.Device, fb.Capability
		a.quality = devices.QualityBad.String()
	default:
		return nil, nil
	}
	k := device + "/" + capability
	if prev := f.ahead[k]; prev != nil && prev.read && !a.read {
		// A read failed after a reading not yet written: bad, over it.
		a.read, a.value, a.at = true, prev.value, prev.at
	}
	f.ahead[k] = a
	s := a.over(*f.state(device, capability))
	if s.Value == nil {
		return nil, nil // no value believed: a failed read changes nothing
	}
	m, err := stateMessage(&s)
	if err != nil {
		return nil, err
	}
	a.payload = m.Payload
	return []Message{m}, nil
}

// older reports whether a reading of device.capability taken at t is
// older than what stands: the state folded so far, or a pending reading.
func (f *Fold) older(device, capability string, t time.Time) bool {
	if t.IsZero() {
		return false // an event from before readings carried their time
	}
	if s := f.states[device+"/"+capability]; s != nil && s.Value != nil && t.Before(s.At) {
		return true
	}
	a := f.ahead[device+"/"+capability]
	return a != nil && a.read && t.Before(a.at)
}

// stateAt is the state message of s after the event seq, or none when it
// is the message published last: over s stands a newer reading that
// Pending published, until the event of that reading comes.
func (f *Fold) stateAt(s *State, seq uint64) ([]Message, error) {
	k := s.Device + "/" + s.Capability
	a := f.ahead[k]
	if a != nil && a.seq > seq && a.read && s.Value != nil && a.at.Before(s.At) {
		// The pending reading was taken before this event's state (an
		// act's receipt): it no longer stands over it.
		delete(f.ahead, k)
		a = nil
	}
	if a != nil && a.seq > seq {
		c := a.over(*s)
		m, err := stateMessage(&c)
		if err != nil || string(m.Payload) == string(a.payload) {
			return nil, err // what stands is published already
		}
		a.payload = m.Payload
		return []Message{m}, nil
	}
	delete(f.ahead, k)
	m, err := stateMessage(s)
	if err != nil {
		return nil, err
	}
	if a != nil && a.seq == seq && string(a.payload) == string(m.Payload) {
		return nil, nil // published already, as the reading was taken
	}
	return []Message{m}, nil
}

// changes reads the body of an event that changes what is retained.
func (f *Fold) changes(ev runtime.Event) ([]Message, error) {
	switch ev.Kind {
	case runtime.KindObserved:
		var o runtime.ObservedBody
		if err := ev.DecodeBody(&o); err != nil || o.Device == "" {
			return nil, bodyErr(ev, err)
		}
		s := f.state(o.Device, o.Capability)
		if s.Value != nil && !o.At.IsZero() && o.At.Before(s.At) {
			// Taken before what stands (the receipt of an act journaled
			// while it was being read): the reading is history, not the
			// state. Pending may have published it; what stands is said
			// again.
			if a := f.ahead[o.Device+"/"+o.Capability]; a != nil && a.seq == ev.Seq {
				return f.stateAt(s, ev.Seq)
			}
			return nil, nil
		}
		v := o.Value
		s.Value, s.At, s.Quality = &v, o.At, o.Quality
		return f.stateAt(s, ev.Seq)
	case runtime.KindActed:
		var rc runtime.Receipt
		if err := ev.DecodeBody(&rc); err != nil || rc.Device == "" {
			return nil, bodyErr(ev, err)
		}
		return f.receipt(&rc, ev.Body, ev.Seq)
	case runtime.KindFailed:
		var fb runtime.FailedBody
		if err := ev.DecodeBody(&fb); err != nil || fb.Device == "" {
			return nil, bodyErr(ev, err)
		}
		s := f.state(fb.Device, fb.Capability)
		switch {
		case fb.Attempt != "" && fb.State == runtime.AttemptUnknown:
			// The latest act's outcome is unknown: nothing confirmed it.
			s.Confirmation, s.Attempt = runtime.NotChecked, fb.Attempt
		case fb.ReadFailed() && s.Value != nil:
			// A read the driver failed: the last value is no longer good.
			s.Quality = devices.QualityBad.String()
		default:
			return nil, nil
		}
		return f.stateAt(s, ev.Seq)
	case runtime.KindReconciled:
		var rb runtime.ReconciledBody
		if err := ev.DecodeBody(&rb); err != nil || rb.Device == "" {
			return nil, bodyErr(ev, err)
		}
		rc := rb.Receipt
		if rb.Found != runtime.FoundActed || rc == nil {
			return nil, nil // found not acted: the state stands as it was
		}
		payload, err := Encode(rc)
		if err != nil {
			return nil, fmt.Errorf("encoding the receipt of attempt %s: %w", rc.Attempt, err)
		}
		return f.receipt(rc, payload, ev.Seq)
	case runtime.KindApprovalRequested:
		var ap runtime.Approval
		if err := ev.DecodeBody(&ap); err != nil || ap.ID == "" {
			return nil, bodyErr(ev, err)
		}
		return []Message{{Stream: StreamApprovals, Topic: ApprovalTopic(ap.ID), Payload: ev.Body, Retain: true}}, nil
	case runtime.KindApprovalAnswered, runtime.KindApprovalExpired:
		id, status, still, err := closedApproval(ev)
		if err != nil {
			return nil, err
		}
		if status != runtime.ApprovalPending {
			// An empty retained message clears the request.
			return []Message{{Stream: StreamApprovals, Topic: ApprovalTopic(id), Retain: true}}, nil
		}
		// One of several approvals: the request stays, with its answers so
		// far, as the event recorded them (the same bytes for every fold,
		// whenever it reads the event). An event written before answers
		// carried the record is published as the engine holds it now.
		ap := still
		if ap == nil {
			cur, ok := f.src.Approval(id)
			if !ok || cur.Status != runtime.ApprovalPending {
				return nil, nil // a later event closes it
			}
			ap = &cur
		}
		payload, err := Encode(ap)
		if err != nil {
			return nil, fmt.Errorf("encoding approval %s: %w", id, err)
		}
		return []Message{{Stream: StreamApprovals, Topic: ApprovalTopic(id), Payload: payload, Retain: true}}, nil
	case runtime.KindAlarm:
		var ab runtime.AlarmBody
		if err := ev.DecodeBody(&ab); err != nil || ab.Alarm.ID == "" {
			return nil, bodyErr(ev, err)
		}
		m, err := alarmMessage(&ab.Alarm)
		if err != nil {
			return nil, err
		}
		return []Message{m}, nil
	case runtime.KindCheckpoint:
		if len(ev.Body) == 0 {
			return nil, nil // an empty retained message would clear the last one
		}
		return []Message{{Stream: StreamCheckpoints, Topic: TopicCheckpoints, Payload: ev.Body, Retain: true}}, nil
	}
	return nil, nil
}

// receipt publishes an act's receipt, whose encoding is payload, and the
// state it leaves the actuator in, after the event seq.
func (f *Fold) receipt(rc *runtime.Receipt, payload []byte, seq uint64) ([]Message, error) {
	out := []Message{{Stream: StreamReceipts, Topic: ReceiptTopic(rc.Device, rc.Capability), Payload: payload}}
	s := f.state(rc.Device, rc.Capability)
	s.Confirmation, s.Attempt = rc.Confirmation, rc.Attempt
	switch {
	case rc.Observed != nil && f.observesItself(rc.Device, rc.Capability):
		v := *rc.Observed
		s.Value, s.At, s.Quality = &v, rc.At, devices.QualityGood.String()
	case rc.Confirmation == runtime.Confirmed:
		// Confirmed by another sensor, whose value is not the actuator's:
		// the world follows the value commanded.
		v := rc.Value
		s.Value, s.At, s.Quality = &v, rc.At, devices.QualityGood.String()
	}
	m, err := f.stateAt(s, seq)
	return append(out, m...), err
}

// observesItself reports whether the receipts of device.capability
// observe the actuator itself, as the Source says when it can (the
// engine); else whatever a receipt observed is taken to be the
// actuator's.
func (f *Fold) observesItself(device, capability string) bool {
	if o, ok := f.src.(interface {
		ObservesItself(device, capability string) bool
	}); ok {
		return o.ObservesItself(device, capability)
	}
	return true
}

// closedApproval reads which approval an answer or an expiry concerns,
// its status after it, and the approval as it stands when an answer left
// it pending. An approval_answered event a person gave has an
// AnsweredBody; one the gateway superseded has a ClosedBody; both carry
// the approval and the status.
func closedApproval(ev runtime.Event) (string, runtime.ApprovalStatus, *runtime.Approval, error) {
	if ev.Kind == runtime.KindApprovalAnswered {
		var a runtime.AnsweredBody
		if err := ev.DecodeBody(&a); err != nil || a.Approval == "" {
			return "", "", nil, bodyErr(ev, err)
		}
		return a.Approval, a.Status, a.Record, nil
	}
	var c runtime.ClosedBody
	if err := ev.DecodeBody(&c); err != nil || c.Approval == "" {
		return "", "", nil, bodyErr(ev, err)
	}
	return c.Approval, c.Status, nil, nil
}

// bodyErr is the error for an event whose body could not be read, or
// lacks the field that says what it concerns.
func bodyErr(ev runtime.Event, err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("event %d (%s): the body names no subject", ev.Seq, ev.Kind)
}

func joinErrs(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%d messages not encoded, the first: %w", len(errs), errs[0])
}

// Events is what NewestCheckpoint reads of the journal. *runtime.Engine
// implements it.
type Events interface {
	Events(ctx context.Context, since uint64, limit int) ([]runtime.Event, error)
}

// checkpointLookback bounds how far back NewestCheckpoint looks, so that
// a start never reads more than this much of a long history.
const checkpointLookback = 64 << 10

// NewestCheckpoint returns the body of the newest checkpoint event at or
// before seq, looking back through at most the last 65,536 events (a
// checkpoint is made every thousand events or every minute, so the newest
// is near the end). It returns false when there is none, or when the
// journal cannot be read.
func NewestCheckpoint(ctx context.Context, j Events, seq uint64) (json.RawMessage, bool) {
	const window = 1024
	for end, looked := seq, 0; end > 0 && looked < checkpointLookback; looked += window {
		start := end - min(end, window)
		evs, err := j.Events(ctx, start, window)
		if err != nil || len(evs) == 0 {
			return nil, false
		}
		var found json.RawMessage
		for _, ev := range evs {
			if ev.Seq <= end && ev.Kind == runtime.KindCheckpoint {
				found = json.RawMessage(ev.Body)
			}
		}
		if found != nil {
			return found, true
		}
		if evs[0].Seq > start+1 {
			return nil, false // what is older was pruned
		}
		end = start
	}
	return nil, false
}

// CheckpointMessage is the retained message of a checkpoint's body.
func CheckpointMessage(body []byte) Message {
	return Message{Stream: StreamCheckpoints, Topic: TopicCheckpoints, Payload: body, Retain: true}
}
