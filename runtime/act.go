package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/internal/failpoint"
	"github.com/shadowgate/shadowgate/value"
)

// act carries an authorized write through the attempt's states. The
// executing record is durable before the driver is called.
func (e *Engine) act(ctx context.Context, w *writeReq, base Observation, ent devices.Entry, c *devices.Capability,
	pol *CapPolicy, dg, authz string) Observation {
	a := Attempt{Key: w.key, ID: newID("act"), Run: base.Run, Step: w.step, Device: w.device, Capability: w.capability,
		Value: w.value, Principal: w.principal, Reason: w.reason, Digest: dg, State: AttemptStaged, Updated: e.now()}
	// step moves the attempt to state and journals it; a nil body is the
	// attempt itself, as it stands after the move.
	step := func(state AttemptState, d Durability, kind Kind, body any) error {
		a.State, a.Updated = state, e.now()
		if body == nil {
			body = attemptBody(&a)
		}
		rec := a
		_, err := e.commit(ctx, d, Event{Kind: kind, Run: base.Run, Step: w.step, Device: w.device}, body,
			func(en *Entry) { en.Attempt = &rec })
		return err
	}
	if err := step(AttemptStaged, Async, KindInvoked, nil); err != nil {
		return e.failedQuiet(base, "not acting: the journal could not record the attempt", err)
	}
	a.Authorization = authz
	if w.resume != nil {
		// The authorized record consumes the approval's authorization in the
		// same commit.
		used := *w.resume
		a.State, a.Updated = AttemptAuthorized, e.now()
		rec := a
		if _, err := e.commit(ctx, Async, Event{Kind: KindInvoked, Run: base.Run, Step: w.step, Device: w.device}, attemptBody(&a),
			func(en *Entry) { en.Attempt = &rec; en.Approval = &used }); err != nil {
			return e.failedQuiet(base, "not acting: the journal could not record the attempt", err)
		}
	} else if err := step(AttemptAuthorized, Async, KindInvoked, nil); err != nil {
		return e.failedQuiet(base, "not acting: the journal could not record the attempt", err)
	}
	if err := failpoint.Inject(failpoint.ActBeforeExecuting); err != nil {
		return e.failedQuiet(base, "not acting: the intent could not be journaled", err)
	}
	// The executing record also brings the run's record up to this step,
	// so a start after a crash knows where the run was.
	a.State, a.Updated = AttemptExecuting, e.now()
	executing, rr := a, w.run.snapshot()
	if _, err := e.commit(ctx, Sync, Event{Kind: KindInvoked, Run: base.Run, Step: w.step, Device: w.device}, attemptBody(&a),
		func(en *Entry) { en.Attempt = &executing; en.Run = rr }); err != nil {
		return e.failedQuiet(base, "not acting: the intent could not be journaled", err)
	}
	// An error here stands for a driver call that failed at once.
	fpErr := failpoint.Inject(failpoint.ActAfterExecuting)
	w.run.charge(true)
	if err := ctx.Err(); err != nil {
		// Cancelled while the intent was being made durable: the driver is
		// not called, so nothing was sent and nothing is locked.
		rc := &Receipt{Key: w.key, Attempt: a.ID, Device: w.device, Capability: w.capability, Value: w.value,
			Driver: "not called", Confirmation: NotChecked, At: e.now()}
		a.Receipt, a.Why = rc, "cancelled before the driver was called"
		_ = e.commitStep(context.WithoutCancel(ctx), &a, base, AttemptFailed, KindFailed, FailedBody{Device: w.device,
			Capability: w.capability, Attempt: a.ID, State: AttemptFailed, Error: a.Why, Outcome: devices.OutcomeFailed.String(), Receipt: rc})
		base.Kind, base.Why, base.Receipt = Failed, a.Why, rc
		return base
	}
	// The confirming reading as it stood before the act, to tell an act
	// that never started from one that stopped short.
	var before *devices.Reading
	if src := confirmSource(ref(w.device, w.capability), c, pol); src != "" {
		if pol.Confirm.StartWithin > 0 && w.safety == "" {
			// Whether it started is told from where it stood just now (a
			// drive to safe does not wait for that read).
			dev, capability := splitRef(src)
			if sent, found := e.reg.Lookup(dev); found {
				if rd, err := e.driverRead(ctx, sent.Driver, dev, capability); err == nil {
					before = &rd
				}
			}
		}
		if rd, ok := e.facts.get(src); ok && before == nil {
			before = &rd
		}
	}
	// Once the driver is called, the call is not cut short by a cancel or
	// a stop: a write torn half way is exactly the one whose outcome
	// nobody knows. The driver timeout bounds it.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.DriverTimeout)
	err := fpErr
	if err == nil {
		err = e.callWrite(dctx, ent.Driver, w.device, w.capability, w.value)
		if fe := failpoint.Inject(failpoint.ActAfterDriver); fe != nil && err == nil {
			err = fe // as a lost acknowledgement: the outcome is unknown
		}
	}
	cancel()
	target := ref(w.device, w.capability)
	rc := &Receipt{Key: w.key, Attempt: a.ID, Device: w.device, Capability: w.capability, Value: w.value, Driver: "ok"}
	// What follows records what the driver did: a stop or a cancel now
	// must not keep it from the journal. The confirmation may be cut
	// short (see confirmContext).
	cctx, confirmed := e.confirmContext(ctx, target, w.safety != "")
	defer confirmed()
	ctx = context.WithoutCancel(ctx)
	if err != nil && writeOutcome(err) == devices.OutcomeUnknown {
		// The command may have reached the device: its effect is unknown,
		// exactly as after a crash in the middle of a write. Its dead man
		// is armed all the same: fail closed.
		e.armTTL(rc, e.now())
		return e.unknownAct(context.WithoutCancel(ctx), base, a, c, rc, err)
	}
	if err != nil {
		// The driver says nothing was done: offline, refused, or a bad
		// address or value.
		outcome := devices.Classify(err)
		code, _ := devices.RefusalCode(err)
		rc.Driver, rc.Confirmation, rc.At = err.Error(), NotChecked, e.now()
		a.Receipt, a.Why = rc, err.Error()
		_ = step(AttemptFailed, Sync, KindFailed, FailedBody{Device: w.device, Capability: w.capability, Attempt: a.ID,
			State: AttemptFailed, Error: err.Error(), Outcome: outcome.String(), Code: code, Receipt: rc})
		base.Kind, base.Why, base.Receipt = Failed, driverWhy(outcome, w.device, err), rc
		return base
	}
	e.recordChange(target)
	actedAt := e.now()
	e.armTTL(rc, actedAt)
	cf := e.confirm(cctx, ent, c, pol, w.value, before)
	confirmed()
	rc.Confirmation, rc.Observed, rc.Detail = cf.class, cf.observed, cf.detail
	if c.ReadBack && confirmSource(target, c, pol) != target {
		// Confirmed another way (a feedback contact, a sensor) or not at
		// all: the actuator is still read back once, so that where it
		// stands is known beside the receipt, not a reading from before.
		// A read-back that disagrees with the command means it ended at
		// the wrong value, what the other confirmation said
		// notwithstanding.
		rd, err := e.driverRead(ctx, ent.Driver, w.device, w.capability)
		if err == nil && !rd.Value.Equal(w.value) && !rc.Confirmation.Discrepant() {
			got := rd.Value
			rc.Confirmation, rc.Observed = WrongFinal, &got
			rc.Detail = strings.TrimPrefix(rc.Detail+"; ", "; ") + "the read-back of " + target + " is " + got.String() + ", not the commanded " + w.value.String()
		}
	}
	rc.At = e.now()
	a.Receipt = rc
	a.State, a.Updated = AttemptReceipt, e.now()
	final := a
	st := &StateRecord{Device: w.device, Capability: w.capability, Receipt: rc}
	if rd, ok := e.facts.get(target); ok && !rd.At.Before(actedAt) {
		st.Reading = &rd // the read-back after the act; one from before is not where it stands now
	}
	// The receipt of a run's last step carries the run's end with it: the
	// receipt is queued, the end after it, and the end's sync makes both
	// durable in one write, before anyone is answered.
	ends := w.endsRun()
	d := Sync
	if ends {
		d = Async
	}
	_, err = e.commit(ctx, d, Event{Kind: KindActed, Run: base.Run, Step: w.step, Device: w.device}, rc, func(en *Entry) {
		en.Attempt = &final
		en.State = st
	})
	if err == nil && ends {
		// Whoever sees the end and repeats the request is told the act,
		// not the run's earlier outcome (an approval asked).
		acted := base
		acted.Kind, acted.Receipt = Acted, rc
		w.run.settle(acted)
		err = e.endRunAtReceipt(ctx, w.run, w.step)
	}
	if err != nil {
		base.Receipt = rc
		return e.failedQuiet(base, "acted, but the receipt could not be journaled", err)
	}
	_ = failpoint.Inject(failpoint.ActAfterReceipt) // the act is done: an error changes nothing
	e.setReceipt(target, *rc)
	e.afterAct(ctx, w, pol, rc, cf.cut)
	base.Kind, base.Receipt = Acted, rc
	return base
}

// afterAct raises or clears the alarms of an act's confirmation, and
// drives the actuator to safe after a discrepancy when its policy says so.
func (e *Engine) afterAct(ctx context.Context, w *writeReq, pol *CapPolicy, rc *Receipt, cut error) {
	switch {
	case cut != nil:
		// Cut short by a drive to safe or a stop: what follows says more.
	case rc.Confirmation.Discrepant():
		e.raise(ctx, AlarmDiscrepancy, w.device, w.capability, string(rc.Confirmation)+": "+rc.Detail, rc.Attempt)
		e.log.Warn("actuation not followed", "device_id", w.device, "capability", w.capability, "class", rc.Confirmation, "detail", rc.Detail)
		// An act to the safe value owes no drive to it: a hand that moved
		// it after is drift, and never fought.
		if pol != nil && pol.Confirm != nil && pol.Confirm.OnDiscrepancy == SafeDrive && pol.Safe != nil && w.safety == "" &&
			!w.value.Equal(*pol.Safe) {
			e.safety.request(safeJob{target: ref(w.device, w.capability), trigger: TriggerDiscrepancy,
				why: "on_contradiction: safe after " + string(rc.Confirmation) + " of attempt " + rc.Attempt + ": " + rc.Detail})
		}
	case rc.Confirmation == Unconfirmed:
		e.raise(ctx, AlarmUnconfirmed, w.device, w.capability, rc.Detail, rc.Attempt)
	case rc.Confirmation == Confirmed:
		e.clearAlarm(ctx, AlarmDiscrepancy, w.device, w.capability, "attempt "+rc.Attempt+" was confirmed")
		e.clearAlarm(ctx, AlarmUnconfirmed, w.device, w.capability, "attempt "+rc.Attempt+" was confirmed")
		// Only a drive to safe acts on a locked actuator. Confirmed by
		// the world, it tells where the actuator stands: whether the
		// earlier act whose outcome was unknown took effect is moot.
		target := ref(w.device, w.capability)
		if held, locked := e.lockedBy(target); locked && held.ID != rc.Attempt {
			e.decide.Lock()
			if cur, ok := e.lockedBy(target); ok && cur.ID == held.ID {
				e.supersedeLocked(ctx, held, "a later act on "+target+", attempt "+rc.Attempt+", was confirmed by the world: where it stands is known")
			}
			e.decide.Unlock()
		}
	}
	// A value it was commanded to is no drift; the hand that moved it is
	// overruled by the person who commanded it.
	e.clearAlarm(ctx, AlarmDrift, w.device, w.capability, "commanded to "+w.value.String()+" by "+w.principal)
}

// commitStep moves attempt a to state and journals it with body.
func (e *Engine) commitStep(ctx context.Context, a *Attempt, base Observation, state AttemptState, kind Kind, body any) error {
	a.State, a.Updated = state, e.now()
	rec := *a
	_, err := e.commit(ctx, Sync, Event{Kind: kind, Run: base.Run, Step: base.Step, Device: a.Device}, body,
		func(en *Entry) { en.Attempt = &rec })
	return err
}

// writeOutcome says what a write's error means. Only a driver that says
// nothing was done (offline, refused, a bad address or value) is taken at
// its word, even when its error also wraps a timeout. Every other error may
// have followed the command out: a timeout, a lost answer, a panic, a
// library's "i/o timeout" or "connection reset" that the driver did not
// place. Its outcome is unknown, and the actuator locks: fail closed.
func writeOutcome(err error) devices.Outcome {
	switch o := devices.Classify(err); o {
	case devices.OutcomeOffline, devices.OutcomeRefused, devices.OutcomeBadRequest:
		return o
	}
	return devices.OutcomeUnknown
}

// driverWhy says in a sentence what a driver's error means for device.
func driverWhy(o devices.Outcome, device string, err error) string {
	switch o {
	case devices.OutcomeOffline:
		return "device " + device + " is offline: " + err.Error()
	case devices.OutcomeRefused:
		return "device " + device + " refused: " + err.Error()
	case devices.OutcomeBadRequest:
		return "the driver cannot take this for " + device + ": " + err.Error()
	}
	return "the driver failed: " + err.Error()
}

// unknownAct settles a write whose outcome is unknown. The attempt
// becomes unknown and locks the actuator; one read-back follows at once.
// If it shows the commanded value, the attempt is reconciled, the lock
// lifts and the act is reported with that confirmation. Otherwise the
// actuator stays locked until an admin resolves it. Nothing is retried.
func (e *Engine) unknownAct(ctx context.Context, base Observation, a Attempt, c *devices.Capability, rc *Receipt, cause error) Observation {
	target := ref(a.Device, a.Capability)
	a.State, a.Updated = AttemptUnknown, e.now()
	unanswered := errors.Is(cause, context.DeadlineExceeded) || errors.Is(cause, errDriverPanicked)
	a.Why = "the driver could not tell whether the act took effect (" + cause.Error() + ")"
	if unanswered {
		a.Why = "the driver did not answer (" + cause.Error() + "); whether the act took effect is unknown"
	}
	rc.Driver, rc.At = cause.Error(), e.now()
	a.Receipt = rc
	rec := a
	armed := *rc
	armed.Confirmation = NotChecked
	_, _ = e.commit(ctx, Sync, Event{Kind: KindFailed, Run: a.Run, Step: a.Step, Device: a.Device}, FailedBody{
		Device: a.Device, Capability: a.Capability, Attempt: a.ID, State: a.State, Error: a.Why, Outcome: devices.OutcomeUnknown.String(),
	}, func(en *Entry) {
		en.Attempt = &rec
		if !armed.Until.IsZero() {
			// Its dead man is kept as the actuator's state, to be
			// enforced after a restart too.
			en.State = &StateRecord{Device: a.Device, Capability: a.Capability, Receipt: &armed}
		}
	})
	if !armed.Until.IsZero() {
		e.setReceipt(target, armed)
	}
	// Locked even if that record could not be written: fail closed.
	if prev, superseded := e.lockTarget(target, a); superseded {
		e.decide.Lock()
		e.supersedeLocked(ctx, prev, "a later act on "+target+", attempt "+a.ID+", is of unknown outcome too and holds the lock now")
		e.decide.Unlock()
	}
	if c.ReadBack {
		obs := e.read(ctx, nil, 0, "gateway:reconcile", a.Device, a.Capability)
		switch {
		case obs.Kind == Completed && obs.Reading != nil && obs.Reading.Value.Equal(a.Value):
			got := obs.Reading.Value
			confirmed := *rc
			confirmed.Confirmation, confirmed.Observed, confirmed.At = Confirmed, &got, e.now()
			confirmed.Detail = "the driver could not tell; the read-back shows the act took effect"
			if unanswered {
				confirmed.Detail = "the driver did not answer; the read-back shows the act took effect"
			}
			settled, err := e.settle(ctx, a, "gateway", "the read-back "+got.String()+" equals the commanded value", &got, &confirmed)
			switch {
			case err != nil:
				// The lock stays: the journal could not record the settling.
				e.log.Error("an unknown act stays locked: its reconciliation could not be journaled", "attempt", a.ID, "error", err)
			case !settled:
				// An admin resolved it meanwhile; their word stands.
				base.Kind, base.Receipt = Failed, rc
				base.Why = a.Why + "; attempt " + a.ID + " was resolved by an admin meanwhile"
				return base
			default:
				e.recordChange(target)
				*rc = confirmed
				base.Kind, base.Receipt = Acted, rc
				return base
			}
		case obs.Reading != nil:
			e.stayLocked(ctx, a, "the read-back is "+obs.Reading.Value.String()+", not the commanded "+a.Value.String())
		default:
			e.stayLocked(ctx, a, "the read-back failed: "+obs.Why)
		}
	} else {
		e.stayLocked(ctx, a, c.Name+" has no read-back to tell")
	}
	rc.Confirmation = NotChecked
	base.Kind, base.Receipt = Failed, rc
	base.Why = a.Why + "; " + target + " is locked until an admin resolves attempt " + a.ID
	return base
}

// setReceipt records the latest receipt of target.
func (e *Engine) setReceipt(target string, rc Receipt) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.receipts[target] = rc
}

// lockTarget locks target until attempt a is reconciled or resolved. It
// returns the attempt that held the lock before, if another did: it is
// superseded, and the caller settles it so.
func (e *Engine) lockTarget(target string, a Attempt) (Attempt, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	prev, had := e.locked[target]
	e.locked[target] = a
	return prev, had && prev.ID != a.ID
}

// supersedeLocked settles attempt a, whose outcome is unknown, as
// superseded by a later act on its actuator. e.decide must be held.
func (e *Engine) supersedeLocked(ctx context.Context, a Attempt, why string) {
	if err := e.settleFound(ctx, a, "gateway", why, FoundSuperseded, nil, nil); err != nil {
		e.log.Error("a superseded attempt could not be settled in the journal", "attempt", a.ID, "error", err)
	}
}

func attemptBody(a *Attempt) AttemptBody {
	return AttemptBody{Attempt: a.ID, Key: a.Key, State: a.State, Device: a.Device,
		Capability: a.Capability, Value: a.Value, Principal: a.Principal, Reason: a.Reason, Authorization: a.Authorization}
}

// failedQuiet is a failure that cannot be journaled (the journal is what failed).
// Why says what happened in public words; the log has the detail under the
// observation's error id.
func (e *Engine) failedQuiet(base Observation, why string, err error) Observation {
	why = withPublicReason(why, err)
	base.Kind, base.Why, base.ErrorID = Failed, why, newErrorID()
	e.log.Error(why, "error_id", base.ErrorID, "device_id", base.Device, "capability", base.Capability, "error", err)
	return base
}

// confirmSource names the reading that confirms an act on target under
// pol, or "" when nothing is configured to confirm it.
func confirmSource(target string, c *devices.Capability, pol *CapPolicy) string {
	if pol == nil || pol.Confirm == nil {
		return ""
	}
	cf := pol.Confirm
	switch {
	case cf.ReadBack && c.ReadBack:
		return target
	case cf.Feedback != "":
		return cf.Feedback
	}
	return cf.Sensor
}

// confirmation is what confirm found.
type confirmation struct {
	class    Confirmation
	observed *value.Value
	detail   string
	// cut is why the confirmation was cut short, if it was.
	cut error
}

// confirm verifies an actuation to v as its policy says. It reads the
// confirming reading (the read-back, a feedback or a sensor) every 250ms:
//
//   - once it holds (equals v, or the sensor's condition holds), the act
//     reached its value; with a watch window, it must keep holding for
//     that long, or it returned;
//   - with start_within, it must have moved from before (its value just
//     before the act) by then, or the act did not start;
//   - by travel_within it must have reached the value, or it ended at the
//     wrong value;
//   - with no good reading at all, it is unconfirmed.
func (e *Engine) confirm(ctx context.Context, ent devices.Entry, c *devices.Capability, pol *CapPolicy, v value.Value, before *devices.Reading) confirmation {
	source := confirmSource(ref(ent.Device.ID, c.Name), c, pol)
	if source == "" {
		return confirmation{class: NotChecked, detail: "no confirmation configured"}
	}
	cf := pol.Confirm
	bySensor := source == cf.Sensor && cf.Feedback == ""
	op := cf.Op
	if bySensor {
		when := cf.When
		if when == nil && c.Type == value.TypeBool {
			t := value.Bool(true)
			when = &t
		}
		if when != nil && !v.Equal(*when) {
			if c.Type != value.TypeBool {
				return confirmation{class: NotChecked, detail: cf.Sensor + " confirms acts to " + when.String() + " only"}
			}
			// The other value of a bool: the condition must stop holding
			// (a valve closed, the flow stops).
			op = negate(op)
		}
	}
	holds := func(got value.Value) bool {
		if bySensor {
			return op.Holds(got, cf.Value)
		}
		return got.Equal(v)
	}
	want := "= " + v.String()
	if bySensor {
		want = string(op) + " " + cf.Value.String()
	}
	read := func() (value.Value, bool, error) {
		dev, capability := splitRef(source)
		sent, found := e.reg.Lookup(dev)
		if !found {
			return value.Value{}, false, errors.New(dev + " is not online")
		}
		rd, err := e.driverRead(ctx, sent.Driver, dev, capability)
		if err != nil {
			return value.Value{}, false, err
		}
		return rd.Value, rd.Quality == devices.QualityGood, nil
	}
	var from *value.Value
	if before != nil && before.Quality == devices.QualityGood && !holds(before.Value) {
		b := before.Value
		from = &b
	}
	started := func(got value.Value) bool {
		if from == nil {
			return true
		}
		if got.Type != value.TypeNumber || from.Type != value.TypeNumber {
			return !got.Equal(*from)
		}
		switch {
		case bySensor:
			switch op {
			case governance.OpGT, governance.OpGE:
				return got.Num > from.Num
			case governance.OpLT, governance.OpLE:
				return got.Num < from.Num
			}
			return got.Num != from.Num
		default: // moved towards v
			return math.Abs(got.Num-v.Num) < math.Abs(from.Num-v.Num)
		}
	}
	travel := cmp.Or(cf.Within, 5*time.Second)
	start := e.now()
	var (
		last      *value.Value
		lastErr   error
		moved     bool
		reachedAt time.Time
	)
	for {
		got, good, err := read()
		now := e.now()
		lastErr = err
		if err == nil && good {
			g := got
			last = &g
			switch {
			case reachedAt.IsZero() && holds(got):
				reachedAt = now
			case !reachedAt.IsZero() && !holds(got):
				return confirmation{class: Returned, observed: last, detail: fmt.Sprintf("%s reached %s, then went back to %s within %s of reaching it (watch %s)",
					source, want, got, now.Sub(reachedAt).Round(time.Millisecond), cf.Watch)}
			}
			moved = moved || started(got)
		}
		switch {
		case !reachedAt.IsZero() && now.Sub(reachedAt) >= cf.Watch:
			return confirmation{class: Confirmed, observed: last}
		case reachedAt.IsZero() && cf.StartWithin > 0 && !moved && last != nil && now.Sub(start) >= cf.StartWithin:
			return confirmation{class: NotStarted, observed: last, detail: fmt.Sprintf("%s stayed at %s for %s (start_within %s); want %s",
				source, last, now.Sub(start).Round(time.Millisecond), cf.StartWithin, want)}
		case reachedAt.IsZero() && now.Sub(start) >= travel:
			if last == nil {
				why := "no good reading of " + source + " within " + travel.String()
				if lastErr != nil {
					why += ": " + lastErr.Error()
				}
				return confirmation{class: Unconfirmed, detail: why}
			}
			if cf.StartWithin > 0 && !moved {
				return confirmation{class: NotStarted, observed: last, detail: fmt.Sprintf("%s stayed at %s for %s; want %s", source, last, travel, want)}
			}
			return confirmation{class: WrongFinal, observed: last, detail: fmt.Sprintf("%s is %s after %s (travel_within); want %s", source, last, travel, want)}
		}
		wait := 250 * time.Millisecond
		if reachedAt.IsZero() {
			wait = min(wait, max(time.Millisecond, start.Add(travel).Sub(now)))
		} else {
			wait = min(wait, max(time.Millisecond, reachedAt.Add(cf.Watch).Sub(now)))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			cut := context.Cause(ctx)
			return confirmation{class: Unconfirmed, observed: last, detail: "the confirmation was cut short: " + cut.Error(), cut: cut}
		case <-t.C:
		}
	}
}

// negate returns the comparison that holds exactly when op does not.
func negate(op governance.Op) governance.Op {
	switch op {
	case governance.OpGT:
		return governance.OpLE
	case governance.OpGE:
		return governance.OpLT
	case governance.OpLT:
		return governance.OpGE
	case governance.OpLE:
		return governance.OpGT
	case governance.OpEQ:
		return governance.OpNE
	}
	return governance.OpEQ
}

// armTTL sets the dead man of rc, an act from at, when its capability has
// a TTL and rc's value is not the safe one.
func (e *Engine) armTTL(rc *Receipt, at time.Time) {
	pol := e.conf().policies[ref(rc.Device, rc.Capability)]
	if pol != nil && pol.TTL > 0 && pol.Safe != nil && !rc.Value.Equal(*pol.Safe) {
		rc.Until = at.Add(pol.TTL)
	}
}
