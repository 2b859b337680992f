package runtime

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
)

// Safety in time: what the gateway does once an actuator is on. A dead-man
// TTL reverts an actuation to its safe value unless renewed; running
// interlocks (while) drive it to safe when one stops holding; a discrepancy
// can drive it to safe; a clean stop and, if configured, a start drive it
// to safe. Every drive to safe is a step under the gateway's own principal,
// journaled with its reason, allowed in every mode and never held up by an
// approval. One goroutine, the guard, carries them out, retrying a failed
// drive with backoff and raising an alarm. An actuator whose read-back
// changes with no command from the gateway is drift: recorded and alarmed,
// never fought.

// PrincipalSafety is the principal of every drive to safe.
const PrincipalSafety = "gateway:safety"

// Why a drive to safe was made.
const (
	TriggerTTL         = "ttl"
	TriggerInterlock   = "interlock"
	TriggerDiscrepancy = "discrepancy"
	TriggerStop        = "stop"
	TriggerStart       = "start"
	// TriggerRestart: a drive that had failed was still owed when the
	// gateway stopped.
	TriggerRestart = "restart"
)

// Event kinds of safety in time.
const (
	// KindSafeDrive records a drive to safe before it is made: what
	// triggered it and why. Its act follows as invoked/acted records
	// under PrincipalSafety.
	KindSafeDrive Kind = "safe_drive"
	// KindDrift records an actuator whose read-back changed with no
	// command from the gateway.
	KindDrift Kind = "drift"
)

// SafeDriveBody is the body of a safe_drive event.
type SafeDriveBody struct {
	Device     string      `json:"device"`
	Capability string      `json:"capability"`
	Trigger    string      `json:"trigger"`
	Why        string      `json:"why"`
	Safe       value.Value `json:"safe"`
	// Condition and Reading name the running interlock that broke and the
	// reading that broke it (absent when no reading was had).
	Condition string           `json:"condition,omitempty"`
	Reading   *devices.Reading `json:"reading,omitempty"`
	// Try counts the attempts of this drive, from 1.
	Try int `json:"try"`
	// Outcome is "driving" before the act, "done" after a drive that was
	// not needed (already at safe) or no longer wanted.
	Outcome string `json:"outcome"`
}

// DriftBody is the body of a drift event.
type DriftBody struct {
	Device     string      `json:"device"`
	Capability string      `json:"capability"`
	From       value.Value `json:"from"`
	To         value.Value `json:"to"`
	// Commanded is the value the gateway last commanded, if any.
	Commanded *value.Value `json:"commanded,omitempty"`
	At        time.Time    `json:"at"`
}

// safeJob is a drive to safe the guard owes.
type safeJob struct {
	target    string
	trigger   string
	why       string
	condition string
	reading   *devices.Reading
	tries     int
	next      time.Time
	// running is set while a worker makes a try.
	running bool
}

// drift is a change of an actuator's read-back the guard must record.
type drift struct {
	target   string
	from, to devices.Reading
}

// safety holds the guard's work.
type safety struct {
	// mu guards everything below.
	mu     sync.Mutex
	jobs   map[string]*safeJob
	drifts []drift
	// confirming holds, by target, the cancel of the confirmation of an
	// act in progress: a drive to safe owed for the target cuts it short,
	// so that the actuator's lock is not held from the drive.
	confirming map[string]context.CancelCauseFunc
	wake       chan struct{}
}

// errPreempted cuts short a confirmation for a drive to safe.
var errPreempted = errors.New("a drive to safe took over")

// errEngineStopping cuts short a confirmation as the gateway stops.
var errEngineStopping = errors.New("the gateway is stopping")

func (s *safety) init() {
	s.jobs = map[string]*safeJob{}
	s.confirming = map[string]context.CancelCauseFunc{}
	s.wake = make(chan struct{}, 1)
}

func (s *safety) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// request owes a drive to safe, unless one is already owed for its
// target, and cuts short the confirmation of an act on the target.
func (s *safety) request(j safeJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel, ok := s.confirming[j.target]; ok {
		cancel(errPreempted)
	}
	if cur, ok := s.jobs[j.target]; ok {
		if cur.trigger == TriggerTTL && j.trigger != TriggerTTL {
			// A TTL drive may turn out moot (renewed); this one is not:
			// it takes the TTL's place, keeping its tries.
			cur.trigger, cur.why, cur.condition, cur.reading = j.trigger, j.why, j.condition, j.reading
			s.poke()
		}
		return
	}
	s.jobs[j.target] = &j
	s.poke()
}

// dueNow makes the owed drives of device due at once: it was found again.
func (s *safety) dueNow(device string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, j := range s.jobs {
		if dev, _ := splitRef(t); dev == device {
			j.next = time.Time{}
		}
	}
	s.poke()
}

// confirmContext returns the context an act's confirmation runs under. A
// drive to safe confirms under its own ctx. Any other act's confirmation
// ends when the engine stops or when a drive to safe is owed for target;
// done releases it.
func (e *Engine) confirmContext(ctx context.Context, target string, safety bool) (context.Context, func()) {
	if safety {
		return ctx, func() {}
	}
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopLife := context.AfterFunc(e.life, func() { cancel(errEngineStopping) })
	// A person who cancels the run cuts its confirmation short too.
	stopRun := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	stop := func() { stopLife(); stopRun() }
	e.safety.mu.Lock()
	e.safety.confirming[target] = cancel
	_, owed := e.safety.jobs[target]
	e.safety.mu.Unlock()
	if owed {
		cancel(errPreempted)
	}
	return cctx, sync.OnceFunc(func() {
		stop()
		e.safety.mu.Lock()
		delete(e.safety.confirming, target)
		e.safety.mu.Unlock()
		cancel(nil)
	})
}

// maxDrifts bounds the drifts waiting for the guard; more are dropped and
// logged, which a flapping contact could otherwise cause.
const maxDrifts = 256

// guard carries out drives to safe, running interlocks on staleness, TTL
// expiry and drift records until ctx is done. Each drive to safe runs in
// a worker of its own, so that one slow actuator holds up no other.
func (e *Engine) guard(ctx context.Context) {
	var workers sync.WaitGroup
	defer workers.Wait()
	cfg := e.conf()
	for _, t := range slices.Sorted(maps.Keys(cfg.policies)) {
		if p := cfg.policies[t]; p.Safe != nil && p.OnStart == SafeDrive {
			e.safety.request(safeJob{target: t, trigger: TriggerStart, why: "on_start: safe"})
		}
	}
	e.owedBefore(cfg)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		e.guardOnce(ctx, &workers)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.safety.wake:
		}
	}
}

// owedBefore owes again the drives to safe a stop cut short: those whose
// alarm still stands with its condition (a failed drive, a tripped running
// interlock, a discrepancy with on_contradiction: safe).
func (e *Engine) owedBefore(cfg *config) {
	for _, a := range e.Alarms() {
		t := ref(a.Device, a.Capability)
		pol := cfg.policies[t]
		if !a.Condition || pol == nil || pol.Safe == nil {
			continue
		}
		why := "owed when the gateway stopped (alarm " + a.ID + ")"
		switch {
		case a.Kind == AlarmInterlock:
			e.safety.request(safeJob{target: t, trigger: TriggerInterlock, why: why})
		case a.Kind == AlarmSafeDrive:
			e.safety.request(safeJob{target: t, trigger: TriggerRestart, why: why})
		case a.Kind == AlarmDiscrepancy && pol.Confirm != nil && pol.Confirm.OnDiscrepancy == SafeDrive && !e.lastCommanded(t, *pol.Safe):
			// Not after an act to the safe value: a hand that moved it
			// since is drift, never fought.
			e.safety.request(safeJob{target: t, trigger: TriggerDiscrepancy, why: why})
		}
	}
}

// guardOnce does what is due now, starting a worker for each drive to
// safe that is due and not already being tried.
func (e *Engine) guardOnce(ctx context.Context, workers *sync.WaitGroup) {
	e.recordDrifts(ctx)
	e.expireTTLs()
	e.checkStale(ctx)
	now := e.now()
	e.safety.mu.Lock()
	defer e.safety.mu.Unlock()
	for _, j := range e.safety.jobs {
		if j.running || now.Before(j.next) || ctx.Err() != nil {
			continue
		}
		j.running = true
		job := *j
		workers.Go(func() { e.runSafeJob(ctx, job) })
	}
}

// backoff is the wait before try n+1 of a failed drive to safe: 1s, 2s,
// 4s ... at most a minute.
func backoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// The outcomes of a drive to safe.
const (
	driven = iota // the actuator is at its safe value
	moot          // it is no longer owed (a TTL renewed, no safe value)
	failed        // it was not driven; it is tried again
)

// runSafeJob makes one try of a drive to safe.
func (e *Engine) runSafeJob(ctx context.Context, j safeJob) {
	j.tries++
	outcome, why := e.driveSafe(ctx, j)
	dev, capability := splitRef(j.target)
	var next time.Time
	func() {
		e.safety.mu.Lock()
		defer e.safety.mu.Unlock()
		cur, ok := e.safety.jobs[j.target]
		if !ok {
			return
		}
		if outcome == moot && cur.trigger != j.trigger {
			// Another trigger took the job's place meanwhile: it is owed.
			cur.running, cur.next = false, time.Time{}
			return
		}
		if outcome != failed {
			delete(e.safety.jobs, j.target)
			return
		}
		cur.running, cur.tries = false, j.tries
		cur.next = e.now().Add(backoff(j.tries))
		next = cur.next
	}()
	e.safety.poke()
	switch {
	case outcome == driven:
		e.clearAlarm(ctx, AlarmSafeDrive, dev, capability, j.target+" is at its safe value")
		e.clearAlarm(ctx, AlarmInterlock, dev, capability, j.target+" is at its safe value")
	case outcome == moot:
		e.clearAlarm(ctx, AlarmSafeDrive, dev, capability, "the drive of "+j.target+" to safe is no longer owed: "+why)
	case ctx.Err() == nil:
		msg := "the drive of " + j.target + " to safe (" + j.trigger + ": " + j.why + ") failed: " + why
		if !next.IsZero() {
			msg += "; try " + strconv.Itoa(j.tries+1) + " at " + next.Format(time.RFC3339)
		}
		e.raise(ctx, AlarmSafeDrive, dev, capability, msg, "")
	}
}

// driveSafe drives j's actuator to its safe value, unless it is known to
// be there already or the drive is no longer owed (a TTL renewed, which is
// checked again under the actuator's lock). It says what came of it, and
// why when it is not driven.
func (e *Engine) driveSafe(ctx context.Context, j safeJob) (int, string) {
	dev, capability := splitRef(j.target)
	pol := e.conf().policies[j.target]
	if pol == nil || pol.Safe == nil {
		return moot, "it has no safe value any more"
	}
	var still func() string
	if j.trigger == TriggerTTL {
		still = func() string { return e.renewed(j.target, pol) }
		if why := still(); why != "" {
			return moot, why
		}
	}
	body := SafeDriveBody{Device: dev, Capability: capability, Trigger: j.trigger, Why: j.why, Safe: *pol.Safe,
		Condition: j.condition, Reading: j.reading, Try: j.tries, Outcome: "driving"}
	if e.atSafe(ctx, j.target, pol) {
		e.dropUntil(j.target)
		if j.tries > 1 || j.trigger == TriggerDiscrepancy {
			body.Outcome = "done"
			body.Why += "; it is already at its safe value"
			_, _ = e.commit(ctx, Sync, Event{Kind: KindSafeDrive, Device: dev}, body, nil)
		}
		return driven, ""
	}
	if j.trigger == TriggerInterlock && j.tries == 1 {
		e.raise(ctx, AlarmInterlock, dev, capability, j.why, "")
	}
	e.log.Warn("driving to safe", "device_id", dev, "capability", capability, "trigger", j.trigger, "why", j.why, "try", j.tries)
	obs := e.write(ctx, &writeReq{key: PrincipalSafety + "/" + newID("safe"), principal: PrincipalSafety, origin: "safety",
		reason: j.trigger + ": " + j.why, device: dev, capability: capability, value: *pol.Safe,
		safety: j.trigger, safeDrive: &body, still: still})
	switch {
	case obs.Stage == stageMoot:
		return moot, obs.Why
	case obs.Kind != Acted:
		return failed, obs.Why
	case obs.Receipt != nil && (obs.Receipt.Confirmation.Discrepant() || obs.Receipt.Confirmation == Unconfirmed):
		// Not known to be safe: tried again (a read-back that shows it
		// safe ends it).
		return failed, string(obs.Receipt.Confirmation) + ": " + obs.Receipt.Detail
	}
	return driven, ""
}

// lastCommanded reports whether target's last act was to v.
func (e *Engine) lastCommanded(target string, v value.Value) bool {
	rc, ok := e.receipt(target)
	return ok && rc.Value.Equal(v)
}

// stageMoot marks a drive to safe found no longer owed under its lock.
const stageMoot = "moot"

// renewed says why target's TTL no longer runs out (a newer act to a
// value other than safe, with a dead man still running), or "".
func (e *Engine) renewed(target string, pol *CapPolicy) string {
	rc, ok := e.receipt(target)
	if ok && !rc.Value.Equal(*pol.Safe) && rc.Until.After(e.now()) {
		return "renewed by attempt " + rc.Attempt + " until " + rc.Until.Format(time.RFC3339)
	}
	return ""
}

// atSafe reports whether target is known to be at its safe value: read
// back now when it can be, else by its last receipt.
func (e *Engine) atSafe(ctx context.Context, target string, pol *CapPolicy) bool {
	dev, capability := splitRef(target)
	if _, c, ok := e.Capability(dev, capability); ok && c.ReadBack {
		obs := e.read(ctx, nil, 0, PrincipalSafety, dev, capability)
		return obs.Kind == Completed && obs.Reading != nil && obs.Reading.Quality == devices.QualityGood && obs.Reading.Value.Equal(*pol.Safe)
	}
	rc, ok := e.receipt(target)
	return ok && rc.Value.Equal(*pol.Safe) && !rc.Confirmation.Discrepant() && rc.Driver == "ok"
}

// known returns target's value as last known: its read-back, or the value
// of its last receipt.
func (e *Engine) known(target string) (value.Value, bool) {
	if rd, ok := e.facts.get(target); ok && rd.Quality == devices.QualityGood {
		return rd.Value, true
	}
	if rc, ok := e.receipt(target); ok && rc.Driver == "ok" && !rc.Confirmation.Discrepant() {
		return rc.Value, true
	}
	return value.Value{}, false
}

// away reports whether target may be away from its safe value: known
// elsewhere, or not known at all.
func (e *Engine) away(target string, pol *CapPolicy) bool {
	v, ok := e.known(target)
	return !ok || !v.Equal(*pol.Safe)
}

func (e *Engine) receipt(target string) (Receipt, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rc, ok := e.receipts[target]
	return rc, ok
}

// dropUntil forgets the TTL of target's last receipt, which found it at
// safe already, so that it is not looked at again every second.
func (e *Engine) dropUntil(target string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rc, ok := e.receipts[target]; ok && !rc.Until.IsZero() {
		rc.Until = time.Time{}
		e.receipts[target] = rc
	}
}

// expireTTLs owes a drive to safe for every actuation whose TTL ran out.
func (e *Engine) expireTTLs() {
	now := e.now()
	var due []Receipt
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, rc := range e.receipts {
			if !rc.Until.IsZero() && !now.Before(rc.Until) {
				due = append(due, rc)
			}
		}
	}()
	for _, rc := range due {
		e.safety.request(safeJob{target: ref(rc.Device, rc.Capability), trigger: TriggerTTL,
			why: "the TTL of attempt " + rc.Attempt + " (" + rc.Value.String() + ") ran out at " + rc.Until.Format(time.RFC3339) + " without renewal"})
	}
}

// checkStale evaluates the running interlocks of every actuator away from
// safe whose sensors' readings are missing, bad or stale, reading them
// afresh first.
func (e *Engine) checkStale(ctx context.Context) {
	cfg := e.conf()
	for _, t := range cfg.guarded {
		pol := cfg.policies[t]
		if !e.away(t, pol) {
			continue
		}
		// A reading past half its max_age is read again, so that a sensor
		// nobody polls still stops the actuator within max_age. One whose
		// device is offline is not asked: its readings are bad already.
		now := e.now()
		var due []governance.Condition
		for _, c := range pol.While {
			if f, ok := e.facts.Fact(c.Sensor); ok && f.Good && now.Sub(f.At) <= maxAge(c)/2 {
				continue
			}
			if dev, _ := splitRef(c.Sensor); !e.online(dev) {
				continue
			}
			due = append(due, c)
		}
		if len(due) > 0 {
			e.gather(ctx, due, true)
		}
		e.checkWhile(cfg, t, pol, e.now(), true)
	}
}

func (e *Engine) online(device string) bool {
	_, ok := e.reg.Lookup(device)
	return ok
}

// checkWhile evaluates target's running interlocks and owes a drive to
// safe when one does not hold. Without strict, a condition whose reading
// is only stale is left for checkStale, which reads it again first.
func (e *Engine) checkWhile(cfg *config, target string, pol *CapPolicy, now time.Time, strict bool) {
	if !e.away(target, pol) {
		return
	}
	for _, c := range pol.While {
		f, known := e.facts.Fact(c.Sensor)
		if !strict && (!known || f.Good && now.Sub(f.At) > maxAge(c)) {
			continue // checkStale reads it afresh first
		}
		ok, why := c.Eval(&e.facts, now)
		if ok {
			continue
		}
		j := safeJob{target: target, trigger: TriggerInterlock, condition: c.String(),
			why: "running interlock " + c.String() + " broke: " + why}
		if rd, ok := e.facts.get(c.Sensor); ok {
			j.reading = &rd
		}
		e.safety.request(j)
		return
	}
}

// onReading is told every reading kept. It evaluates the running
// interlocks that name the reading, or the actuator's own, and notes a
// change of an actuator's read-back the gateway did not command.
func (e *Engine) onReading(name string, old devices.Reading, hadOld bool, rd devices.Reading) {
	cfg := e.conf()
	now := e.now()
	for _, t := range cfg.whileBy[name] {
		e.checkWhile(cfg, t, cfg.policies[t], now, false)
	}
	if pol := cfg.policies[name]; pol != nil {
		if len(pol.While) > 0 {
			e.checkWhile(cfg, name, pol, now, false)
		}
		if hadOld && old.Quality == devices.QualityGood && rd.Quality == devices.QualityGood &&
			!old.Value.Equal(rd.Value) && !e.acting(name) {
			e.safety.mu.Lock()
			if len(e.safety.drifts) < maxDrifts {
				e.safety.drifts = append(e.safety.drifts, drift{target: name, from: old, to: rd})
			} else {
				e.log.Warn("drift not recorded: too many waiting", "target", name)
			}
			e.safety.mu.Unlock()
			e.safety.poke()
		}
	}
}

// acting reports whether an act on target is under way (its actuator lock
// is held): a change of its read-back then is the act's own.
func (e *Engine) acting(target string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.actLocks[target]
	return ok && len(ch) > 0
}

// recordDrifts journals the drifts noted since the last time, and raises
// or clears their alarms. It never drives the actuator back.
func (e *Engine) recordDrifts(ctx context.Context) {
	e.safety.mu.Lock()
	ds := e.safety.drifts
	e.safety.drifts = nil
	e.safety.mu.Unlock()
	for _, d := range ds {
		dev, capability := splitRef(d.target)
		body := DriftBody{Device: dev, Capability: capability, From: d.from.Value, To: d.to.Value, At: d.to.At}
		rc, commanded := e.receipt(d.target)
		if commanded {
			v := rc.Value
			body.Commanded = &v
		}
		if _, err := e.commit(ctx, Sync, Event{Kind: KindDrift, Device: dev}, body, nil); err != nil {
			e.log.Error("a drift could not be journaled", "target", d.target, "error", err)
		}
		why := d.target + " changed from " + d.from.Value.String() + " to " + d.to.Value.String() + " with no command from the gateway"
		switch {
		case commanded && d.to.Value.Equal(rc.Value):
			e.clearAlarm(ctx, AlarmDrift, dev, capability, d.target+" is back at the commanded "+rc.Value.String())
		case commanded:
			e.raise(ctx, AlarmDrift, dev, capability, why+" (the gateway last commanded "+rc.Value.String()+")", "")
		default:
			// Never commanded: there is nothing to return to; a person is
			// still told.
			e.raise(ctx, AlarmDrift, dev, capability, why, "")
			e.clearAlarm(ctx, AlarmDrift, dev, capability, "")
		}
	}
}

// SafeStop drives every actuator with a safe value to it, unless its
// policy says on_stop: keep, as the gateway stops cleanly. It first stops
// every run, so that none acts again, and cuts short their confirmations;
// it waits for them while ctx allows. The drives are made at once, each in
// its own goroutine, within ctx. A drive that fails or that ctx leaves no
// time for is logged and alarmed; none is retried. Call it before the
// engine's Run ends.
func (e *Engine) SafeStop(ctx context.Context) {
	e.stop()
	ended := make(chan struct{})
	go func() { e.wg.Wait(); close(ended) }() // ends with the runs, which end within the driver timeout
	select {
	case <-ended:
	case <-ctx.Done():
		e.log.Error("runs had not ended when the time to stop ran out; driving to safe regardless")
	}
	cfg := e.conf()
	var drives sync.WaitGroup
	for _, t := range slices.Sorted(maps.Keys(cfg.policies)) {
		p := cfg.policies[t]
		if p.Safe == nil || p.OnStop == SafeKeep {
			continue
		}
		drives.Go(func() {
			j := safeJob{target: t, trigger: TriggerStop, why: "the gateway is stopping", tries: 1}
			if outcome, why := e.driveSafe(ctx, j); outcome == failed {
				if ctx.Err() != nil {
					why += " (the time to stop ran out)"
				}
				dev, capability := splitRef(t)
				e.log.Error("not driven to safe as the gateway stopped", "device_id", dev, "capability", capability, "why", why)
				e.raise(context.WithoutCancel(ctx), AlarmSafeDrive, dev, capability, "the drive of "+t+" to safe as the gateway stopped failed: "+why, "")
			}
		})
	}
	drives.Wait()
}
