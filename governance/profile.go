package governance

import "strings"

// EffectProfile says what a step would do to the world. Its six fields are
// ordered "safer is smaller": fewer scopes read or written, not reaching
// beyond this machine, reversible, contained and free are the safe ends.
//
// The zero value reads and writes nothing and reaches nothing, but is
// neither reversible nor contained; [Nothing] is the safest profile and
// [Worst] the widest.
type EffectProfile struct {
	// Reads holds the scopes the step observes.
	Reads ScopeSet
	// Writes holds the scopes the step changes.
	Writes ScopeSet
	// Reaches is true when the act leaves this machine (a PLC, a publish upstream).
	Reaches bool
	// Reversible is true when the world can be put back (a valve can close again).
	Reversible bool
	// Contained is true when the effect stays inside a bounded envelope.
	Contained bool
	// Costs is true when the act spends something: consumables, energy, money.
	Costs bool
}

// Nothing is the safest profile: it reads and writes nothing, stays on this
// machine, is reversible, contained and free.
func Nothing() EffectProfile { return EffectProfile{Reversible: true, Contained: true} }

// Worst is the widest profile, given to anything that declares no effects.
func Worst() EffectProfile {
	return EffectProfile{Reads: Everything(), Writes: Everything(), Reaches: true, Costs: true}
}

// Narrows reports whether p is at most as wide as q in every field, so a
// step with profile p may run wherever q is permitted.
func (p EffectProfile) Narrows(q EffectProfile) bool {
	return p.crossed(q) == fieldNone
}

// Meet returns the greatest lower bound of p and q: the widest profile that
// narrows both.
func (p EffectProfile) Meet(q EffectProfile) EffectProfile {
	return EffectProfile{
		Reads:      p.Reads.Intersect(q.Reads),
		Writes:     p.Writes.Intersect(q.Writes),
		Reaches:    p.Reaches && q.Reaches,
		Reversible: p.Reversible || q.Reversible,
		Contained:  p.Contained || q.Contained,
		Costs:      p.Costs && q.Costs,
	}
}

// Join returns the least upper bound of p and q: the narrowest profile that
// both narrow. It combines a driver's floor with a configured declaration.
func (p EffectProfile) Join(q EffectProfile) EffectProfile {
	return EffectProfile{
		Reads:      p.Reads.Union(q.Reads),
		Writes:     p.Writes.Union(q.Writes),
		Reaches:    p.Reaches || q.Reaches,
		Reversible: p.Reversible && q.Reversible,
		Contained:  p.Contained && q.Contained,
		Costs:      p.Costs || q.Costs,
	}
}

// Equal reports whether p and q are the same profile.
func (p EffectProfile) Equal(q EffectProfile) bool {
	return p.Reads.Equal(q.Reads) && p.Writes.Equal(q.Writes) && p.Reaches == q.Reaches &&
		p.Reversible == q.Reversible && p.Contained == q.Contained && p.Costs == q.Costs
}

// String describes p compactly, for logs and messages.
func (p EffectProfile) String() string {
	var b strings.Builder
	b.WriteString("reads[" + p.Reads.String() + "] writes[" + p.Writes.String() + "]")
	if p.Reaches {
		b.WriteString(" reaches")
	}
	if !p.Reversible {
		b.WriteString(" irreversible")
	}
	if !p.Contained {
		b.WriteString(" uncontained")
	}
	if p.Costs {
		b.WriteString(" costs")
	}
	return b.String()
}

// Field names one of the six fields of a profile.
type Field uint8

// The fields, in the order the judge reports the first one crossed.
const (
	fieldNone Field = iota
	FieldWrites
	FieldReads
	FieldReaches
	FieldReversible
	FieldContained
	FieldCosts
)

// String returns the field's configuration name.
func (f Field) String() string {
	switch f {
	case FieldReads:
		return "reads"
	case FieldWrites:
		return "writes"
	case FieldReaches:
		return "reaches"
	case FieldReversible:
		return "reversible"
	case FieldContained:
		return "contained"
	case FieldCosts:
		return "costs"
	}
	return ""
}

// crossed returns the first field in which p is wider than q, or fieldNone.
func (p EffectProfile) crossed(q EffectProfile) Field {
	switch {
	case !p.Writes.SubsetOf(q.Writes):
		return FieldWrites
	case !p.Reads.SubsetOf(q.Reads):
		return FieldReads
	case p.Reaches && !q.Reaches:
		return FieldReaches
	case !p.Reversible && q.Reversible:
		return FieldReversible
	case !p.Contained && q.Contained:
		return FieldContained
	case p.Costs && !q.Costs:
		return FieldCosts
	}
	return fieldNone
}

// whyCrossed says in words which field of p crossed the line q.
func (p EffectProfile) whyCrossed(f Field) string {
	switch f {
	case FieldWrites:
		return "it writes " + p.Writes.String()
	case FieldReads:
		return "it reads " + p.Reads.String()
	case FieldReaches:
		return "it reaches beyond this gateway"
	case FieldReversible:
		return "it is irreversible"
	case FieldContained:
		return "it is not contained by an envelope"
	case FieldCosts:
		return "it costs something"
	}
	return ""
}
