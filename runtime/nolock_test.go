package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// stallJournal is an in-memory journal whose commit of one kind of event
// blocks until released, as a disk that stalls on fsync would.
type stallJournal struct {
	*runtimetest.MemJournal
	kind     runtime.Kind
	entered  chan struct{} // closed when the stalled commit starts
	release  chan struct{} // closed to let it finish
	once     sync.Once
	released sync.Once
}

func (j *stallJournal) Commit(ctx context.Context, en runtime.Entry) (runtime.Event, error) {
	if en.Event.Kind == j.kind {
		stalled := false
		j.once.Do(func() { stalled = true })
		if stalled {
			close(j.entered)
			select {
			case <-j.release:
			case <-ctx.Done():
				return runtime.Event{}, ctx.Err()
			}
		}
	}
	return j.MemJournal.Commit(ctx, en)
}

func (j *stallJournal) unblock() { j.released.Do(func() { close(j.release) }) }

// TestStalledCommitStallsNoOtherStep shows that the engine holds no lock
// across a journal commit: while one decision's commit is stuck on the
// disk, a read of another device completes, a write is judged, and the
// engine's views answer. Each decision the engine journals is tried.
func TestStalledCommitStallsNoOtherStep(t *testing.T) {
	tests := []struct {
		name    string
		kind    runtime.Kind
		prepare func(w *world) string
		decide  func(ctx context.Context, e *runtime.Engine, arg string)
	}{
		{
			name: "a narrowing mode change",
			kind: runtime.KindModeChanged,
			decide: func(ctx context.Context, e *runtime.Engine, _ string) {
				_, _, _ = e.SetMode(ctx, "console:ann", governance.ModeObserve, "closing up")
			},
		},
		{
			name: "an answer to an approval",
			kind: runtime.KindApprovalAnswered,
			prepare: func(w *world) string {
				obs := w.do("mqtt:ann", "v1", "valve-1", "open", value.Bool(true))
				if obs.Kind != runtime.ApprovalRequest {
					w.t.Fatalf("write valve-1.open = %v (%q), want an approval request", obs.Kind, obs.Why)
				}
				return obs.Approval.ID
			},
			decide: func(ctx context.Context, e *runtime.Engine, id string) {
				_, _ = e.Answer(ctx, id, runtime.Answer{By: "console:bob", Decision: runtime.Deny, Reason: "not now"})
			},
		},
		{
			name: "a rule's revocation",
			kind: runtime.KindRuleRevoked,
			prepare: func(w *world) string {
				obs := w.do("mqtt:alice", "r1", "valve-1", "open", value.Bool(true))
				if obs.Kind != runtime.ApprovalRequest {
					w.t.Fatalf("write valve-1.open = %v (%q), want an approval request", obs.Kind, obs.Why)
				}
				w.answer(obs.Approval.ID, runtime.Answer{By: "console:bob", Decision: runtime.ApproveAndRule, RuleFor: time.Hour})
				for _, r := range w.e.Rules() {
					if r.Rule.Device == "valve-1" {
						return r.Rule.ID
					}
				}
				w.t.Fatal("approve and add a rule made no rule")
				return ""
			},
			decide: func(ctx context.Context, e *runtime.Engine, id string) {
				_ = e.RevokeRule(ctx, id, "console:ann")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			sj := &stallJournal{kind: tc.kind, entered: make(chan struct{}), release: make(chan struct{})}
			w := newWorld(t, func(s *setup) {
				s.journal = func(m *runtimetest.MemJournal) runtime.Journal { sj.MemJournal = m; return sj }
				s.opts.Rules = []governance.Rule{{ID: "night-valve", Principal: "mqtt:*", Device: "heater-1", Capability: "on",
					Decision: governance.DecideAllow, ExpiresAt: time.Now().Add(time.Hour), MadeBy: "test"}}
			})
			defer sj.unblock()
			arg := ""
			if tc.prepare != nil {
				arg = tc.prepare(w)
			}
			decided := make(chan struct{})
			go func() {
				defer close(decided)
				tc.decide(ctx, w.e, arg)
			}()
			select {
			case <-sj.entered:
			case <-ctx.Done():
				t.Fatalf("the %s commit never started", tc.kind)
			}
			// The decision is stuck in its commit. Everything else goes on.
			within(ctx, t, "a read of another device", func() {
				obs, err := w.e.Do(ctx, runtime.Command{Principal: "api:ann", Origin: "api", Device: "tank-1", Capability: "level"})
				if err != nil || obs.Kind != runtime.Completed {
					t.Errorf("read tank-1.level during the stalled commit = %v (%q), %v, want completed", obs.Kind, obs.Why, err)
				}
			})
			within(ctx, t, "the engine's views", func() {
				_ = w.e.Mode(ctx)
				_ = w.e.Approvals()
				_ = w.e.Rules()
				_ = w.e.Runs()
				_ = w.e.States()
				_ = w.e.Locks()
			})
			select {
			case <-decided:
				t.Fatalf("the decision returned before its commit was released")
			default:
			}
			sj.unblock()
			within(ctx, t, "the decision after its commit", func() { <-decided })
		})
	}
}

// A narrowing takes effect before its commit: while the disk syncs the
// change to observe, a write is already judged under observe.
func TestNarrowingTakesEffectBeforeItsCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sj := &stallJournal{kind: runtime.KindModeChanged, entered: make(chan struct{}), release: make(chan struct{})}
	w := newWorld(t, func(s *setup) {
		s.opts.Mode = governance.ModeInterlocked
		s.journal = func(m *runtimetest.MemJournal) runtime.Journal { sj.MemJournal = m; return sj }
	})
	defer sj.unblock()
	decided := make(chan struct{})
	go func() {
		defer close(decided)
		_, _, _ = w.e.SetMode(ctx, "console:ann", governance.ModeObserve, "closing up")
	}()
	select {
	case <-sj.entered:
	case <-ctx.Done():
		t.Fatal("the mode change was never committed")
	}
	within(ctx, t, "a write during the narrowing's commit", func() {
		obs, err := w.e.Do(ctx, runtime.Command{Principal: "mqtt:alice", Origin: "mqtt", RequestID: "c1", Device: "valve-1", Capability: "open", Value: on})
		if err != nil || obs.Kind != runtime.Refused || obs.Mode != governance.ModeObserve {
			t.Errorf("write while observe is being journaled = %v (%q, mode %q), %v; want refused by observe", obs.Kind, obs.Why, obs.Mode, err)
		}
	})
	sj.unblock()
	<-decided
}

// An approval can be seen and answered only once its request is durable.
func TestApprovalIsFiledOnlyOnceJournaled(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sj := &stallJournal{kind: runtime.KindApprovalRequested, entered: make(chan struct{}), release: make(chan struct{})}
	w := newWorld(t, func(s *setup) {
		s.journal = func(m *runtimetest.MemJournal) runtime.Journal { sj.MemJournal = m; return sj }
	})
	defer sj.unblock()
	asked := make(chan runtime.Observation, 1)
	go func() {
		obs, _ := w.e.Do(ctx, runtime.Command{Principal: "mqtt:alice", Origin: "mqtt", RequestID: "c1", Device: "valve-1", Capability: "open", Value: on})
		asked <- obs
	}()
	select {
	case <-sj.entered:
	case <-ctx.Done():
		t.Fatal("the request was never journaled")
	}
	if aps := w.e.Approvals(); len(aps) != 0 {
		t.Fatalf("approvals while the request is being journaled = %+v, want none", aps)
	}
	sj.unblock()
	obs := <-asked
	if obs.Kind != runtime.ApprovalRequest {
		t.Fatalf("first request = %v (%q), want an approval request", obs.Kind, obs.Why)
	}
	if aps := w.e.Approvals(); len(aps) != 1 || aps[0].ID != obs.Approval.ID {
		t.Fatalf("approvals once journaled = %+v", aps)
	}
}
