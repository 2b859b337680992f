package runtime

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A plan may start by itself every so long (Plan.Every). A start is
// refused while a run of the plan has not ended: the schedule skips it,
// and journals the skip.

// KindScheduleSkipped records a scheduled start that did not happen
// because a run of the plan had not ended.
const KindScheduleSkipped Kind = "schedule_skipped"

// ScheduleSkippedBody is the body of a schedule_skipped event.
type ScheduleSkippedBody struct {
	// Due is when the start was due.
	Due  time.Time `json:"due"`
	Plan string    `json:"plan"`
	// Run is the run of the plan that had not ended.
	Run string `json:"run"`
	Why string `json:"why"`
}

// startSchedules starts the schedule of every plan that has one, on wg.
func (e *Engine) startSchedules(ctx context.Context, wg *sync.WaitGroup) {
	for _, p := range e.conf().plans {
		if p.Every > 0 {
			wg.Go(func() { e.everySchedule(ctx, p) })
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
