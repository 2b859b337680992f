package governance

import (
	"errors"
	"strconv"
	"time"
)

// Mode is a named policy posture. A step whose profile does not narrow the
// Ceiling is refused, never asked. A step inside the ceiling whose profile
// does not narrow AskAbove is asked. Inside both, it runs.
type Mode struct {
	Name string
	// Base names the shipped mode this one narrows; a shipped mode is its
	// own base.
	Base    string
	Ceiling EffectProfile
	// AskAbove is the ask line; nil means the mode never asks.
	AskAbove *EffectProfile
	// ApprovalsRequired is how many different people must approve: 1 or 2.
	ApprovalsRequired int
	// MaxDuration bounds how long the mode stays on before it falls back to
	// supervised; zero means unbounded.
	MaxDuration time.Duration
}

// Names of the shipped modes.
const (
	ModeObserve     = "observe"
	ModeSupervised  = "supervised"
	ModeInterlocked = "interlocked"
	ModeMaintenance = "maintenance"
)

// DefaultMaintenance is the MaxDuration of the shipped maintenance mode.
const DefaultMaintenance = time.Hour

func readsOnly() EffectProfile {
	p := Nothing()
	p.Reads = Everything()
	return p
}

// ShippedModes returns the four modes Shadowgate ships, fresh each call:
//
//   - observe: reads only; every write is refused.
//   - supervised: the default; every write asks.
//   - interlocked: reversible, contained writes that stay on this machine
//     run (inside their envelope and interlocks); others ask.
//   - maintenance: everything inside the ceiling runs without asking, for
//     at most an hour, then the gateway falls back to supervised.
func ShippedModes() map[string]Mode {
	ro := readsOnly()
	supervisedAsk := readsOnly()
	interlockedAsk := readsOnly()
	interlockedAsk.Writes = Everything()
	interlockedAsk.Costs = true
	return map[string]Mode{
		ModeObserve:     {Name: ModeObserve, Base: ModeObserve, Ceiling: ro, ApprovalsRequired: 1},
		ModeSupervised:  {Name: ModeSupervised, Base: ModeSupervised, Ceiling: Worst(), AskAbove: &supervisedAsk, ApprovalsRequired: 1},
		ModeInterlocked: {Name: ModeInterlocked, Base: ModeInterlocked, Ceiling: Worst(), AskAbove: &interlockedAsk, ApprovalsRequired: 1},
		ModeMaintenance: {Name: ModeMaintenance, Base: ModeMaintenance, Ceiling: Worst(), ApprovalsRequired: 1, MaxDuration: DefaultMaintenance},
	}
}

// Narrower reports whether m is at most as permissive as o: its ceiling
// narrows o's, what it runs without asking narrows what o runs without
// asking, it requires at least as many approvals, and it lasts no longer.
func (m Mode) Narrower(o Mode) bool { return m.Widens(o) == "" }

// runsUnasked is the widest profile the mode runs without asking: inside
// both its ceiling and its ask line; a mode that never asks runs everything
// under its ceiling.
func (m Mode) runsUnasked() EffectProfile {
	if m.AskAbove == nil {
		return m.Ceiling
	}
	return m.AskAbove.Meet(m.Ceiling)
}

// Widens names the first way m is wider than o, or returns "".
func (m Mode) Widens(o Mode) string {
	if w := m.widensPowers(o); w != "" {
		return w
	}
	return m.outlasts(o)
}

// SwitchWidens names the first way switching from o to m widens what runs,
// or returns "". Unlike Widens, a mode with strictly fewer powers narrows
// even without o's max_duration: leaving maintenance for observe is always
// safe. With equal powers, lasting longer widens.
func (m Mode) SwitchWidens(o Mode) string {
	if w := m.widensPowers(o); w != "" {
		return w
	}
	if o.widensPowers(m) != "" {
		return "" // fewer powers than o: no bound on time is needed
	}
	return m.outlasts(o)
}

func (m Mode) outlasts(o Mode) string {
	if o.MaxDuration > 0 && (m.MaxDuration <= 0 || m.MaxDuration > o.MaxDuration) {
		return "it may last longer than " + o.Name + "'s max_duration " + o.MaxDuration.String()
	}
	return ""
}

func (m Mode) widensPowers(o Mode) string {
	if f := m.Ceiling.crossed(o.Ceiling); f != fieldNone {
		return "its ceiling is wider than " + o.Name + "'s in " + f.String()
	}
	if f := m.runsUnasked().crossed(o.runsUnasked()); f != fieldNone {
		if m.AskAbove == nil {
			return "it never asks, so it runs without asking what " + o.Name + " asks about (" + f.String() + ")"
		}
		return "its ask line is wider than " + o.Name + "'s in " + f.String()
	}
	if m.ApprovalsRequired < o.ApprovalsRequired {
		noun := " approvals, "
		if m.ApprovalsRequired == 1 {
			noun = " approval, "
		}
		return "it requires " + strconv.Itoa(m.ApprovalsRequired) + noun + o.Name + " requires " + strconv.Itoa(o.ApprovalsRequired)
	}
	return ""
}

// CheckConfigured checks a configured mode against the shipped modes: it
// must name a shipped base, not reuse a shipped name, and narrow its base on
// both lines.
func CheckConfigured(m Mode) error {
	shipped := ShippedModes()
	if _, ok := shipped[m.Name]; ok {
		return errors.New("mode " + m.Name + " is a shipped mode and cannot be redefined")
	}
	base, ok := shipped[m.Base]
	if !ok {
		return errors.New("mode " + m.Name + " names base \"" + m.Base + "\", which is not a shipped mode (observe, supervised, interlocked, maintenance)")
	}
	if m.ApprovalsRequired < 1 || m.ApprovalsRequired > 2 {
		return errors.New("mode " + m.Name + " requires " + strconv.Itoa(m.ApprovalsRequired) + " approvals (want 1 or 2)")
	}
	if why := m.Widens(base); why != "" {
		return errors.New("mode " + m.Name + " does not narrow its base " + base.Name + ": " + why)
	}
	return nil
}
