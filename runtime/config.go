package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/shadowgate/shadowgate/governance"
)

// Config is what the engine takes from the configuration: the governance
// of each capability, the configured modes, the standing rules and the
// plans. The engine holds it, with the judge's policy, as one snapshot
// that Reconfigure swaps whole; a step loads the snapshot once, so it sees
// either the old configuration or the new one, never a mix. The devices
// themselves live with their drivers.
type Config struct {
	// Policies holds the governance of each capability by "device.capability".
	Policies map[string]CapPolicy
	// Modes are the configured modes, each checked with
	// governance.CheckConfigured. The shipped modes are always known.
	Modes []governance.Mode
	// Rules are standing rules from the configuration.
	Rules []governance.Rule
	// Plans are the named plans.
	Plans []Plan
}

// config is a checked Config, as the engine reads it. It is never changed
// once built.
type config struct {
	policies map[string]*CapPolicy
	modes    map[string]governance.Mode
	rules    []governance.Rule
	plans    map[string]*Plan
	// whileBy names, by "device.capability" of a reading, the actuators
	// whose running interlocks read it; guarded lists, sorted, every
	// actuator with running interlocks.
	whileBy map[string][]string
	guarded []string
	// policy is what the judge sees: the modes and every rule in force,
	// those of the configuration and those made by approvals. It is
	// rebuilt, in a new snapshot, whenever a rule comes or goes.
	policy *governance.Policy
}

// checkConfig checks c and builds the snapshot the engine reads.
func checkConfig(c Config) (*config, error) {
	out := &config{
		policies: make(map[string]*CapPolicy, len(c.Policies)),
		modes:    governance.ShippedModes(),
		plans:    make(map[string]*Plan, len(c.Plans)),
	}
	out.whileBy = map[string][]string{}
	for _, k := range slices.Sorted(maps.Keys(c.Policies)) {
		p := c.Policies[k]
		if err := p.check(k); err != nil {
			return nil, err
		}
		out.policies[k] = &p
		if len(p.While) > 0 {
			out.guarded = append(out.guarded, k)
		}
		seen := map[string]bool{}
		for _, w := range p.While {
			if !seen[w.Sensor] {
				seen[w.Sensor] = true
				out.whileBy[w.Sensor] = append(out.whileBy[w.Sensor], k)
			}
		}
	}
	for _, m := range c.Modes {
		if err := governance.CheckConfigured(m); err != nil {
			return nil, err
		}
		out.modes[m.Name] = m
	}
	plans := slices.Clone(c.Plans)
	for i := range plans {
		p := &plans[i]
		if err := p.validate(); err != nil {
			return nil, err
		}
		if _, dup := out.plans[p.Name]; dup {
			return nil, fmt.Errorf("plan %q is defined twice", p.Name)
		}
		out.plans[p.Name] = p
	}
	seen := map[string]bool{}
	for _, r := range c.Rules {
		if err := r.Validate(); err != nil {
			return nil, err
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("rule %q is defined twice", r.ID)
		}
		seen[r.ID] = true
	}
	out.rules = slices.Clone(c.Rules)
	out.policy = &governance.Policy{Modes: out.modes, Rules: out.rules}
	return out, nil
}

// conf returns the configuration in force.
func (e *Engine) conf() *config { return e.cfg.Load() }

// Reconfigure checks c and, if it is sound, puts it in force at once and
// whole: policies, modes, rules from the configuration and plans. Rules
// added by approvals stay. It refuses, changing nothing, a configuration
// that does not check or that drops the mode in force. Runs already
// started keep the plan they started with; schedules and pollers are those
// the engine started with.
func (e *Engine) Reconfigure(ctx context.Context, c Config) error {
	return e.reconfigure(ctx, c, nil)
}

// Reload is Reconfigure for a configuration file read again: the change is
// journaled (config_changed, with the file's digest and what changed)
// before it takes effect, and not made if it cannot be journaled.
func (e *Engine) Reload(ctx context.Context, c Config, body ConfigChangedBody) error {
	return e.reconfigure(ctx, c, &body)
}

func (e *Engine) reconfigure(ctx context.Context, c Config, note *ConfigChangedBody) error {
	next, err := checkConfig(c)
	if err != nil {
		return fmt.Errorf("the new configuration: %w", err)
	}
	e.decide.Lock()
	defer e.decide.Unlock()
	e.mu.Lock()
	err = e.fitsLocked(next)
	e.mu.Unlock()
	if err != nil {
		return err
	}
	if note != nil {
		if note.Changes == nil {
			note.Changes = e.configChanges(next)
		}
		// The decision lock keeps the state checked until it is applied.
		if _, err := e.commit(ctx, Sync, Event{Kind: KindConfigChanged}, *note, nil); err != nil {
			return fmt.Errorf("not applied: the change could not be journaled: %w", err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, rr := range e.rules {
		if rr.MadeAt.IsZero() { // from the configuration it replaces
			delete(e.rules, id)
		}
	}
	for _, r := range next.rules {
		e.rules[r.ID] = RuleRecord{Rule: r}
	}
	next.policy = e.policyLocked(next)
	e.cfg.Store(next)
	e.log.Info("configuration in force", "policies", len(next.policies), "modes", len(next.modes),
		"rules", len(next.rules), "plans", slices.Sorted(maps.Keys(next.plans)))
	return nil
}

// fitsLocked reports why next cannot replace the configuration in force:
// it drops the mode in force, or reuses the id of a rule an approval made.
// e.mu must be held.
func (e *Engine) fitsLocked(next *config) error {
	if _, ok := next.modes[e.mode.Name]; !ok {
		return fmt.Errorf("the new configuration drops mode %q, which is in force: %w", e.mode.Name, ErrUnknownMode)
	}
	for _, r := range next.rules {
		if rr, ok := e.rules[r.ID]; ok && !rr.MadeAt.IsZero() {
			return errors.New("the new configuration's rule " + r.ID + " has the id of a rule made by an approval")
		}
	}
	return nil
}

// configChanges says what next changes in the configuration in force, as lines
// a person reads: rules, plans, modes and capabilities added, removed or
// changed.
func (e *Engine) configChanges(next *config) []string {
	cur := e.conf()
	out := []string{}
	diff := func(what string, old, now map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(now)) {
			o, had := old[k]
			switch {
			case !had:
				out = append(out, what+" "+k+" added")
			case o != now[k]:
				out = append(out, what+" "+k+" changed")
			}
		}
		for _, k := range slices.Sorted(maps.Keys(old)) {
			if _, has := now[k]; !has {
				out = append(out, what+" "+k+" removed")
			}
		}
	}
	diff("rule", describeRules(cur.rules), describeRules(next.rules))
	diff("plan", describe(cur.plans), describe(next.plans))
	diff("mode", describe(cur.modes), describe(next.modes))
	diff("capability", describe(cur.policies), describe(next.policies))
	return out
}

func describeRules(rs []governance.Rule) map[string]string {
	out := make(map[string]string, len(rs))
	for _, r := range rs {
		out[r.ID] = content(r)
	}
	return out
}

func describe[V any](m map[string]V) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = content(v)
	}
	return out
}

// content is v as JSON, pointers followed, so that two snapshots' values
// compare by what they hold.
func content(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", err)
	}
	return string(b)
}
