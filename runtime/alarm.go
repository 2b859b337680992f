package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Alarms follow ISA-18.2. An alarm is raised when a condition a person
// must know of begins (an actuation the world did not follow, an actuator
// switched by hand, a drive to safe that failed); it is cleared when the
// condition ends. A person acknowledges it with a comment. An alarm is
// one record per condition and thing (its id), so a flood of the same
// alarm is one alarm with a count. Every change is journaled, and the
// record is kept in the journal, so alarms survive a restart.

// AlarmKind is what an alarm is about.
type AlarmKind string

// The kinds of alarm the gateway raises.
const (
	// AlarmDiscrepancy: an actuation's confirmation was not_started,
	// wrong_final or returned.
	AlarmDiscrepancy AlarmKind = "discrepancy"
	// AlarmUnconfirmed: an actuation could not be confirmed (no reading).
	AlarmUnconfirmed AlarmKind = "unconfirmed"
	// AlarmDrift: an actuator's read-back changed with no command from us.
	AlarmDrift AlarmKind = "drift"
	// AlarmInterlock: a running interlock broke and the actuator was
	// driven to safe.
	AlarmInterlock AlarmKind = "interlock"
	// AlarmSafeDrive: a drive to the safe value failed; it is retried.
	AlarmSafeDrive AlarmKind = "safe_drive"
	// AlarmLocked: an actuation's outcome is unknown and its actuator is
	// locked until it is reconciled or resolved.
	AlarmLocked AlarmKind = "locked"
	// AlarmSchedule: a plan's schedule was missed while the gateway was
	// down.
	AlarmSchedule AlarmKind = "schedule"
)

// AlarmKinds lists every kind, in the order a configuration documents them.
var AlarmKinds = []AlarmKind{AlarmDiscrepancy, AlarmUnconfirmed, AlarmDrift, AlarmInterlock, AlarmSafeDrive, AlarmLocked, AlarmSchedule}

// AlarmPriority orders alarms by urgency.
type AlarmPriority string

// The priorities, most urgent first.
const (
	PriorityCritical AlarmPriority = "critical"
	PriorityHigh     AlarmPriority = "high"
	PriorityMedium   AlarmPriority = "medium"
	PriorityLow      AlarmPriority = "low"
)

// Rank is 0 for critical up to 3 for low, and 4 for anything else.
func (p AlarmPriority) Rank() int {
	switch p {
	case PriorityCritical:
		return 0
	case PriorityHigh:
		return 1
	case PriorityMedium:
		return 2
	case PriorityLow:
		return 3
	}
	return 4
}

// ParsePriority checks a priority's name.
func ParsePriority(s string) (AlarmPriority, error) {
	p := AlarmPriority(s)
	if p.Rank() > 3 {
		return "", fmt.Errorf("priority %q is not one of critical, high, medium, low", s)
	}
	return p, nil
}

// AlarmClass is how alarms of one kind behave.
type AlarmClass struct {
	Priority AlarmPriority
	// Latching keeps an unacknowledged alarm active after its condition
	// cleared, until a person acknowledges it.
	Latching bool
}

// DefaultAlarmClasses are the classes of each kind unless configured.
func DefaultAlarmClasses() map[AlarmKind]AlarmClass {
	return map[AlarmKind]AlarmClass{
		AlarmDiscrepancy: {Priority: PriorityHigh},
		AlarmUnconfirmed: {Priority: PriorityMedium},
		AlarmDrift:       {Priority: PriorityMedium},
		AlarmInterlock:   {Priority: PriorityHigh, Latching: true},
		AlarmSafeDrive:   {Priority: PriorityCritical, Latching: true},
		AlarmLocked:      {Priority: PriorityHigh},
		AlarmSchedule:    {Priority: PriorityLow},
	}
}

// AlarmState is where an alarm stands (ISA-18.2).
type AlarmState string

// The states of an alarm.
const (
	AlarmActive         AlarmState = "active_unacknowledged"
	AlarmActiveAcked    AlarmState = "active_acknowledged"
	AlarmClearedUnacked AlarmState = "cleared_unacknowledged"
	// AlarmNormal is an alarm cleared and acknowledged: nothing to do.
	AlarmNormal AlarmState = "cleared"
)

// Alarm is one alarm's record.
type Alarm struct {
	// ID is kind.device.capability, or kind.plan for a schedule.
	ID         string        `json:"id"`
	Kind       AlarmKind     `json:"kind"`
	Device     string        `json:"device,omitempty"`
	Capability string        `json:"capability,omitempty"`
	Plan       string        `json:"plan,omitempty"`
	Priority   AlarmPriority `json:"priority"`
	Latching   bool          `json:"latching,omitempty"`
	State      AlarmState    `json:"state"`
	// Condition is true while the condition that raised it holds. A
	// latching alarm can be active with its condition gone.
	Condition bool `json:"condition"`
	// Message says why it was last raised; it is kept when the
	// condition clears, which ClearedWhy says.
	Message    string `json:"message"`
	ClearedWhy string `json:"cleared_why,omitempty"`
	// Attempt names the actuation attempt behind it, if any.
	Attempt string `json:"attempt,omitempty"`
	// Count is how many times it was raised since it was last normal.
	Count     int       `json:"count"`
	RaisedAt  time.Time `json:"raised_at"`
	LastAt    time.Time `json:"last_at"`
	ClearedAt time.Time `json:"cleared_at,omitzero"`
	// AckedBy, AckedAt and Comment record the acknowledgement.
	AckedBy string    `json:"acked_by,omitempty"`
	AckedAt time.Time `json:"acked_at,omitzero"`
	Comment string    `json:"comment,omitempty"`
	// ShelvedUntil is set while an admin shelved it: it is kept and
	// journaled but not counted nor shown as active until then.
	ShelvedUntil time.Time `json:"shelved_until,omitzero"`
	ShelvedBy    string    `json:"shelved_by,omitempty"`
	ShelveReason string    `json:"shelve_reason,omitempty"`
}

// Active reports whether the alarm is in an active state.
func (a *Alarm) Active() bool { return a.State == AlarmActive || a.State == AlarmActiveAcked }

// Unacknowledged reports whether a person must still acknowledge it.
func (a *Alarm) Unacknowledged() bool {
	return a.State == AlarmActive || a.State == AlarmClearedUnacked
}

// Shelved reports whether it is shelved at now.
func (a *Alarm) Shelved(now time.Time) bool { return now.Before(a.ShelvedUntil) }

// Standing reports whether the alarm still asks for attention: active or
// unacknowledged. A standing alarm is retained on MQTT.
func (a *Alarm) Standing() bool { return a.State != AlarmNormal }

// AlarmCounts summarises alarms for a page header and metrics.
type AlarmCounts struct {
	// Active counts active alarms not shelved; Unacknowledged those of
	// them and of the cleared that wait for a person; Shelved the shelved.
	Active         int `json:"active"`
	Unacknowledged int `json:"unacknowledged"`
	Shelved        int `json:"shelved"`
}

// CountAlarms counts as of now.
func CountAlarms(as []Alarm, now time.Time) AlarmCounts {
	var c AlarmCounts
	for i := range as {
		a := &as[i]
		switch {
		case !a.Standing():
		case a.Shelved(now):
			c.Shelved++
		default:
			if a.Active() {
				c.Active++
			}
			if a.Unacknowledged() {
				c.Unacknowledged++
			}
		}
	}
	return c
}

// SortAlarms puts alarms in the order a person reads them: active first,
// then cleared but unacknowledged, then the rest; shelved after the
// unshelved of their state; by priority; newest first.
func SortAlarms(as []Alarm, now time.Time) {
	order := func(a *Alarm) int {
		switch a.State {
		case AlarmActive:
			return 0
		case AlarmActiveAcked:
			return 1
		case AlarmClearedUnacked:
			return 2
		}
		return 3
	}
	slices.SortFunc(as, func(a, b Alarm) int {
		return cmp.Or(
			cmp.Compare(order(&a), order(&b)),
			compareBool(a.Shelved(now), b.Shelved(now)),
			cmp.Compare(a.Priority.Rank(), b.Priority.Rank()),
			b.LastAt.Compare(a.LastAt),
			strings.Compare(a.ID, b.ID))
	})
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// The actions an alarm event records.
const (
	AlarmRaised       = "raised"
	AlarmCleared      = "cleared"
	AlarmAcknowledged = "acknowledged"
	AlarmShelved      = "shelved"
	AlarmUnshelved    = "unshelved"
)

// AlarmBody is the body of an alarm event: what happened to the alarm,
// who did it, and the alarm as it stands after.
type AlarmBody struct {
	Action  string `json:"action"`
	Alarm   Alarm  `json:"alarm"`
	By      string `json:"by,omitempty"`
	Comment string `json:"comment,omitempty"`
}

// Errors of alarms.
var (
	ErrAlarmNotFound = errors.New("alarm not found")
	// ErrAlarmNotUnacknowledged is an acknowledgement of an alarm that
	// waits for none.
	ErrAlarmNotUnacknowledged = errors.New("the alarm is not waiting for an acknowledgement")
	// ErrBadAlarmRequest is a request that lacks what it needs (a comment,
	// a reason, a duration within bounds).
	ErrBadAlarmRequest = errors.New("bad alarm request")
	// ErrAlarmNotStanding is a shelving of an alarm back to normal.
	ErrAlarmNotStanding = errors.New("the alarm does not stand")
)

// alarms holds the alarm records. Changes are serialised by change, held
// across the journal commit, so that they are journaled in the order they
// are made; mu guards the map only, briefly, so that a reader (a page, the
// metrics) never waits for the disk.
type alarms struct {
	change sync.Mutex
	mu     sync.Mutex
	m      map[string]*Alarm
}

func alarmID(kind AlarmKind, device, capability string) string {
	return string(kind) + "." + device + "." + capability
}

// Alarms returns every alarm, in the order of SortAlarms.
func (e *Engine) Alarms() []Alarm {
	e.alarms.mu.Lock()
	out := make([]Alarm, 0, len(e.alarms.m))
	for _, a := range e.alarms.m {
		out = append(out, *a)
	}
	e.alarms.mu.Unlock()
	SortAlarms(out, e.now())
	return out
}

// Alarm returns one alarm by id.
func (e *Engine) Alarm(id string) (Alarm, bool) {
	e.alarms.mu.Lock()
	defer e.alarms.mu.Unlock()
	a, ok := e.alarms.m[id]
	if !ok {
		return Alarm{}, false
	}
	return *a, true
}

// alarmChange applies change to the alarm id (made by fresh when it does
// not exist, if fresh is set) and journals it. A change that changes
// nothing (change returns "") is not journaled. A change that cannot be
// journaled is not made.
func (e *Engine) alarmChange(ctx context.Context, id string, fresh func() *Alarm, change func(a *Alarm) (action string, err error), by, comment string) (Alarm, error) {
	e.alarms.change.Lock()
	defer e.alarms.change.Unlock()
	e.alarms.mu.Lock()
	cur, ok := e.alarms.m[id]
	e.alarms.mu.Unlock()
	var next Alarm
	switch {
	case ok:
		next = *cur
	case fresh != nil:
		next = *fresh()
	default:
		return Alarm{}, fmt.Errorf("%w: %s", ErrAlarmNotFound, id)
	}
	action, err := change(&next)
	if err != nil || action == "" {
		return next, err
	}
	rec := next
	ev := Event{Kind: KindAlarm, Device: next.Device}
	if _, err := e.commit(ctx, Sync, ev, AlarmBody{Action: action, Alarm: rec, By: by, Comment: comment},
		func(en *Entry) { en.Alarm = &rec }); err != nil {
		return Alarm{}, err
	}
	e.alarms.mu.Lock()
	e.alarms.m[id] = &next
	e.alarms.mu.Unlock()
	switch action {
	case AlarmRaised:
		e.log.Debug("alarm", "alarm", id, "priority", next.Priority, "count", next.Count, "message", next.Message)
	default:
		e.log.Debug("alarm "+action, "alarm", id, "state", next.State, "by", by)
	}
	return next, nil
}

// raise raises the alarm of kind on device.capability, or counts it again
// when it is already active.
func (e *Engine) raise(ctx context.Context, kind AlarmKind, device, capability, why, attempt string) {
	e.raiseID(ctx, alarmID(kind, device, capability), kind, device, capability, "", why, attempt)
}

func (e *Engine) raiseID(ctx context.Context, id string, kind AlarmKind, device, capability, plan, why, attempt string) {
	class := e.alarmClass(kind)
	now := e.now()
	fresh := func() *Alarm {
		return &Alarm{ID: id, Kind: kind, Device: device, Capability: capability, Plan: plan, State: AlarmNormal}
	}
	_, err := e.alarmChange(context.WithoutCancel(ctx), id, fresh, func(a *Alarm) (string, error) {
		a.Priority, a.Latching = class.Priority, class.Latching
		a.Message, a.Attempt, a.LastAt, a.Condition = why, attempt, now, true
		a.ClearedAt, a.ClearedWhy = time.Time{}, ""
		switch a.State {
		case AlarmNormal:
			a.State, a.Count, a.RaisedAt = AlarmActive, 1, now
			a.AckedBy, a.AckedAt, a.Comment = "", time.Time{}, ""
		case AlarmClearedUnacked:
			a.State = AlarmActive
			a.Count++
		default:
			a.Count++
		}
		return AlarmRaised, nil
	}, "gateway", "")
	if err != nil {
		e.log.Error("an alarm could not be journaled", "alarm", id, "why", why, "error", err)
	}
}

// clearAlarm says the condition of an alarm ended. An alarm that is not
// raised is left alone.
func (e *Engine) clearAlarm(ctx context.Context, kind AlarmKind, device, capability, why string) {
	e.clearID(ctx, alarmID(kind, device, capability), why)
}

func (e *Engine) clearID(ctx context.Context, id, why string) {
	e.alarms.mu.Lock()
	a, ok := e.alarms.m[id]
	holds := ok && a.Condition
	e.alarms.mu.Unlock()
	if !holds {
		return // the common case: nothing to clear, nothing journaled
	}
	now := e.now()
	_, err := e.alarmChange(context.WithoutCancel(ctx), id, nil, func(a *Alarm) (string, error) {
		if !a.Condition {
			return "", nil
		}
		a.Condition, a.ClearedAt, a.ClearedWhy = false, now, why
		switch {
		case a.State == AlarmActiveAcked:
			a.State = AlarmNormal
		case a.State == AlarmActive && !a.Latching:
			a.State = AlarmClearedUnacked
		}
		normalised(a)
		return AlarmCleared, nil
	}, "gateway", "")
	if err != nil {
		e.log.Error("an alarm's clearing could not be journaled", "alarm", id, "error", err)
	}
}

// normalised ends the shelving of an alarm back to normal: shelving
// hides an alarm that stands, never its next occurrence.
func normalised(a *Alarm) {
	if a.State == AlarmNormal {
		a.ShelvedUntil, a.ShelvedBy, a.ShelveReason = time.Time{}, "", ""
	}
}

// maxAlarmText bounds a comment or a reason, in characters.
const maxAlarmText = 500

// alarmText checks a person's comment or reason: something a person can
// read, at most maxAlarmText characters.
func alarmText(what, s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }):
		return "", errors.New(what + " needs words a person can read")
	case utf8.RuneCountInString(s) > maxAlarmText:
		return "", fmt.Errorf("%s is over %d characters", what, maxAlarmText)
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }):
		return "", errors.New(what + " holds control characters")
	}
	return s, nil
}

// AckAlarm acknowledges an alarm that waits for it, with a comment. A
// latching alarm whose condition is gone returns to normal.
func (e *Engine) AckAlarm(ctx context.Context, id, by, comment string) (Alarm, error) {
	if strings.TrimSpace(comment) == "" {
		return Alarm{}, fmt.Errorf("%w: an acknowledgement needs a comment", ErrBadAlarmRequest)
	}
	comment, err := alarmText("an acknowledgement's comment", comment)
	if err != nil {
		return Alarm{}, fmt.Errorf("%w: %w", ErrBadAlarmRequest, err)
	}
	if by == "" {
		return Alarm{}, fmt.Errorf("%w: an acknowledgement needs a person", ErrBadAlarmRequest)
	}
	now := e.now()
	return e.alarmChange(ctx, id, nil, func(a *Alarm) (string, error) {
		switch {
		case a.State == AlarmActive && a.Condition:
			a.State = AlarmActiveAcked
		case a.State == AlarmActive || a.State == AlarmClearedUnacked:
			a.State = AlarmNormal
		default:
			return "", fmt.Errorf("alarm %s is %s: %w", id, a.State, ErrAlarmNotUnacknowledged)
		}
		a.AckedBy, a.AckedAt, a.Comment = by, now, comment
		normalised(a)
		return AlarmAcknowledged, nil
	}, by, comment)
}

// ShelveAlarm shelves an alarm for d, at most Options.MaxShelve, with a
// reason; d of zero unshelves it.
func (e *Engine) ShelveAlarm(ctx context.Context, id, by string, d time.Duration, reason string) (Alarm, error) {
	switch {
	case by == "":
		return Alarm{}, fmt.Errorf("%w: shelving needs a person", ErrBadAlarmRequest)
	case d < 0 || d > e.opts.MaxShelve || d > 0 && d < time.Minute:
		return Alarm{}, fmt.Errorf("%w: an alarm is shelved for at least 1m and at most %s, not %s", ErrBadAlarmRequest, e.opts.MaxShelve, d)
	case d > 0 && strings.TrimSpace(reason) == "":
		return Alarm{}, fmt.Errorf("%w: shelving needs a reason", ErrBadAlarmRequest)
	}
	if d > 0 {
		var err error
		if reason, err = alarmText("shelving's reason", reason); err != nil {
			return Alarm{}, fmt.Errorf("%w: %w", ErrBadAlarmRequest, err)
		}
	}
	now := e.now()
	return e.alarmChange(ctx, id, nil, func(a *Alarm) (string, error) {
		if d > 0 && a.State == AlarmNormal {
			return "", fmt.Errorf("alarm %s is back to normal; an alarm is shelved while it stands: %w", id, ErrAlarmNotStanding)
		}
		if d == 0 {
			if a.ShelvedUntil.IsZero() {
				return "", nil
			}
			a.ShelvedUntil, a.ShelvedBy, a.ShelveReason = time.Time{}, "", ""
			return AlarmUnshelved, nil
		}
		a.ShelvedUntil, a.ShelvedBy, a.ShelveReason = now.Add(d), by, reason
		return AlarmShelved, nil
	}, by, reason)
}

// unshelveExpired returns alarms whose shelving ran out to view.
func (e *Engine) unshelveExpired(ctx context.Context) {
	now := e.now()
	var due []string
	e.alarms.mu.Lock()
	for id, a := range e.alarms.m {
		if !a.ShelvedUntil.IsZero() && !now.Before(a.ShelvedUntil) {
			due = append(due, id)
		}
	}
	e.alarms.mu.Unlock()
	for _, id := range due {
		_, err := e.alarmChange(ctx, id, nil, func(a *Alarm) (string, error) {
			if a.ShelvedUntil.IsZero() || now.Before(a.ShelvedUntil) {
				return "", nil
			}
			a.ShelvedUntil, a.ShelvedBy, a.ShelveReason = time.Time{}, "", ""
			return AlarmUnshelved, nil
		}, "gateway", "its shelving ran out")
		if err != nil {
			e.log.Error("an alarm's unshelving could not be journaled", "alarm", id, "error", err)
		}
	}
}

// alarmClass returns the configured class of kind.
func (e *Engine) alarmClass(kind AlarmKind) AlarmClass {
	if c, ok := e.opts.AlarmClasses[kind]; ok {
		return c
	}
	return DefaultAlarmClasses()[kind]
}
