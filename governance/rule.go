package governance

import (
	"errors"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/value"
)

// Decision is what a rule decides when it matches.
type Decision string

// The two decisions a rule can make.
const (
	DecideAllow Decision = "allow"
	DecideDeny  Decision = "deny"
)

// ValueMatch selects values: any value, a number range, or a set.
// The zero value matches any value, including no value (a read).
type ValueMatch struct {
	// Min and Max bound numbers when HasMin and HasMax are set.
	Min    float64 `json:"min,omitempty"`
	Max    float64 `json:"max,omitempty"`
	HasMin bool    `json:"has_min,omitempty"`
	HasMax bool    `json:"has_max,omitempty"`
	// Set, when not empty, lists the values matched.
	Set []value.Value `json:"set,omitempty"`
}

// Any reports whether m matches every value.
func (m ValueMatch) Any() bool { return !m.HasMin && !m.HasMax && len(m.Set) == 0 }

// Matches reports whether v is selected.
func (m ValueMatch) Matches(v value.Value) bool {
	if m.Any() {
		return true
	}
	if len(m.Set) > 0 {
		for _, s := range m.Set {
			if s.Equal(v) {
				return true
			}
		}
		return false
	}
	if v.Type != value.TypeNumber {
		return false
	}
	return (!m.HasMin || v.Num >= m.Min) && (!m.HasMax || v.Num <= m.Max)
}

// String describes m for messages.
func (m ValueMatch) String() string {
	if m.Any() {
		return "any value"
	}
	if len(m.Set) > 0 {
		parts := make([]string, len(m.Set))
		for i, s := range m.Set {
			parts[i] = s.String()
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	lo, hi := "-inf", "+inf"
	if m.HasMin {
		lo = value.Number(m.Min).String()
	}
	if m.HasMax {
		hi = value.Number(m.Max).String()
	}
	return "[" + lo + ", " + hi + "]"
}

// Rule is a standing decision a person made, usually by "approve and add a
// rule". A rule never widens a mode's ceiling: the judge consults deny rules
// before the ceiling and allow rules after it. An expired rule decides
// nothing.
type Rule struct {
	ID string `json:"id"`
	// Principal is who the rule covers: an exact name, "*" for anyone, or a
	// prefix ending in "*" ("mqtt:line-*").
	Principal string `json:"principal"`
	// Device and Capability name what the rule covers; "*" matches any.
	Device     string     `json:"device"`
	Capability string     `json:"capability"`
	Values     ValueMatch `json:"values"`
	Decision   Decision   `json:"decision"`
	// ExpiresAt is when the rule stops deciding; zero means never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	MadeBy    string    `json:"made_by,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	// Approvals is how many different people made the rule. A rule stands
	// for acts that would each have needed that many approvals, so an allow
	// rule decides only in a mode that requires no more than Approvals.
	// Zero means the configuration made it; it decides in every mode.
	Approvals int `json:"approvals,omitempty"`
}

// Binds reports whether the rule may decide in mode m: a deny rule always
// may; an allow rule made by fewer people than m requires may not.
func (r *Rule) Binds(m Mode) bool {
	return r.Decision == DecideDeny || r.Approvals == 0 || r.Approvals >= m.ApprovalsRequired
}

// Validate names what is wrong with r, if anything.
func (r Rule) Validate() error {
	switch {
	case r.ID == "":
		return errors.New("rule has no id")
	case r.Principal == "":
		return errors.New("rule " + r.ID + " has no principal")
	case r.Device == "" || r.Capability == "":
		return errors.New("rule " + r.ID + " names no device or capability")
	case r.Decision != DecideAllow && r.Decision != DecideDeny:
		return errors.New("rule " + r.ID + " has decision \"" + string(r.Decision) + "\" (want allow or deny)")
	case r.Values.HasMin && r.Values.HasMax && r.Values.Min > r.Values.Max:
		return errors.New("rule " + r.ID + " has min above max")
	case r.Approvals < 0:
		return errors.New("rule " + r.ID + " has a negative count of approvals")
	}
	return nil
}

// Active reports whether r still decides at now.
func (r *Rule) Active(now time.Time) bool { return r.ExpiresAt.IsZero() || now.Before(r.ExpiresAt) }

// Matches reports whether r covers the step at now.
func (r *Rule) Matches(principal, device, capability string, v value.Value, now time.Time) bool {
	return r.Active(now) &&
		matchName(r.Principal, principal) &&
		(r.Device == "*" || r.Device == device) &&
		(r.Capability == "*" || r.Capability == capability) &&
		r.Values.Matches(v)
}

func matchName(pattern, name string) bool {
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}
