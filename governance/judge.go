package governance

import (
	"fmt"
	"time"

	"github.com/shadowgate/shadowgate/value"
)

// Request is everything the judge needs to know about one step.
type Request struct {
	// Principal is who asked: "mqtt:alice", "plan:irrigate", "console:bob".
	Principal string
	// Device and Capability name the target.
	Device, Capability string
	// Write is true for an actuation, false for a read.
	Write bool
	// Profile is the step's effect profile.
	Profile EffectProfile
	// Value is the value to write; Type is TypeNone for a read.
	Value value.Value
	// Envelope bounds the value of a write; nil means none was declared.
	Envelope *Envelope
	// History feeds the envelope's rate and dwell limits.
	History History
	// Interlocks must all hold for a write to run.
	Interlocks []Condition
	// Facts supplies the readings the interlocks depend on.
	Facts Facts
	// Mode names the mode in force.
	Mode string
	// Now is the time of judgement.
	Now time.Time
	// AtAct asks for the select-before-operate re-check of an approved
	// step: envelope, interlocks, deny rules and ceiling only. Allow rules
	// and the ask line are not consulted, so an approved step is not asked
	// again.
	AtAct bool
}

// Policy is the standing policy: the modes known by name and the rules
// people made. The judge only reads it.
type Policy struct {
	Modes map[string]Mode
	Rules []Rule
}

// Judge decides whether the step described by req may run under pol. It
// evaluates, strongest first: envelope, interlocks, deny rules, the mode's
// ceiling, allow rules, the mode's ask line; otherwise it allows. An unknown
// mode refuses. A panic while judging becomes a refusal ("unjudged: ...").
//
// Judge is pure and safe for concurrent use; it does not modify req or pol.
func Judge(req *Request, pol *Policy) (v Verdict) {
	defer func() {
		if r := recover(); r != nil {
			v = Verdict{Outcome: Refuse, Stage: StageUnjudged, Mode: req.Mode, Why: fmt.Sprint("unjudged: ", r)}
		}
	}()
	if req == nil || pol == nil {
		return Verdict{Outcome: Refuse, Stage: StageUnjudged, Why: "unjudged: no request or no policy"}
	}
	mode, ok := pol.Modes[req.Mode]
	if !ok {
		return Verdict{Outcome: Refuse, Stage: StageMode, Mode: req.Mode, Why: "unknown mode \"" + req.Mode + "\": unjudged is not permission"}
	}
	if req.Write {
		if req.Value.Type == value.TypeNone {
			return Verdict{Outcome: Refuse, Stage: StageEnvelope, Mode: mode.Name, Why: "a write carries no value"}
		}
		if req.Envelope != nil {
			if ok, why := req.Envelope.Check(req.Value, req.History, req.Now); !ok {
				return Verdict{Outcome: Refuse, Stage: StageEnvelope, Mode: mode.Name, Why: "envelope: " + why}
			}
		}
		for i := range req.Interlocks {
			c := &req.Interlocks[i]
			if ok, why := c.Eval(req.Facts, req.Now); !ok {
				name := c.String()
				return Verdict{Outcome: Refuse, Stage: StageInterlock, Mode: mode.Name, Interlock: name, Why: "interlock " + name + ": " + why}
			}
		}
	}
	// A deny rule refuses at the act too: one made while a request waited
	// ("the pump is under repair") stops an approval given after it.
	for i := range pol.Rules {
		r := &pol.Rules[i]
		if r.Decision == DecideDeny && r.Matches(req.Principal, req.Device, req.Capability, req.Value, req.Now) {
			return Verdict{Outcome: Refuse, Stage: StageDenyRule, Mode: mode.Name, Rule: r.ID, Why: ruleWhy("deny rule ", r)}
		}
	}
	if f := req.Profile.crossed(mode.Ceiling); f != fieldNone {
		return Verdict{Outcome: Refuse, Stage: StageCeiling, Mode: mode.Name, Field: f,
			Why: "mode " + mode.Name + " does not permit it: " + req.Profile.whyCrossed(f)}
	}
	if req.AtAct {
		return Verdict{Outcome: Allow, Stage: StageCeiling, Mode: mode.Name}
	}
	for i := range pol.Rules {
		r := &pol.Rules[i]
		if r.Decision == DecideAllow && r.Binds(mode) && r.Matches(req.Principal, req.Device, req.Capability, req.Value, req.Now) {
			return Verdict{Outcome: Allow, Stage: StageAllowRule, Mode: mode.Name, Rule: r.ID}
		}
	}
	if mode.AskAbove != nil {
		if f := req.Profile.crossed(*mode.AskAbove); f != fieldNone {
			return Verdict{Outcome: Ask, Stage: StageAskLine, Mode: mode.Name, Field: f,
				Why: "mode " + mode.Name + " asks: " + req.Profile.whyCrossed(f)}
		}
	}
	return Verdict{Outcome: Allow, Stage: StageMode, Mode: mode.Name}
}

func ruleWhy(prefix string, r *Rule) string {
	s := prefix + r.ID
	if r.Reason != "" {
		s += " (" + r.Reason + ")"
	}
	return s
}
