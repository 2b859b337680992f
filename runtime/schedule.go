package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A plan starts by itself in one of two ways: every so long (Plan.Every),
// or at times of day by the wall clock of a time zone, on some days of
// the week (Plan.At). Either way a start is refused while a run of the
// plan has not ended: the schedule skips it, and journals the skip. A
// clock schedule's firings that fell while the gateway was not running
// are missed: each plan's are reported once at start, as a
// schedule_missed event and an alarm left cleared for a person to
// acknowledge, and they are not run late unless the plan catches up
// (Plan.CatchUp), which runs it once.

// The event kinds of schedules.
const (
	// KindScheduleSkipped records a scheduled start that did not happen
	// because a run of the plan had not ended.
	KindScheduleSkipped Kind = "schedule_skipped"
	// KindScheduleMissed records the firings of a plan's clock schedule
	// that passed while the gateway was not running, or that it noticed
	// too late to start the plan, counted once.
	KindScheduleMissed Kind = "schedule_missed"
)

// ScheduleSkippedBody is the body of a schedule_skipped event.
type ScheduleSkippedBody struct {
	// Due is when the start was due.
	Due  time.Time `json:"due"`
	Plan string    `json:"plan"`
	// Run is the run of the plan that had not ended.
	Run string `json:"run"`
	Why string `json:"why"`
}

// ScheduleMissedBody is the body of a schedule_missed event: the firings
// of a plan's clock schedule after Since and before Until, which did not
// start the plan. Since is when the gateway was last seen running (its
// newest journal event) or, for firings noticed late, when the schedule
// last fired or reported; Until is when it noticed.
type ScheduleMissedBody struct {
	// AtLeast says Count stopped at a bound: more firings were missed.
	AtLeast bool `json:"at_least,omitempty"`
	// CatchUp says the plan catches up: it was started once, as Run, or
	// Why says why not.
	CatchUp bool `json:"catch_up"`
	// Cause is "not_running" (the gateway was stopped) or "late" (the
	// gateway noticed them more than a minute late: its wall clock was
	// set forward, or it was held up).
	Cause string    `json:"cause"`
	Count int       `json:"count"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	Plan  string    `json:"plan"`
	Run   string    `json:"run,omitempty"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Why says what happened, in words a person reads: the message of
	// the schedule alarm.
	Why string `json:"why"`
}

// The causes of a schedule_missed event.
const (
	MissedNotRunning = "not_running"
	MissedLate       = "late"
)

// TimeOfDay is a time on the wall clock, to the minute.
type TimeOfDay struct {
	Hour, Minute int
}

// ParseTimeOfDay reads a time of day written "06:30" (or "6:30"), from
// 00:00 to 23:59. Its error quotes s and says how to write one.
func ParseTimeOfDay(s string) (TimeOfDay, error) {
	h, m, ok := strings.Cut(s, ":")
	if ok && len(h) >= 1 && len(h) <= 2 && len(m) == 2 && allDigits(h) && allDigits(m) {
		hh, _ := strconv.Atoi(h)
		mm, _ := strconv.Atoi(m)
		if t := (TimeOfDay{hh, mm}); t.valid() {
			return t, nil
		}
	}
	return TimeOfDay{}, fmt.Errorf("%s is not a time of day (write it like 06:30, from 00:00 to 23:59)", quoteClipped(s))
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// quoteClipped quotes s, cut to 40 bytes.
func quoteClipped(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

func (t TimeOfDay) valid() bool { return t.Hour >= 0 && t.Hour < 24 && t.Minute >= 0 && t.Minute < 60 }

// String writes t as "06:30".
func (t TimeOfDay) String() string { return fmt.Sprintf("%02d:%02d", t.Hour, t.Minute) }

// MarshalText writes t as "06:30".
func (t TimeOfDay) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Weekdays is a set of days of the week. The zero value is every day.
type Weekdays uint8

// allWeek is the set of every day.
const allWeek Weekdays = 1<<7 - 1

// WeekdaysOf returns the set of days.
func WeekdaysOf(days ...time.Weekday) Weekdays {
	var w Weekdays
	for _, d := range days {
		w |= 1 << d
	}
	return w
}

// Has reports whether d is in the set; every day is in the zero set.
func (w Weekdays) Has(d time.Weekday) bool { return w == 0 || w&(1<<d) != 0 }

// dayNames are the short names of the days, Sunday first as time.Weekday.
var dayNames = [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// String lists the days Monday first, "mon,wed,fri", or says "every day".
func (w Weekdays) String() string {
	if w == 0 || w&allWeek == allWeek {
		return "every day"
	}
	var b strings.Builder
	for i := range 7 {
		d := time.Weekday((i + 1) % 7) // Monday first, as a week is read
		if w.Has(d) {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(dayNames[d])
		}
	}
	return b.String()
}

// ParseWeekday reads a day of the week by its English name or its first
// three letters, in any letter case: "mon", "Monday".
func ParseWeekday(s string) (time.Weekday, error) {
	l := strings.ToLower(s)
	for d, short := range dayNames {
		if l == short || l == strings.ToLower(time.Weekday(d).String()) {
			return time.Weekday(d), nil
		}
	}
	return 0, fmt.Errorf("%s is not a day of the week (write mon, tue, wed, thu, fri, sat or sun)", quoteClipped(s))
}

// ClockSchedule starts a plan at times of day by the wall clock of a time
// zone, on some days of the week. It is not changed once a plan holds it.
type ClockSchedule struct {
	// Times are the times of day, in Zone. There is at least one.
	Times []TimeOfDay
	// Zone is the time zone of Times and of the days. Nil means the
	// gateway's local zone (time.Local).
	Zone *time.Location
	// Weekdays are the days on which it fires, by the calendar of Zone.
	// The zero value is every day.
	Weekdays Weekdays
}

func (c *ClockSchedule) location() *time.Location {
	if c.Zone == nil {
		return time.Local
	}
	return c.Zone
}

func (c *ClockSchedule) validate() error {
	if len(c.Times) == 0 {
		return errors.New("a clock schedule needs a time of day")
	}
	for _, t := range c.Times {
		if !t.valid() {
			return fmt.Errorf("%02d:%02d is not a time of day", t.Hour, t.Minute)
		}
	}
	if c.Weekdays&^allWeek != 0 {
		return fmt.Errorf("weekdays %#x holds no day of the week", uint8(c.Weekdays))
	}
	return nil
}

// String says when it fires: "06:30, 18:00 Europe/Berlin, mon,fri".
func (c *ClockSchedule) String() string {
	ts := make([]string, len(c.Times))
	for i, t := range c.Times {
		ts[i] = t.String()
	}
	return strings.Join(ts, ", ") + " " + c.location().String() + ", " + c.Weekdays.String()
}

// MarshalJSON writes the schedule with its zone's name, so that two
// configurations compare by what they say.
func (c ClockSchedule) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Times    []TimeOfDay `json:"times"`
		Zone     string      `json:"zone"`
		Weekdays string      `json:"weekdays"`
	}{c.Times, c.location().String(), c.Weekdays.String()})
}

// Next returns the first firing strictly after t, in the schedule's zone;
// the zero time for a schedule without times. It is pure: it reads no
// clock.
//
// Each time of day fires once on each day of Weekdays, by the calendar
// date in the zone, at that time on the wall clock: across a change of
// daylight saving time a plan at 06:30 fires at 06:30 local time on both
// sides. On the two days a year when the wall clock jumps:
//
//   - A time that does not exist (02:30 on a day the clocks spring
//     forward from 02:00 to 03:00) fires once, at the first instant after
//     the gap: the instant the clocks jump, which the wall clock shows as
//     03:00 new time. A time of day at that instant (03:00 itself) fires
//     with it, once.
//   - A time that happens twice (02:30 on a day the clocks fall back from
//     03:00 to 02:00) fires once, at its first occurrence, still on
//     summer time; never again an hour later.
func (c *ClockSchedule) Next(t time.Time) time.Time {
	if c == nil || len(c.Times) == 0 {
		return time.Time{}
	}
	loc := c.location()
	y, m, d := t.In(loc).Date()
	var best time.Time
	// A day's firings come after the day before's, so the first day with
	// a firing after t holds the answer; the day after it is looked at
	// too, for zones whose clocks once jumped back across midnight. Eight
	// days ahead always hold a day of the week in Weekdays.
	for i, last := -1, 8; i <= last; i++ {
		day := time.Date(y, m, d+i, 0, 0, 0, 0, time.UTC) // calendar arithmetic only
		if !c.Weekdays.Has(day.Weekday()) {
			continue
		}
		for _, tod := range c.Times {
			f := firing(day, tod, loc)
			if f.After(t) && (best.IsZero() || f.Before(best)) {
				best = f
				last = min(last, i+1)
			}
		}
	}
	return best
}

// firing returns the instant at which time of day tod of the calendar day
// day (a midnight in UTC standing for a date) fires in loc; see Next.
func firing(day time.Time, tod TimeOfDay, loc *time.Location) time.Time {
	want := time.Date(day.Year(), day.Month(), day.Day(), tod.Hour, tod.Minute, 0, 0, time.UTC)
	f := time.Date(day.Year(), day.Month(), day.Day(), tod.Hour, tod.Minute, 0, 0, loc)
	if got := wall(f); !got.Equal(want) {
		// The wall clock skips want. time.Date placed it on one side of
		// the jump; the jump is the bound of that side's zone.
		start, end := f.ZoneBounds()
		if got.After(want) {
			return start
		}
		return end
	}
	// want exists. If the clocks fell back at the start of f's zone and
	// want also came before that, fire at its first occurrence.
	start, _ := f.ZoneBounds()
	if start.IsZero() {
		return f
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	_, after := f.Zone()
	if before > after {
		if alt := f.Add(-time.Duration(before-after) * time.Second); alt.Before(start) && wall(alt).Equal(want) {
			return alt
		}
	}
	return f
}

// wall returns what the wall clock of t's location shows at t, as a time
// in UTC, so that wall times compare as plain numbers.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// maxMissed bounds the missed firings counted one by one: a journal last
// written while the wall clock was unset can be decades old.
const maxMissed = 10000

// Missed counts the firings after since and at or before until, naming
// the first and the last. Past maxMissed firings it stops counting, with
// atLeast set, and still names the true last.
func (c *ClockSchedule) Missed(since, until time.Time) (n int, first, last time.Time, atLeast bool) {
	for f := c.Next(since); !f.IsZero() && !f.After(until); f = c.Next(f) {
		if n == 0 {
			first = f
		}
		n++
		last = f
		if week := until.Add(-8 * 24 * time.Hour); n >= maxMissed && week.After(f) {
			atLeast = true
			for g := c.Next(week); !g.IsZero() && !g.After(until); g = c.Next(g) {
				last = g
			}
			break
		}
	}
	return n, first, last, atLeast
}

// lateLimit is how late a clock firing may be noticed and still start the
// plan. Later than that (the wall clock was set forward, the process was
// stopped), it is missed.
const lateLimit = time.Minute

// recheck bounds a clock schedule's wait, so that a wall clock set while
// it waits (the first time sync of a board without a real-time clock) is
// noticed within it.
const recheck = time.Minute

// startSchedules starts the schedule of every plan that has one, on wg.
// The schedules are those of the plans in force when it is called: a
// reconfiguration changes the plan a schedule starts, not when it starts.
func (e *Engine) startSchedules(ctx context.Context, wg *sync.WaitGroup) {
	for _, p := range e.conf().plans {
		switch {
		case p.Every > 0:
			wg.Go(func() { e.everySchedule(ctx, p) })
		case p.At != nil:
			wg.Go(func() { e.clockSchedule(ctx, p) })
		}
	}
}

// everySchedule starts plan p every p.Every, skipping a tick while a run
// of it has not ended.
func (e *Engine) everySchedule(ctx context.Context, p *Plan) {
	t := time.NewTicker(p.Every)
	defer t.Stop()
	var s scheduler
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.fire(ctx, e, p, e.now(), "schedule: every "+p.Every.String())
	}
}

// clockSchedule starts plan p at the firings of p.At, by e.now(). It first
// reports the firings missed since the gateway last ran. A firing noticed
// more than lateLimit late is missed too (reported, and caught up once if
// the plan says so); a wall clock set back never fires a firing twice.
func (e *Engine) clockSchedule(ctx context.Context, p *Plan) {
	start := e.now()
	// done is the time up to which every firing was started or reported;
	// a firing at this very instant is still to start.
	done := start.Add(-time.Nanosecond)
	if since := e.lastRunning(); !since.IsZero() {
		if start.After(since) {
			e.reportMissed(ctx, p, since, start, MissedNotRunning)
		} else {
			done = since // the wall clock is behind the journal: not set yet
		}
	}
	var s scheduler
	next := p.At.Next(done)
	for {
		t := time.NewTimer(max(0, min(next.Sub(e.now()), recheck)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		now := e.now()
		switch {
		case now.Before(next):
			continue
		case now.Sub(next) > lateLimit:
			e.reportMissed(ctx, p, done, now, MissedLate)
			done = now.Add(-time.Nanosecond)
		default:
			s.fire(ctx, e, p, next, "schedule: due "+next.Format("2006-01-02 15:04 MST"))
			done = next
		}
		next = p.At.Next(done)
	}
}

// lastRunning returns the time the gateway was last seen running before
// this start (the newest journal event's), or zero on a first start.
func (e *Engine) lastRunning() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.restoredAt
}

// scheduler is one schedule's memory of the run it last found still going,
// so that a run that outlasts many firings is logged once at Info.
type scheduler struct {
	blocking string
}

// fire starts plan p for a firing due at due. A start refused because a
// run of the plan has not ended is skipped and journaled.
func (s *scheduler) fire(ctx context.Context, e *Engine, p *Plan, due time.Time, reason string) {
	_, err := e.StartPlan(ctx, StartPlan{Plan: p.Name, Principal: "schedule:" + p.Name, Origin: "schedule", Reason: reason})
	var running *PlanRunningError
	switch {
	case err == nil:
		s.blocking = ""
	case errors.As(err, &running):
		body := ScheduleSkippedBody{Plan: p.Name, Due: due, Run: running.Run,
			Why: "run " + running.Run + " of the plan has not ended; a plan runs one run at a time"}
		if _, err := e.commit(ctx, Async, Event{Kind: KindScheduleSkipped}, body, nil); err != nil {
			e.log.Debug("a skipped start could not be journaled", "plan", p.Name, "error", err)
		}
		args := []any{"plan", p.Name, "run", running.Run, "due", due}
		if s.blocking != running.Run {
			s.blocking = running.Run
			e.log.InfoContext(ctx, "scheduled start skipped; a run of the plan has not ended", args...)
		} else {
			e.log.DebugContext(ctx, "scheduled start skipped; a run of the plan has not ended", args...)
		}
	case ctx.Err() != nil || errors.Is(err, ErrStopped):
	default:
		e.log.WarnContext(ctx, "scheduled run not started", "plan", p.Name, "error", err)
	}
}

// reportMissed reports the firings of p's clock schedule after since and
// before until, if there are any: once, as a schedule_missed event
// and as an alarm raised and cleared at once, so that it stands cleared
// and unacknowledged for a person to see. A plan that catches up is
// started once, first.
func (e *Engine) reportMissed(ctx context.Context, p *Plan, since, until time.Time, cause string) {
	n, first, last, atLeast := p.At.Missed(since, until.Add(-time.Nanosecond))
	if n == 0 {
		return
	}
	loc := p.At.location()
	count := strconv.Itoa(n)
	if atLeast {
		count = "more than " + count
	}
	starts, them := "starts", "them"
	if n == 1 {
		starts, them = "start", "it"
	}
	when := first.In(loc).Format("2006-01-02 15:04 MST")
	if n > 1 {
		when = "first " + when + ", last " + last.In(loc).Format("2006-01-02 15:04 MST")
	}
	while := "while the gateway was not running"
	if cause == MissedLate {
		while = "because the gateway noticed " + them + " more than " + lateLimit.String() + " late (its wall clock was set forward, or it was held up)"
	}
	body := ScheduleMissedBody{Plan: p.Name, Cause: cause, Count: n, AtLeast: atLeast, First: first, Last: last,
		Since: since, Until: until, CatchUp: p.CatchUp}
	why := "plan " + p.Name + " missed " + count + " scheduled " + starts + " " + while + " (" + when + ")"
	if p.CatchUp {
		rec, err := e.StartPlan(ctx, StartPlan{Plan: p.Name, Principal: "schedule:" + p.Name, Origin: "schedule",
			Reason: "schedule: catching up once on " + count + " missed " + starts + " (" + when + ")"})
		var running *PlanRunningError
		switch {
		case err == nil:
			body.Run = rec.ID
			why += "; run once to catch up, as " + rec.ID
		case errors.As(err, &running):
			why += "; not caught up: run " + running.Run + " of the plan had not ended"
		default:
			why += "; not caught up: the run could not be started"
			e.log.WarnContext(ctx, "catch-up run not started", "plan", p.Name, "error", err)
		}
	} else {
		why += "; not run late"
	}
	body.Why = why
	if _, err := e.commit(ctx, Sync, Event{Kind: KindScheduleMissed}, body, nil); err != nil {
		e.log.Debug("missed starts could not be journaled", "plan", p.Name, "error", err)
	}
	args := []any{"plan", p.Name, "count", n, "first", first, "last", last, "cause", cause}
	if body.Run != "" {
		args = append(args, "run", body.Run)
	}
	e.log.WarnContext(ctx, "scheduled starts missed", args...)
	id := "schedule." + p.Name
	e.raiseID(ctx, id, AlarmSchedule, "", "", p.Name, why, "")
	e.clearID(ctx, id, "")
}
