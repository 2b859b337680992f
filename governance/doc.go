// Package governance decides whether a step may touch the world.
//
// It holds effect profiles and the scope sets inside them, modes, rules made
// by people, capability envelopes, interlocks, and the judge that combines
// them. Everything here is pure: no I/O, no clock reads, no logging and no
// package state. Time and facts arrive in the [Request]; a [Verdict] goes out.
//
// The judge evaluates, strongest first: the envelope of the capability, its
// interlocks, deny rules, the ceiling of the mode, allow rules, the ask line
// of the mode, and otherwise allows. An error or a panic while judging is a
// refusal ("unjudged is not permission").
package governance
