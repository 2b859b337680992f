// Package runtimetest holds what tests of the runtime and of its surfaces
// share: an in-memory journal and small helpers. It is not part of the
// gateway's binary.
package runtimetest

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/shadowgate/shadowgate/runtime"
)

// MemJournal is a runtime.Journal held in memory: nothing survives the process.
// It keeps at most MaxEvents events, dropping the oldest. It is safe for
// concurrent use.
type MemJournal struct {
	// MaxEvents bounds the events kept; zero means 100,000.
	MaxEvents int

	// mu guards everything below.
	mu        sync.Mutex
	closed    bool
	events    []runtime.Event
	seq       uint64
	attempts  map[string]runtime.Attempt
	approvals map[string]runtime.Approval
	rules     map[string]runtime.RuleRecord
	runs      map[string]runtime.RunRecord
	states    map[string]runtime.StateRecord
	mode      *runtime.ModeRecord
	alarms    map[string]runtime.Alarm
}

// NewMemJournal returns an empty in-memory journal.
func NewMemJournal() *MemJournal {
	return &MemJournal{
		attempts:  map[string]runtime.Attempt{},
		approvals: map[string]runtime.Approval{},
		rules:     map[string]runtime.RuleRecord{},
		runs:      map[string]runtime.RunRecord{},
		states:    map[string]runtime.StateRecord{},
		alarms:    map[string]runtime.Alarm{},
	}
}

// Commit appends the event and stores the records. Durability is moot in
// memory: every commit is visible when it returns.
func (j *MemJournal) Commit(_ context.Context, e runtime.Entry) (runtime.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return runtime.Event{}, runtime.ErrJournalClosed
	}
	if a := e.Attempt; a != nil {
		if prev := j.attempts[a.Key]; !prev.State.CanMoveTo(a.State) {
			return runtime.Event{}, &runtime.TransitionError{Key: a.Key, From: prev.State, To: a.State}
		}
	}
	j.seq++
	ev := e.Event
	ev.Seq = j.seq
	max := j.MaxEvents
	if max <= 0 {
		max = 100_000
	}
	if len(j.events) >= max {
		// Drop a tenth at once so that pruning stays cheap per commit.
		j.events = slices.Delete(j.events, 0, len(j.events)-max+max/10+1)
	}
	j.events = append(j.events, ev)
	if e.Attempt != nil {
		j.attempts[e.Attempt.Key] = *e.Attempt
	}
	if e.Approval != nil {
		j.approvals[e.Approval.ID] = *e.Approval
	}
	if e.Rule != nil {
		j.rules[e.Rule.Rule.ID] = *e.Rule
	}
	if e.Run != nil {
		j.runs[e.Run.ID] = *e.Run
	}
	if e.Mode != nil {
		m := *e.Mode
		j.mode = &m
	}
	if e.Alarm != nil {
		j.alarms[e.Alarm.ID] = *e.Alarm
	}
	if st := e.State; st != nil {
		k := st.Device + "." + st.Capability
		cur := j.states[k]
		cur.Device, cur.Capability = st.Device, st.Capability
		if st.Reading != nil {
			cur.Reading = st.Reading
		}
		if st.Receipt != nil {
			cur.Receipt = st.Receipt
		}
		j.states[k] = cur
	}
	return ev, nil
}

// Events returns up to limit events after since.
func (j *MemJournal) Events(_ context.Context, since uint64, limit int) ([]runtime.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	i, _ := slices.BinarySearchFunc(j.events, since+1, func(e runtime.Event, s uint64) int { return cmp.Compare(e.Seq, s) })
	end := len(j.events)
	if limit > 0 && end-i > limit {
		end = i + limit
	}
	return slices.Clone(j.events[i:end]), nil
}

// runtime.Attempt returns the attempt with the key.
func (j *MemJournal) Attempt(_ context.Context, key string) (runtime.Attempt, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	a, ok := j.attempts[key]
	return a, ok, nil
}

// Load returns the folded records.
func (j *MemJournal) Load(context.Context) (runtime.Snapshot, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := runtime.Snapshot{LastSeq: j.seq}
	if n := len(j.events); n > 0 {
		s.LastAt = j.events[n-1].At
	}
	for _, a := range j.alarms {
		s.Alarms = append(s.Alarms, a)
	}
	slices.SortFunc(s.Alarms, func(a, b runtime.Alarm) int { return cmp.Compare(a.ID, b.ID) })
	for _, a := range j.approvals {
		if a.Status == runtime.ApprovalPending {
			s.Approvals = append(s.Approvals, a)
		}
	}
	for _, r := range j.rules {
		if !r.Revoked {
			s.Rules = append(s.Rules, r)
		}
	}
	for _, r := range j.runs {
		switch {
		case r.Status != runtime.RunEnded:
			s.Runs = append(s.Runs, r)
		case r.RequestID != "" && r.Plan != runtime.CommandPlan:
			s.Ended = append(s.Ended, r)
		}
	}
	for _, st := range j.states {
		s.States = append(s.States, st)
	}
	for _, a := range j.attempts {
		if !a.State.Terminal() {
			s.Open = append(s.Open, a)
		}
	}
	if j.mode != nil {
		m := *j.mode
		s.Mode = &m
	}
	slices.SortFunc(s.Approvals, func(a, b runtime.Approval) int { return a.RequestedAt.Compare(b.RequestedAt) })
	slices.SortFunc(s.Runs, func(a, b runtime.RunRecord) int { return a.StartedAt.Compare(b.StartedAt) })
	slices.SortFunc(s.Rules, func(a, b runtime.RuleRecord) int { return a.MadeAt.Compare(b.MadeAt) })
	slices.SortFunc(s.Open, func(a, b runtime.Attempt) int { return a.Updated.Compare(b.Updated) })
	slices.SortFunc(s.States, func(a, b runtime.StateRecord) int {
		return cmp.Compare(a.Device+"."+a.Capability, b.Device+"."+b.Capability)
	})
	return s, nil
}

// Err returns runtime.ErrJournalClosed after Close, and nil before.
func (j *MemJournal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return runtime.ErrJournalClosed
	}
	return nil
}

// Close makes later commits fail.
func (j *MemJournal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	return nil
}
