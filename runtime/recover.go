package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shadowgate/shadowgate/devices"
)

// ErrAttemptNotLocked is returned when resolving an attempt that is not
// holding an actuator locked.
var ErrAttemptNotLocked = errors.New("attempt is not locked")

// restore carries on where the last start stopped. It folds the mode, the
// rules and the last readings back in; settles attempts cut short (staged
// or authorized: refused; executing: unknown, locking its actuator); puts
// pending approvals back with their expiry; and returns the parked runs to
// resume. A run that was running is ended, not resumed: half a plan is not
// carried on blindly. Nothing is retried.
func (e *Engine) restore(ctx context.Context) ([]*run, error) {
	snap, err := e.j.Load(ctx)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.bus.last = snap.LastSeq
	e.restoredSeq = snap.LastSeq
	if snap.Mode != nil {
		if _, ok := e.modes[snap.Mode.Name]; ok {
			e.mode = *snap.Mode
		} else {
			e.log.Warn("the journal's mode is no longer configured; starting in the configured mode",
				"journal_mode", snap.Mode.Name, "mode", e.mode.Name)
		}
	}
	for _, r := range snap.Rules {
		e.rules[r.Rule.ID] = r
	}
	for _, st := range snap.States {
		if st.Reading != nil {
			e.facts.put(ref(st.Device, st.Capability), *st.Reading)
		}
		if st.Receipt != nil {
			e.receipts[ref(st.Device, st.Capability)] = *st.Receipt
		}
	}
	for _, a := range snap.Open {
		e.recoverAttemptLocked(ctx, a)
	}
	for _, ap := range snap.Approvals {
		p := &pending{rec: ap, decided: make(chan struct{})}
		e.approvals[ap.ID] = p
		if ap.Kind == "actuation" {
			e.byTarget[ref(ap.Device, ap.Capability)] = ap.ID
		}
	}
	var resume []*run
	parked := map[string]bool{}
	for _, rr := range snap.Runs {
		if rr.Status == RunParked {
			if p, ok := e.approvals[rr.Approval]; ok && p.rec.Run == rr.ID {
				if r, why := e.resumeRunLocked(rr, p.rec); r != nil {
					resume = append(resume, r)
					parked[rr.Approval] = true
					continue
				} else {
					e.endRunLocked(ctx, rr, why)
					continue
				}
			}
			e.endRunLocked(ctx, rr, "the gateway stopped after approval "+rr.Approval+" was answered and before the step acted; it is not carried out after a restart")
			continue
		}
		e.endRunLocked(ctx, rr, "interrupted: the gateway stopped during step "+strconv.Itoa(rr.Step)+"; a run is not resumed half way")
	}
	for _, p := range e.approvals {
		if p.rec.Kind == "actuation" && !parked[p.rec.ID] {
			e.closeLocked(ctx, p, ApprovalSuperseded, KindApprovalAnswered, "its run did not survive the restart")
		}
	}
	if n := len(resume); n > 0 || len(snap.Approvals) > 0 {
		e.log.Info("restored from the journal", "pending_approvals", len(snap.Approvals), "resumed_runs", n,
			"locked_actuators", len(e.locked), "last_seq", snap.LastSeq)
	}
	return resume, nil
}

// recoverAttemptLocked settles one attempt a stop cut short. e.mu must be held.
func (e *Engine) recoverAttemptLocked(ctx context.Context, a Attempt) {
	from := a.State
	target := ref(a.Device, a.Capability)
	switch from {
	case AttemptStaged, AttemptAuthorized:
		a.State, a.Why = AttemptRefused, "abandoned before execution: the gateway stopped while it was "+string(from)
	case AttemptExecuting:
		a.State, a.Why = AttemptUnknown, "the gateway stopped while the driver was writing; whether the act took effect is unknown"
	case AttemptUnknown:
		e.locked[target] = a // still unresolved from an earlier start
		return
	default:
		return
	}
	a.Updated = e.now()
	rec := a
	_, err := e.commit(ctx, Sync, Event{Kind: KindRecovered, Run: a.Run, Step: a.Step, Device: a.Device}, map[string]any{
		"attempt": a.ID, "key": a.Key, "from": from, "to": a.State, "why": a.Why, "device": a.Device, "capability": a.Capability,
		"value": a.Value,
	}, func(en *Entry) { en.Attempt = &rec })
	if a.State != AttemptUnknown {
		return
	}
	// Locked even if the journal could not record it: fail closed.
	e.locked[target] = a
	if err == nil {
		_, _ = e.commit(ctx, Sync, Event{Kind: KindAlarm, Run: a.Run, Step: a.Step, Device: a.Device}, map[string]any{
			"device": a.Device, "capability": a.Capability, "attempt": a.ID,
			"why": target + " is locked: attempt " + a.ID + " was executing when the gateway stopped",
		}, nil)
	}
	e.log.Warn("actuator locked: an actuation was cut short", "device_id", a.Device, "capability", a.Capability, "attempt", a.ID)
}

// resumeRunLocked rebuilds a parked run to wait for its approval again, or
// says why it cannot. e.mu must be held.
func (e *Engine) resumeRunLocked(rr RunRecord, ap Approval) (*run, string) {
	var p *Plan
	if rr.Plan == "command" {
		p = &Plan{Name: "command", Lease: e.opts.CommandLease,
			Steps: []PlanStep{{Op: OpWrite, Device: ap.Device, Capability: ap.Capability, Value: ap.Value}}}
	} else if p = e.plans[rr.Plan]; p == nil {
		return nil, "plan " + rr.Plan + " is no longer configured"
	}
	if rr.Step < 1 || rr.Step > len(p.Steps) {
		return nil, "plan " + rr.Plan + " has no step " + strconv.Itoa(rr.Step) + " any more"
	}
	if s := p.Steps[rr.Step-1]; s.Op != OpWrite || s.Device != ap.Device || s.Capability != ap.Capability || !s.Value.Equal(ap.Value) {
		return nil, "plan " + rr.Plan + " step " + strconv.Itoa(rr.Step) + " changed since the approval was asked"
	}
	rr.Status = RunParked
	r := &run{plan: p, requestID: rr.RequestID, first: make(chan Observation, 1), firstDone: make(chan struct{}),
		done: make(chan struct{}), rec: rr, parked: ap.ID, sentFirst: true,
		last: Observation{Kind: ApprovalRequest, Run: rr.ID, Step: rr.Step, Device: ap.Device, Capability: ap.Capability, Why: ap.Why, Approval: &ap}}
	close(r.firstDone)
	e.runs[rr.ID] = r
	if rr.Plan == "command" && rr.RequestID != "" {
		r.requestKey = rr.Principal + "/" + rr.RequestID
	} else if rr.RequestID != "" {
		r.requestKey = rr.Principal + "/run/" + rr.RequestID
	}
	if r.requestKey != "" {
		e.requests[r.requestKey] = r
	}
	return r, ""
}

// endRunLocked records the end of a run a stop cut short. e.mu must be held.
func (e *Engine) endRunLocked(ctx context.Context, rr RunRecord, why string) {
	rr.Status, rr.End, rr.Why, rr.EndedAt = RunEnded, EndFailed, why, e.now()
	rec := rr
	_, _ = e.commit(ctx, Sync, Event{Kind: KindEnded, Run: rr.ID}, map[string]any{
		"end": rr.End, "why": why, "steps": rr.Steps, "actuations": rr.Actuations, "spent": rr.Spent.String(),
	}, func(en *Entry) { en.Run = &rec })
}

// reconcile tries one read-back for every locked actuator. Where it equals
// the commanded value the attempt is reconciled and the lock lifts;
// otherwise the lock stays until an admin resolves it.
func (e *Engine) reconcile(ctx context.Context) {
	for _, a := range e.Locks() {
		target := ref(a.Device, a.Capability)
		obs := e.read(ctx, nil, 0, "gateway:reconcile", a.Device, a.Capability)
		if obs.Kind != Completed || obs.Reading == nil {
			e.stayLocked(ctx, a, "the read-back failed: "+obs.Why)
			continue
		}
		got := obs.Reading.Value
		if !got.Equal(a.Value) {
			e.stayLocked(ctx, a, "the read-back is "+got.String()+", not the commanded "+a.Value.String())
			continue
		}
		e.mu.Lock()
		if cur, ok := e.locked[target]; !ok || cur.ID != a.ID {
			e.mu.Unlock()
			continue
		}
		err := e.settleLocked(ctx, a, "gateway", "the read-back "+got.String()+" equals the commanded value", &got)
		e.mu.Unlock()
		if err == nil {
			e.log.Info("actuator unlocked: the read-back reconciled the attempt", "device_id", a.Device, "capability", a.Capability, "attempt", a.ID)
		}
	}
}

func (e *Engine) stayLocked(ctx context.Context, a Attempt, why string) {
	why += "; " + ref(a.Device, a.Capability) + " stays locked until an admin resolves attempt " + a.ID
	_, _ = e.commit(ctx, Sync, Event{Kind: KindAlarm, Run: a.Run, Step: a.Step, Device: a.Device}, map[string]any{
		"device": a.Device, "capability": a.Capability, "attempt": a.ID, "why": why,
	}, nil)
	e.log.Warn("actuator stays locked", "device_id", a.Device, "capability", a.Capability, "attempt", a.ID, "why", why)
}

// settleLocked moves a locked attempt to reconciled and lifts the lock.
// e.mu must be held.
func (e *Engine) settleLocked(ctx context.Context, a Attempt, by, why string, observed *devices.Value) error {
	a.State, a.Why, a.Updated = AttemptReconciled, why, e.now()
	rec := a
	if _, err := e.commit(ctx, Sync, Event{Kind: KindReconciled, Run: a.Run, Step: a.Step, Device: a.Device}, map[string]any{
		"attempt": a.ID, "key": a.Key, "device": a.Device, "capability": a.Capability, "value": a.Value,
		"observed": observed, "by": by, "why": why,
	}, func(en *Entry) { en.Attempt = &rec }); err != nil {
		return err
	}
	delete(e.locked, ref(a.Device, a.Capability))
	return nil
}

// ResolveAttempt settles an attempt whose effect is unknown, on an admin's
// word, and lifts the lock on its actuator. The note says what the admin
// found; it goes in the journal with their name. Nothing is retried.
func (e *Engine) ResolveAttempt(ctx context.Context, id, by string, admin bool, note string) (Attempt, error) {
	if !admin {
		return Attempt{}, fmt.Errorf("resolving attempt %s needs an admin: %w", id, ErrNotPermitted)
	}
	if strings.TrimSpace(note) == "" {
		return Attempt{}, errors.New("resolving attempt " + id + " needs a note saying what was found")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.locked {
		if a.ID == id {
			if err := e.settleLocked(ctx, a, by, "resolved by "+by+": "+note, nil); err != nil {
				return a, err
			}
			a.State = AttemptReconciled
			return a, nil
		}
	}
	return Attempt{}, fmt.Errorf("attempt %s: %w", id, ErrAttemptNotLocked)
}

// RestoredSeq returns the sequence of the newest event the journal held
// when the engine started: what came after is this start's.
func (e *Engine) RestoredSeq() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.restoredSeq
}

// Locks returns the attempts that hold an actuator locked, oldest first.
func (e *Engine) Locks() []Attempt {
	e.mu.Lock()
	out := make([]Attempt, 0, len(e.locked))
	for _, a := range e.locked {
		out = append(out, a)
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b Attempt) int { return a.Updated.Compare(b.Updated) })
	return out
}

// lockedBy returns the attempt locking target, if any.
func (e *Engine) lockedBy(target string) (Attempt, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.locked[target]
	return a, ok
}
