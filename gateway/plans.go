package gateway

import (
	"strconv"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"go.yaml.in/yaml/v3"
)

// PlanConfig is a named plan. It starts by itself every so long (every),
// or at times of day (at: one time or a list, in zone, on weekdays), or
// only when asked.
type PlanConfig struct {
	Name  string `yaml:"name"`
	Every string `yaml:"every"`
	// At is a time of day ("06:30") or a list of them.
	At yaml.Node `yaml:"at"`
	// Zone is the IANA time zone of at ("Europe/Berlin"); empty means the
	// gateway's local zone.
	Zone string `yaml:"zone"`
	// Weekdays are the days at fires on (mon ... sun); absent means every
	// day.
	Weekdays []string `yaml:"weekdays"`
	// CatchUp runs the plan once at start when firings of at were missed
	// while the gateway was not running.
	CatchUp   bool         `yaml:"catch_up"`
	OnFailure string       `yaml:"on_failure"`
	Lease     LeaseConfig  `yaml:"lease"`
	Steps     []StepConfig `yaml:"steps"`
}

// StepConfig is one plan step: exactly one of read, write, wait, expect.
type StepConfig struct {
	Read   string        `yaml:"read"`
	Write  string        `yaml:"write"`
	Value  yaml.Node     `yaml:"value"`
	Wait   string        `yaml:"wait"`
	Expect *ExpectConfig `yaml:"expect"`
}

// ExpectConfig is a condition a plan waits for.
type ExpectConfig struct {
	Sensor string    `yaml:"sensor"`
	Op     string    `yaml:"op"`
	Value  yaml.Node `yaml:"value"`
	Within string    `yaml:"within"`
}

func (c *checker) plan(p path, pc PlanConfig) (runtime.Plan, bool) {
	n := len(c.errs)
	pl := runtime.Plan{Name: pc.Name, Every: c.duration(p.with("every"), pc.Every, 0),
		Lease: c.lease(p.with("lease"), pc.Lease, runtime.Lease{MaxSteps: 100, MaxActuations: 20, MaxWall: time.Hour})}
	if !namePattern.MatchString(pc.Name) {
		c.errf(p.with("name"), "%q is not a valid plan name", pc.Name)
	}
	if pc.Name == "command" {
		c.errf(p.with("name"), "plan name command is reserved for single commands; choose another name")
	}
	pl.At, pl.CatchUp = c.clock(p, pc), pc.CatchUp
	switch pc.OnFailure {
	case "", "end":
	case "continue":
		pl.ContinueOnFailure = true
	default:
		c.errf(p.with("on_failure"), "on_failure is end or continue, not %q", pc.OnFailure)
	}
	if len(pc.Steps) == 0 {
		c.errf(p.with("steps"), "plan %s has no steps", pc.Name)
	}
	for i, sc := range pc.Steps {
		sp := p.with("steps", i)
		count := 0
		for _, set := range []bool{sc.Read != "", sc.Write != "", sc.Wait != "", sc.Expect != nil} {
			if set {
				count++
			}
		}
		if count != 1 {
			c.errf(sp, "a step is exactly one of read, write, wait or expect")
			continue
		}
		switch {
		case sc.Read != "":
			capa, ok := c.caps[sc.Read]
			if !ok || !capa.Readable() {
				c.errf(sp.with("read"), "%q is not a readable device.capability", sc.Read)
				continue
			}
			dev, name := splitRef(sc.Read)
			pl.Steps = append(pl.Steps, runtime.PlanStep{Op: runtime.OpRead, Device: dev, Capability: name})
		case sc.Write != "":
			capa, ok := c.caps[sc.Write]
			if !ok || capa.Kind != devices.KindActuator {
				c.errf(sp.with("write"), "%q is not an actuator device.capability", sc.Write)
				continue
			}
			if v, ok := c.value(sp.with("value"), &sc.Value, capa.Type, capa.Enum); ok {
				dev, name := splitRef(sc.Write)
				pl.Steps = append(pl.Steps, runtime.PlanStep{Op: runtime.OpWrite, Device: dev, Capability: name, Value: v})
			}
		case sc.Wait != "":
			pl.Steps = append(pl.Steps, runtime.PlanStep{Op: runtime.OpWait, Wait: c.duration(sp.with("wait"), sc.Wait, time.Second)})
		default:
			ep := sp.with("expect")
			if op, v, ok := c.condition(ep, sc.Expect.Sensor, sc.Expect.Op, &sc.Expect.Value); ok {
				within := c.duration(ep.with("within"), sc.Expect.Within, 10*time.Second)
				pl.Steps = append(pl.Steps, runtime.PlanStep{Op: runtime.OpExpect,
					Expect: &runtime.Expect{Sensor: sc.Expect.Sensor, Op: op, Value: v, Within: within}})
			}
		}
	}
	return pl, len(c.errs) == n
}

// clock checks a plan's clock schedule: at, zone, weekdays and catch_up.
// It returns nil for a plan without at.
func (c *checker) clock(p path, pc PlanConfig) *runtime.ClockSchedule {
	at := pc.At
	if at.Kind == 0 || (at.Kind == yaml.ScalarNode && at.ShortTag() == "!!null") {
		if pc.Zone != "" {
			c.errf(p.with("zone"), "zone is the time zone of at; without at it means nothing")
		}
		if pc.Weekdays != nil {
			c.errf(p.with("weekdays"), "weekdays are the days at fires on; without at they mean nothing")
		}
		if pc.CatchUp {
			c.errf(p.with("catch_up"), "catch_up runs a plan whose at was missed; without at there is nothing to catch up")
		}
		return nil
	}
	if pc.Every != "" {
		c.errf(p.with("at"), "every and at are exclusive: a plan starts every so long or at times of day, not both")
	}
	sch := &runtime.ClockSchedule{}
	seen := map[runtime.TimeOfDay]bool{}
	add := func(ip path, n *yaml.Node) {
		if n.Kind != yaml.ScalarNode {
			c.errf(ip, "expected a time of day like 06:30, found a list or a mapping")
			return
		}
		t, err := runtime.ParseTimeOfDay(n.Value)
		switch {
		case err != nil:
			c.errf(ip, "%v", err)
		case seen[t]:
			c.errf(ip, "%s appears twice in at", t)
		default:
			seen[t] = true
			sch.Times = append(sch.Times, t)
		}
	}
	switch at.Kind {
	case yaml.SequenceNode:
		if len(at.Content) == 0 {
			c.errf(p.with("at"), "at lists no time of day; write at least one, like 06:30, or leave at out")
		}
		for i, n := range at.Content {
			add(p.with("at", i), n)
		}
	default:
		add(p.with("at"), &at)
	}
	if pc.Zone != "" {
		loc, err := time.LoadLocation(pc.Zone)
		if err != nil {
			c.errf(p.with("zone"), "unknown time zone %s (write an IANA name like Europe/Berlin, from the system's time zone database)", strconv.Quote(pc.Zone))
		}
		sch.Zone = loc
	}
	if pc.Weekdays != nil && len(pc.Weekdays) == 0 {
		c.errf(p.with("weekdays"), "weekdays lists no day; name at least one, or leave weekdays out for every day")
	}
	var days []time.Weekday
	for i, s := range pc.Weekdays {
		d, err := runtime.ParseWeekday(s)
		switch {
		case err != nil:
			c.errf(p.with("weekdays", i), "%v", err)
		case runtime.WeekdaysOf(days...).Has(d) && len(days) > 0:
			c.errf(p.with("weekdays", i), "%s appears twice in weekdays", s)
		default:
			days = append(days, d)
		}
	}
	sch.Weekdays = runtime.WeekdaysOf(days...)
	return sch
}
