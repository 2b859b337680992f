package runtime

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
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
}

// drift is a change of an actuator's read-back the guard must record.
type drift struct {
	target   string
	from, to devices.Reading
}

// safety holds the guard's work.
type safety struct {
	// mu guards jobs and drifts.
	mu     sync.Mutex
	jobs   map[string]*safeJob
	drifts []drift
	wake   chan struct{}
}

func (s *safety) init() {
	s.jobs = map[string]*safeJob{}
	s.wake = make(chan struct{}, 1)
}

func (s *safety) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// request adds a drive to safe unless one is already owed for its target.
func (s *safety) request(j safeJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[j.target]; ok {
		return
	}
	s.jobs[j.target] = &j
	s.poke()
}

// now makes the owed drives of device due at once: it was found again.
func (s *safety) now(device string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, j := range s.jobs {
		if dev, _ := splitRef(t); dev == device {
			j.next = time.Time{}
		}
	}
	s.poke()
}

// maxDrifts bounds the drifts waiting for the guard; more are dropped and
// logged, which a flapping contact could otherwise cause.
const maxDrifts = 256

// guard carries out drives to safe, running interlocks on staleness, TTL
// expiry and drift records until ctx is done.
func (e *Engine) guard(ctx context.Context) {
	cfg := e.conf()
	for _, t := range slices.Sorted(maps.Keys(cfg.policies)) {
		if p := cfg.policies[t]; p.Safe != nil && p.OnStart == SafeDrive {
			e.safety.request(safeJob{target: t, trigger: TriggerStart, why: "on_start: safe"})
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		e.guardOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.safety.wake:
		}
	}
}

// guardOnce does what is due now.
func (e *Engine) guardOnce(ctx context.Context) {
	e.recordDrifts(ctx)
	e.expireTTLs()
	e.checkStale(ctx)
	now := e.now()
	var due []safeJob
	func() {
		e.safety.mu.Lock()
		defer e.safety.mu.Unlock()
		for _, j := range e.safety.jobs {
			if !now.Before(j.next) {
				due = append(due, *j)
			}
		}
	}()
	slices.SortFunc(due, func(a, b safeJob) int { return strings.Compare(a.target, b.target) })
	for _, j := range due {
		if ctx.Err() != nil {
			return
		}
		e.runSafeJob(ctx, j)
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

// runSafeJob makes one try of a drive to safe.
func (e *Engine) runSafeJob(ctx context.Context, j safeJob) {
	j.tries++
	done, why := e.driveSafe(ctx, j)
	dev, capability := splitRef(j.target)
	e.safety.mu.Lock()
	cur, ok := e.safety.jobs[j.target]
	if done {
		if ok {
			delete(e.safety.jobs, j.target)
		}
	} else if ok {
		cur.tries, cur.next = j.tries, e.now().Add(backoff(j.tries))
	}
	next := time.Time{}
	if ok && !done {
		next = cur.next
	}
	e.safety.mu.Unlock()
	if done {
		e.clearAlarm(ctx, AlarmSafeDrive, dev, capability, j.target+" is at its safe value")
		e.clearAlarm(ctx, AlarmInterlock, dev, capability, j.target+" is at its safe value")
		return
	}
	if ctx.Err() != nil {
		return
	}
	msg := "the drive of " + j.target + " to safe (" + j.trigger + ": " + j.why + ") failed: " + why
	if !next.IsZero() {
		msg += "; try " + strconv.Itoa(j.tries+1) + " at " + next.Format(time.RFC3339)
	}
	e.raise(ctx, AlarmSafeDrive, dev, capability, msg, "")
}

// driveSafe drives j's actuator to its safe value, unless it is known to
// be there already or the reason is gone (a TTL renewed). It reports
// whether the job is done, and if not why.
func (e *Engine) driveSafe(ctx context.Context, j safeJob) (bool, string) {
	dev, capability := splitRef(j.target)
	pol := e.conf().policies[j.target]
	if pol == nil || pol.Safe == nil {
		return true, ""
	}
	if j.trigger == TriggerTTL {
		if rc, ok := e.receipt(j.target); !ok || rc.Until.IsZero() || e.now().Before(rc.Until) {
			return true, "" // renewed meanwhile
		}
	}
	body := SafeDriveBody{Device: dev, Capability: capability, Trigger: j.trigger, Why: j.why, Safe: *pol.Safe,
		Condition: j.condition, Reading: j.reading, Try: j.tries, Outcome: "driving"}
	if e.atSafe(ctx, j.target, pol) {
		e.dropUntil(j.target)
		if j.tries > 1 || j.trigger == TriggerInterlock || j.trigger == TriggerDiscrepancy {
			body.Outcome = "done"
			body.Why += "; it is already at its safe value"
			_, _ = e.commit(ctx, Sync, Event{Kind: KindSafeDrive, Device: dev}, body, nil)
		}
		return true, ""
	}
	if j.trigger == TriggerInterlock && j.tries == 1 {
		e.raise(ctx, AlarmInterlock, dev, capability, j.why, "")
	}
	if _, err := e.commit(ctx, Sync, Event{Kind: KindSafeDrive, Device: dev}, body, nil); err != nil {
		return false, "the drive could not be journaled: " + err.Error()
	}
	e.log.Warn("driving to safe", "device_id", dev, "capability", capability, "trigger", j.trigger, "why", j.why, "try", j.tries)
	obs := e.write(ctx, &writeReq{key: PrincipalSafety + "/" + newID("safe"), principal: PrincipalSafety, origin: "safety",
		reason: j.trigger + ": " + j.why, device: dev, capability: capability, value: *pol.Safe, safety: j.trigger})
	switch {
	case obs.Kind != Acted:
		return false, obs.Why
	case obs.Receipt != nil && obs.Receipt.Confirmation.Discrepant():
		return false, string(obs.Receipt.Confirmation) + ": " + obs.Receipt.Detail
	}
	return true, ""
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
		now := e.now()
		var stale []governance.Condition
		for _, c := range pol.While {
			if f, ok := e.facts.Fact(c.Sensor); !ok || !f.Good || now.Sub(f.At) > maxAge(c) {
				stale = append(stale, c)
			}
		}
		if len(stale) == 0 {
			continue
		}
		e.gather(ctx, stale, true)
		e.checkWhile(cfg, t, pol, e.now(), true)
	}
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
// every run, so that none acts again, and waits for them. Drives that
// fail are logged and alarmed; they are not retried. Call it before the
// engine's Run ends.
func (e *Engine) SafeStop(ctx context.Context) {
	e.stop()
	e.wg.Wait()
	cfg := e.conf()
	for _, t := range slices.Sorted(maps.Keys(cfg.policies)) {
		p := cfg.policies[t]
		if p.Safe == nil || p.OnStop == SafeKeep || ctx.Err() != nil {
			continue
		}
		j := safeJob{target: t, trigger: TriggerStop, why: "the gateway is stopping", tries: 1}
		if done, why := e.driveSafe(ctx, j); !done {
			dev, capability := splitRef(t)
			e.raise(ctx, AlarmSafeDrive, dev, capability, "the drive of "+t+" to safe as the gateway stopped failed: "+why, "")
		}
	}
}
