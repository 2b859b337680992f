package runtime

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
)

// writeReq is one write step.
type writeReq struct {
	run        *run
	step       int
	key        string
	principal  string
	origin     string
	reason     string
	device     string
	capability string
	value      value.Value
	// resume is the approved approval being carried out, or nil.
	resume *Approval
	// safety, when set, is the trigger of a drive to safe: it is not
	// judged, asks nobody and passes a locked actuator, for driving to
	// safe is never held up; it is witnessed like every act.
	safety string
	// safeDrive, with safety, is journaled under the actuator's lock
	// before the act, as the reason for it, once still (if set) says ""
	// (still owed); otherwise the drive is moot, and not made.
	safeDrive *SafeDriveBody
	still     func() string
}

// write is the write step. It returns an ApprovalRequest when it parks.
func (e *Engine) write(ctx context.Context, w *writeReq) (obs Observation) {
	if e.opts.OnStep != nil {
		start := time.Now()
		defer func() { e.opts.OnStep(obs.Kind, time.Since(start)) }()
	}
	base := Observation{Run: w.run.id(), Step: w.step, Device: w.device, Capability: w.capability}
	if err := ctx.Err(); err != nil {
		return e.failed(ctx, base, "cancelled before acting")
	}
	e.refresh(ctx)
	ent, c, obs, ok := e.lookupTarget(ctx, Prompt, base)
	if !ok {
		return obs
	}
	if c.Kind != devices.KindActuator {
		return e.failed(ctx, base, w.capability+" of "+w.device+" is a sensor and cannot be written")
	}
	target := ref(w.device, w.capability)
	unlock, err := e.lockActuator(ctx, target)
	if err != nil {
		return e.failed(ctx, base, "cancelled while waiting for "+target)
	}
	defer unlock()

	// Fail closed: what cannot be witnessed is not done.
	if err := e.Healthy(); err != nil {
		return e.refusedInternal(ctx, base, "not acting: the journal cannot witness", err, w.value)
	}
	dg := digest(w.device, w.capability, w.value, w.principal, w.key)
	if prev, found, err := e.j.Attempt(ctx, w.key); err != nil {
		return e.refusedInternal(ctx, base, "not acting: the journal cannot be read", err, w.value)
	} else if found {
		return e.replay(ctx, base, prev, dg)
	}
	if w.safety != "" {
		if w.still != nil {
			if why := w.still(); why != "" {
				base.Kind, base.Why, base.Stage = Refused, "no longer owed: "+why, stageMoot
				return base
			}
		}
		if b := w.safeDrive; b != nil {
			if _, err := e.commit(ctx, Sync, Event{Kind: KindSafeDrive, Device: w.device}, b, nil); err != nil {
				return e.failedQuiet(base, "not driving to safe: the reason could not be journaled", err)
			}
		}
		return e.act(ctx, w, base, ent, c, e.conf().policies[target], dg, "safety:"+w.safety)
	}
	if a, locked := e.lockedBy(target); locked {
		return e.refusedWrite(ctx, base, governance.Verdict{Outcome: governance.Refuse, Stage: governance.StageUnjudged,
			Why: target + " is locked: attempt " + a.ID + " (key " + a.Key + ") has an unknown effect (" + a.Why + "); an admin must resolve it"}, w.value)
	}
	// One snapshot of the configuration for each judgement: its policy,
	// envelope, interlocks and the judge's rules agree. A snapshot that
	// changed while the step read the world (a rule revoked, a
	// configuration swapped) is taken again before judging.
	var (
		cfg   *config
		pol   *CapPolicy
		conds []governance.Condition
		req   governance.Request
		// renewing is set when derive judged the write a renewal; until
		// the act reads the actuator again, allowRenewal lets it.
		renewing     bool
		allowRenewal = true
	)
	derive := func(now *config) {
		cfg = now
		req, pol, renewing = e.writeRequest(now, &ent.Device, c, w.principal, w.value, allowRenewal)
		conds = req.Interlocks
	}
	derive(e.conf())
	// steady takes the snapshot again until it holds still, reading the
	// interlocks of each; false if it kept changing.
	steady := func(fresh bool) bool {
		for range 3 {
			now := e.conf()
			if now == cfg {
				return true
			}
			derive(now)
			e.gather(ctx, conds, fresh)
		}
		return e.conf() == cfg
	}
	unsteady := governance.Verdict{Outcome: governance.Refuse, Stage: governance.StageUnjudged,
		Why: "the rules or the configuration kept changing while this step was judged; send it again"}
	current, known := e.facts.get(target)
	if !known && c.ReadBack && w.resume == nil {
		// Learn where the actuator stands before judging: the envelope's
		// history and the person asked both need it. The read is itself a
		// governed, journaled step.
		if obs := e.read(ctx, nil, 0, "gateway:current", w.device, w.capability); obs.Kind == Completed && obs.Reading != nil {
			current = *obs.Reading
		}
	}
	if w.resume == nil {
		if id, busy := e.pendingFor(target); busy {
			return e.refused(ctx, base, governance.Verdict{Outcome: governance.Refuse, Stage: governance.StageUnjudged,
				Why: target + " already has a pending approval " + e.pendingWho(id) + "; answer it first"})
		}
		e.gather(ctx, conds, false)
		if !steady(false) {
			return e.refusedWrite(ctx, base, unsteady, w.value)
		}
		req.Mode, req.Now, req.History = e.currentMode(ctx), e.now(), e.history(target, current.Value)
		v := governance.Judge(&req, cfg.policy)
		switch v.Outcome {
		case governance.Ask:
			return e.park(ctx, w, base, v, current, pol)
		case governance.Allow:
		default:
			return e.refusedWrite(ctx, base, v, w.value)
		}
	} else {
		// Select before operate: the world may have changed while a person
		// thought. Read the interlocks afresh and re-check what the approval
		// cannot vouch for.
		e.gather(ctx, conds, true)
	}
	// Where the actuator stands, read now, when the act depends on it:
	// consent given to an act from one value is not consent from another
	// (a renewal approved after its dead man ran out would start the
	// pump), and a renewal is one only while the actuator still runs.
	was := (*value.Value)(nil)
	if w.resume != nil && w.resume.Current != nil && w.resume.Current.Type != value.TypeNumber {
		was = w.resume.Current // a number's read-back may jitter; a bool, an enum or a string does not
	}
	if c.ReadBack && (was != nil || renewing) {
		var now *devices.Reading
		if obs := e.read(ctx, nil, 0, "gateway:current", w.device, w.capability); obs.Kind == Completed && obs.Reading != nil &&
			obs.Reading.Quality == devices.QualityGood {
			now = obs.Reading
		}
		switch {
		case was != nil && now == nil:
			return e.refusedWrite(ctx, base, governance.Verdict{Outcome: governance.Refuse, Stage: governance.StageUnjudged,
				Why: "at the act: where " + target + " stands cannot be read, and approval " + w.resume.ID + " was given with it at " +
					was.String() + "; ask again"}, w.value)
		case was != nil && !now.Value.Equal(*was):
			return e.refusedWrite(ctx, base, governance.Verdict{Outcome: governance.Refuse, Stage: governance.StageUnjudged,
				Why: "at the act: " + target + " was " + was.String() + " when approval " + w.resume.ID + " was asked and is " +
					now.Value.String() + " now; ask again"}, w.value)
		}
		if renewing && (now == nil || !now.Value.Equal(w.value)) {
			// It no longer runs: this is a start, and its permissives hold.
			allowRenewal = false
			derive(cfg)
			e.gather(ctx, conds, true)
		}
	} else if renewing && !c.ReadBack {
		// Nothing tells whether it still runs: a start, to be safe.
		allowRenewal = false
		derive(cfg)
		e.gather(ctx, conds, true)
	}
	if !steady(true) {
		return e.refusedWrite(ctx, base, unsteady, w.value)
	}
	req.AtAct = true
	req.Mode, req.Now, req.History = e.currentMode(ctx), e.now(), e.history(target, current.Value)
	if v := governance.Judge(&req, cfg.policy); v.Outcome != governance.Allow {
		v.Why = "at the act: " + v.Why
		return e.refusedWrite(ctx, base, v, w.value)
	}
	if why := w.run.leaseLeft(e.now(), true); why != "" {
		o := e.refusedWrite(ctx, base, governance.Verdict{Outcome: governance.Refuse, Why: "lease exhausted: " + why}, w.value)
		o.Stage = "lease"
		return o
	}
	authz := "verdict:" + e.currentMode(ctx)
	if w.resume != nil {
		if why := e.useAuthorization(w.resume, dg); why != "" {
			return e.refusedWrite(ctx, base, governance.Verdict{Outcome: governance.Refuse, Why: why}, w.value)
		}
		authz = w.resume.Authorization.ID
	}
	return e.act(ctx, w, base, ent, c, pol, dg, authz)
}

// writeRequest is the judge's request for writing v to capability c of
// device d under the configuration now, with the capability's policy and
// whether the write is a renewal (allowRenewal lets it be one).
func (e *Engine) writeRequest(now *config, d *devices.Device, c *devices.Capability, principal string, v value.Value,
	allowRenewal bool) (req governance.Request, pol *CapPolicy, renewing bool) {
	target := ref(d.ID, c.Name)
	pol = now.policies[target]
	env := governance.Envelope{Type: c.Type}
	var conds []governance.Condition
	if pol != nil {
		if pol.Envelope != nil {
			env = *pol.Envelope
			env.Type = c.Type
		}
		// A running interlock is also a permissive: an act it would undo
		// at once is not made. Permissives guard a start: a command to
		// the safe value (stopping the pump, closing the valve) is never
		// held up by them.
		conds = append(slices.Clip(pol.Interlocks), pol.While...)
		switch {
		case pol.Safe != nil && v.Equal(*pol.Safe):
			conds = nil
		case allowRenewal && len(pol.Interlocks) > 0 && e.renewal(target, v, pol):
			// A renewal (a running dead man's value again) is no start:
			// only the running interlocks hold it. The act reads the
			// actuator again to be sure it still runs.
			conds, renewing = pol.While, true
		}
	}
	if c.Type == value.TypeEnum && len(env.Allowed) == 0 {
		for _, s := range c.Enum {
			env.Allowed = append(env.Allowed, value.Enum(s))
		}
	}
	req = governance.Request{
		Principal: principal, Device: d.ID, Capability: c.Name, Write: true,
		Profile: Profile(d, c, pol), Value: v, Envelope: &env,
		Interlocks: conds, Facts: &e.facts,
	}
	return req, pol, renewing
}

func (e *Engine) refusedWrite(ctx context.Context, base Observation, v governance.Verdict, value value.Value) Observation {
	if v.Outcome == 0 {
		v.Outcome = governance.Refuse
	}
	base.Kind, base.Why, base.Stage, base.Mode, base.Rule = Refused, v.Why, v.Stage.String(), v.Mode, v.Rule
	_, _ = e.commit(ctx, Prompt, Event{Kind: KindRefused, Run: base.Run, Step: base.Step, Device: base.Device}, RefusedBody{
		Device: base.Device, Capability: base.Capability, Value: &value, Why: v.Why, Stage: v.Stage.String(),
		Mode: v.Mode, Rule: v.Rule, Interlock: v.Interlock,
	}, nil)
	return base
}

// refusedInternal refuses a write because the gateway itself cannot
// witness it. Why says so in public words, with the error's public reason
// if it has one (a journal's integrity report: which record or event is
// wrong); the log has the detail under the observation's error id.
func (e *Engine) refusedInternal(ctx context.Context, base Observation, why string, err error, v value.Value) Observation {
	why = withPublicReason(why, err)
	id := newErrorID()
	e.log.Warn(why, "error_id", id, "device_id", base.Device, "capability", base.Capability, "error", err)
	obs := e.refusedWrite(ctx, base, governance.Verdict{Outcome: governance.Refuse, Stage: governance.StageUnjudged,
		Why: why + " (error id " + id + ")"}, v)
	obs.ErrorID = id
	return obs
}

// withPublicReason adds to why the public reason err gives, if it gives
// one: a journal's failed write says what failed ("no space left on
// device") with its file's path left out.
func withPublicReason(why string, err error) string {
	var pr interface{ PublicReason() string }
	if errors.As(err, &pr) {
		return why + ": " + pr.PublicReason()
	}
	return why
}

// replay answers a repeated request with its first outcome, acting nothing.
func (e *Engine) replay(ctx context.Context, base Observation, prev Attempt, dg string) Observation {
	if prev.Digest != dg {
		return e.refusedWrite(ctx, base, governance.Verdict{Outcome: governance.Refuse,
			Why: "idempotency key " + prev.Key + " was already used for a different act"}, prev.Value)
	}
	base.Replayed = true
	switch prev.State {
	case AttemptReceipt, AttemptReconciled:
		base.Kind, base.Receipt = Acted, prev.Receipt
	case AttemptRefused:
		base.Kind, base.Why = Refused, prev.Why
	default:
		base.Kind, base.Receipt = Failed, prev.Receipt
		base.Why = "the first attempt " + prev.ID + " is " + string(prev.State) + "; it is not repeated"
		if prev.Why != "" {
			base.Why += ": " + prev.Why
		}
	}
	return base
}

// history returns the change history of target for the envelope.
func (e *Engine) history(target string, current value.Value) governance.History {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.changes[target]
	if !ok {
		h := governance.History{}
		if !current.IsZero() {
			h.Current = current
		}
		return h
	}
	return ch.history(current, e.now())
}

func (e *Engine) recordChange(target string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.changes[target]
	if !ok {
		ch = &changes{}
		e.changes[target] = ch
	}
	ch.record(e.now())
}

// pendingFor returns the pending approval of target, if there is one.
func (e *Engine) pendingFor(target string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id, ok := e.byTarget[target]
	return id, ok
}

// park records an approval request for a write and parks its run.
func (e *Engine) park(ctx context.Context, w *writeReq, base Observation, v governance.Verdict, current devices.Reading, pol *CapPolicy) Observation {
	now := e.now()
	mode := e.modeByName(v.Mode)
	ap := Approval{
		ID: newID("apr"), Run: base.Run, Step: w.step, Key: w.key, Kind: "actuation",
		Device: w.device, Capability: w.capability, Value: w.value,
		Principal: w.principal, Origin: w.origin, Reason: w.reason,
		Why: v.Why, Stage: v.Stage.String(), Field: v.Field.String(), Mode: v.Mode,
		Required: max(1, mode.ApprovalsRequired), RequestedAt: now, Expires: now.Add(e.opts.ApprovalTimeout),
		Status: ApprovalPending,
	}
	if !current.Value.IsZero() {
		cv := current.Value
		ap.Current = &cv
	}
	if pol != nil {
		for _, c := range pol.Interlocks {
			ap.Interlocks = append(ap.Interlocks, c.String())
		}
		for _, c := range pol.While {
			ap.Interlocks = append(ap.Interlocks, "while "+c.String())
		}
	}
	p := &pending{rec: ap, decided: make(chan struct{})}
	target := ref(w.device, w.capability)
	if id, busy := e.reservePending(target, ap.ID); busy {
		return e.refused(ctx, base, governance.Verdict{Outcome: governance.Refuse, Why: target + " already has a pending approval " + e.pendingWho(id)})
	}
	rr := w.run.park(now, ap.ID)
	rec := ap
	if _, err := e.commit(ctx, Sync, Event{Kind: KindApprovalRequested, Run: base.Run, Step: w.step, Device: w.device}, &rec,
		func(en *Entry) { en.Approval = &rec; en.Run = rr }); err != nil {
		e.dropPending(target, ap.ID)
		return e.failedQuiet(base, "not asking: the request could not be journaled", err)
	}
	e.filePending(p)
	base.Kind, base.Why, base.Stage, base.Mode = ApprovalRequest, v.Why, v.Stage.String(), v.Mode
	base.Approval = &rec
	return base
}

// reservePending reserves target for the approval id while its request
// is journaled, unless target already has one: then it returns that one's
// id and busy. The approval itself is filed, and can be seen and answered,
// only once its request is durable.
func (e *Engine) reservePending(target, id string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, busy := e.byTarget[target]; busy {
		return cur, true
	}
	e.byTarget[target] = id
	e.filing[id] = make(chan struct{})
	return "", false
}

// filed ends the filing of approval id. e.mu must be held.
func (e *Engine) filed(id string) {
	if ch, ok := e.filing[id]; ok {
		close(ch)
		delete(e.filing, id)
	}
}

// awaitFiled waits, until ctx ends, while the request of approval id is
// being journaled. Its id is published once the request is durable,
// which is a moment before the approval is filed: whoever answers or
// looks it up at once must find it.
func (e *Engine) awaitFiled(ctx context.Context, id string) {
	e.mu.Lock()
	ch := e.filing[id]
	e.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// filePending files p, whose request is journaled, as pending.
func (e *Engine) filePending(p *pending) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.approvals[p.rec.ID] = p
	e.filed(p.rec.ID)
}

// dropPending lifts the reservation of target for id, whose request was
// never journaled.
func (e *Engine) dropPending(target, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byTarget[target] == id {
		delete(e.byTarget, target)
	}
	e.filed(id)
}

// useAuthorization consumes the single-use authorization of an approval,
// or says why it cannot.
func (e *Engine) useAuthorization(ap *Approval, dg string) string {
	az := ap.Authorization
	switch {
	case az == nil:
		return "approval " + ap.ID + " issued no authorization"
	case az.Used:
		return "the authorization of approval " + ap.ID + " was already used"
	case az.Digest != dg:
		return "the authorization of approval " + ap.ID + " is for a different act"
	case e.now().After(az.ValidUntil):
		return "the authorization of approval " + ap.ID + " lapsed at " + az.ValidUntil.Format(time.RFC3339) +
			" (operate_within " + e.opts.OperateWithin.String() + ")"
	}
	// Mark it used on a copy: records already handed out share the old one.
	used := *az
	used.Used = true
	ap.Authorization = &used
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if p, ok := e.approvals[ap.ID]; ok {
			p.rec.Authorization = &used
		}
	}()
	return ""
}

// renewal reports whether writing v to target renews a dead man that
// still runs: the last act put v there with a TTL not yet out, and the
// latest reading of target is v, good, and no older than the start
// permissives trust their own readings to be. The act reads it again.
func (e *Engine) renewal(target string, v value.Value, pol *CapPolicy) bool {
	rc, ok := e.receipt(target)
	if !ok || rc.Driver != "ok" || !rc.Value.Equal(v) || !rc.Until.After(e.now()) {
		return false
	}
	rd, ok := e.facts.get(target)
	if !ok || rd.Quality != devices.QualityGood || !rd.Value.Equal(v) {
		return false
	}
	age := e.now().Sub(rd.At)
	for _, c := range pol.Interlocks {
		if age > maxAge(c) {
			return false
		}
	}
	return true
}

// pendingWho names the pending approval id and who asked for it, when,
// for a refusal that names it: the one refused learns whose request
// stands in the way.
func (e *Engine) pendingWho(id string) string {
	ap, ok := e.Approval(id)
	if !ok {
		return id
	}
	return id + ", asked by " + ap.Principal + " at " + ap.RequestedAt.UTC().Format("2006-01-02 15:04:05Z")
}
