package mqtt

import (
	"encoding/json"
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

// haFold turns journal events into the integration's state and outcome
// topics. It is used by one goroutine at a time: the broker's start, then
// the goroutine that follows the journal.
type haFold struct {
	// caps are the announced capabilities by "device/capability".
	caps map[string]devices.Capability
	// asked maps a pending approval's id to its "device/capability".
	asked map[string]string
	// devs are the announced devices.
	devs map[string]bool
}

func newHAFold(devs []devices.Device) *haFold {
	f := &haFold{caps: map[string]devices.Capability{}, asked: map[string]string{}, devs: map[string]bool{}}
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
// and v is of its type.
func (f *haFold) state(device, capability string, v value.Value) []haMessage {
	c, ok := f.caps[device+"/"+capability]
	if !ok || v.Type != c.Type {
		return nil
	}
	return []haMessage{{topic: HAStateTopic(device, capability), payload: haValue(v)}}
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
		switch rd, rc := st.Reading, st.Receipt; {
		case rd != nil && rd.Quality != devices.QualityBad:
			out = append(out, f.state(st.Device, st.Capability, rd.Value)...)
		case rc != nil && rc.Confirmation == runtime.Confirmed:
			out = append(out, f.state(st.Device, st.Capability, rc.Value)...)
		}
		if rc := st.Receipt; rc != nil {
			out = append(out, f.outcome(st.Device, st.Capability, receiptOutcome(rc))...)
		}
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

// apply folds one event, and returns the messages it changes.
func (f *haFold) apply(ev runtime.Event) []haMessage {
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
		return f.state(o.Device, o.Capability, o.Value)
	case runtime.KindActed:
		var rc runtime.Receipt
		if ev.DecodeBody(&rc) != nil {
			return nil
		}
		out := f.outcome(rc.Device, rc.Capability, receiptOutcome(&rc))
		if rc.Confirmation == runtime.Confirmed {
			out = append(f.state(rc.Device, rc.Capability, rc.Value), out...)
		}
		return out
	case runtime.KindReconciled:
		var rb runtime.ReconciledBody
		if ev.DecodeBody(&rb) != nil || rb.Receipt == nil {
			return nil
		}
		out := f.outcome(rb.Device, rb.Capability, receiptOutcome(rb.Receipt))
		if rb.Receipt.Confirmation == runtime.Confirmed {
			out = append(f.state(rb.Device, rb.Capability, rb.Receipt.Value), out...)
		}
		return out
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
		if ev.DecodeBody(&fb) != nil || fb.Attempt == "" {
			return nil // only an act's failure is a command's outcome
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
		return f.outcome(fb.Device, fb.Capability, o)
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
		id, status, _, err := approvalClosed(ev)
		key, ok := f.asked[id]
		if err != nil || !ok {
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

// approvalClosed reads which approval an answer or an expiry concerns and
// its status after it.
func approvalClosed(ev runtime.Event) (string, runtime.ApprovalStatus, string, error) {
	if ev.Kind == runtime.KindApprovalAnswered {
		var a runtime.AnsweredBody
		if err := ev.DecodeBody(&a); err != nil {
			return "", "", "", err
		}
		return a.Approval, a.Status, a.By, nil
	}
	var c runtime.ClosedBody
	if err := ev.DecodeBody(&c); err != nil {
		return "", "", "", err
	}
	return c.Approval, c.Status, "", nil
}
