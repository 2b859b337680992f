package gateway

import (
	"cmp"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/internal/omit"
)

// BuiltDriver is a configured driver, checked by its factory, ready to
// build.
type BuiltDriver struct {
	// Name is the driver's name in the configuration; devices name it.
	Name string
	// Type is the driver type, one this build has.
	Type  string
	build devices.Builder
}

// driverEntry is a driver of the configuration being checked.
type driverEntry struct {
	cfg     DriverConfig
	at      path
	factory devices.Factory
	// ok is false when the entry has an error of its own (name or type):
	// its factory is not asked about it.
	ok bool
}

// drivers checks the driver entries: names, types, and that an entry holds
// no options but its own type's. It returns the entries in order and the
// names defined.
func (c *checker) drivers(dcs []DriverConfig) ([]*driverEntry, map[string]bool) {
	names := map[string]bool{}
	entries := make([]*driverEntry, 0, len(dcs))
	for i, d := range dcs {
		e := &driverEntry{cfg: d, at: path{"drivers", i}, ok: true}
		switch {
		case !namePattern.MatchString(d.Name):
			c.errf(e.at.with("name"), "%q is not a valid driver name", d.Name)
			e.ok = false
		case names[d.Name]:
			c.errf(e.at.with("name"), "driver %s is defined twice", d.Name)
			e.ok = false
		}
		names[d.Name] = true
		types := strings.Join(devices.DriverTypes(), ", ")
		var known bool
		e.factory, known = devices.LookupFactory(d.Type)
		switch {
		case d.Type == "":
			c.errf(e.at, "a driver names its type (this build has: %s)", types)
		case !known && omit.OPCUA && d.Type == "opcua":
			c.errf(e.at.with("type"), "%s", omit.OPCUAPart.Refusal())
		case !known:
			c.errf(e.at.with("type"), "unknown driver type %q (this build has: %s)", d.Type, types)
		}
		e.ok = e.ok && known
		keys := make([]string, 0, len(d.Options))
		for k := range d.Options {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			na, nb := d.Options[a], d.Options[b]
			return cmp.Or(cmp.Compare(na.Line, nb.Line), cmp.Compare(na.Column, nb.Column), cmp.Compare(a, b))
		})
		for _, k := range keys {
			switch _, other := devices.LookupFactory(k); {
			case k == d.Type:
			case other:
				c.errf(e.at.with(k), "%s options on a %s driver", k, d.Type)
			case known:
				c.errf(e.at.with(k), "unknown key %q (known keys here: name, type, %s)", k, d.Type)
			default:
				c.errf(e.at.with(k), "unknown key %q (known keys here: name, type and the options of the driver type)", k)
			}
		}
		entries = append(entries, e)
	}
	return entries, names
}

// configureDrivers asks the factory of every driver entry without an error
// of its own to check its options and its devices, at is where each of
// devs is in the file. The floors the factories set are written into devs.
func (c *checker) configureDrivers(entries []*driverEntry, devs []devices.Device, at []path) []BuiltDriver {
	c.driverOf = map[string]string{}
	c.claims = map[string]string{}
	var out []BuiltDriver
	for _, e := range entries {
		if !e.ok {
			continue
		}
		in := &driverInstance{c: c, name: e.cfg.Name, at: e.at.with(e.cfg.Type)}
		if n, ok := e.cfg.Options[e.cfg.Type]; ok {
			in.node = &n
		}
		var mine []int // indices in devs of the driver's devices
		var given []devices.Device
		for k := range devs {
			if devs[k].Driver != e.cfg.Name {
				continue
			}
			d := devs[k]
			d.Capabilities = slices.Clone(d.Capabilities)
			mine, given = append(mine, k), append(given, d)
			in.devAt = append(in.devAt, at[k])
		}
		n := len(c.errs)
		build := e.factory.Configure(in, given)
		for j, k := range mine {
			c.driverOf[devs[k].ID] = e.cfg.Name
			caps := devs[k].Capabilities
			for ci := range caps {
				if ci < len(given[j].Capabilities) && given[j].Capabilities[ci].Name == caps[ci].Name {
					caps[ci].Floor = given[j].Capabilities[ci].Floor
				}
			}
		}
		if build == nil && len(c.errs) == n {
			// A factory that reports nothing must build: fail closed.
			c.errf(e.at, "the %s driver type accepted the driver but gave nothing to build it with", e.cfg.Type)
		}
		out = append(out, BuiltDriver{Name: e.cfg.Name, Type: e.cfg.Type, build: build})
	}
	return out
}

// driverInstance is a configured driver as its factory sees it: the
// devices.Instance of the configuration file.
type driverInstance struct {
	c    *checker
	name string
	// at is the place of the driver's options, node their value (nil when
	// there are none).
	at    path
	node  *yaml.Node
	devAt []path
}

func (in *driverInstance) Name() string { return in.name }

func (in *driverInstance) Options() devices.Place { return place{in.c, in.at} }

func (in *driverInstance) Device(i int) devices.Place {
	if i < 0 || i >= len(in.devAt) {
		panic("gateway: Device(" + strconv.Itoa(i) + ") of a device the driver factory was not given")
	}
	return place{in.c, in.devAt[i]}
}

// Claim records that the driver reaches kind key, and reports a second
// driver's claim of it, naming the first.
func (in *driverInstance) Claim(kind, key string, at devices.Place) bool {
	k := kind + "\x00" + key
	first, taken := in.c.claims[k]
	if !taken || first == in.name {
		in.c.claims[k] = in.name
		return true
	}
	at.Errorf("%s %s is reached by driver %s already: one %s, one driver", kind, key, first, kind)
	return false
}

// Decode checks the options' shape against v's type, as the rest of the
// file is checked, and then decodes them.
func (in *driverInstance) Decode(v any) bool {
	if in.node == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic("gateway: a driver factory decodes its options into a non-pointer")
	}
	n := len(in.c.errs)
	in.c.shape(in.node, rv.Type().Elem(), in.at)
	if len(in.c.errs) > n {
		return false
	}
	if err := in.node.Decode(v); err != nil {
		// shape checks what the decoder does; this is a last resort.
		in.c.errf(in.at, "%s", plainYAML(strings.TrimPrefix(err.Error(), "yaml: ")))
		return false
	}
	return true
}

// place is a devices.Place: a path in the file.
type place struct {
	c *checker
	p path
}

func (pl place) At(key string) devices.Place { return place{pl.c, pl.p.with(key)} }

func (pl place) Index(i int) devices.Place { return place{pl.c, pl.p.with(i)} }

func (pl place) Errorf(format string, args ...any) { pl.c.errf(pl.p, format, args...) }
