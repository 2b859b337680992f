package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/shadowgate/shadowgate/governance"
)

// Mode returns the mode in force.
func (e *Engine) Mode(ctx context.Context) ModeRecord {
	e.currentMode(ctx)
	return e.modeRecord()
}

// modeRecord returns the mode record as it stands, without falling back.
func (e *Engine) modeRecord() ModeRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mode
}

// currentMode returns the name of the mode in force, falling back to
// supervised when a mode's max_duration has run out. The fallback is
// journaled without e.mu held, so a step that only asks never waits for it.
func (e *Engine) currentMode(ctx context.Context) string {
	name, expired := e.modeNow()
	if !expired {
		return name
	}
	e.decide.Lock()
	defer e.decide.Unlock()
	e.fallBackIfExpired(ctx)
	name, _ = e.modeNow()
	return name
}

// fallBackIfExpired puts supervised in force if the mode's max_duration
// has run out. Every decision that reads the mode calls it first, so none
// is taken against an expired mode. e.decide must be held.
func (e *Engine) fallBackIfExpired(ctx context.Context) {
	if name, expired := e.modeNow(); expired {
		_ = e.applyMode(ctx, governance.ModeSupervised, "gateway", name+" reached its max_duration") // logged if not journaled
	}
}

// modeNow returns the mode in force and whether its max_duration ran out.
func (e *Engine) modeNow() (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mode.Name, !e.mode.Expires.IsZero() && !e.now().Before(e.mode.Expires)
}

func (e *Engine) modeByName(name string) governance.Mode {
	if m, ok := e.conf().modes[name]; ok {
		return m
	}
	return governance.Mode{ApprovalsRequired: 1}
}

// SetMode changes the mode. Narrowing (or staying) takes effect at once.
// Widening asks: it returns a pending approval that only an admin may
// answer. An unknown mode is refused.
func (e *Engine) SetMode(ctx context.Context, by, name, reason string) (ModeRecord, *Approval, error) {
	e.decide.Lock()
	defer e.decide.Unlock()
	e.fallBackIfExpired(ctx)
	if cur := e.modeRecord(); cur.Name == name {
		return cur, nil, nil // already in force; a time limit is not re-armed
	}
	ap, widens, err := e.modeRequest(by, name, reason)
	if err != nil {
		return e.modeRecord(), nil, err
	}
	if !widens {
		err := e.applyMode(ctx, name, by, reason)
		return e.modeRecord(), nil, err
	}
	rec := ap
	if _, err := e.commit(ctx, Sync, Event{Kind: KindApprovalRequested}, &rec, func(en *Entry) { en.Approval = &rec }); err != nil {
		return e.modeRecord(), nil, err
	}
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.approvals[ap.ID] = &pending{rec: ap, decided: make(chan struct{})}
	}()
	return e.modeRecord(), &rec, nil
}

// modeRequest checks a change to mode name: whether it widens the mode in
// force and, if so, the approval an admin must give. e.decide must be held.
func (e *Engine) modeRequest(by, name, reason string) (Approval, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	target, ok := e.conf().modes[name]
	if !ok {
		return Approval{}, false, fmt.Errorf("mode %q: %w", name, ErrUnknownMode)
	}
	cur := e.conf().modes[e.mode.Name]
	widens := target.SwitchWidens(cur)
	if widens == "" {
		return Approval{}, false, nil
	}
	for _, p := range e.approvals {
		if p.rec.Kind == "mode_change" && p.rec.Status == ApprovalPending {
			return Approval{}, true, fmt.Errorf("%w: to %s, as %s; answer it first", ErrModeChangePending, p.rec.Mode, p.rec.ID)
		}
	}
	now := e.now()
	return Approval{ID: newID("apr"), Kind: "mode_change", Mode: name, Principal: by, Origin: "mode", Reason: reason,
		Why: "mode " + name + " is wider than " + cur.Name + ": " + widens, Stage: "mode",
		Required: max(1, cur.ApprovalsRequired, target.ApprovalsRequired), AdminOnly: true, RequestedAt: now,
		Expires: now.Add(e.opts.ApprovalTimeout), Status: ApprovalPending}, true, nil
}

// applyMode switches the mode and journals it. A narrowing takes effect at
// once, before its commit: no step is judged under the wider mode while
// the disk syncs, and it stands even if the journal cannot record it,
// because narrowing is always safe. A widening takes effect only once it
// is journaled. e.decide must be held.
func (e *Engine) applyMode(ctx context.Context, name, by, reason string) error {
	e.mu.Lock()
	m, from := e.conf().modes[name], e.mode.Name
	widens := m.SwitchWidens(e.conf().modes[from]) != ""
	e.mu.Unlock()
	now := e.now()
	next := ModeRecord{Name: name, Since: now, By: by}
	if m.MaxDuration > 0 {
		next.Expires = now.Add(m.MaxDuration)
	}
	set := func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.mode = next
	}
	if !widens {
		set()
		// A widening asked for against the mode just left was judged
		// against it: it is asked again, against the mode now in force.
		defer e.supersedeModeRequests(ctx, "the mode changed to "+name+"; ask again")
	}
	rec := next
	if _, err := e.commit(ctx, Sync, Event{Kind: KindModeChanged}, ModeChangedBody{From: from, To: name, By: by,
		Reason: reason, Expires: next.Expires}, func(en *Entry) { en.Mode = &rec }); err != nil {
		if widens {
			return fmt.Errorf("mode %s is not in force: %w", name, err)
		}
		e.log.Error("a narrower mode is in force but not journaled: it does not survive a restart", "mode", name, "by", by, "error", err)
		return fmt.Errorf("mode %s is in force until the gateway restarts, but the journal could not record it: %w", name, err)
	}
	if widens {
		set()
	}
	return nil
}

// supersedeModeRequests closes every pending mode change. e.decide must be
// held.
func (e *Engine) supersedeModeRequests(ctx context.Context, why string) {
	var open []*pending
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, p := range e.approvals {
			if p.rec.Kind == "mode_change" && p.rec.Status == ApprovalPending {
				open = append(open, p)
			}
		}
	}()
	for _, p := range open {
		e.closeDecided(ctx, p, ApprovalSuperseded, KindApprovalAnswered, why)
	}
}

func (e *Engine) expireModeApprovals(ctx context.Context) {
	e.decide.Lock()
	defer e.decide.Unlock()
	now := e.now()
	var due []*pending
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, p := range e.approvals {
			if p.rec.Kind == "mode_change" && p.rec.Status == ApprovalPending && !now.Before(p.rec.Expires) {
				due = append(due, p)
			}
		}
	}()
	for _, p := range due {
		e.closeDecided(ctx, p, ApprovalExpired, KindApprovalExpired, "unanswered")
	}
}

// Modes returns every known mode, sorted by name.
func (e *Engine) Modes() []governance.Mode {
	modes := e.conf().modes
	out := make([]governance.Mode, 0, len(modes))
	for _, m := range modes {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b governance.Mode) int { return strings.Compare(a.Name, b.Name) })
	return out
}
