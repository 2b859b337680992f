package runtime

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/governance"
)

// execute is a run's goroutine: it takes the plan's steps in order, parks
// for approvals, and ends the run as the plan says.
func (e *Engine) execute(ctx context.Context, r *run) {
	rec := r.record()
	from := 0
	body := StartedBody{Plan: rec.Plan, Principal: rec.Principal, Origin: rec.Origin, RequestID: rec.RequestID, Reason: rec.Reason}
	if r.parked != "" {
		// Restored after a restart: carry on at the parked step.
		from = rec.Step - 1
		body.ResumedAtStep, body.Approval = rec.Step, r.parked
	}
	_, _ = e.commit(ctx, Async, Event{Kind: KindStarted, Run: rec.ID}, body, func(en *Entry) { en.Run = &rec })
	end, why := EndCompleted, ""
	for i, s := range r.plan.Steps {
		if i < from {
			continue
		}
		idx := i + 1
		r.setStep(idx)
		if ctx.Err() != nil {
			end, why = EndCancelled, cancelWhy(ctx, "before step "+strconv.Itoa(idx))
			break
		}
		if left := r.leaseLeft(e.now(), false); left != "" {
			end, why = EndLeaseExhausted, "lease exhausted before step "+strconv.Itoa(idx)+": "+left
			r.observe(Observation{Kind: Refused, Run: rec.ID, Step: idx, Device: s.Device, Capability: s.Capability, Why: why, Stage: "lease"})
			break
		}
		obs := e.runStep(ctx, r, idx, s)
		if obs.Kind == parkedAtStop {
			// Left parked in the journal, with its approval pending.
			e.log.Info("run left parked for the next start", "run", rec.ID, "step", idx)
			return
		}
		r.observe(obs)
		switch obs.Kind {
		case Refused:
			end, why = EndRefused, obs.Why
			if obs.Stage == "lease" {
				end = EndLeaseExhausted
			}
		case Failed:
			if !r.plan.ContinueOnFailure {
				end, why = EndFailed, obs.Why
			}
		}
		if ctx.Err() != nil && (end == EndCompleted || end == EndFailed && strings.HasPrefix(obs.Why, "cancelled ")) {
			// A step cut short by the cancel ends the run cancelled; one
			// that failed for its own reason ends it failed.
			end, why = EndCancelled, cancelWhy(ctx, "during step "+strconv.Itoa(idx))
		}
		if end != EndCompleted {
			break
		}
	}
	final, journaled := r.endJournaled()
	if !journaled {
		final = r.end(end, why, e.now)
		// The run's own context may be cancelled; its end is still recorded.
		_, _ = e.commit(context.WithoutCancel(ctx), Async, Event{Kind: KindEnded, Run: final.ID}, endedBody(&final), func(en *Entry) { en.Run = &final })
	}
	r.ensureFirst(Observation{Kind: Failed, Run: final.ID, Why: "run ended before its first step: " + why})
	e.forgetRun(r)
}

// endsRun reports whether the write is its run's last step, so that its
// receipt ends the run.
func (w *writeReq) endsRun() bool {
	return w.run != nil && w.safety == "" && w.run.plan != nil && w.step == len(w.run.plan.Steps)
}

// endRunAtReceipt ends the run whose last step's receipt was just queued,
// as execute would end it after an act, and commits the end durably: one
// write for both.
func (e *Engine) endRunAtReceipt(ctx context.Context, r *run, idx int) error {
	end, why := EndCompleted, ""
	if rc := r.ctx; rc != nil && rc.Err() != nil {
		// Cancelled during the step: the run ends cancelled, as execute
		// ends it.
		end, why = EndCancelled, cancelWhy(rc, "during step "+strconv.Itoa(idx))
	}
	final := r.end(end, why, e.now)
	if _, err := e.commit(context.WithoutCancel(ctx), Sync, Event{Kind: KindEnded, Run: final.ID}, endedBody(&final), func(en *Entry) { en.Run = &final }); err != nil {
		return err
	}
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	return nil
}

func endedBody(rr *RunRecord) EndedBody {
	return EndedBody{End: rr.End, Why: rr.Why, Steps: rr.Steps, Actuations: rr.Actuations, Spent: rr.Spent.String()}
}

// endJournaled returns the run's record and whether its end is journaled.
func (r *run) endJournaled() (RunRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec, r.ended
}

// forgetRun queues an ended run and drops the oldest ended runs beyond the
// newest 1000, so memory stays bounded at a constant cost per run.
func (e *Engine) forgetRun(r *run) {
	e.mu.Lock()
	defer e.mu.Unlock()
	const keep = 1000
	e.ended = append(e.ended, r)
	for len(e.ended) > keep {
		old := e.ended[0]
		e.ended[0] = nil
		e.ended = e.ended[1:]
		delete(e.runs, old.rec.ID)
		if old.requestKey != "" && e.requests[old.requestKey] == old {
			delete(e.requests, old.requestKey)
			// A plan started by a request id stays known by its record, so
			// that the start sent again is answered, not run again.
			e.fileEndedLocked(old.record())
		}
	}
}

// parkedAtStop is what runStep returns when the gateway stops while the
// step waits for people; errStopping is awaitAnswer's reason then.
const parkedAtStop ObservationKind = "parked_at_stop"

const errStopping = "the gateway is stopping"

// runStep executes one plan step, waiting out an approval if it parks.
func (e *Engine) runStep(ctx context.Context, r *run, idx int, s PlanStep) Observation {
	rec := r.record()
	switch s.Op {
	case OpRead:
		return e.read(ctx, r, idx, rec.Principal, s.Device, s.Capability)
	case OpWait:
		r.charge(false)
		t := time.NewTimer(s.Wait)
		defer t.Stop()
		select {
		case <-t.C:
			return Observation{Kind: Completed, Run: rec.ID, Step: idx}
		case <-ctx.Done():
			return Observation{Kind: Failed, Run: rec.ID, Step: idx, Why: "cancelled while waiting"}
		}
	case OpExpect:
		r.charge(false)
		return e.expect(ctx, r, idx, s.Expect)
	}
	key := rec.ID + "/" + strconv.Itoa(idx)
	if rec.Plan == "command" {
		key = rec.Principal + "/" + r.requestID
	}
	w := &writeReq{run: r, step: idx, key: key, principal: rec.Principal, origin: rec.Origin, reason: rec.Reason,
		device: s.Device, capability: s.Capability, value: s.Value}
	id := r.takeParked()
	if id == "" {
		obs := e.write(ctx, w)
		if obs.Kind != ApprovalRequest {
			return obs
		}
		r.observe(obs)
		id = obs.Approval.ID
	}
	ap, why := e.awaitAnswer(ctx, id)
	if why == errStopping {
		return Observation{Kind: parkedAtStop, Run: rec.ID, Step: idx}
	}
	r.resume(e.now())
	if ap == nil {
		base := Observation{Run: rec.ID, Step: idx, Device: s.Device, Capability: s.Capability}
		return e.refusedWrite(ctx, base, governance.Verdict{Outcome: governance.Refuse, Why: why}, s.Value)
	}
	w.resume = ap
	return e.write(ctx, w)
}

// awaitAnswer waits until the approval is decided, expires, or ctx is done.
// It returns the approved record, or nil and why not.
func (e *Engine) awaitAnswer(ctx context.Context, id string) (*Approval, string) {
	p, ok := e.pendingByID(id)
	if !ok {
		return nil, "approval " + id + " is gone"
	}
	t := time.NewTimer(max(0, e.approvalRecord(p).Expires.Sub(e.now())))
	defer t.Stop()
	select {
	case <-p.decided:
	case <-t.C:
		e.expire(ctx, id)
	case <-ctx.Done():
		if e.life.Err() != nil {
			// The gateway is stopping, not the run: the request stays
			// pending in the journal and the run resumes at the next start.
			return nil, errStopping
		}
		e.supersede(context.WithoutCancel(ctx), id, "the run was cancelled")
	}
	rec := e.approvalRecord(p)
	switch rec.Status {
	case ApprovalApproved:
		return &rec, ""
	case ApprovalDenied:
		last := rec.Answers[len(rec.Answers)-1]
		why := "denied by " + last.By
		if last.Reason != "" {
			why += ": " + last.Reason
		}
		return nil, why
	case ApprovalExpired:
		return nil, "approval " + id + " expired at " + rec.Expires.Format(time.RFC3339) + " unanswered"
	}
	return nil, "approval " + id + " was " + string(rec.Status)
}

// pendingByID returns the approval with the given id, pending or not.
func (e *Engine) pendingByID(id string) (*pending, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.approvals[id]
	return p, ok
}

// approvalRecord returns a copy of p's record as it stands.
func (e *Engine) approvalRecord(p *pending) Approval {
	e.mu.Lock()
	defer e.mu.Unlock()
	return p.rec
}

// expect polls a sensor with governed reads until the condition holds.
func (e *Engine) expect(ctx context.Context, r *run, idx int, x *Expect) Observation {
	rec := r.record()
	dev, capability := splitRef(x.Sensor)
	deadline := e.now().Add(x.Within)
	var last Observation
	for {
		last = e.read(ctx, nil, idx, rec.Principal, dev, capability)
		last.Run = rec.ID
		if last.Kind == Completed && last.Reading != nil && x.Op.Holds(last.Reading.Value, x.Value) {
			return last
		}
		if last.Kind == Refused {
			return last
		}
		if !e.now().Before(deadline) || ctx.Err() != nil {
			break
		}
		t := time.NewTimer(min(500*time.Millisecond, deadline.Sub(e.now())))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	seen := "no good reading"
	if last.Reading != nil {
		seen = "last " + last.Reading.Value.String()
	}
	base := Observation{Run: rec.ID, Step: idx, Device: dev, Capability: capability}
	return e.failed(ctx, base, "expected "+x.Sensor+" "+string(x.Op)+" "+x.Value.String()+" within "+x.Within.String()+" ("+seen+")")
}

// cancelWhy says why a run was cancelled, and when: by a person (with
// their reason), or as the gateway stopped.
func cancelWhy(ctx context.Context, when string) string {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause.Error() + ", " + when
	}
	return "cancelled " + when
}
