package runtime

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
)

// This file is the part of the engine's API that the surfaces (MQTT, the
// uplink, HTTP) use beyond commands and answers.

// KindLink records a change of a surface's link, such as the uplink
// connecting, losing its broker, or dropping telemetry.
const KindLink Kind = "link"

// Capability returns an online device and one of its capabilities.
func (e *Engine) Capability(device, capability string) (devices.Device, devices.Capability, bool) {
	ent, ok := e.reg.Lookup(device)
	if !ok {
		return devices.Device{}, devices.Capability{}, false
	}
	c, ok := ent.Device.Capability(capability)
	if !ok {
		return ent.Device, devices.Capability{}, false
	}
	return ent.Device, *c, true
}

// PlanNames returns the configured plans, sorted.
func (e *Engine) PlanNames() []string {
	out := make([]string, 0, len(e.conf().plans))
	for name := range e.conf().plans {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Outcome waits until the run has ended and returns the observation that
// ended it (for a command: acted, refused or failed) with the run's record.
func (e *Engine) Outcome(ctx context.Context, id string) (Observation, RunRecord, error) {
	r, ok := e.runByID(id)
	if !ok {
		return Observation{}, RunRecord{}, errors.New("run " + id + " not found")
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return Observation{}, r.record(), ctx.Err()
	}
	obs, rec := r.outcome()
	return obs, rec, nil
}

// States returns the last known state of every capability: its latest
// reading and, for an actuator, its latest receipt. Both survive restarts.
func (e *Engine) States() []StateRecord {
	byRef := map[string]*StateRecord{}
	func() {
		e.facts.mu.RLock()
		defer e.facts.mu.RUnlock()
		for k, rd := range e.facts.m {
			dev, capability := splitRef(k)
			r := rd
			byRef[k] = &StateRecord{Device: dev, Capability: capability, Reading: &r}
		}
	}()
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for k, rc := range e.receipts {
			st, ok := byRef[k]
			if !ok {
				dev, capability := splitRef(k)
				st = &StateRecord{Device: dev, Capability: capability}
				byRef[k] = st
			}
			c := rc
			st.Receipt = &c
		}
	}()
	out := make([]StateRecord, 0, len(byRef))
	for _, st := range byRef {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b StateRecord) int {
		return strings.Compare(ref(a.Device, a.Capability), ref(b.Device, b.Capability))
	})
	return out
}

// Note journals an event of a surface (KindLink, KindLogin) without
// waiting for it to be durable, but promptly: they come at the pace of
// people and links, and are followed on MQTT and the uplink.
func (e *Engine) Note(ctx context.Context, kind Kind, device string, body any) (Event, error) {
	return e.commit(ctx, Prompt, Event{Kind: kind, Device: device}, body, nil)
}

// KindLogin records a login, a failed login or a logout on the console or
// the API. It never carries a password.
const KindLogin Kind = "login"

// Attempt returns the journal's record of an actuation by its idempotency key.
func (e *Engine) Attempt(ctx context.Context, key string) (Attempt, bool, error) {
	return e.j.Attempt(ctx, key)
}

// RecentApprovals returns up to n approvals this engine has seen closed
// (answered, expired or superseded), newest first.
func (e *Engine) RecentApprovals(n int) []Approval {
	out := e.approvalsWhere(func(s ApprovalStatus) bool { return s != ApprovalPending })
	slices.SortFunc(out, func(a, b Approval) int { return b.RequestedAt.Compare(a.RequestedAt) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// Interlocks returns the conditions an actuator's writes depend on.
func (e *Engine) Interlocks(device, capability string) []governance.Condition {
	if p := e.conf().policies[ref(device, capability)]; p != nil {
		return slices.Clone(p.Interlocks)
	}
	return nil
}

// Governed returns, sorted, every "device.capability" the configuration
// governs, whether or not its device is online.
func (e *Engine) Governed() []string {
	return slices.Sorted(maps.Keys(e.conf().policies))
}

// Policy returns a copy of the governance of "device.capability", and
// false when the configuration gives it none.
func (e *Engine) Policy(device, capability string) (CapPolicy, bool) {
	p := e.conf().policies[ref(device, capability)]
	if p == nil {
		return CapPolicy{}, false
	}
	out := *p
	out.Interlocks, out.While = slices.Clone(p.Interlocks), slices.Clone(p.While)
	if p.Envelope != nil {
		env := *p.Envelope
		env.Allowed = slices.Clone(env.Allowed)
		out.Envelope = &env
	}
	return out, true
}

// ObservesItself reports whether the receipt of an act on capability c,
// governed by p (nil: no policy), observes the actuator itself, its
// read-back, rather than another sensor that confirms it: when its
// read-back confirms it, or, with no confirmation configured, the act
// reads it back.
func ObservesItself(c *devices.Capability, p *CapPolicy) bool {
	return c.ReadBack && (p == nil || p.Confirm == nil || p.Confirm.ReadBack)
}

// ObservesItself is the package's ObservesItself for "device.capability"
// of a device online, false for one that is not.
func (e *Engine) ObservesItself(device, capability string) bool {
	ent, ok := e.reg.Lookup(device)
	if !ok {
		return false
	}
	c, ok := ent.Device.Capability(capability)
	if !ok {
		return false
	}
	return ObservesItself(c, e.conf().policies[ref(device, capability)])
}

// Facts returns the latest readings as the judge sees them.
func (e *Engine) Facts() governance.Facts { return &e.facts }

// Reading returns the latest reading of "device.capability".
func (e *Engine) Reading(sensor string) (devices.Reading, bool) {
	return e.facts.get(sensor)
}

// Devices returns the devices online, sorted by id.
func (e *Engine) Devices() []devices.Device {
	return e.reg.Devices()
}

// Plans returns the configured plans, sorted by name.
func (e *Engine) Plans() []Plan {
	out := make([]Plan, 0, len(e.conf().plans))
	for _, p := range e.conf().plans {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Plan) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Parked returns the runs of an origin that wait for an approval, with
// their ReplyTo, so that a surface can answer them once they end, also
// after a restart.
func (e *Engine) Parked(origin string) []RunRecord {
	out := func() []RunRecord {
		e.mu.Lock()
		defer e.mu.Unlock()
		var out []RunRecord
		for _, r := range e.runs {
			if rec := r.record(); rec.Origin == origin && rec.Status == RunParked {
				out = append(out, rec)
			}
		}
		return out
	}()
	sortRuns(out)
	return out
}

// KindCheckpoint records a signed checkpoint of the journal: a C2SP signed
// note over the chain's head, made with a key kept outside the journal's
// file. Surfaces publish the newest one (MQTT retained on checkpoints, the
// uplink), so a copy held elsewhere can later prove the journal was not
// re-chained.
const KindCheckpoint Kind = "checkpoint"

// CheckpointBody is the body of a KindCheckpoint event.
type CheckpointBody struct {
	// Note is the signed note, as text: origin, tree size (the sequence of
	// the newest event covered), the base64 head hash, a blank line, and
	// the signature lines.
	Note string `json:"note"`
	// Size and Hash repeat what the note signs: the sequence of the newest
	// event covered and its hash, in hex.
	Size uint64 `json:"size"`
	Hash string `json:"hash"`
	// Key names the signing key (the note's key name and hash).
	Key string `json:"key"`
}

// DriverHealth reports the link state of every driver, for /readyz and
// the Devices page. Drivers that cannot tell are listed with Reports false.
func (e *Engine) DriverHealth(ctx context.Context) []devices.DriverHealth {
	return e.reg.Health(ctx)
}
