package runtime

import (
	"context"
	"sync"
	"time"
)

// startSchedules starts the schedule of every plan that has one, on wg.
func (e *Engine) startSchedules(ctx context.Context, wg *sync.WaitGroup) {
	for _, p := range e.conf().plans {
		if p.Every > 0 {
			wg.Go(func() { e.schedule(ctx, p) })
		}
	}
}

// schedule starts plan p every p.Every, skipping a tick while a run of it
// is still going.
func (e *Engine) schedule(ctx context.Context, p *Plan) {
	t := time.NewTicker(p.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if e.planActive(p.Name) {
			e.log.Debug("scheduled run skipped", "plan", p.Name, "why", "a run is still going")
			continue
		}
		if _, err := e.StartPlan(ctx, StartPlan{Plan: p.Name, Principal: "schedule:" + p.Name, Origin: "schedule"}); err != nil {
			e.log.Warn("scheduled run not started", "plan", p.Name, "error", err)
		}
	}
}
