package runtime

import (
	"context"
	"fmt"
	"maps"
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
//
// The answer takes effect only once it is journaled; until then the
// approval stands as it was, and no other step waits for the journal.
func (e *Engine) Answer(ctx context.Context, id string, a Answer) (Approval, error) {
	if a.By == "" {
		return Approval{}, fmt.Errorf("an answer must name who gives it: %w", ErrNotPermitted)
	}
	switch a.Decision {
	case Approve, Deny, ApproveAndRule:
	default:
		return Approval{}, fmt.Errorf("unknown decision %q (want approve, deny or approve_and_rule)", a.Decision)
	}
	e.awaitFiled(ctx, id)
	e.decide.Lock()
	defer e.decide.Unlock()
	e.fallBackIfExpired(ctx) // the approvals required are the mode's in force
	p, ok := e.pendingByID(id)
	if !ok {
		return Approval{}, fmt.Errorf("approval %s: %w", id, ErrApprovalNotFound)
	}
	now := e.now()
	if cur := e.approvalRecord(p); cur.Status == ApprovalPending && !now.Before(cur.Expires) {
		e.closeDecided(ctx, p, ApprovalExpired, KindApprovalExpired, "")
	}
	next, terms, rule, ruleWhy, err := e.answered(p, a, now)
	if err != nil {
		return next, err
	}
	body := AnsweredBody{Approval: id, Decision: a.Decision, By: a.By, Person: e.person(a.By), Reason: a.Reason,
		Status: next.Status, Device: next.Device, Capability: next.Capability, Rule: next.Answers[len(next.Answers)-1].Rule, RuleWhy: ruleWhy}
	if next.Kind == "actuation" {
		v := next.Value
		body.Value = &v
	}
	if next.Status == ApprovalPending {
		still := next
		body.Record = &still
	}
	rec := next
	if _, err := e.commit(ctx, Sync, Event{Kind: KindApprovalAnswered, Run: rec.Run, Step: rec.Step, Device: rec.Device}, body,
		func(en *Entry) { en.Approval = &rec }); err != nil {
		return e.approvalRecord(p), err
	}
	e.settleAnswer(p, next, terms)
	if rule != nil {
		if err := e.addRule(ctx, *rule); err != nil {
			e.log.Error("rule not added", "rule", rule.Rule.ID, "error", err)
		}
	}
	if next.Kind == "mode_change" && next.Status == ApprovalApproved {
		if err := e.applyMode(ctx, next.Mode, a.By, "approved "+id); err != nil {
			return next, err
		}
	}
	return next, nil
}

// answered returns what the approval of p becomes with answer a, and the
// rule terms of its people, without changing p; or why a may not answer.
// On an error the approval is returned as it stands.
func (e *Engine) answered(p *pending, a Answer, now time.Time) (Approval, map[string]ruleTerms, *RuleRecord, string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	next := p.rec
	if next.Status != ApprovalPending {
		return next, nil, nil, "", &ClosedError{ID: next.ID, Status: next.Status}
	}
	if a.Decision != Deny {
		if err := e.mayApproveLocked(&next, a); err != nil {
			return p.rec, nil, nil, "", err
		}
	}
	if a.Decision == ApproveAndRule && next.Kind != "actuation" {
		return p.rec, nil, nil, "", fmt.Errorf("approval %s: a rule can only be added for an actuation, not a %s", next.ID, next.Kind)
	}
	next.Answers = append(slices.Clip(next.Answers), AnswerRecord{By: a.By, Decision: a.Decision, Reason: a.Reason, At: now})
	next.Status = ApprovalPending
	switch {
	case a.Decision == Deny:
		next.Status = ApprovalDenied
	case len(next.Answers) >= max(1, next.Required):
		next.Status = ApprovalApproved
		next.Authorization = &Authorization{ID: newID("auth"),
			Digest: digest(next.Device, next.Capability, next.Value, next.Principal, next.Key), ValidUntil: now.Add(e.opts.OperateWithin)}
	}
	terms := p.terms
	var rule *RuleRecord
	ruleWhy := ""
	if a.Decision == ApproveAndRule {
		terms = maps.Clone(p.terms)
		if terms == nil {
			terms = map[string]ruleTerms{}
		}
		terms[a.By] = termsOf(a)
		switch {
		case next.Status != ApprovalApproved:
			ruleWhy = "the rule waits for " + strconv.Itoa(max(1, next.Required)) + " people to approve"
		default:
			rule, ruleWhy = e.agreedRule(&next, terms, now)
		}
		if rule != nil {
			next.Answers[len(next.Answers)-1].Rule = rule.Rule.ID
		}
	}
	return next, terms, rule, ruleWhy, nil
}

// settleAnswer puts a journaled answer in force: the approval becomes
// next and, once decided, wakes the run that waits for it.
func (e *Engine) settleAnswer(p *pending, next Approval, terms map[string]ruleTerms) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p.rec, p.terms = next, terms
	if next.Status != ApprovalPending {
		e.unfileLocked(p)
	}
}

// unfileLocked forgets p as its actuator's pending approval and wakes its
// run. e.mu must be held.
func (e *Engine) unfileLocked(p *pending) {
	target := ref(p.rec.Device, p.rec.Capability)
	if e.byTarget[target] == p.rec.ID {
		delete(e.byTarget, target)
	}
	select {
	case <-p.decided:
	default:
		close(p.decided)
	}
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
		if m, ok := e.conf().modes[e.mode.Name]; ok && m.ApprovalsRequired > ap.Required {
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
// narrowest any of them asked for. terms holds the terms each asked for.
func (e *Engine) agreedRule(ap *Approval, terms map[string]ruleTerms, now time.Time) (*RuleRecord, string) {
	var by, reasons []string
	t := ruleTerms{For: e.opts.MaxRuleTTL, AnyValue: true}
	for _, ans := range ap.Answers {
		if ans.Decision != ApproveAndRule {
			continue
		}
		at, ok := terms[ans.By]
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

// closeDecided ends a pending approval without approval. The approval is
// closed even if the journal cannot record it: a request nobody can answer
// must not hold its run. e.decide must be held.
func (e *Engine) closeDecided(ctx context.Context, p *pending, status ApprovalStatus, kind Kind, why string) {
	rec := e.approvalRecord(p)
	if rec.Status != ApprovalPending {
		return
	}
	rec.Status = status
	_, _ = e.commit(ctx, Sync, Event{Kind: kind, Run: rec.Run, Step: rec.Step, Device: rec.Device},
		ClosedBody{Approval: rec.ID, Status: status, Why: why, Device: rec.Device, Capability: rec.Capability},
		func(en *Entry) { en.Approval = &rec })
	e.mu.Lock()
	defer e.mu.Unlock()
	p.rec = rec
	e.unfileLocked(p)
}

func (e *Engine) expire(ctx context.Context, id string) {
	e.decide.Lock()
	defer e.decide.Unlock()
	if p, ok := e.pendingByID(id); ok {
		e.closeDecided(ctx, p, ApprovalExpired, KindApprovalExpired, "unanswered")
	}
}

func (e *Engine) supersede(ctx context.Context, id, why string) {
	e.decide.Lock()
	defer e.decide.Unlock()
	if p, ok := e.pendingByID(id); ok {
		e.closeDecided(ctx, p, ApprovalSuperseded, KindApprovalAnswered, why)
	}
}

// Approval returns one approval by id.
func (e *Engine) Approval(id string) (Approval, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), filingWait)
	e.awaitFiled(ctx, id)
	cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.approvals[id]
	if !ok {
		return Approval{}, false
	}
	return p.rec, true
}

// filingWait bounds how long Approval waits for an approval whose request
// is being journaled.
const filingWait = 2 * time.Second

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
