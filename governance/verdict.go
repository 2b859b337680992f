package governance

// Outcome is the judge's answer. The zero value is not an answer and is
// treated as a refusal everywhere.
type Outcome uint8

// The three outcomes.
const (
	Allow Outcome = iota + 1
	Ask
	Refuse
)

// String returns "allow", "ask" or "refuse".
func (o Outcome) String() string {
	switch o {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Refuse:
		return "refuse"
	}
	return "unjudged"
}

// Stage names the part of the policy that decided a verdict.
type Stage uint8

// The stages, in the judge's order of evaluation.
const (
	StageUnjudged Stage = iota
	StageEnvelope
	StageInterlock
	StageDenyRule
	StageCeiling
	StageAllowRule
	StageAskLine
	StageMode
)

// String returns the stage's name as the journal records it.
func (s Stage) String() string {
	switch s {
	case StageEnvelope:
		return "envelope"
	case StageInterlock:
		return "interlock"
	case StageDenyRule:
		return "deny_rule"
	case StageCeiling:
		return "ceiling"
	case StageAllowRule:
		return "allow_rule"
	case StageAskLine:
		return "ask_line"
	case StageMode:
		return "mode"
	}
	return "unjudged"
}

// Verdict is the judge's decision and what made it, so the journal can
// record why.
type Verdict struct {
	Outcome Outcome
	// Why says in words why the step was asked or refused; empty on a plain Allow.
	Why string
	// Stage is the part of the policy that decided.
	Stage Stage
	// Mode is the mode the step was judged under.
	Mode string
	// Rule is the id of the rule that decided, if one did.
	Rule string
	// Interlock is the condition that refused, if one did.
	Interlock string
	// Field is the profile field that crossed the ceiling or the ask line.
	Field Field
}

// Allowed reports whether the verdict permits the step.
func (v Verdict) Allowed() bool { return v.Outcome == Allow }
