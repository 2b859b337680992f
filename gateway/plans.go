package gateway

import (
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"go.yaml.in/yaml/v3"
)

// PlanConfig is a named plan.
type PlanConfig struct {
	Name      string       `yaml:"name"`
	Every     string       `yaml:"every"`
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
