package web

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// policyData is the Policy page: the mode in force, the modes to switch
// to, the rules in force in words, and the locked actuators.
type policyData struct {
	Mode runtime.ModeRecord
	// ModeBy says who put the mode in force, ModeWords what it does.
	ModeBy, ModeWords string
	Modes             []governance.Mode
	Rules             []ruleView
	Locks             []runtime.Attempt
}

// ruleView is a rule as a person reads it: "Allow api:operator to set
// valve-1.open to false", until when, who made it and how.
type ruleView struct {
	ID string
	// Verb is "Allow" or "Forbid"; Deny marks the second.
	Verb string
	Deny bool
	// Who is whom it covers, Act what it lets them do or forbids.
	Who, Act string
	Until    time.Time
	// Made says where the rule came from: "made by api:approver approving
	// a request", "from the configuration".
	Made   string
	MadeAt time.Time
	Reason string
	// Idle says why an allow rule decides nothing in the mode in force,
	// or is "".
	Idle string
	// Revocable is false for a rule of the configuration, which comes
	// back with the file.
	Revocable bool
}

func (s *Server) policyData(ctx context.Context) policyData {
	d := policyData{Mode: s.eng.Mode(ctx), Modes: s.eng.Modes(), Locks: s.eng.Locks()}
	d.ModeBy = modeByWords(d.Mode.By)
	var mode governance.Mode
	for _, m := range d.Modes {
		if m.Name == d.Mode.Name {
			mode, d.ModeWords = m, modeWords(m)
		}
	}
	for _, rr := range s.eng.Rules() {
		d.Rules = append(d.Rules, ruleWords(rr, mode))
	}
	return d
}

// modeByWords says who put a mode in force.
func modeByWords(by string) string {
	switch by {
	case "configuration":
		return "the configuration, at start"
	case "gateway":
		return "the gateway, when the mode before ran out of time"
	case "":
		return "no one recorded"
	}
	return personText(by)
}

// modeWords says what a mode does, from the shipped mode it narrows.
func modeWords(m governance.Mode) string {
	var b strings.Builder
	switch m.Base {
	case governance.ModeObserve:
		b.WriteString("Reads only: every write is refused.")
	case governance.ModeSupervised:
		b.WriteString("Every write asks a person first.")
	case governance.ModeInterlocked:
		b.WriteString("Reversible writes that stay on this machine run, inside their envelope and interlocks; every other write asks a person first.")
	case governance.ModeMaintenance:
		b.WriteString("Writes run without asking a person, inside their envelope and interlocks.")
	}
	if m.Base != "" && m.Base != m.Name {
		b.WriteString(" It narrows " + m.Base + ".")
	}
	if m.ApprovalsRequired > 1 {
		b.WriteString(" Each request needs " + strconv.Itoa(m.ApprovalsRequired) + " different people to approve it.")
	}
	if m.MaxDuration > 0 {
		b.WriteString(" It lasts at most " + spanWords(m.MaxDuration) + ", then the gateway falls back to supervised.")
	}
	return strings.TrimSpace(b.String())
}

// ruleWords puts a rule in words, and says whether it decides in mode.
func ruleWords(rr runtime.RuleRecord, mode governance.Mode) ruleView {
	r := rr.Rule
	v := ruleView{ID: r.ID, Verb: "Allow", Deny: r.Decision == governance.DecideDeny, Who: principalWords(r.Principal),
		Act: valuesWords(r.Values, targetWords(r.Device, r.Capability)), Until: r.ExpiresAt, MadeAt: rr.MadeAt,
		Reason: r.Reason, Revocable: !rr.MadeAt.IsZero()}
	if v.Deny {
		v.Verb = "Forbid"
	}
	switch {
	case rr.MadeAt.IsZero():
		v.Made = "from the configuration"
	case r.MadeBy == "":
		v.Made = "made by no one recorded"
	default:
		v.Made = "made by " + peopleInSentence(r.MadeBy) + " approving a request"
	}
	if !r.Binds(mode) {
		v.Idle = "It decides nothing in mode " + mode.Name + ", which needs " + strconv.Itoa(mode.ApprovalsRequired) +
			" people to approve: " + strconv.Itoa(r.Approvals) + countNoun(r.Approvals, " person", " people") +
			" made it, so such requests ask as usual."
	}
	return v
}

// principalWords says whom a rule's principal covers.
func principalWords(p string) string {
	if p == "*" {
		return "anyone"
	}
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return "anyone whose name begins with " + prefix
	}
	return personInSentence(p)
}

// targetWords names what a rule covers.
func targetWords(device, capability string) string {
	switch {
	case device == "*" && capability == "*":
		return "any capability of any device"
	case device == "*":
		return capability + " of any device"
	case capability == "*":
		return "any capability of " + device
	}
	return device + "." + capability
}

// valuesWords says what a rule lets someone do to target, by the values
// it matches. A rule for any value covers reads too.
func valuesWords(m governance.ValueMatch, target string) string {
	switch {
	case m.Any():
		return "to read " + target + " or set it to any value"
	case len(m.Set) > 0:
		vs := make([]string, len(m.Set))
		for i, x := range m.Set {
			vs[i] = x.String()
		}
		return "to set " + target + " to " + orList(vs)
	case m.HasMin && m.HasMax:
		return "to set " + target + " to a number from " + value.Number(m.Min).String() + " to " + value.Number(m.Max).String()
	case m.HasMin:
		return "to set " + target + " to a number of at least " + value.Number(m.Min).String()
	}
	return "to set " + target + " to a number of at most " + value.Number(m.Max).String()
}

// andList joins words as a person lists them: "a", "a and b", "a, b and c".
func andList(ws []string) string { return joinLast(ws, " and ") }

// orList joins words as alternatives: "a", "a or b", "a, b or c".
func orList(ws []string) string { return joinLast(ws, " or ") }

func joinLast(ws []string, last string) string {
	if len(ws) < 2 {
		return strings.Join(ws, "")
	}
	return strings.Join(ws[:len(ws)-1], ", ") + last + ws[len(ws)-1]
}
