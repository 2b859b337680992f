package gateway

import (
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
)

func isTrue(b *bool) bool { return b != nil && *b }

// aboveFloor reports every field of the declared effects e of actuator capa
// of device that is narrower than its driver's floor: configuration may
// declare more than the driver knows, never less.
func (c *checker) aboveFloor(p path, device string, capa devices.Capability, e *EffectsConfig) {
	f := capa.Floor
	says := "driver " + c.driverOf[device] + " says " + device + "." + capa.Name
	const rule = "the configuration may declare more than the driver's floor, never less"
	if f.Irreversible && isTrue(e.Reversible) {
		c.errf(p.with("reversible"), "%s cannot be undone (irreversible); %s: write reversible: false or leave it out", says, rule)
	}
	if f.Uncontained && isTrue(e.Contained) {
		c.errf(p.with("contained"), "%s is not contained in a bounded envelope; %s: write contained: false or leave it out", says, rule)
	}
	if f.Costs && e.Costs != nil && !*e.Costs {
		c.errf(p.with("costs"), "%s spends something (costs); %s: write costs: true or leave it out", says, rule)
	}
	if f.Reaches && e.Reaches != nil && !*e.Reaches {
		c.errf(p.with("reaches"), "%s leaves this machine (reaches); %s: write reaches: true or leave it out", says, rule)
	}
}

// Effect is the effect profile a step on one capability is judged with,
// and where each field wider than the safest came from.
type Effect struct {
	Device     string
	Capability string
	Kind       devices.Kind
	// Driver names the driver that reaches the device.
	Driver string
	// Profile is the profile the engine judges: runtime.Profile for an
	// actuator, runtime.ReadProfile for a sensor.
	Profile governance.EffectProfile
	// Fields are the six fields of the profile, in the order of the
	// design: reads, writes, reaches, reversible, contained, costs.
	Fields []EffectField
}

// EffectField is one field of an effect profile.
type EffectField struct {
	// Name is reads, writes, reaches, reversible, contained or costs.
	Name string
	// Value is the field's value: a scope set ("greenhouse/zone-a/pump-1",
	// "nothing", "**"), true or false.
	Value string
	// From says where a value wider than the safest came from, each
	// source a phrase: the capability's kind, the driver's floor, the
	// configuration. It is empty for the safest value.
	From []string
}

// Where a wider field came from.
const (
	fromSensorKind   = "the kind (a sensor reads its own scope)"
	fromActuatorKind = "the kind (an actuator writes its own scope)"
	fromWorst        = "the configuration (no effects declared: the worst case)"
)

// Effects returns the effect profile of every capability, devices and
// capabilities in the order of the file.
func (b *Built) Effects() []Effect {
	var out []Effect
	for i := range b.Devices {
		d := &b.Devices[i]
		for k := range d.Capabilities {
			c := &d.Capabilities[k]
			ref := d.ID + "." + c.Name
			e := Effect{Device: d.ID, Capability: c.Name, Kind: c.Kind, Driver: d.Driver}
			floor := "the driver's floor (" + d.Driver + ")"
			var from [6][]string // reads, writes, reaches, reversible, contained, costs
			if c.Kind == devices.KindSensor {
				e.Profile = runtime.ReadProfile(d, c)
				from[0] = []string{fromSensorKind}
				if c.Floor.Reaches {
					from[2] = []string{floor}
				}
			} else {
				pol, ok := b.Policies[ref]
				var pp *runtime.CapPolicy
				if ok {
					pp = &pol
				}
				e.Profile = runtime.Profile(d, c, pp)
				decl, declared := b.declared[ref]
				if !declared {
					for f := range from {
						from[f] = []string{fromWorst}
					}
				} else {
					from[1] = []string{fromActuatorKind}
					from[2] = sources(c.Floor.Reaches, floor, decl.Reaches, true, "reaches")
					from[3] = sources(c.Floor.Irreversible, floor, decl.Reversible, false, "reversible")
					from[4] = sources(c.Floor.Uncontained, floor, decl.Contained, false, "contained")
					from[5] = sources(c.Floor.Costs, floor, decl.Costs, true, "costs")
				}
			}
			p := e.Profile
			wide := [6]bool{!p.Reads.IsEmpty(), !p.Writes.IsEmpty(), p.Reaches, !p.Reversible, !p.Contained, p.Costs}
			for f, v := range [6]string{p.Reads.String(), p.Writes.String(), bstr(p.Reaches), bstr(p.Reversible), bstr(p.Contained), bstr(p.Costs)} {
				ef := EffectField{Name: fieldNames[f], Value: v}
				if wide[f] {
					ef.From = from[f]
				}
				e.Fields = append(e.Fields, ef)
			}
			out = append(out, e)
		}
	}
	return out
}

var fieldNames = [6]string{"reads", "writes", "reaches", "reversible", "contained", "costs"}

func bstr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// sources says where the wide side of a declared field came from: the
// driver's floor, the configuration, or both. wide is the value of the
// field's wide side (true for reaches and costs, false for reversible and
// contained); a field left out is the wide side only for those whose wide
// side is false.
func sources(inFloor bool, floor string, declared *bool, wide bool, name string) []string {
	var out []string
	if inFloor {
		out = append(out, floor)
	}
	switch {
	case declared != nil && *declared == wide:
		out = append(out, "the configuration (effects."+name+": "+bstr(wide)+")")
	case declared == nil && !wide:
		out = append(out, "the configuration (effects does not declare "+name+": true)")
	}
	return out
}
