package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
)

// Lease bounds a run. A refused step spends nothing, and time parked
// waiting for people is not spent. Zero fields mean no bound.
type Lease struct {
	MaxSteps      int
	MaxWall       time.Duration
	MaxActuations int
}

// StepOp is what a plan step does.
type StepOp string

// The plan step operations.
const (
	OpRead   StepOp = "read"
	OpWrite  StepOp = "write"
	OpWait   StepOp = "wait"
	OpExpect StepOp = "expect"
)

// Expect is a condition a plan waits for, failing after Within.
type Expect struct {
	Sensor string
	Op     governance.Op
	Value  value.Value
	Within time.Duration
}

// PlanStep is one step of a plan.
type PlanStep struct {
	Op         StepOp
	Device     string
	Capability string
	// Value is what a write step writes.
	Value value.Value
	// Wait is how long a wait step waits.
	Wait time.Duration
	// Expect is the condition of an expect step.
	Expect *Expect
}

// Describe says what the step does, for logs.
func (s PlanStep) Describe() string {
	switch s.Op {
	case OpRead:
		return "read " + ref(s.Device, s.Capability)
	case OpWrite:
		return "write " + ref(s.Device, s.Capability) + " = " + s.Value.String()
	case OpWait:
		return "wait " + s.Wait.String()
	case OpExpect:
		return "expect " + s.Expect.Sensor + " " + string(s.Expect.Op) + " " + s.Expect.Value.String() + " within " + s.Expect.Within.String()
	}
	return string(s.Op)
}

// Plan is a named sequence of steps run under a lease.
type Plan struct {
	Name  string
	Steps []PlanStep
	Lease Lease
	// ContinueOnFailure makes a failed step not end the run. A refused step
	// always ends it.
	ContinueOnFailure bool
	// Every starts the plan every so long; zero means never. It excludes
	// At.
	Every time.Duration
	// At starts the plan at times of day by the wall clock; nil means
	// never. It excludes Every. See ClockSchedule.Next for when it fires.
	At *ClockSchedule
	// CatchUp, with At, starts the plan once when the engine starts if
	// firings of At were missed while the gateway was not running (or
	// when the wall clock is set forward past them). Without it missed
	// firings are reported, never run late.
	CatchUp bool
}

// CommandPlan is the name of the one-step plan of a single command.
const CommandPlan = "command"

func (p *Plan) validate() error {
	if p.Name == "" {
		return errors.New("a plan has no name")
	}
	if p.Name == CommandPlan {
		return errors.New(`plan name "command" is reserved for single commands`)
	}
	if len(p.Steps) == 0 {
		return errors.New("plan " + p.Name + " has no steps")
	}
	switch {
	case p.Every < 0:
		return errors.New("plan " + p.Name + ": every must not be negative")
	case p.Every > 0 && p.At != nil:
		return errors.New("plan " + p.Name + ": every and at are exclusive")
	case p.CatchUp && p.At == nil:
		return errors.New("plan " + p.Name + ": catch_up needs a clock schedule (at)")
	case p.At != nil:
		if err := p.At.validate(); err != nil {
			return errors.New("plan " + p.Name + ": " + err.Error())
		}
	}
	for i, s := range p.Steps {
		where := "plan " + p.Name + " step " + strconv.Itoa(i+1)
		switch s.Op {
		case OpRead:
		case OpWrite:
			if s.Value.IsZero() {
				return errors.New(where + ": a write needs a value")
			}
		case OpWait:
			if s.Wait <= 0 {
				return errors.New(where + ": a wait needs a positive duration")
			}
		case OpExpect:
			if s.Expect == nil || s.Expect.Within <= 0 {
				return errors.New(where + ": an expect needs a condition and a positive within")
			}
		default:
			return errors.New(where + ": unknown operation " + strconv.Quote(string(s.Op)))
		}
	}
	return nil
}

// run is one execution of a plan. Its goroutine, owned by the engine's
// WaitGroup, is the only writer of rec's counters; others read under mu.
type run struct {
	plan      *Plan
	requestID string
	// requestKey is the key of e.requests that names this run, if any.
	requestKey string
	// ctx and cancel are the run's, made with it, before anyone can find
	// it to cancel it.
	ctx       context.Context
	cancel    context.CancelCauseFunc
	first     chan Observation // the first observation that ends or parks a step
	firstDone chan struct{}    // closed once first has been sent
	done      chan struct{}

	// mu guards everything below.
	mu sync.Mutex
	// parked is the approval a run restored after a restart waits for at
	// its current step, before anything else.
	parked      string
	rec         RunRecord
	activeSince time.Time
	last        Observation
	sentFirst   bool
	// ended is set once the run's end is journaled with its last receipt.
	ended bool
}

// id returns the run's id; a nil run (a poll) has none.
func (r *run) id() string {
	if r == nil {
		return ""
	}
	return r.rec.ID
}

// charge spends one step, and one actuation for a write.
func (r *run) charge(actuation bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Steps++
	if actuation {
		r.rec.Actuations++
	}
}

// leaseLeft returns "" while the lease allows another step (and another
// actuation, with actuation set), or why not.
func (r *run) leaseLeft(now time.Time, actuation bool) string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.plan.Lease
	spent := r.rec.Spent
	if !r.activeSince.IsZero() {
		spent += now.Sub(r.activeSince)
	}
	switch {
	case l.MaxSteps > 0 && r.rec.Steps >= l.MaxSteps:
		return fmt.Sprintf("%d of %d steps spent", r.rec.Steps, l.MaxSteps)
	case actuation && l.MaxActuations > 0 && r.rec.Actuations >= l.MaxActuations:
		return fmt.Sprintf("%d of %d actuations spent", r.rec.Actuations, l.MaxActuations)
	case l.MaxWall > 0 && spent >= l.MaxWall:
		return fmt.Sprintf("%s of %s wall time spent", spent.Round(time.Millisecond), l.MaxWall)
	}
	return ""
}

// park stops the wall clock of the run and returns its record.
func (r *run) park(now time.Time, approval string) *RunRecord {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.activeSince.IsZero() {
		r.rec.Spent += now.Sub(r.activeSince)
		r.activeSince = time.Time{}
	}
	r.rec.Status, r.rec.Approval = RunParked, approval
	rec := r.rec
	return &rec
}

// takeParked returns the approval a restored run must wait for first, once.
func (r *run) takeParked() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.parked
	r.parked = ""
	return id
}

func (r *run) resume(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.activeSince = now
	r.rec.Status, r.rec.Approval = RunRunning, ""
}

// observe records obs as the run's latest and hands the first one to Do.
func (r *run) observe(obs Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = obs
	if !r.sentFirst {
		r.sentFirst = true
		r.first <- obs
		close(r.firstDone)
	}
}

// settle records obs as the run's latest before its end is written, when
// its first outcome was handed already (an approval asked): a repeat of
// the request that comes once the end is seen gets obs. The first
// outcome is only ever handed by observe, after the end is written.
func (r *run) settle(obs Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sentFirst {
		r.last = obs
	}
}

// ensureFirst hands obs to Do if nothing was handed yet.
func (r *run) ensureFirst(obs Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.sentFirst {
		r.sentFirst = true
		r.last = obs
		r.first <- obs
		close(r.firstDone)
	}
}

// snapshot returns a copy of the run's record, or nil for no run.
func (r *run) snapshot() *RunRecord {
	if r == nil {
		return nil
	}
	rec := r.record()
	return &rec
}

func (r *run) record() RunRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec
}

// outcome returns the run's latest observation with its record.
func (r *run) outcome() (Observation, RunRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.rec
}

// setStep records the step the run is at.
func (r *run) setStep(idx int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Step = idx
}

// end ends the run's record as end says, stops its wall clock, and
// returns the final record.
func (r *run) end(end EndReason, why string, now func() time.Time) RunRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Status, r.rec.End, r.rec.Why, r.rec.EndedAt = RunEnded, end, why, now()
	if !r.activeSince.IsZero() {
		r.rec.Spent += now().Sub(r.activeSince)
		r.activeSince = time.Time{}
	}
	return r.rec
}

// runByID returns the run with the given id, if the engine still holds it.
func (e *Engine) runByID(id string) (*run, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.runs[id]
	return r, ok
}

// Command is one request to read or write a capability, from MQTT, the API
// or the console. It runs as a one-step plan.
type Command struct {
	// Principal is who asks: "mqtt:alice".
	Principal string
	// Origin is where from: "mqtt", "api", "console".
	Origin string
	// RequestID makes the command idempotent: the same principal and id
	// get the first outcome back. Empty means the engine makes one.
	RequestID string
	Reason    string
	Device    string
	// Capability is the target; Value is zero for a read.
	Capability string
	Value      value.Value
	// ReplyTo says, in the origin's own terms, where the outcome goes. It
	// is kept with the run, so that after a restart the surface can still
	// answer a command that was waiting for approval.
	ReplyTo string
}

// Do runs a command and returns its first observation: the outcome, or an
// ApprovalRequest when it parks. A parked command acts later, when it is
// approved, and its receipt is an "acted" event of the same run.
func (e *Engine) Do(ctx context.Context, cmd Command) (Observation, error) {
	if cmd.Principal == "" {
		return Observation{}, errors.New("a command needs a principal")
	}
	if cmd.RequestID == "" {
		cmd.RequestID = newID("req")
	}
	key := cmd.Principal + "/" + cmd.RequestID
	op := OpRead
	if !cmd.Value.IsZero() {
		op = OpWrite
	}
	plan := &Plan{Name: CommandPlan, Lease: e.opts.CommandLease,
		Steps: []PlanStep{{Op: op, Device: cmd.Device, Capability: cmd.Capability, Value: cmd.Value}}}
	r, seen, err := e.newRequest(key, plan, false, cmd.Principal, cmd.Origin, cmd.RequestID, cmd.Reason, cmd.ReplyTo)
	if err != nil {
		return Observation{}, err
	}
	if seen {
		return e.repeat(ctx, r, plan.Steps[0], cmd)
	}
	e.start(r)
	select {
	case obs := <-r.first:
		obs.RequestID = cmd.RequestID
		return obs, nil
	case <-ctx.Done():
		return Observation{}, ctx.Err()
	}
}

// repeat answers a command whose idempotency key was seen before.
func (e *Engine) repeat(ctx context.Context, r *run, s PlanStep, cmd Command) (Observation, error) {
	prev := r.plan.Steps[0]
	if prev.Device != s.Device || prev.Capability != s.Capability || !prev.Value.Equal(s.Value) {
		return Observation{Kind: Refused, Run: r.id(), RequestID: cmd.RequestID, Device: s.Device, Capability: s.Capability,
			Why: "idempotency key " + cmd.Principal + "/" + cmd.RequestID + " was already used for a different act"}, nil
	}
	select {
	case <-r.firstDone:
	case <-ctx.Done():
		return Observation{}, ctx.Err()
	}
	obs, _ := r.outcome()
	obs.RequestID, obs.Replayed = cmd.RequestID, true
	return obs, nil
}

// StartPlan is a request to start a plan.
type StartPlan struct {
	Plan      string
	Principal string
	Origin    string
	RequestID string
	Reason    string
	// ReplyTo is kept with the run; see Command.ReplyTo.
	ReplyTo string
}

// ErrPlanRunning is returned by StartPlan for a plan with a run that has
// not ended (running, or parked waiting for an approval): a plan runs one
// run at a time, whoever starts it. The error is a *PlanRunningError that
// names the run.
var ErrPlanRunning = errors.New("a run of the plan has not ended")

// PlanRunningError is the error of a start refused because a run of the
// plan has not ended. It matches ErrPlanRunning with errors.Is. Its text
// names only the plan and the run, so a surface may show it.
type PlanRunningError struct {
	Plan string
	// Run is the id of the run that has not ended, Status where it stands
	// and Approval the approval it waits for, if parked.
	Run      string
	Status   RunStatus
	Approval string
}

func (e *PlanRunningError) Error() string {
	s := "plan " + e.Plan + " is already running as " + e.Run
	if e.Status == RunParked && e.Approval != "" {
		s += " (parked, waiting for approval " + e.Approval + ")"
	}
	return s + "; a plan runs one run at a time: wait for it to end or cancel it"
}

// Unwrap returns ErrPlanRunning.
func (e *PlanRunningError) Unwrap() error { return ErrPlanRunning }

// StartPlan starts a run of a configured plan and returns its record at
// once. A start with the RequestID of an earlier one returns that run's
// record. While a run of the plan has not ended, a new start is refused
// with a *PlanRunningError (ErrPlanRunning), whoever asks; nothing is
// journaled of it. It returns ErrUnknownPlan for a plan not configured
// and ErrStopped once the engine has stopped.
func (e *Engine) StartPlan(ctx context.Context, sp StartPlan) (RunRecord, error) {
	p, ok := e.conf().plans[sp.Plan]
	if !ok {
		return RunRecord{}, fmt.Errorf("plan %q: %w", sp.Plan, ErrUnknownPlan)
	}
	if sp.Principal == "" {
		return RunRecord{}, errors.New("a plan run needs a principal")
	}
	key := ""
	if sp.RequestID != "" {
		key = sp.Principal + "/run/" + sp.RequestID
	}
	r, seen, err := e.newRequest(key, p, true, sp.Principal, sp.Origin, sp.RequestID, sp.Reason, sp.ReplyTo)
	if err != nil {
		return RunRecord{}, err
	}
	if seen {
		return r.record(), nil
	}
	e.start(r)
	return r.record(), nil
}

// newRequest returns the run already made under the idempotency key, with
// seen set, or makes a new run of p and files it under key. An empty key
// files nothing. With alone set, it refuses a new run while a run of the
// plan of that name has not ended. The caller starts a new run.
func (e *Engine) newRequest(key string, p *Plan, alone bool, principal, origin, requestID, reason, replyTo string) (r *run, seen bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if key != "" {
		if r, ok := e.requests[key]; ok {
			return r, true, nil
		}
	}
	if alone && e.life.Err() == nil {
		// Checked and filed under one hold of mu: two starts at once
		// cannot both find the plan idle.
		if err := e.planRunningLocked(p.Name); err != nil {
			return nil, false, err
		}
	}
	r, err = e.newRunLocked(p, principal, origin, requestID, reason, replyTo)
	if err != nil {
		return nil, false, err
	}
	if key != "" {
		e.requests[key] = r
		r.requestKey = key
	}
	return r, false, nil
}

func (e *Engine) newRunLocked(p *Plan, principal, origin, requestID, reason, replyTo string) (*run, error) {
	if e.life.Err() != nil {
		return nil, ErrStopped
	}
	now := e.now()
	r := &run{plan: p, requestID: requestID, first: make(chan Observation, 1), firstDone: make(chan struct{}), done: make(chan struct{}),
		rec: RunRecord{ID: newID("run"), Plan: p.Name, Principal: principal, Origin: origin, RequestID: requestID,
			Reason: reason, ReplyTo: replyTo, Status: RunRunning, StartedAt: now}, activeSince: now}
	r.ctx, r.cancel = context.WithCancelCause(e.life)
	e.runs[r.rec.ID] = r
	return r, nil
}

func (e *Engine) start(r *run) {
	ctx, cancel := r.ctx, r.cancel
	e.wg.Go(func() {
		defer cancel(nil)
		defer close(r.done)
		e.execute(ctx, r)
	})
}

// planRunningLocked returns a *PlanRunningError naming a run of the plan
// called name that has not ended, or nil. e.mu must be held.
func (e *Engine) planRunningLocked(name string) error {
	for _, r := range e.runs {
		if r.plan.Name != name {
			continue
		}
		if rec := r.record(); rec.Status != RunEnded {
			return &PlanRunningError{Plan: name, Run: rec.ID, Status: rec.Status, Approval: rec.Approval}
		}
	}
	return nil
}

// Runs returns the records of the runs this engine knows, newest first.
func (e *Engine) Runs() []RunRecord {
	out := func() []RunRecord {
		e.mu.Lock()
		defer e.mu.Unlock()
		out := make([]RunRecord, 0, len(e.runs))
		for _, r := range e.runs {
			out = append(out, r.record())
		}
		return out
	}()
	sortRuns(out)
	return out
}

// Cancel cancels a run. A parked run ends cancelled; an act in progress
// finishes its read-back first.
func (e *Engine) Cancel(id string) error {
	return e.cancelRun(id, nil)
}

// ErrRunNotFound is returned for a run that is not known.
var ErrRunNotFound = errors.New("run not found")

// ErrRunEnded is returned for a cancel of a run that has ended.
var ErrRunEnded = errors.New("the run has ended")

// ErrBadCancel is returned for a cancel whose reason cannot be taken.
var ErrBadCancel = errors.New("bad cancel")

// CancelRun cancels a run for a person, whose name and reason its end
// records. A parked run ends cancelled and its approval is closed; an act
// in progress finishes its driver call first (its confirmation is cut
// short), and nothing the run did is undone.
func (e *Engine) CancelRun(id, by, reason string) error {
	if by == "" {
		return errors.New("a cancel names its person")
	}
	why := "cancelled by " + by
	if strings.TrimSpace(reason) != "" {
		r, err := alarmText("a cancel's reason", reason)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadCancel, err)
		}
		why += ": " + r
	}
	return e.cancelRun(id, errors.New(why))
}

func (e *Engine) cancelRun(id string, cause error) error {
	r, ok := e.runByID(id)
	if !ok {
		return fmt.Errorf("run %s: %w", id, ErrRunNotFound)
	}
	if r.record().Status == RunEnded {
		return fmt.Errorf("run %s: %w", id, ErrRunEnded)
	}
	r.cancel(cause)
	return nil
}

// Wait blocks until the run has ended or ctx is done, and returns its record.
func (e *Engine) Wait(ctx context.Context, id string) (RunRecord, error) {
	r, ok := e.runByID(id)
	if !ok {
		return RunRecord{}, errors.New("run " + id + " not found")
	}
	select {
	case <-r.done:
		return r.record(), nil
	case <-ctx.Done():
		return r.record(), ctx.Err()
	}
}
