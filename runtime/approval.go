package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
)

// Answer is a person's answer to an approval.
type Answer struct {
	// By names the person: "console:bob".
	By string
	// Admin is true when the person holds the admin role; a mode change
	// that widens needs one.
	Admin    bool
	Decision Decision
	Reason   string
	// RuleFor is how long a rule added with ApproveAndRule lasts; it is
	// capped by the engine's MaxRuleTTL. Zero means one hour.
	RuleFor time.Duration
	// RuleAnyValue makes the added rule cover every value of the
	// capability, not only the one approved.
	RuleAnyValue bool
}

// ClosedError says why an approval can no longer be answered. It matches
// ErrApprovalClosed with errors.Is.
type ClosedError struct {
	ID     string
	Status ApprovalStatus
}

func (e *ClosedError) Error() string { return "approval " + e.ID + " is " + string(e.Status) }

// Is makes errors.Is(err, ErrApprovalClosed) true.
func (e *ClosedError) Is(target error) bool { return target == ErrApprovalClosed }

// Answer answers a pending approval. Four-eyes counts people, not
// principals: Options.Person names the person behind By, so one person is
// one approver whatever surface they answer through. No person approves
// twice; under approvals_required 2 the requester never approves. Approving
// enough times issues a single-use authorization bound to the exact act and
// valid for OperateWithin; the parked step then re-checks the world and
// acts. A rule asked for with ApproveAndRule is made only once the approval
// is approved and as many people as it required asked for the rule; it gets
// the narrowest terms they asked for.
func (e *Engine) Answer(ctx context.Context, id string, a Answer) (Approval, error) {
	if a.By == "" {
		return Approval{}, fmt.Errorf("an answer must name who gives it: %w", ErrNotPermitted)
	}
	switch a.Decision {
	case Approve, Deny, ApproveAndRule:
	default:
		return Approval{}, fmt.Errorf("unknown decision %q (want approve, deny or approve_and_rule)", a.Decision)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.approvals[id]
	if !ok {
		return Approval{}, fmt.Errorf("approval %s: %w", id, ErrApprovalNotFound)
	}
	now := e.now()
	if p.rec.Status == ApprovalPending && !now.Before(p.rec.Expires) {
		e.closeLocked(ctx, p, ApprovalExpired, KindApprovalExpired, "")
	}
	if p.rec.Status != ApprovalPending {
		return p.rec, &ClosedError{ID: id, Status: p.rec.Status}
	}
	if a.Decision != Deny {
		if err := e.mayApproveLocked(&p.rec, a); err != nil {
			return p.rec, err
		}
	}
	if a.Decision == ApproveAndRule && p.rec.Kind != "actuation" {
		return p.rec, fmt.Errorf("approval %s: a rule can only be added for an actuation, not a %s", id, p.rec.Kind)
	}
	ans := AnswerRecord{By: a.By, Decision: a.Decision, Reason: a.Reason, At: now}
	saved := p.rec
	p.rec.Answers = append(slices.Clip(p.rec.Answers), ans)
	status := ApprovalPending
	switch {
	case a.Decision == Deny:
		status = ApprovalDenied
	case len(p.rec.Answers) >= max(1, p.rec.Required):
		status = ApprovalApproved
		p.rec.Authorization = &Authorization{ID: newID("auth"),
			Digest: digest(p.rec.Device, p.rec.Capability, p.rec.Value, p.rec.Principal, p.rec.Key), ValidUntil: now.Add(e.opts.OperateWithin)}
	}
	var rule *RuleRecord
	ruleWhy := ""
	if a.Decision == ApproveAndRule {
		if p.terms == nil {
			p.terms = map[string]ruleTerms{}
		}
		p.terms[a.By] = termsOf(a)
		switch {
		case status != ApprovalApproved:
			ruleWhy = "the rule waits for " + strconv.Itoa(max(1, p.rec.Required)) + " people to approve"
		default:
			rule, ruleWhy = e.agreedRule(p, now)
		}
		if rule != nil {
			p.rec.Answers[len(p.rec.Answers)-1].Rule = rule.Rule.ID
		}
	}
	p.rec.Status = status
	rec := p.rec
	body := AnsweredBody{Approval: id, Decision: a.Decision, By: a.By, Person: e.person(a.By), Reason: a.Reason,
		Status: status, Device: rec.Device, Capability: rec.Capability, Rule: rec.Answers[len(rec.Answers)-1].Rule, RuleWhy: ruleWhy}
	if _, err := e.commit(ctx, Sync, Event{Kind: KindApprovalAnswered, Run: rec.Run, Step: rec.Step, Device: rec.Device}, body,
		func(en *Entry) { en.Approval = &rec }); err != nil {
		p.rec = saved
		delete(p.terms, a.By)
		return p.rec, err
	}
	if rule != nil {
		if err := e.addRuleLocked(ctx, *rule); err != nil {
			e.log.Error("rule not added", "rule", rule.Rule.ID, "error", err)
		}
	}
	if status != ApprovalPending {
		delete(e.byTarget, ref(rec.Device, rec.Capability))
		close(p.decided)
		if rec.Kind == "mode_change" && status == ApprovalApproved {
			e.applyModeLocked(ctx, rec.Mode, a.By, "approved "+id)
		}
	}
	return rec, nil
}

// mayApproveLocked says why a may not approve ap, or returns nil. It also
// raises ap.Required to what the mode in force requires now: an act asked
// for under one approval and answered after a switch to a two-approval mode
// needs two. e.mu must be held.
func (e *Engine) mayApproveLocked(ap *Approval, a Answer) error {
	if ap.AdminOnly && !a.Admin {
		return fmt.Errorf("approval %s changes to a wider mode and needs an admin: %w", ap.ID, ErrNotPermitted)
	}
	if ap.Kind == "actuation" {
		if m, ok := e.modes[e.mode.Name]; ok && m.ApprovalsRequired > ap.Required {
			ap.Required = m.ApprovalsRequired
		}
	}
	who := e.person(a.By)
	if ap.Required >= 2 && who == e.person(ap.Principal) {
		return fmt.Errorf("approval %s needs two people other than the requester %s, and %s is the same person (%s): %w",
			ap.ID, ap.Principal, a.By, who, ErrNotPermitted)
	}
	for _, prev := range ap.Answers {
		if e.person(prev.By) == who {
			return fmt.Errorf("%s (%s) already approved %s as %s; a second person must: %w", a.By, who, ap.ID, prev.By, ErrNotPermitted)
		}
	}
	return nil
}

// ruleTerms is the rule one person asked for with ApproveAndRule.
type ruleTerms struct {
	For      time.Duration
	AnyValue bool
}

// narrowestTerms are the terms of an answer whose own terms were lost (the
// gateway restarted while the approval waited for a second person).
var narrowestTerms = ruleTerms{For: time.Hour}

func termsOf(a Answer) ruleTerms {
	d := a.RuleFor
	if d <= 0 {
		d = time.Hour
	}
	return ruleTerms{For: d, AnyValue: a.RuleAnyValue}
}

// agreedRule returns the rule the people who approved ap agreed on, or nil
// and why there is none: a rule stands for future acts like this one, so as
// many people as the act required must have asked for it. Its terms are the
// narrowest any of them asked for. e.mu must be held.
func (e *Engine) agreedRule(p *pending, now time.Time) (*RuleRecord, string) {
	ap := &p.rec
	var by, reasons []string
	t := ruleTerms{For: e.opts.MaxRuleTTL, AnyValue: true}
	for _, ans := range ap.Answers {
		if ans.Decision != ApproveAndRule {
			continue
		}
		at, ok := p.terms[ans.By]
		if !ok {
			at = narrowestTerms
		}
		t.For, t.AnyValue = min(t.For, at.For), t.AnyValue && at.AnyValue
		by = append(by, ans.By)
		if ans.Reason != "" {
			reasons = append(reasons, ans.Reason)
		}
	}
	need := max(1, ap.Required)
	if len(by) < need {
		return nil, "no rule: " + strconv.Itoa(len(by)) + " of the " + strconv.Itoa(need) + " people who approved asked for one"
	}
	r := governance.Rule{ID: newID("rule"), Principal: ap.Principal, Device: ap.Device, Capability: ap.Capability,
		Decision: governance.DecideAllow, ExpiresAt: now.Add(min(t.For, e.opts.MaxRuleTTL)), MadeBy: strings.Join(by, ", "),
		Reason: strings.Join(reasons, "; "), Approvals: len(by)}
	if !t.AnyValue {
		r.Values.Set = []value.Value{ap.Value}
	}
	return &RuleRecord{Rule: r, MadeAt: now}, ""
}

// closeLocked ends a pending approval without approval. e.mu must be held.
func (e *Engine) closeLocked(ctx context.Context, p *pending, status ApprovalStatus, kind Kind, why string) {
	if p.rec.Status != ApprovalPending {
		return
	}
	p.rec.Status = status
	rec := p.rec
	_, _ = e.commit(ctx, Sync, Event{Kind: kind, Run: rec.Run, Step: rec.Step, Device: rec.Device},
		ClosedBody{Approval: rec.ID, Status: status, Why: why, Device: rec.Device, Capability: rec.Capability},
		func(en *Entry) { en.Approval = &rec })
	delete(e.byTarget, ref(rec.Device, rec.Capability))
	close(p.decided)
}

func (e *Engine) expire(ctx context.Context, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.approvals[id]; ok {
		e.closeLocked(ctx, p, ApprovalExpired, KindApprovalExpired, "unanswered")
	}
}

func (e *Engine) supersede(ctx context.Context, id, why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.approvals[id]; ok {
		e.closeLocked(ctx, p, ApprovalSuperseded, KindApprovalAnswered, why)
	}
}

func (e *Engine) expireModeApprovals(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for _, p := range e.approvals {
		if p.rec.Kind == "mode_change" && p.rec.Status == ApprovalPending && !now.Before(p.rec.Expires) {
			e.closeLocked(ctx, p, ApprovalExpired, KindApprovalExpired, "unanswered")
		}
	}
}

// Approval returns one approval by id.
func (e *Engine) Approval(id string) (Approval, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.approvals[id]
	if !ok {
		return Approval{}, false
	}
	return p.rec, true
}

// Approvals returns the pending approvals, oldest first.
func (e *Engine) Approvals() []Approval {
	out := e.approvalsWhere(func(s ApprovalStatus) bool { return s == ApprovalPending })
	slices.SortFunc(out, func(a, b Approval) int { return a.RequestedAt.Compare(b.RequestedAt) })
	return out
}

// approvalsWhere returns the records of the approvals whose status keep
// accepts, in no order.
func (e *Engine) approvalsWhere(keep func(ApprovalStatus) bool) []Approval {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Approval
	for _, p := range e.approvals {
		if keep(p.rec.Status) {
			out = append(out, p.rec)
		}
	}
	return out
}

// Mode returns the mode in force.
func (e *Engine) Mode(ctx context.Context) ModeRecord {
	e.currentMode(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mode
}

// currentMode returns the name of the mode in force, falling back to
// supervised when a mode's max_duration has run out.
func (e *Engine) currentMode(ctx context.Context) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.mode.Expires.IsZero() && !e.now().Before(e.mode.Expires) {
		e.applyModeLocked(ctx, governance.ModeSupervised, "gateway", e.mode.Name+" reached its max_duration")
	}
	return e.mode.Name
}

func (e *Engine) modeByName(name string) governance.Mode {
	if m, ok := e.policy.Load().Modes[name]; ok {
		return m
	}
	return governance.Mode{ApprovalsRequired: 1}
}

// SetMode changes the mode. Narrowing (or staying) takes effect at once.
// Widening asks: it returns a pending approval that only an admin may
// answer. An unknown mode is refused.
func (e *Engine) SetMode(ctx context.Context, by, name, reason string) (ModeRecord, *Approval, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	target, ok := e.modes[name]
	if !ok {
		return e.mode, nil, fmt.Errorf("mode %q: %w", name, ErrUnknownMode)
	}
	cur := e.modes[e.mode.Name]
	if target.SwitchWidens(cur) == "" {
		e.applyModeLocked(ctx, name, by, reason)
		return e.mode, nil, nil
	}
	for _, p := range e.approvals {
		if p.rec.Kind == "mode_change" && p.rec.Status == ApprovalPending {
			return e.mode, nil, errors.New("a mode change to " + p.rec.Mode + " is already pending as " + p.rec.ID)
		}
	}
	now := e.now()
	ap := Approval{ID: newID("apr"), Kind: "mode_change", Mode: name, Principal: by, Origin: "mode", Reason: reason,
		Why: "mode " + name + " is wider than " + cur.Name + ": " + target.SwitchWidens(cur), Stage: "mode",
		Required: max(1, cur.ApprovalsRequired, target.ApprovalsRequired), AdminOnly: true, RequestedAt: now, Expires: now.Add(e.opts.ApprovalTimeout), Status: ApprovalPending}
	rec := ap
	if _, err := e.commit(ctx, Sync, Event{Kind: KindApprovalRequested}, &rec, func(en *Entry) { en.Approval = &rec }); err != nil {
		return e.mode, nil, err
	}
	e.approvals[ap.ID] = &pending{rec: ap, decided: make(chan struct{})}
	return e.mode, &rec, nil
}

// applyModeLocked switches the mode and journals it. e.mu must be held.
func (e *Engine) applyModeLocked(ctx context.Context, name, by, reason string) {
	m := e.modes[name]
	now := e.now()
	next := ModeRecord{Name: name, Since: now, By: by}
	if m.MaxDuration > 0 {
		next.Expires = now.Add(m.MaxDuration)
	}
	from := e.mode.Name
	rec := next
	if _, err := e.commit(ctx, Sync, Event{Kind: KindModeChanged}, ModeChangedBody{From: from, To: name, By: by,
		Reason: reason, Expires: next.Expires}, func(en *Entry) { en.Mode = &rec }); err != nil {
		// An unjournaled widening must not take effect; a narrowing still
		// does, because narrowing is always safe.
		if m.SwitchWidens(e.modes[from]) != "" {
			return
		}
	}
	e.mode = next
}

// Modes returns every known mode, sorted by name.
func (e *Engine) Modes() []governance.Mode {
	out := make([]governance.Mode, 0, len(e.modes))
	for _, m := range e.modes {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b governance.Mode) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// addRuleLocked journals a rule and puts it in force. e.mu must be held.
func (e *Engine) addRuleLocked(ctx context.Context, rr RuleRecord) error {
	if err := rr.Rule.Validate(); err != nil {
		return err
	}
	rec := rr
	if _, err := e.commit(ctx, Sync, Event{Kind: KindRuleAdded, Device: rr.Rule.Device}, &rec, func(en *Entry) { en.Rule = &rec }); err != nil {
		return err
	}
	e.rules[rr.Rule.ID] = rr
	e.rebuildPolicyLocked()
	return nil
}

// RevokeRule ends a rule at once.
func (e *Engine) RevokeRule(ctx context.Context, id, by string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	rr, ok := e.rules[id]
	if !ok {
		return fmt.Errorf("rule %s: %w", id, ErrRuleNotFound)
	}
	rr.Revoked, rr.RevokedBy = true, by
	rec := rr
	if _, err := e.commit(ctx, Sync, Event{Kind: KindRuleRevoked, Device: rr.Rule.Device},
		RuleRevokedBody{Rule: id, By: by}, func(en *Entry) { en.Rule = &rec }); err != nil {
		return err
	}
	delete(e.rules, id)
	e.rebuildPolicyLocked()
	return nil
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

// rebuildPolicyLocked publishes a fresh policy snapshot for the judge,
// dropping expired rules. e.mu must be held.
func (e *Engine) rebuildPolicyLocked() {
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
	e.policy.Store(&governance.Policy{Modes: e.modes, Rules: rules})
}

func sortRuns(rs []RunRecord) {
	slices.SortFunc(rs, func(a, b RunRecord) int { return b.StartedAt.Compare(a.StartedAt) })
}
