package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
)

// Options configure an Engine. The zero value of each duration means its
// default.
type Options struct {
	Registry *devices.Registry
	Journal  Journal
	// Policies holds the governance of each capability by "device.capability".
	Policies map[string]CapPolicy
	// Modes are the configured modes, each checked with
	// governance.CheckConfigured. The shipped modes are always known.
	Modes []governance.Mode
	// Mode is the mode at first start. Default supervised.
	Mode string
	// Rules are standing rules from the configuration.
	Rules []governance.Rule
	// Plans are the named plans.
	Plans []Plan
	// OperateWithin is how long an approval's authorization stays valid.
	// Default 15s.
	OperateWithin time.Duration
	// ApprovalTimeout is how long a request waits for people. Default 10m.
	ApprovalTimeout time.Duration
	// MaxRuleTTL caps the life of a rule added with an approval. Default 24h.
	MaxRuleTTL time.Duration
	// DriverTimeout bounds one driver call. Default 5s.
	DriverTimeout time.Duration
	// CommandLease bounds a single command's run. Default 1 step, 1 actuation, 15m.
	CommandLease Lease
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives operational logs. Nil discards them.
	Logger *slog.Logger
	// OnStep, if set, is told the outcome and duration of every read and
	// write step, for metrics. It must not block.
	OnStep func(ObservationKind, time.Duration)
	// AlarmClasses sets the priority and latching of alarms by kind;
	// a kind left out has its DefaultAlarmClasses entry.
	AlarmClasses map[AlarmKind]AlarmClass
	// MaxShelve bounds how long an admin may shelve an alarm. Default 8h.
	MaxShelve time.Duration
	// Person names the person behind a principal, so that four-eyes counts
	// people, not the surfaces they come through: "mqtt:ann" and
	// "console:ann" are one person. It must be pure and fast; it is called
	// with the engine's lock held. Nil means the part after the first
	// colon ("console:ann" is "ann"); an empty answer means the principal
	// is a person of its own.
	Person func(principal string) string
}

// Errors of the engine.
var (
	// ErrStopped is returned once the engine has stopped.
	ErrStopped = errors.New("engine stopped")
	// ErrUnknownPlan is returned for a plan that is not configured.
	ErrUnknownPlan = errors.New("unknown plan")
	// ErrUnknownMode is returned for a mode that is not known.
	ErrUnknownMode = errors.New("unknown mode")
	// ErrApprovalNotFound is returned for an approval id that does not exist.
	ErrApprovalNotFound = errors.New("approval not found")
	// ErrApprovalClosed is returned for an answer to an approval that is no
	// longer pending (answered, expired or superseded).
	ErrApprovalClosed = errors.New("approval is no longer pending")
	// ErrNotPermitted is returned when the person may not give this answer.
	ErrNotPermitted = errors.New("not permitted")
	// ErrRuleNotFound is returned for a rule id that does not exist.
	ErrRuleNotFound = errors.New("rule not found")
	// ErrRuleFromConfiguration is returned for a revocation of a rule the
	// configuration file makes: it is removed by editing the file.
	ErrRuleFromConfiguration = errors.New("the rule comes from the configuration file; remove it there")
	// ErrNotWitnessed is returned when the journal could not record a
	// decision or a step, so it did not take effect. It is the gateway's
	// failure, not the caller's.
	ErrNotWitnessed = errors.New("the journal could not record it")
	// ErrModeChangePending is returned for a widening mode change while
	// another one waits for an admin.
	ErrModeChangePending = errors.New("a mode change is already pending")
)

// Engine runs governed steps. It is safe for concurrent use. It owns the
// goroutine of every run it starts, and those of pollers and schedules
// started by Run; Close (or the end of Run) cancels them and waits.
type Engine struct {
	reg  *devices.Registry
	j    Journal
	now  func() time.Time
	log  *slog.Logger
	opts Options
	// cfg is the configuration in force; Reconfigure swaps it whole.
	cfg       atomic.Pointer[config]
	facts     facts
	links     links
	alarms    alarms
	safety    safety
	bus       bus
	unhealthy atomic.Pointer[string]

	life context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	// decide serialises the decisions that are journaled before they take
	// effect: answers, expiries, mode changes, rules, settling locked
	// attempts. It is held across the decision's commit, so that the state
	// it checked is still the state it changes. It is taken before mu,
	// never while mu is held. Steps never take it, except to journal the
	// fall back of an expired mode.
	decide sync.Mutex

	// mu guards everything below. It is never held across a journal
	// commit or a driver call: a slow disk or device stalls no other step.
	mu        sync.Mutex
	mode      ModeRecord
	rules     map[string]RuleRecord
	approvals map[string]*pending
	byTarget  map[string]string // "device.capability" -> pending approval id
	// filing holds the approvals whose request is being journaled, each
	// closed once it is filed or dropped: an answer to one waits for it.
	filing   map[string]chan struct{}
	runs     map[string]*run
	requests map[string]*run // idempotency key of a command -> its run
	ended    []*run          // ended runs still held, oldest first
	// startedBy holds, oldest first, the request keys of ended plan runs
	// filed in requests by their record alone (fileEndedLocked), at most
	// maxStartedBy.
	startedBy []string
	changes   map[string]*changes
	actLocks  map[string]chan struct{}
	// locked holds, by "device.capability", the attempt whose effect is
	// unknown: every write to the actuator is refused until it is
	// reconciled by a read-back or resolved by an admin.
	locked map[string]Attempt
	// restoredSeq is the newest sequence in the journal at start, and
	// restoredAt the time of that event.
	restoredSeq uint64
	restoredAt  time.Time
	// restoredLocks are the attempts that held actuators locked at start,
	// for Run to read back once. Set by New, then only read.
	restoredLocks []Attempt
	// receipts holds the latest receipt of each actuator.
	receipts map[string]Receipt
}

// pending is an approval waiting for people, and the channel its run waits on.
type pending struct {
	rec     Approval
	decided chan struct{} // closed once rec.Status is no longer pending
	// terms holds, by the By of each approve_and_rule answer, the rule its
	// person asked for. It is not journaled: after a restart an answer
	// without terms counts as asking for the narrowest rule.
	terms map[string]ruleTerms
}

// New builds an engine from opts, restoring approvals, rules, runs and the
// mode from the journal. It checks configured modes and rules.
func New(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Registry == nil || opts.Journal == nil {
		return nil, errors.New("engine needs a registry and a journal")
	}
	setDefaults(&opts)
	e := &Engine{
		reg: opts.Registry, j: opts.Journal, now: opts.Now, log: opts.Logger, opts: opts,
		facts:     facts{m: map[string]devices.Reading{}},
		rules:     map[string]RuleRecord{},
		approvals: map[string]*pending{},
		byTarget:  map[string]string{},
		filing:    map[string]chan struct{}{},
		runs:      map[string]*run{},
		requests:  map[string]*run{},
		changes:   map[string]*changes{},
		actLocks:  map[string]chan struct{}{},
		locked:    map[string]Attempt{},
		receipts:  map[string]Receipt{},
	}
	e.alarms.m = map[string]*Alarm{}
	e.safety.init()
	e.bus.ch = make(chan struct{})
	if n, ok := opts.Journal.(notifier); ok {
		n.Notify(e.bus.publish)
	}
	cfg, err := checkConfig(Config{Policies: opts.Policies, Modes: opts.Modes, Rules: opts.Rules, Plans: opts.Plans})
	if err != nil {
		return nil, err
	}
	e.cfg.Store(cfg)
	for _, r := range cfg.rules {
		e.rules[r.ID] = RuleRecord{Rule: r}
	}
	if _, ok := cfg.modes[opts.Mode]; !ok {
		return nil, fmt.Errorf("initial mode %q: %w", opts.Mode, ErrUnknownMode)
	}
	e.mode = ModeRecord{Name: opts.Mode, By: "configuration", Since: opts.Now()}
	if d := cfg.modes[opts.Mode].MaxDuration; d > 0 {
		e.mode.Expires = e.mode.Since.Add(d) // a time-bound mode is bound from the first start too
	}
	e.life, e.stop = context.WithCancel(context.WithoutCancel(ctx))
	resume, err := e.restore(ctx)
	if err != nil {
		e.stop()
		return nil, fmt.Errorf("restoring from the journal: %w", err)
	}
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.rebuildPolicyLocked()
	}()
	for _, r := range resume {
		e.start(r)
	}
	return e, nil
}

func setDefaults(o *Options) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Mode == "" {
		o.Mode = governance.ModeSupervised
	}
	if o.Person == nil {
		o.Person = PersonAfterColon
	}
	if o.OperateWithin <= 0 {
		o.OperateWithin = 15 * time.Second
	}
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = 10 * time.Minute
	}
	if o.MaxRuleTTL <= 0 {
		o.MaxRuleTTL = 24 * time.Hour
	}
	if o.DriverTimeout <= 0 {
		o.DriverTimeout = 5 * time.Second
	}
	if o.MaxShelve <= 0 {
		o.MaxShelve = 8 * time.Hour
	}
	if o.CommandLease == (Lease{}) {
		o.CommandLease = Lease{MaxSteps: 1, MaxActuations: 1, MaxWall: 15 * time.Minute}
	}
}

// PersonAfterColon is the default Options.Person: the part of a principal
// after its first colon ("console:ann" is "ann"), or the whole principal
// when it has no colon or nothing follows it.
func PersonAfterColon(principal string) string {
	if _, who, ok := strings.Cut(principal, ":"); ok && who != "" {
		return who
	}
	return principal
}

// person names the person behind a principal; never empty for a non-empty
// principal.
func (e *Engine) person(principal string) string {
	if who := e.opts.Person(principal); who != "" {
		return who
	}
	return principal
}

// Run polls sensors and starts scheduled plans until ctx is done, then stops
// the engine: it cancels every run and waits for their goroutines.
func (e *Engine) Run(ctx context.Context) error {
	e.refresh(ctx)
	e.reconcile(ctx)
	var wg sync.WaitGroup
	for _, d := range e.reg.Devices() {
		for _, c := range d.Capabilities {
			if c.Readable() && c.Poll > 0 {
				wg.Go(func() { e.poll(ctx, d.ID, c.Name, c.Poll) })
			}
		}
	}
	for _, d := range e.reg.Drivers() {
		if w, ok := d.(devices.Watcher); ok {
			wg.Go(func() { w.Watch(ctx, func(n devices.Notice) { e.notice(ctx, n) }) })
		}
	}
	e.startSchedules(ctx, &wg)
	wg.Go(func() { e.sweep(ctx) })
	wg.Go(func() { e.guard(ctx) })
	wg.Wait()
	return e.Close()
}

// Close cancels every run and waits for the engine's goroutines. It does
// not close the journal, which its owner closes last.
func (e *Engine) Close() error {
	e.stop()
	e.wg.Wait()
	return nil
}

// poll reads one sensor every interval with a governed read step.
func (e *Engine) poll(ctx context.Context, device, capability string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := e.Read(ctx, "gateway:poller", device, capability); err != nil && ctx.Err() == nil {
			e.log.Debug("poll failed", "device_id", device, "capability", capability, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep expires pending mode-change approvals and an expired mode, and
// looks at the registry, so a device that vanished is noticed within a
// second even when no step runs and its driver does not tell.
func (e *Engine) sweep(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.refresh(ctx)
		e.currentMode(ctx)
		e.expireModeApprovals(ctx)
		e.unshelveExpired(ctx)
	}
}

// Healthy returns nil while the engine can witness, or why it cannot.
// While it cannot, every actuation is refused; sensors are still read.
func (e *Engine) Healthy() error {
	if err := e.j.Err(); err != nil {
		return fmt.Errorf("the journal cannot witness: %w", err)
	}
	if p := e.unhealthy.Load(); p != nil {
		return errors.New(*p)
	}
	return nil
}

// commit writes one event with its records, publishing it to subscribers.
// A journal error makes the engine unhealthy.
func (e *Engine) commit(ctx context.Context, d Durability, ev Event, body any, with func(*Entry)) (Event, error) {
	if body != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // bodies are read by people and machines, not browsers
		if err := enc.Encode(body); err != nil {
			return Event{}, fmt.Errorf("encoding %s event: %w", ev.Kind, err)
		}
		ev.Body = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	if ev.At.IsZero() {
		ev.At = e.now()
	}
	ent := Entry{Event: ev, Durability: d}
	if with != nil {
		with(&ent)
	}
	out, err := e.j.Commit(ctx, ent)
	if err != nil {
		// A commit cut short by its caller's context says nothing of the
		// journal; any other failure does.
		if !errors.Is(err, ErrIllegalTransition) && ctx.Err() == nil {
			msg := "journal unwritable: " + err.Error()
			if e.unhealthy.CompareAndSwap(nil, &msg) {
				e.log.Error("journal commit failed; actuations are refused from now on", "kind", ev.Kind, "error", err)
			} else {
				e.log.Debug("journal commit failed", "kind", ev.Kind, "error", err)
			}
		}
		return Event{}, fmt.Errorf("journaling %s: %w: %w", ev.Kind, ErrNotWitnessed, err)
	}
	e.bus.publish(out.Seq)
	return out, nil
}

// Events returns up to limit events after since.
func (e *Engine) Events(ctx context.Context, since uint64, limit int) ([]Event, error) {
	return e.j.Events(ctx, since, limit)
}

// Subscribe calls fn with every event after since, in order, until ctx is
// done or fn returns an error. A slow subscriber never blocks a step: it
// reads the journal from its own position and catches up.
func (e *Engine) Subscribe(ctx context.Context, since uint64, fn func(Event) error) error {
	return e.Follow(ctx, since, fn, nil)
}

// Follow is Subscribe that also calls pending, when it is not nil, with
// the events queued for the journal and not yet durable (a reading waits
// for the next durable point or the flush interval), in order, each at
// most once, as soon as it is seen queued. One written before Follow
// looks is given to fn alone; pending may be given an event before fn is
// given older ones. Every event given to pending is later given to fn,
// once durable, unless the journal fails to write it. pending is how a
// surface shows what the gateway believes now: fn alone is what the
// journal witnessed.
func (e *Engine) Follow(ctx context.Context, since uint64, fn func(Event) error, pending func(Event)) error {
	ahead := since // the newest event given to pending
	for {
		changed := e.bus.changed()
		evs, err := e.j.Events(ctx, since, 512)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return err
			}
			since = ev.Seq
		}
		if len(evs) > 0 {
			continue
		}
		if pending != nil {
			ahead = max(ahead, since)
			queued := e.Pending(ahead, 512)
			for _, ev := range queued {
				pending(ev)
				ahead = ev.Seq
			}
			if len(queued) == 512 {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// FromNow is where a follower that is to see every event from now on
// starts (Subscribe's since): after the newest event, or, while events
// are queued and not yet written, before the oldest of them, which a start
// after LastSeq would never be given.
func (e *Engine) FromNow() uint64 {
	since := e.LastSeq()
	if p := e.Pending(0, 1); len(p) > 0 {
		since = min(since, p[0].Seq-1)
	}
	return since
}

// Pending returns up to limit events after since that are queued for the
// journal and not yet durable, in order: none from a journal that writes
// each event before Commit returns.
func (e *Engine) Pending(since uint64, limit int) []Event {
	if p, ok := e.j.(pender); ok {
		return p.Pending(since, limit)
	}
	return nil
}

// notifier is a Journal that writes in the background and says when: its
// Events return only what is written, and fn is called after each write.
type notifier interface {
	Notify(fn func(seq uint64))
}

// pender is a notifier that tells what it has queued and not yet written.
type pender interface {
	Pending(since uint64, limit int) []Event
}

// bus wakes subscribers when events are committed.
type bus struct {
	// mu guards last and ch.
	mu   sync.Mutex
	last uint64
	ch   chan struct{}
}

func (b *bus) publish(seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seq > b.last {
		b.last = seq
	}
	close(b.ch)
	b.ch = make(chan struct{})
}

func (b *bus) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// LastSeq returns the sequence of the newest event committed.
func (e *Engine) LastSeq() uint64 {
	e.bus.mu.Lock()
	defer e.bus.mu.Unlock()
	return e.bus.last
}

// Readings returns the latest reading of every capability, sorted.
func (e *Engine) Readings() []Reading {
	out := func() []Reading {
		e.facts.mu.RLock()
		defer e.facts.mu.RUnlock()
		out := make([]Reading, 0, len(e.facts.m))
		for k, r := range e.facts.m {
			dev, capability := splitRef(k)
			out = append(out, Reading{Device: dev, Capability: capability, Reading: r})
		}
		return out
	}()
	slices.SortFunc(out, func(a, b Reading) int {
		if a.Device != b.Device {
			return strings.Compare(a.Device, b.Device)
		}
		return strings.Compare(a.Capability, b.Capability)
	})
	return out
}

// newID returns an identifier with a prefix, "run-019de368f60000017c5a9b31":
// the wall clock's Unix milliseconds (6 bytes), a count of the
// identifiers this process has made (2 bytes, wrapping) and 4 random
// bytes, in hexadecimal. Identifiers made one after another sort
// together, so that the journal's store adds the records they name to the
// end of its trees (one page for a batch of runs), not to a random page
// each; the count keeps apart the ones made in the same millisecond, the
// random bytes those of another start.
func newID(prefix string) string {
	var b [12]byte
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (8 * (5 - i)))
	}
	n := idCount.Add(1)
	b[6], b[7] = byte(n>>8), byte(n)
	_, _ = rand.Read(b[8:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// idCount counts the identifiers newID made.
var idCount atomic.Uint32

// newErrorID returns an id for a log line whose detail a client is not
// shown: "err-" and 12 hex digits, as every surface's error ids.
func newErrorID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "err-" + hex.EncodeToString(b[:])
}

func ref(device, capability string) string { return device + "." + capability }

func splitRef(s string) (string, string) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}
