package runtime

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/shadowgate/shadowgate/governance"
)

// addRule journals a rule and puts it in force. e.decide must be held.
func (e *Engine) addRule(ctx context.Context, rr RuleRecord) error {
	if err := rr.Rule.Validate(); err != nil {
		return err
	}
	rec := rr
	if _, err := e.commit(ctx, Sync, Event{Kind: KindRuleAdded, Device: rr.Rule.Device}, &rec, func(en *Entry) { en.Rule = &rec }); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rules[rr.Rule.ID] = rr
	e.rebuildPolicyLocked()
	return nil
}

// RevokeRule ends a rule at once.
func (e *Engine) RevokeRule(ctx context.Context, id, by string) error {
	e.decide.Lock()
	defer e.decide.Unlock()
	rr, ok := e.rule(id)
	if !ok {
		return fmt.Errorf("rule %s: %w", id, ErrRuleNotFound)
	}
	if rr.MadeAt.IsZero() {
		// It would come back from the file at the next start.
		return fmt.Errorf("rule %s: %w", id, ErrRuleFromConfiguration)
	}
	rr.Revoked, rr.RevokedBy = true, by
	// Revoking narrows: it takes effect at once, before the commit, and
	// stands for this run of the gateway even if the journal cannot
	// record it.
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.rules, id)
		e.rebuildPolicyLocked()
	}()
	rec := rr
	if _, err := e.commit(ctx, Sync, Event{Kind: KindRuleRevoked, Device: rr.Rule.Device},
		RuleRevokedBody{Rule: id, By: by}, func(en *Entry) { en.Rule = &rec }); err != nil {
		return fmt.Errorf("rule %s is revoked until the gateway restarts, but the journal could not record it: %w", id, err)
	}
	return nil
}

// rule returns the rule with the given id, if it is held.
func (e *Engine) rule(id string) (RuleRecord, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rr, ok := e.rules[id]
	return rr, ok
}

// Rules returns the rules in force, newest first.
func (e *Engine) Rules() []RuleRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	var out []RuleRecord
	for _, r := range e.rules {
		if r.Rule.Active(now) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b RuleRecord) int { return b.MadeAt.Compare(a.MadeAt) })
	return out
}

// rebuildPolicyLocked publishes a new snapshot whose policy holds the
// rules in force now, dropping expired ones. e.mu must be held.
func (e *Engine) rebuildPolicyLocked() {
	next := *e.conf()
	next.policy = e.policyLocked(&next)
	e.cfg.Store(&next)
}

// policyLocked returns the judge's policy for configuration c: its modes
// and the rules in force, dropping expired ones. e.mu must be held.
func (e *Engine) policyLocked(c *config) *governance.Policy {
	now := e.now()
	rules := make([]governance.Rule, 0, len(e.rules))
	for id, r := range e.rules {
		if !r.Rule.Active(now) {
			delete(e.rules, id)
			continue
		}
		if !r.MadeAt.IsZero() && r.Rule.Approvals == 0 {
			// Made by an approval before rules counted people: one person.
			r.Rule.Approvals = 1
		}
		rules = append(rules, r.Rule)
	}
	// Deny rules first is not needed for correctness (the judge takes every
	// deny before any allow), but a stable order makes verdicts repeatable.
	slices.SortFunc(rules, func(a, b governance.Rule) int { return cmp.Compare(a.ID, b.ID) })
	return &governance.Policy{Modes: c.modes, Rules: rules}
}

func sortRuns(rs []RunRecord) {
	slices.SortFunc(rs, func(a, b RunRecord) int { return b.StartedAt.Compare(a.StartedAt) })
}
