package runtime

import (
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
)

// Foresight is what the act of a pending approval would meet were it
// approved now: the check the act makes before it operates (a lock, the
// mode's ceiling, the envelope, the interlocks) made in advance, on the
// readings the gateway holds. It reads nothing and journals nothing; the
// act checks again, on fresh readings, when it is approved.
type Foresight struct {
	// Refuse is true when the act would be refused as things stand.
	Refuse bool `json:"refuse"`
	// Why says why it would be refused; "" when it would go ahead.
	Why string `json:"why,omitempty"`
	// Mode is the mode it was judged in.
	Mode string `json:"mode"`
	// Interlock is true when an interlock would refuse it, as last read:
	// the act reads its interlocks again.
	Interlock bool `json:"interlock,omitempty"`
	// Unread names the interlocks that could not be judged in advance
	// (no reading, a reading not good or older than its max_age), each
	// with why: the act reads them again, and they decide then.
	Unread []string `json:"unread,omitempty"`
}

// Foresee judges in advance the act of the pending actuation approval id.
// It returns false for an approval that is not pending or is no
// actuation (a mode change is not judged at an act).
func (e *Engine) Foresee(id string) (Foresight, bool) {
	ap, ok := e.Approval(id)
	if !ok || ap.Status != ApprovalPending || ap.Kind != "actuation" {
		return Foresight{}, false
	}
	mode, expired := e.modeNow()
	if expired {
		mode = governance.ModeSupervised // what the act would find in force
	}
	f := Foresight{Mode: mode}
	ent, ok := e.reg.Lookup(ap.Device)
	if !ok {
		f.Refuse, f.Why = true, "device "+ap.Device+" is not online"
		if err := e.DeviceWhy(ap.Device); err != nil {
			f.Why = "device " + ap.Device + " is offline: " + err.Error()
		}
		return f, true
	}
	c, ok := ent.Device.Capability(ap.Capability)
	if !ok {
		f.Refuse, f.Why = true, "device "+ap.Device+" has no capability "+ap.Capability
		return f, true
	}
	target := ref(ap.Device, ap.Capability)
	if err := e.Healthy(); err != nil {
		f.Refuse, f.Why = true, "the journal cannot witness"
		return f, true
	}
	if a, locked := e.lockedBy(target); locked {
		f.Refuse, f.Why = true, target+" is locked: attempt "+a.ID+" has an unknown effect; an admin must resolve it"
		return f, true
	}
	cur, known := e.facts.get(target)
	if was := ap.Current; was != nil && was.Type != value.TypeNumber && c.ReadBack && known && !cur.Value.IsZero() && !cur.Value.Equal(*was) {
		// The act's select-before-operate refuses consent given from
		// another state.
		f.Refuse, f.Why = true, target+" was "+was.String()+" when this was asked and reads "+cur.Value.String()+" now; ask again"
		return f, true
	}
	cfg := e.conf()
	now := e.now()
	req, _, _ := e.writeRequest(cfg, &ent.Device, c, ap.Principal, ap.Value, true)
	// The act reads every interlock again; one without a fresh good
	// reading now cannot be judged in advance, and is named instead.
	var judged []governance.Condition
	for _, cond := range req.Interlocks {
		fact, ok := e.facts.Fact(cond.Sensor)
		if holds, why := cond.Eval(&e.facts, now); !holds && (!ok || !fact.Good || now.Sub(fact.At) > cond.MaxAgeOrDefault()) {
			f.Unread = append(f.Unread, cond.String()+": "+why)
			continue
		}
		judged = append(judged, cond)
	}
	req.Interlocks = judged
	req.AtAct, req.Mode, req.Now, req.History = true, mode, now, e.history(target, cur.Value)
	if v := governance.Judge(&req, cfg.policy); v.Outcome != governance.Allow {
		f.Refuse, f.Why, f.Interlock = true, v.Why, v.Interlock != ""
	}
	return f, true
}
