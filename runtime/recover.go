package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shadowgate/shadowgate/value"
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
	e.decide.Lock()
	defer e.decide.Unlock()
	e.mu.Lock()
	e.bus.publish(snap.LastSeq) // the journal may already have told the bus of newer events
	e.restoredSeq = snap.LastSeq
	bindInitial := false
	if snap.Mode == nil || e.conf().modes[snap.Mode.Name].Name == "" {
		// The configured mode is in force: if it is bound in time, the
		// journal keeps its end, or every restart would re-arm it.
		bindInitial = !e.mode.Expires.IsZero()
	}
	if snap.Mode != nil {
		if _, ok := e.conf().modes[snap.Mode.Name]; ok {
			e.mode = *snap.Mode
		} else {
			e.log.Warn("the journal's mode is no longer configured; starting in the configured mode",
				"journal_mode", snap.Mode.Name, "mode", e.mode.Name)
		}
	}
	for _, r := range snap.Rules {
		e.rules[r.Rule.ID] = r
	}
	e.alarms.mu.Lock()
	for _, a := range snap.Alarms {
		e.alarms.m[a.ID] = &a
	}
	e.alarms.mu.Unlock()
	e.restoredAt = snap.LastAt
	for _, st := range snap.States {
		if st.Reading != nil {
			e.facts.put(ref(st.Device, st.Capability), *st.Reading)
		}
		if st.Receipt != nil {
			e.receipts[ref(st.Device, st.Capability)] = *st.Receipt
		}
	}
	clockBehind := e.now().Before(snap.LastAt)
	for _, ap := range snap.Approvals {
		p := &pending{rec: ap, decided: make(chan struct{})}
		e.approvals[ap.ID] = p
		if ap.Kind == "actuation" {
			e.byTarget[ref(ap.Device, ap.Capability)] = ap.ID
		}
	}
	initial := e.mode
	e.mu.Unlock()
	if bindInitial {
		rec := initial
		_, _ = e.commit(ctx, Sync, Event{Kind: KindModeChanged}, ModeChangedBody{To: rec.Name, By: rec.By,
			Reason: "the configured mode, bound in time from this start", Expires: rec.Expires}, func(en *Entry) { en.Mode = &rec })
	}
	for _, a := range snap.Open {
		e.recoverAttempt(ctx, a)
	}
	if clockBehind {
		// The clock is behind the journal (a board without a real-time
		// clock, before it has the time): how long the gateway was down
		// cannot be told, so every dead man runs out now, those armed
		// just now for acts cut short included. Fail closed.
		now, n := e.now(), 0
		e.mu.Lock()
		for k, rc := range e.receipts {
			if !rc.Until.IsZero() && rc.Until.After(now) {
				rc.Until, n = now, n+1
				e.receipts[k] = rc
			}
		}
		e.mu.Unlock()
		e.log.Warn("the clock is behind the journal's newest event; dead men that were running run out now",
			"now", now, "journal_last", snap.LastAt, "ttls", n)
	}
	e.restoredLocks = e.Locks()
	var resume []*run
	parked := map[string]bool{}
	for _, rr := range snap.Ended {
		e.fileEnded(rr)
	}
	for _, rr := range snap.Runs {
		if rr.Status != RunParked {
			e.fileEnded(e.endRun(ctx, rr, "interrupted: the gateway stopped during step "+strconv.Itoa(rr.Step)+"; a run is not resumed half way"))
			continue
		}
		p, ok := e.pendingByID(rr.Approval)
		if !ok || e.approvalRecord(p).Run != rr.ID {
			e.fileEnded(e.endRun(ctx, rr, "the gateway stopped after approval "+rr.Approval+" was answered and before the step acted; it is not carried out after a restart"))
			continue
		}
		r, why := e.resumeRun(rr, e.approvalRecord(p))
		if r == nil {
			e.fileEnded(e.endRun(ctx, rr, why))
			continue
		}
		resume = append(resume, r)
		parked[rr.Approval] = true
	}
	for _, ap := range snap.Approvals {
		if p, ok := e.pendingByID(ap.ID); ok && ap.Kind == "actuation" && !parked[ap.ID] {
			e.closeDecided(ctx, p, ApprovalSuperseded, KindApprovalAnswered, "its run did not survive the restart")
		}
	}
	if snap.LastSeq > 0 {
		// Said whenever there was a journal to restore from: what waits
		// for a read-back (the locks) is known from this line.
		e.log.Info("restored from the journal", "pending_approvals", len(snap.Approvals), "resumed_runs", len(resume),
			"locked_actuators", len(e.Locks()), "last_seq", snap.LastSeq)
	}
	return resume, nil
}

// recoverAttempt settles one attempt a stop cut short. e.decide must be held.
func (e *Engine) recoverAttempt(ctx context.Context, a Attempt) {
	from := a.State
	target := ref(a.Device, a.Capability)
	switch from {
	case AttemptStaged, AttemptAuthorized:
		a.State, a.Why = AttemptRefused, "abandoned before execution: the gateway stopped while it was "+string(from)
	case AttemptExecuting:
		a.State, a.Why = AttemptUnknown, "the gateway stopped after it journaled the act as executing and before it journaled the driver's answer; whether the act took effect is unknown"
	case AttemptUnknown:
		// Still unresolved from an earlier start.
		if prev, superseded := e.lockTarget(target, a); superseded {
			e.supersedeLocked(ctx, prev, "a later act on "+target+", attempt "+a.ID+", is of unknown outcome too and holds the lock now")
		}
		return
	default:
		return
	}
	executing := a.Updated
	a.Updated = e.now()
	rec := a
	// An act cut short while executing may have taken effect: its dead
	// man is armed from when it was sent, and kept as the actuator's
	// state, so that it is enforced: fail closed.
	var armed *Receipt
	if a.State == AttemptUnknown {
		rc := Receipt{Key: a.Key, Attempt: a.ID, Device: a.Device, Capability: a.Capability, Value: a.Value,
			Driver: "unknown: the gateway stopped before the driver's answer was journaled", Confirmation: NotChecked, At: a.Updated}
		if e.armTTL(&rc, executing); !rc.Until.IsZero() {
			armed = &rc
		}
	}
	_, err := e.commit(ctx, Sync, Event{Kind: KindRecovered, Run: a.Run, Step: a.Step, Device: a.Device}, RecoveredBody{
		Attempt: a.ID, Key: a.Key, From: from, To: a.State, Why: a.Why, Device: a.Device, Capability: a.Capability,
		Value: a.Value,
	}, func(en *Entry) {
		en.Attempt = &rec
		if armed != nil {
			en.State = &StateRecord{Device: a.Device, Capability: a.Capability, Receipt: armed}
		}
	})
	if armed != nil {
		e.setReceipt(target, *armed)
	}
	if a.State != AttemptUnknown {
		return
	}
	// Locked even if the journal could not record it: fail closed.
	if prev, superseded := e.lockTarget(target, a); superseded {
		e.supersedeLocked(ctx, prev, "a later act on "+target+", attempt "+a.ID+", is of unknown outcome too and holds the lock now")
	}
	if err == nil {
		e.raise(ctx, AlarmLocked, a.Device, a.Capability, target+" is locked: attempt "+a.ID+" was executing when the gateway stopped", a.ID)
	}
	e.log.Warn("actuator locked: an actuation was cut short", "device_id", a.Device, "capability", a.Capability, "attempt", a.ID)
}

// resumeRun rebuilds a parked run to wait for its approval again, or
// says why it cannot.
func (e *Engine) resumeRun(rr RunRecord, ap Approval) (*run, string) {
	var p *Plan
	if rr.Plan == "command" {
		p = &Plan{Name: "command", Lease: e.opts.CommandLease,
			Steps: []PlanStep{{Op: OpWrite, Device: ap.Device, Capability: ap.Capability, Value: ap.Value}}}
	} else if p = e.conf().plans[rr.Plan]; p == nil {
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
	r.ctx, r.cancel = context.WithCancelCause(e.life)
	close(r.firstDone)
	if rr.Plan == "command" && rr.RequestID != "" {
		r.requestKey = rr.Principal + "/" + rr.RequestID
	} else if rr.RequestID != "" {
		r.requestKey = rr.Principal + "/run/" + rr.RequestID
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs[rr.ID] = r
	if r.requestKey != "" {
		e.requests[r.requestKey] = r
	}
	return r, ""
}

// endRun records the end of a run a stop cut short, and returns its
// record. e.decide must be held.
func (e *Engine) endRun(ctx context.Context, rr RunRecord, why string) RunRecord {
	rr.Status, rr.End, rr.Why, rr.EndedAt = RunEnded, EndFailed, why, e.now()
	rec := rr
	_, _ = e.commit(ctx, Sync, Event{Kind: KindEnded, Run: rr.ID}, endedBody(&rr), func(en *Entry) { en.Run = &rec })
	return rr
}

// fileEnded files an ended plan run under the request id that started it,
// so that the same start sent again after a restart is answered with that
// run, and starts nothing: its writes were made, or were cut short, once.
// A single command needs none: its write's attempt answers a repeat.
func (e *Engine) fileEnded(rr RunRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fileEndedLocked(rr)
}

// maxStartedBy bounds the plan starts remembered by their record alone:
// a start older than the newest maxStartedBy of them, or than the
// journal's keep_records, is a new start.
const maxStartedBy = 100_000

// fileEndedLocked is fileEnded with e.mu held.
func (e *Engine) fileEndedLocked(rr RunRecord) {
	if rr.RequestID == "" || rr.Plan == CommandPlan {
		return
	}
	key := rr.Principal + "/run/" + rr.RequestID
	if _, ok := e.requests[key]; ok {
		return
	}
	r := &run{requestID: rr.RequestID, rec: rr, first: make(chan Observation, 1), firstDone: make(chan struct{}), done: make(chan struct{}),
		requestKey: key, sentFirst: true}
	close(r.firstDone)
	close(r.done)
	e.requests[key] = r
	e.startedBy = append(e.startedBy, key)
	if len(e.startedBy) > maxStartedBy {
		old := e.startedBy[0]
		e.startedBy[0] = ""
		e.startedBy = e.startedBy[1:]
		if p := e.requests[old]; p != nil && p.plan == nil {
			delete(e.requests, old)
		}
	}
}

// reconcile tries one read-back for every locked actuator. Where it equals
// the commanded value the attempt is reconciled and the lock lifts;
// otherwise the lock stays until an admin resolves it.
func (e *Engine) reconcile(ctx context.Context) {
	for _, a := range e.restoredLocks {
		// Only the locks the journal held at start: one taken since was
		// read back by the act that took it.
		if cur, ok := e.lockOf(a); !ok || cur.ID != a.ID {
			continue
		}
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
		rc := Receipt{Key: a.Key, Attempt: a.ID, Device: a.Device, Capability: a.Capability, Value: a.Value,
			Driver: "unknown", Confirmation: Confirmed, Observed: &got, At: e.now(),
			Detail: "the driver did not answer; the read-back when the gateway started shows the act took effect"}
		if prev, ok := e.receipt(ref(a.Device, a.Capability)); ok && prev.Attempt == a.ID {
			rc.Until = prev.Until // armed when its outcome became unknown
		} else {
			e.armTTL(&rc, a.Updated)
		}
		if a.Receipt != nil && a.Receipt.Driver != "" {
			rc.Driver = a.Receipt.Driver
		}
		settled, err := e.settle(ctx, a, "gateway", "the read-back "+got.String()+" equals the commanded value", &got, &rc)
		if !settled {
			continue
		}
		if err == nil {
			e.log.Info("actuator unlocked: the read-back reconciled the attempt", "device_id", a.Device, "capability", a.Capability, "attempt", a.ID)
		}
	}
}

func (e *Engine) stayLocked(ctx context.Context, a Attempt, why string) {
	why += "; " + ref(a.Device, a.Capability) + " stays locked until an admin resolves attempt " + a.ID
	e.raise(ctx, AlarmLocked, a.Device, a.Capability, why, a.ID)
	e.log.Warn("actuator stays locked", "device_id", a.Device, "capability", a.Capability, "attempt", a.ID, "why", why)
}

// Found is what a person found on site when resolving an attempt whose
// effect was unknown.
type Found string

// What a person may find.
const (
	// FoundActed: the act took effect; the commanded value is taken as the
	// actuator's state.
	FoundActed Found = "acted"
	// FoundNotActed: the act did not happen; the actuator's state stays
	// what it was before.
	FoundNotActed Found = "not_acted"
	// FoundSuperseded: a later act settled where the actuator stands (it
	// was confirmed by the world, or its own outcome is unknown and it
	// holds the lock now): whether this one took effect is moot. The
	// gateway finds it; a person answers acted or not_acted.
	FoundSuperseded Found = "superseded"
)

// ErrFoundRequired is returned when a resolution does not say whether the
// act took effect.
var ErrFoundRequired = errors.New(`a resolution must say what was found: "acted" or "not_acted"`)

// settle moves a locked attempt to reconciled after a read-back that
// shows observed, the commanded value, and lifts the lock; receipt, the
// act's receipt as the read-back confirmed it, becomes the actuator's
// state in the same commit. It reports
// false when the attempt no longer holds the lock (an admin resolved it
// meanwhile).
func (e *Engine) settle(ctx context.Context, a Attempt, by, why string, observed *value.Value, receipt *Receipt) (bool, error) {
	e.decide.Lock()
	defer e.decide.Unlock()
	if cur, ok := e.lockOf(a); !ok || cur.ID != a.ID {
		return false, nil
	}
	return true, e.settleFound(ctx, a, by, why, FoundActed, observed, receipt)
}

// lockOf returns the attempt that holds a's actuator locked, if any.
func (e *Engine) lockOf(a Attempt) (Attempt, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, ok := e.locked[ref(a.Device, a.Capability)]
	return cur, ok
}

// settleFound moves a locked attempt to reconciled and lifts the lock,
// recording what was found. When state is set, the actuator's state
// becomes that receipt. The lock lifts only once this is journaled.
// e.decide must be held.
func (e *Engine) settleFound(ctx context.Context, a Attempt, by, why string, found Found, observed *value.Value, state *Receipt) error {
	a.State, a.Why, a.Updated = AttemptReconciled, why, e.now()
	rec := a
	if _, err := e.commit(ctx, Sync, Event{Kind: KindReconciled, Run: a.Run, Step: a.Step, Device: a.Device}, ReconciledBody{
		Attempt: a.ID, Key: a.Key, Device: a.Device, Capability: a.Capability, Value: a.Value,
		Found: found, Observed: observed, Receipt: state, By: by, Why: why,
	}, func(en *Entry) {
		en.Attempt = &rec
		if state != nil {
			en.State = &StateRecord{Device: a.Device, Capability: a.Capability, Receipt: state}
		}
	}); err != nil {
		return err
	}
	target := ref(a.Device, a.Capability)
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if cur, ok := e.locked[target]; ok && cur.ID == a.ID {
			delete(e.locked, target)
		}
		if state != nil {
			e.receipts[target] = *state
		}
	}()
	if _, still := e.lockedBy(target); !still {
		e.clearAlarm(ctx, AlarmLocked, a.Device, a.Capability, "attempt "+a.ID+" was reconciled by "+by+": "+why)
	}
	return nil
}

// Resolution is an admin's word on an attempt whose effect is unknown.
type Resolution struct {
	// Attempt is the attempt's id.
	Attempt string
	// By names the person: "console:bob".
	By    string
	Admin bool
	// Found says whether the act took effect; it is required.
	Found Found
	// Note says how the person knows; it is required.
	Note string
}

// Resolve settles an attempt whose effect is unknown, on an admin's word,
// and lifts the lock on its actuator. The journal's reconciled event and
// the attempt record say what the admin found and how they know, with
// their name: under FoundActed the commanded value becomes the actuator's
// state (a receipt confirmed by that person), under FoundNotActed the
// state stays what it was. Nothing is retried. It returns ErrNotPermitted
// for a non-admin, ErrFoundRequired when Found is neither, and
// ErrAttemptNotLocked when the attempt holds no lock.
func (e *Engine) Resolve(ctx context.Context, r Resolution) (Attempt, error) {
	if !r.Admin {
		return Attempt{}, fmt.Errorf("resolving attempt %s needs an admin: %w", r.Attempt, ErrNotPermitted)
	}
	if r.Found != FoundActed && r.Found != FoundNotActed {
		return Attempt{}, fmt.Errorf("resolving attempt %s: %w", r.Attempt, ErrFoundRequired)
	}
	if strings.TrimSpace(r.Note) == "" {
		return Attempt{}, errors.New("resolving attempt " + r.Attempt + " needs a note saying what was found")
	}
	return e.resolveAttempt(ctx, r.Attempt, r.By, r.Found, r.Note)
}

func (e *Engine) resolveAttempt(ctx context.Context, id, by string, found Found, note string) (Attempt, error) {
	e.decide.Lock()
	defer e.decide.Unlock()
	a, ok := e.lockedAttempt(id)
	if !ok {
		return Attempt{}, fmt.Errorf("attempt %s: %w", id, ErrAttemptNotLocked)
	}
	why := "resolved by " + by + ": " + note
	var observed *value.Value
	var state *Receipt
	switch found {
	case FoundActed:
		why = "resolved by " + by + ", who found that it acted: " + note
		v := a.Value
		observed = &v
		state = &Receipt{Key: a.Key, Attempt: a.ID, Device: a.Device, Capability: a.Capability, Value: a.Value,
			Driver: "unknown", Confirmation: Confirmed, Observed: &v, At: e.now(),
			Detail: "the driver did not answer; " + by + " found that it acted: " + note}
		if a.Receipt != nil && a.Receipt.Driver != "" {
			state.Driver = a.Receipt.Driver
		}
		if prev, ok := e.receipt(ref(a.Device, a.Capability)); ok && prev.Attempt == a.ID {
			state.Until = prev.Until // armed when its outcome became unknown
		} else {
			e.armTTL(state, a.Updated)
		}
	case FoundNotActed:
		why = "resolved by " + by + ", who found that it did not act: " + note
	}
	if err := e.settleFound(ctx, a, by, why, found, observed, state); err != nil {
		return a, err
	}
	if found == FoundActed {
		e.recordChange(ref(a.Device, a.Capability)) // a change for the envelope's rate and dwell
	}
	a.State, a.Why = AttemptReconciled, why
	return a, nil
}

// lockedAttempt returns the attempt with the given id if it holds a lock.
func (e *Engine) lockedAttempt(id string) (Attempt, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.locked {
		if a.ID == id {
			return a, true
		}
	}
	return Attempt{}, false
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
	out := func() []Attempt {
		e.mu.Lock()
		defer e.mu.Unlock()
		out := make([]Attempt, 0, len(e.locked))
		for _, a := range e.locked {
			out = append(out, a)
		}
		return out
	}()
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
