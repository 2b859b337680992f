package mqtt

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// haOutcome is the payload of an actuator's outcome topic: what became of
// the last command to it, in words Home Assistant shows as the outcome
// sensor's state (at most 255 characters), with the details as its
// attributes.
type haOutcome struct {
	Outcome string `json:"outcome"`
	// Value is the value asked for.
	Value *value.Value `json:"value,omitempty"`
	// By is the principal that asked, when the event says.
	By       string    `json:"by,omitempty"`
	Approval string    `json:"approval,omitempty"`
	Attempt  string    `json:"attempt,omitempty"`
	At       time.Time `json:"at,omitzero"`
}

// haMessage is a retained message of the integration, its topic relative
// to the broker's prefix.
type haMessage struct {
	topic   string
	payload []byte
}

// haNone is the state payload that Home Assistant's switch, number and
// select take for "unknown": the gateway no longer believes any value.
const haNone = "None"

// haRange is what a number entity was announced with, and the envelope it
// came from.
type haRange struct {
	lo, hi         float64 // the announced min and max
	min, max       float64 // the envelope's bounds, where it has them
	hasMin, hasMax bool
}

// outside says how v lies outside the envelope or the announced range,
// or "" when Home Assistant's number can show it.
func (r haRange) outside(v float64) string {
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	switch {
	case r.hasMin && v < r.min || r.hasMax && v > r.max:
		lo, hi := "…", "…"
		if r.hasMin {
			lo = num(r.min)
		}
		if r.hasMax {
			hi = num(r.max)
		}
		return "outside the envelope " + lo + " to " + hi
	case v < r.lo || v > r.hi:
		return "outside the range Home Assistant was told, " + num(r.lo) + " to " + num(r.hi)
	}
	return ""
}

// haFold turns journal events into the integration's state and outcome
// topics. It is used by one goroutine at a time: the broker's start, then
// the goroutine that follows the journal.
type haFold struct {
	// caps are the announced capabilities by "device/capability".
	caps map[string]devices.Capability
	// ranges are the announced number actuators' ranges, by
	// "device/capability".
	ranges map[string]haRange
	// ownReadBack holds the actuators whose receipts observe the
	// actuator itself (its read-back), not another sensor: a discrepant
	// receipt's observed value is their state.
	ownReadBack map[string]bool
	// asked maps a pending approval's id to its "device/capability".
	asked map[string]string
	// devs are the announced devices.
	devs map[string]bool
	// outsideSaid is the reading outside its range whose outcome was last
	// said, by "device/capability", so that a poll repeats it only when it
	// changes.
	outsideSaid map[string]string
	// ahead holds, by state topic, the reading that pending published
	// before the journal wrote it.
	ahead map[string]haAhead
	// at is when the state said last was true, by "device/capability":
	// the reading's time, or the receipt's. A reading taken before it (an
	// act's receipt journaled while the reading was being taken) is
	// history, not the state.
	at map[string]time.Time
}

// haAhead is a state published from a pending reading: its event, the
// payload, and when the reading was taken, of which capability.
type haAhead struct {
	seq     uint64
	payload []byte
	key     string
	at      time.Time
}

// older reports whether a reading of device.capability taken at t is
// older than the state said last.
func (f *haFold) older(device, capability string, t time.Time) bool {
	return !t.IsZero() && t.Before(f.at[device+"/"+capability])
}

// said notes that the state of device.capability said now was true at t.
func (f *haFold) said(device, capability string, t time.Time) {
	k := device + "/" + capability
	if t.After(f.at[k]) {
		f.at[k] = t
	}
}

func newHAFold(devs []devices.Device) *haFold {
	f := &haFold{caps: map[string]devices.Capability{}, ranges: map[string]haRange{}, ownReadBack: map[string]bool{},
		asked: map[string]string{}, devs: map[string]bool{}, outsideSaid: map[string]string{}, ahead: map[string]haAhead{}, at: map[string]time.Time{}}
	for _, d := range devs {
		f.devs[d.ID] = true
		for _, c := range d.Capabilities {
			f.caps[d.ID+"/"+c.Name] = c
		}
	}
	return f
}

// actuator reports whether device/capability is an announced actuator.
func (f *haFold) actuator(device, capability string) bool {
	c, ok := f.caps[device+"/"+capability]
	return ok && c.Kind == devices.KindActuator
}

// state is the believed state of device/capability, if it is announced
// and v is of its type. A number outside its envelope or the range Home
// Assistant was told is not clamped (the gateway shows no value it does
// not believe) but published as None, unknown; its real value is in the
// entity's attributes, the protocol's state topic.
func (f *haFold) state(device, capability string, v value.Value) []haMessage {
	key := device + "/" + capability
	c, ok := f.caps[key]
	if !ok || !ofType(v, c.Type) {
		return nil
	}
	if r, ok := f.ranges[key]; ok && r.outside(v.Num) != "" {
		return f.unknown(device, capability)
	}
	if c.Type == value.TypeEnum && !slices.Contains(c.Enum, v.Text) {
		return f.unknown(device, capability) // not an option Home Assistant was told
	}
	return []haMessage{{topic: HAStateTopic(device, capability), payload: haValue(v)}}
}

// ofType reports whether v is a value of type t. An enum's value comes
// back from the journal's JSON as a string, and is one.
func ofType(v value.Value, t value.Type) bool {
	return v.Type == t || t == value.TypeEnum && v.Type == value.TypeString
}

// unknown says that the gateway no longer believes any state of an
// announced actuator: Home Assistant shows it unknown. A text entity has
// no such state, and keeps its last.
func (f *haFold) unknown(device, capability string) []haMessage {
	c, ok := f.caps[device+"/"+capability]
	if !ok || c.Kind != devices.KindActuator || c.Type == value.TypeString {
		return nil
	}
	return []haMessage{{topic: HAStateTopic(device, capability), payload: []byte(haNone)}}
}

// reading is what a good reading changes: the state, and, for a number
// actuator whose reading lies outside its range, an outcome that says so
// (once for each such value, not at every poll).
func (f *haFold) reading(device, capability string, v value.Value, at time.Time) []haMessage {
	out := f.state(device, capability, v)
	key := device + "/" + capability
	r, ok := f.ranges[key]
	if !ok || v.Type != value.TypeNumber {
		return out
	}
	why := r.outside(v.Num)
	if why == "" {
		delete(f.outsideSaid, key)
		return out
	}
	said := string(haValue(v))
	if f.outsideSaid[key] == said {
		return out
	}
	f.outsideSaid[key] = said
	return append(out, f.outcome(device, capability, haOutcome{Outcome: "read " + said + ", " + why, Value: &v, At: at})...)
}

// acted is what an act's receipt changes: its outcome, and the state: the
// value when the world confirmed it; what was observed when the world
// did not follow and the observation is of the actuator itself, else
// unknown.
func (f *haFold) acted(rc *runtime.Receipt) []haMessage {
	out := f.outcome(rc.Device, rc.Capability, receiptOutcome(rc))
	key := rc.Device + "/" + rc.Capability
	switch {
	case rc.Confirmation == runtime.Confirmed:
		f.said(rc.Device, rc.Capability, rc.At)
		out = append(f.state(rc.Device, rc.Capability, rc.Value), out...)
	case rc.Confirmation.Discrepant():
		f.said(rc.Device, rc.Capability, rc.At)
		var st []haMessage
		if rc.Observed != nil && f.ownReadBack[key] {
			st = f.state(rc.Device, rc.Capability, *rc.Observed)
		}
		if st == nil {
			st = f.unknown(rc.Device, rc.Capability)
		}
		out = append(st, out...)
	}
	return out
}

func (f *haFold) outcome(device, capability string, o haOutcome) []haMessage {
	if !f.actuator(device, capability) {
		return nil
	}
	return outcomeMessage(device, capability, o)
}

// outcomeMessage is the message of an actuator's outcome, cut to the 255
// characters Home Assistant keeps of a state.
func outcomeMessage(device, capability string, o haOutcome) []haMessage {
	if r := []rune(o.Outcome); len(r) > 255 {
		o.Outcome = string(r[:254]) + "…"
	}
	payload, err := json.Marshal(o)
	if err != nil {
		return nil // a value that cannot be encoded was never a command
	}
	return []haMessage{{topic: HAOutcomeTopic(device, capability), payload: payload}}
}

// reachable is whether an announced device is online.
func (f *haFold) reachable(device string, online bool) []haMessage {
	if !f.devs[device] {
		return nil
	}
	payload := []byte("offline")
	if online {
		payload = []byte("online")
	}
	return []haMessage{{topic: HADeviceTopic(device), payload: payload}}
}

// snapshot is what the fold starts from: the believed state of every
// capability, the outcome of every actuator's last act, and the pending
// approvals, which stand over an older act's outcome.
func (f *haFold) snapshot(src interface {
	States() []runtime.StateRecord
	Approvals() []runtime.Approval
}) []haMessage {
	var out []haMessage
	for _, st := range src.States() {
		// Only a good reading, as the live fold: a stale one is not
		// what the gateway believes now. The state is the newer of the
		// reading and the receipt's.
		var msgs []haMessage
		if rc := st.Receipt; rc != nil {
			msgs = f.acted(rc)
		}
		if rd := st.Reading; rd != nil && rd.Quality == devices.QualityGood {
			f.said(st.Device, st.Capability, rd.At)
			if rc := st.Receipt; rc != nil && rd.At.Before(rc.At) {
				msgs = append(slices.DeleteFunc(f.reading(st.Device, st.Capability, rd.Value, rd.At), func(m haMessage) bool {
					return m.topic == HAStateTopic(st.Device, st.Capability)
				}), msgs...)
			} else {
				msgs = append(msgs, f.reading(st.Device, st.Capability, rd.Value, rd.At)...)
			}
		}
		out = append(out, msgs...)
	}
	for _, ap := range src.Approvals() {
		if ap.Kind == "mode_change" || ap.Status != runtime.ApprovalPending {
			continue
		}
		f.asked[ap.ID] = ap.Device + "/" + ap.Capability
		v := ap.Value
		out = append(out, f.outcome(ap.Device, ap.Capability, haOutcome{Outcome: "pending approval " + ap.ID, Value: &v,
			By: ap.Principal, Approval: ap.ID, At: ap.RequestedAt})...)
	}
	return out
}

// receiptOutcome says what an act's receipt found.
func receiptOutcome(rc *runtime.Receipt) haOutcome {
	v := rc.Value
	o := haOutcome{Value: &v, Attempt: rc.Attempt, At: rc.At}
	switch rc.Confirmation {
	case runtime.Confirmed:
		o.Outcome = "confirmed"
	case runtime.NotChecked:
		o.Outcome = "acted, not checked"
	default:
		o.Outcome = strings.ReplaceAll(string(rc.Confirmation), "_", " ")
		if rc.Detail != "" {
			o.Outcome += ": " + rc.Detail
		}
	}
	return o
}

// haMode is the payload of HAModeTopic.
type haMode struct {
	Mode    string    `json:"mode"`
	Since   time.Time `json:"since,omitzero"`
	By      string    `json:"by,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
}

func modeMessage(m haMode) []haMessage {
	payload, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return []haMessage{{topic: HAModeTopic, payload: payload}}
}

// pending returns the state a good reading the journal has queued and not
// yet written makes: it stands from now until apply folds the event
// itself, over what older events say. What else the reading says (that it
// lies outside its range) waits for its event, in order with the
// outcomes of the events before it. Any other event yields nothing.
// Events come to pending in order, each before apply folds it (apply may
// not yet have folded older ones); one may skip pending.
func (f *haFold) pending(ev runtime.Event) []haMessage {
	var o runtime.ObservedBody
	if ev.Kind != runtime.KindObserved || ev.DecodeBody(&o) != nil || o.Quality != devices.QualityGood.String() ||
		f.older(o.Device, o.Capability, o.At) {
		return nil
	}
	msgs := f.state(o.Device, o.Capability, o.Value)
	for _, m := range msgs {
		f.ahead[m.topic] = haAhead{seq: ev.Seq, payload: m.payload, key: o.Device + "/" + o.Capability, at: o.At}
	}
	return msgs
}

// apply folds one event, and returns the messages it changes: a state
// that a newer pending reading stands over is not said, nor the one that
// reading said already.
func (f *haFold) apply(ev runtime.Event) []haMessage {
	msgs := f.changes(ev)
	if len(f.ahead) == 0 {
		return msgs
	}
	return slices.DeleteFunc(msgs, func(m haMessage) bool {
		a, ok := f.ahead[m.topic]
		if !ok {
			return false
		}
		if a.seq > ev.Seq && !a.at.Before(f.at[a.key]) {
			return true
		}
		// This event's state is said: a reading pending from before it
		// (in time) no longer stands over it.
		delete(f.ahead, m.topic)
		return a.seq == ev.Seq && bytes.Equal(a.payload, m.payload)
	})
}

// changes folds one event, and returns the messages it changes.
func (f *haFold) changes(ev runtime.Event) []haMessage {
	switch ev.Kind {
	case runtime.KindDeviceOnline, runtime.KindDeviceOffline:
		var db runtime.DeviceBody
		if ev.DecodeBody(&db) != nil {
			return nil
		}
		return f.reachable(db.Device, ev.Kind == runtime.KindDeviceOnline)
	case runtime.KindModeChanged:
		var mc runtime.ModeChangedBody
		if ev.DecodeBody(&mc) != nil || mc.To == "" {
			return nil
		}
		return modeMessage(haMode{Mode: mc.To, Since: ev.At, By: mc.By, Expires: mc.Expires})
	case runtime.KindObserved:
		var o runtime.ObservedBody
		if ev.DecodeBody(&o) != nil || o.Quality != devices.QualityGood.String() {
			return nil // the last good reading stands
		}
		if f.older(o.Device, o.Capability, o.At) {
			return nil // taken before the state said last
		}
		f.said(o.Device, o.Capability, o.At)
		return f.reading(o.Device, o.Capability, o.Value, ev.At)
	case runtime.KindActed:
		var rc runtime.Receipt
		if ev.DecodeBody(&rc) != nil {
			return nil
		}
		return f.acted(&rc)
	case runtime.KindReconciled:
		var rb runtime.ReconciledBody
		if ev.DecodeBody(&rb) != nil || rb.Receipt == nil {
			return nil
		}
		return f.acted(rb.Receipt)
	case runtime.KindRefused:
		var rb runtime.RefusedBody
		if ev.DecodeBody(&rb) != nil {
			return nil
		}
		// Some refusals of a write carry no value (one refused for another
		// request's pending approval); a refused read of an actuator is
		// rare, and a refused request all the same.
		return f.outcome(rb.Device, rb.Capability, haOutcome{Outcome: "refused: " + rb.Why, Value: rb.Value, At: ev.At})
	case runtime.KindFailed:
		var fb runtime.FailedBody
		if ev.DecodeBody(&fb) != nil {
			return nil
		}
		// A command's outcome is an act's failure (it has an attempt),
		// or a failure in a run before any attempt: the device offline,
		// no such capability, cancelled before acting or while waiting
		// for the actuator's lock. A poll's failed read is no command's
		// (it has no run), nor is a driver's failure to read (it has an
		// outcome, where a write's has an attempt). A read of the
		// actuator in a run that finds its device gone says so too: it
		// is a command that failed.
		if fb.Attempt == "" && (ev.Run == "" || fb.Outcome != "") {
			return nil
		}
		what := "failed: "
		if fb.State == runtime.AttemptUnknown {
			what = "outcome unknown, the actuator is locked: "
		}
		o := haOutcome{Outcome: what + fb.Error, Attempt: fb.Attempt, At: ev.At}
		if fb.Receipt != nil {
			v := fb.Receipt.Value
			o.Value = &v
		}
		out := f.outcome(fb.Device, fb.Capability, o)
		if fb.State == runtime.AttemptUnknown {
			// Locked: where the actuator stands is not known.
			out = append(f.unknown(fb.Device, fb.Capability), out...)
		}
		return out
	case runtime.KindApprovalRequested:
		var ap runtime.Approval
		if ev.DecodeBody(&ap) != nil || ap.Kind == "mode_change" || !f.actuator(ap.Device, ap.Capability) {
			return nil
		}
		f.asked[ap.ID] = ap.Device + "/" + ap.Capability
		v := ap.Value
		return f.outcome(ap.Device, ap.Capability, haOutcome{Outcome: "pending approval " + ap.ID, Value: &v,
			By: ap.Principal, Approval: ap.ID, At: ev.At})
	case runtime.KindApprovalAnswered, runtime.KindApprovalExpired:
		id, status, key, err := approvalClosed(ev)
		if asked, ok := f.asked[id]; ok {
			key = asked
		}
		if err != nil || key == "/" {
			return nil
		}
		var o haOutcome
		switch status {
		case runtime.ApprovalPending:
			return nil // one of several approvals; it still waits
		case runtime.ApprovalApproved:
			o.Outcome = "approved " + id + "; acting"
		case runtime.ApprovalDenied:
			o.Outcome = "denied " + id
		default:
			o.Outcome = "approval " + id + " " + string(status)
		}
		delete(f.asked, id)
		o.Approval, o.At = id, ev.At
		device, capability, _ := strings.Cut(key, "/")
		return f.outcome(device, capability, o)
	}
	return nil
}

// approvalClosed reads which approval an answer or an expiry concerns,
// its status after it, and the "device/capability" it asks for (one
// asked before the fold began, such as in the window a start reads
// again, is known by this alone).
func approvalClosed(ev runtime.Event) (string, runtime.ApprovalStatus, string, error) {
	if ev.Kind == runtime.KindApprovalAnswered {
		var a runtime.AnsweredBody
		if err := ev.DecodeBody(&a); err != nil {
			return "", "", "", err
		}
		return a.Approval, a.Status, a.Device + "/" + a.Capability, nil
	}
	var c runtime.ClosedBody
	if err := ev.DecodeBody(&c); err != nil {
		return "", "", "", err
	}
	return c.Approval, c.Status, c.Device + "/" + c.Capability, nil
}
