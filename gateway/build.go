package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/gateway/mqtt"
	"github.com/shadowgate/shadowgate/gateway/uplink"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/internal/omit"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/value"
	"github.com/shadowgate/shadowgate/web"
)

// Built is a checked configuration, ready to wire.
type Built struct {
	File      string
	GatewayID string
	StateDir  string
	// Drivers are the configured drivers, checked by their factories,
	// ready to build.
	Drivers []BuiltDriver
	// Devices carry the effect floors their drivers set.
	Devices         []devices.Device
	Policies        map[string]runtime.CapPolicy
	Modes           []governance.Mode
	Mode            string
	Rules           []governance.Rule
	Plans           []runtime.Plan
	OperateWithin   time.Duration
	ApprovalTimeout time.Duration
	MaxRuleTTL      time.Duration
	// MaxShelve and AlarmClasses are how alarms behave.
	MaxShelve    time.Duration
	AlarmClasses map[runtime.AlarmKind]runtime.AlarmClass
	CommandLease runtime.Lease
	// Journal bounds the journal; its Logger is set by Run.
	Journal journal.Options
	// Users are the accounts of the broker and the console.
	Users []access.User
	// MQTT configures the broker; nil when it is turned off. Its Users,
	// Logger and Now are set by Run.
	MQTT *mqtt.Options
	// Uplink configures the link upstream; nil without one.
	Uplink *uplink.Options
	// Web configures the console; nil when it is turned off. Its Users,
	// Sessions, Verify, stats and Logger are set by Run.
	Web *web.Options
	// Person names the person behind a principal, for the engine's
	// four-eyes (runtime.Options.Person): the user of "mqtt:<user>" and
	// "console:<user>", the holder of "api:<token>" ("token:<name>" when
	// the token names none), the user of the uplink ("uplink:<client id>"
	// when it names none). Any other principal is a person of its own.
	Person func(principal string) string

	// declared is each actuator's effects as the configuration wrote
	// them, by "device.capability", for Effects.
	declared map[string]EffectsConfig
	// raw is the file's top-level sections as parsed, for a reload to
	// tell what changed.
	raw map[string]any
	// schedules says when each plan started itself as the engine started
	// (reloads do not change it), for telling a reload that changes it
	// that it waits for a restart. Nil means those of Plans.
	schedules map[string]string
}

// people knows who holds each token and the uplink.
type people struct {
	tokens map[string]string // token name -> person
	uplink map[string]string // uplink principal -> person
}

func (pp *people) person(principal string) string {
	kind, name, ok := strings.Cut(principal, ":")
	if !ok || name == "" {
		return principal
	}
	switch kind {
	case "mqtt", "console":
		return name
	case "api", "mcp": // an agent acts for the token's holder
		if who, ok := pp.tokens[name]; ok {
			return who
		}
		return "token:" + name
	case "uplink":
		if who, ok := pp.uplink[principal]; ok {
			return who
		}
	}
	return principal
}

var plainNumber = regexp.MustCompile(`^-?[0-9][0-9.]*([eE][-+]?[0-9]+)?$`)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// checker turns a Config into a Built, collecting errors with lines.
type checker struct {
	file string
	root *yaml.Node
	errs []error
	// budget is how many more nodes shape may visit.
	budget int
	caps   map[string]devices.Capability // "device.capability"
	// driverOf names the driver of each device its driver configured,
	// for errors that say what the driver says.
	driverOf map[string]string
	// claims names the driver that reaches each thing a driver claimed
	// ("kind\x00key"), for one thing, one driver.
	claims map[string]string
}

// path is a place in the document: keys and indices.
type path []any

func (p path) String() string {
	var b strings.Builder
	for _, el := range p {
		switch v := el.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(v) + "]")
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(v)
		}
	}
	return b.String()
}

func (p path) with(el ...any) path { return append(append(path{}, p...), el...) }

// place finds the line and column of the node at p, or of its deepest
// ancestor present.
func (c *checker) place(p path) (int, int) {
	n := c.root
	for _, el := range p {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next *yaml.Node
		switch v := el.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == v {
						next = n.Content[i+1]
						if next.Line == 0 {
							next = n.Content[i]
						}
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && v < len(n.Content) {
				next = n.Content[v]
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return n.Line, n.Column
}

func (c *checker) errf(p path, format string, args ...any) {
	line, col := c.place(p)
	c.errs = append(c.errs, &ConfigError{File: c.file, Line: line, Column: col, Path: p.String(), Msg: fmt.Sprintf(format, args...)})
}

// duration parses an optional duration; empty gives def.
func (c *checker) duration(p path, s string, def time.Duration) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		c.errf(p, "%q is not a positive duration (write it like 30s, 5m or 2h)", s)
		return def
	}
	return d
}

// value parses a YAML scalar as a value of type t, as strictly as JSON.
func (c *checker) value(p path, n *yaml.Node, t value.Type, enum []string) (value.Value, bool) {
	if n == nil || n.Kind == 0 {
		c.errf(p, "a %s value is required", t)
		return value.Value{}, false
	}
	if n.Kind != yaml.ScalarNode {
		c.errf(p, "want a %s, got a YAML collection", t)
		return value.Value{}, false
	}
	if t == value.TypeBool && n.ShortTag() != "!!bool" && yaml11Bools[strings.ToLower(n.Value)] {
		c.errf(p, "%q is not a boolean in YAML 1.2: write true or false", n.Value)
		return value.Value{}, false
	}
	var raw []byte
	switch n.ShortTag() {
	case "!!bool", "!!int", "!!float":
		raw = []byte(strings.ToLower(n.Value))
		if n.ShortTag() == "!!bool" && raw[0] != 't' && raw[0] != 'f' {
			raw = []byte(n.Value) // yes/no/on/off are not bools here
		}
	case "!!null":
		raw = []byte("null")
	default:
		raw, _ = json.Marshal(n.Value)
		if n.Style == 0 && plainNumber.MatchString(n.Value) {
			raw = []byte(n.Value) // YAML calls 1e400 a string; it was written as a number
		}
	}
	v, err := value.ParseValue(t, raw, enum)
	if err != nil {
		c.errf(p, "%v", err)
		return value.Value{}, false
	}
	return v, true
}

// listenersApart reports two listeners of the gateway on one port: the
// second would fail to bind against the gateway's own first.
func (c *checker) listenersApart(b *Built) {
	type listener struct {
		at   path
		addr string
	}
	var ls []listener
	if m := b.MQTT; m != nil {
		ls = append(ls, listener{path{"mqtt", "listen"}, m.Listen}, listener{path{"mqtt", "tls", "listen"}, m.TLSListen},
			listener{path{"mqtt", "websocket", "listen"}, m.WebsocketListen})
	}
	if w := b.Web; w != nil {
		ls = append(ls, listener{path{"web", "listen"}, w.Listen})
	}
	for i, a := range ls {
		ah, ap, err := net.SplitHostPort(a.addr)
		if err != nil || ap == "0" || ap == "" {
			continue
		}
		for _, o := range ls[:i] {
			oh, op, err := net.SplitHostPort(o.addr)
			if err != nil || op != ap {
				continue
			}
			// One port, and hosts that overlap: the same one, or any.
			if ah == oh || ah == "" || oh == "" || ah == "0.0.0.0" || oh == "0.0.0.0" || ah == "::" || oh == "::" {
				c.errf(a.at, "%s is the port of %s (%s); each listener needs a port of its own", a.addr, o.at, o.addr)
			}
		}
	}
}

// build checks cfg and returns what it describes.
func (c *checker) build(cfg *Config) *Built {
	b := &Built{File: c.file, GatewayID: cfg.Gateway.ID, StateDir: cfg.Gateway.StateDir, Policies: map[string]runtime.CapPolicy{}}
	if b.GatewayID == "" {
		b.GatewayID = "shadowgate"
	} else if !namePattern.MatchString(b.GatewayID) {
		c.errf(path{"gateway", "id"}, "%q is not a valid id (letters, digits, '-' and '_', at most 64)", b.GatewayID)
	}
	if b.StateDir == "" {
		b.StateDir = "/var/lib/shadowgate"
	}
	ap := path{"approvals"}
	b.ApprovalTimeout = c.duration(ap.with("timeout"), cfg.Approvals.Timeout, 10*time.Minute)
	b.OperateWithin = c.duration(ap.with("operate_within"), cfg.Approvals.OperateWithin, 15*time.Second)
	b.MaxRuleTTL = c.duration(ap.with("max_rule_ttl"), cfg.Approvals.MaxRuleTTL, 24*time.Hour)
	b.CommandLease = c.lease(path{"leases", "command"}, cfg.Leases.Command, runtime.Lease{MaxSteps: 1, MaxActuations: 1, MaxWall: 15 * time.Minute})
	b.MaxShelve, b.AlarmClasses = c.alarms(path{"alarms"}, cfg.Alarms)

	entries, drivers := c.drivers(cfg.Drivers)
	// No devices is a gateway with nothing attached yet (a fresh
	// package): it serves, and everything asked of it fails, naming the
	// device it does not have.
	c.caps = map[string]devices.Capability{}
	var at []path               // where each of b.Devices is in the file
	shared := map[string]bool{} // drivers whose devices may share an address
	for _, dc := range cfg.Drivers {
		if f, ok := devices.LookupFactory(dc.Type); ok && f.SharedAddress {
			shared[dc.Name] = true
		}
	}
	for i, dc := range cfg.Devices {
		d, ok := c.device(path{"devices", i}, dc, drivers, shared[dc.Driver], b.Devices)
		if ok {
			b.Devices = append(b.Devices, d)
			at = append(at, path{"devices", i})
			continue
		}
		// Known even when the device has errors, so that references to it
		// do not add errors of their own.
		for _, cp := range d.Capabilities {
			c.caps[d.ID+"."+cp.Name] = cp
		}
	}
	// The drivers check their devices' addresses and set their floors,
	// which the policies are checked against.
	b.Drivers = c.configureDrivers(entries, b.Devices, at)
	for _, d := range b.Devices {
		for _, cp := range d.Capabilities {
			c.caps[d.ID+"."+cp.Name] = cp
		}
	}
	b.declared = map[string]EffectsConfig{}
	for i, dc := range cfg.Devices {
		for k, cc := range dc.Capabilities {
			if pol, ok := c.policy(path{"devices", i, "capabilities", k}, dc.ID, cc); ok && pol != nil {
				b.Policies[dc.ID+"."+cc.Name] = *pol
				if cc.Effects != nil {
					b.declared[dc.ID+"."+cc.Name] = *cc.Effects
				}
			}
		}
	}
	modes := governance.ShippedModes()
	for i, mc := range cfg.Modes {
		if m, ok := c.mode(path{"modes", i}, mc, modes); ok {
			modes[m.Name] = m
			b.Modes = append(b.Modes, m)
		}
	}
	b.Mode = cfg.Mode
	if b.Mode == "" {
		b.Mode = governance.ModeSupervised
	} else if _, ok := modes[b.Mode]; !ok {
		c.errf(path{"mode"}, "unknown mode %q", b.Mode)
	}
	ids := map[string]bool{}
	for i, rc := range cfg.Rules {
		if r, ok := c.rule(path{"rules", i}, rc); ok {
			if ids[r.ID] {
				c.errf(path{"rules", i, "id"}, "rule %s is defined twice", r.ID)
			}
			ids[r.ID] = true
			b.Rules = append(b.Rules, r)
		}
	}
	b.Journal = c.journal(path{"journal"}, cfg.Journal)
	b.Users = c.users(cfg.Users)
	b.MQTT = c.mqtt(path{"mqtt"}, cfg.MQTT, b.GatewayID)
	switch {
	case cfg.Uplink != nil && omit.Uplink:
		c.errf(path{"uplink"}, "%s", omit.UplinkPart.Refusal())
	case cfg.Uplink != nil:
		b.Uplink = c.uplink(path{"uplink"}, cfg.Uplink, b.GatewayID)
	}
	b.Web = c.web(path{"web"}, cfg.Web)
	if o := c.mcp(path{"mcp"}, cfg.MCP, cfg, b); o != nil {
		b.Web.MCP = o
	}
	c.homeAssistant(path{"integrations", "homeassistant"}, cfg.Integrations.HomeAssistant, b)
	c.listenersApart(b)
	b.Person = c.people(cfg, b).person
	plans := map[string]bool{}
	for i, pc := range cfg.Plans {
		p := path{"plans", i}
		if plans[pc.Name] {
			c.errf(p.with("name"), "plan %s is defined twice", pc.Name)
		}
		plans[pc.Name] = true
		if pl, ok := c.plan(p, pc); ok {
			b.Plans = append(b.Plans, pl)
		}
	}
	return b
}

func (c *checker) lease(p path, lc LeaseConfig, def runtime.Lease) runtime.Lease {
	l := def
	if lc.MaxSteps < 0 || lc.MaxActuations < 0 {
		c.errf(p, "max_steps and max_actuations cannot be negative")
	}
	if lc.MaxSteps > 0 {
		l.MaxSteps = lc.MaxSteps
	}
	if lc.MaxActuations > 0 {
		l.MaxActuations = lc.MaxActuations
	}
	l.MaxWall = c.duration(p.with("max_wall"), lc.MaxWall, def.MaxWall)
	return l
}

func (c *checker) device(p path, dc DeviceConfig, drivers map[string]bool, shared bool, seen []devices.Device) (devices.Device, bool) {
	d := devices.Device{ID: dc.ID, Label: dc.Label, Area: dc.Area, Driver: dc.Driver, Address: dc.Address}
	n := len(c.errs)
	if !namePattern.MatchString(dc.ID) {
		c.errf(p.with("id"), "%q is not a valid device id (letters, digits, '-' and '_', at most 64)", dc.ID)
	}
	for _, s := range seen {
		if s.ID == dc.ID {
			c.errf(p.with("id"), "device %s is defined twice", dc.ID)
		}
		// One thing in the world, one id: a second id for the same
		// address would get around the first one's lock, dwell, rate and
		// pending approval. A driver whose address holds many things (a
		// Modbus unit) checks its things itself.
		if !shared && dc.Address != "" && s.Driver == dc.Driver && s.Address == dc.Address && s.ID != dc.ID {
			c.errf(p.with("address"), "device %s has the address %q of device %s on driver %s; one device, one id", dc.ID, dc.Address, s.ID, dc.Driver)
		}
	}
	if err := checkLabel(dc.Label); err != nil {
		c.errf(p.with("label"), "%v", err)
	}
	if dc.Area != "" {
		if _, err := governance.ParseScope(dc.Area); err != nil {
			c.errf(p.with("area"), "%v", err)
		}
	}
	if !drivers[dc.Driver] {
		c.errf(p.with("driver"), "unknown driver %q; define it under drivers", dc.Driver)
	}
	if dc.Address == "" {
		c.errf(p.with("address"), "an address is required")
	}
	if len(dc.Capabilities) == 0 {
		c.errf(p.with("capabilities"), "device %s has no capabilities", dc.ID)
	}
	for k, cc := range dc.Capabilities {
		cp := p.with("capabilities", k)
		capa := devices.Capability{Name: cc.Name, Unit: cc.Unit, Enum: cc.Enum, ReadBack: cc.ReadBack}
		if !namePattern.MatchString(cc.Name) {
			c.errf(cp.with("name"), "%q is not a valid capability name", cc.Name)
		}
		for _, o := range d.Capabilities {
			if o.Name == cc.Name {
				c.errf(cp.with("name"), "capability %s is defined twice", cc.Name)
			}
		}
		var err error
		if capa.Kind, err = devices.ParseKind(cc.Kind); err != nil {
			c.errf(cp.with("kind"), "%v", err)
		}
		if capa.Type, err = value.ParseType(cc.Type); err != nil {
			c.errf(cp.with("type"), "%v", err)
		}
		if (capa.Type == value.TypeEnum) != (len(cc.Enum) > 0) {
			c.errf(cp.with("enum"), "an enum capability lists its values under enum, and only an enum does")
		}
		if cc.Poll != "" {
			if capa.Kind != devices.KindSensor && !capa.ReadBack {
				c.errf(cp.with("poll"), "an actuator is polled only with read_back (to see it switched by hand)")
			}
			capa.Poll = c.duration(cp.with("poll"), cc.Poll, 0)
			if capa.Poll > 0 && capa.Poll < 100*time.Millisecond {
				c.errf(cp.with("poll"), "poll %s is faster than 100ms", capa.Poll)
			}
		}
		if capa.Kind == devices.KindSensor && (cc.Effects != nil || cc.Envelope != nil || len(cc.Interlocks) > 0 || cc.Confirm != nil || cc.Safe.Kind != 0 ||
			cc.TTL != "" || len(cc.While) > 0 || cc.OnStart != "" || cc.OnStop != "") {
			c.errf(cp, "a sensor has no effects, envelope, interlocks, confirm, safe value, ttl, while, on_start or on_stop")
		}
		d.Capabilities = append(d.Capabilities, capa)
	}
	return d, len(c.errs) == n
}

// condition parses an interlock, confirmation or expectation.
func (c *checker) condition(p path, sensor, op string, raw *yaml.Node) (governance.Op, value.Value, bool) {
	capa, ok := c.caps[sensor]
	if !ok {
		c.errf(p.with("sensor"), "unknown reading %q (write device.capability)", sensor)
		return "", value.Value{}, false
	}
	if !capa.Readable() {
		c.errf(p.with("sensor"), "%s cannot be read", sensor)
		return "", value.Value{}, false
	}
	o, err := governance.ParseOp(op)
	if err != nil {
		c.errf(p.with("op"), "%v", err)
		return "", value.Value{}, false
	}
	if capa.Type != value.TypeNumber && o != governance.OpEQ && o != governance.OpNE {
		c.errf(p.with("op"), "%s is a %s; only == and != compare it", sensor, capa.Type)
		return "", value.Value{}, false
	}
	v, ok := c.value(p.with("value"), raw, capa.Type, capa.Enum)
	return o, v, ok
}

func (c *checker) policy(p path, device string, cc CapabilityConfig) (*runtime.CapPolicy, bool) {
	capa, ok := c.caps[device+"."+cc.Name]
	if !ok || capa.Kind != devices.KindActuator {
		return nil, ok
	}
	n := len(c.errs)
	pol := &runtime.CapPolicy{}
	if e := cc.Effects; e != nil {
		c.aboveFloor(p.with("effects"), device, capa, e)
		pol.Effects = &runtime.Declared{Reversible: isTrue(e.Reversible), Contained: isTrue(e.Contained),
			Costs: isTrue(e.Costs), Reaches: isTrue(e.Reaches)}
	}
	if ec := cc.Envelope; ec != nil {
		ep := p.with("envelope")
		env := &governance.Envelope{MaxRate: ec.MaxRate, Step: ec.Step}
		if (ec.Min != nil || ec.Max != nil || ec.Step != 0) && capa.Type != value.TypeNumber {
			c.errf(ep, "min, max and step bound numbers; %s is a %s", cc.Name, capa.Type)
		}
		if ec.Min != nil {
			env.Min, env.HasMin = *ec.Min, true
		}
		if ec.Max != nil {
			env.Max, env.HasMax = *ec.Max, true
		}
		if env.HasMin && env.HasMax && env.Min > env.Max {
			c.errf(ep.with("min"), "min %v is above max %v", env.Min, env.Max)
		}
		if ec.Step < 0 || ec.MaxRate < 0 {
			c.errf(ep, "step and max_rate cannot be negative")
		}
		for i := range ec.Allowed {
			if v, ok := c.value(ep.with("allowed", i), &ec.Allowed[i], capa.Type, capa.Enum); ok {
				env.Allowed = append(env.Allowed, v)
			}
		}
		env.MinDwell = c.duration(ep.with("min_dwell"), ec.MinDwell, 0)
		pol.Envelope = env
	}
	for i, ic := range cc.Interlocks {
		ip := p.with("interlocks", i)
		if op, v, ok := c.condition(ip, ic.Sensor, ic.Op, &ic.Value); ok {
			pol.Interlocks = append(pol.Interlocks, governance.Condition{Sensor: ic.Sensor, Op: op, Value: v,
				MaxAge: c.duration(ip.with("max_age"), ic.MaxAge, governance.DefaultMaxAge)})
		}
	}
	for i, ic := range cc.While {
		ip := p.with("while", i)
		if ic.Sensor == device+"."+cc.Name {
			c.errf(ip.with("sensor"), "a running interlock reads another device, not the actuator itself")
			continue
		}
		if op, v, ok := c.condition(ip, ic.Sensor, ic.Op, &ic.Value); ok {
			pol.While = append(pol.While, governance.Condition{Sensor: ic.Sensor, Op: op, Value: v,
				MaxAge: c.duration(ip.with("max_age"), ic.MaxAge, governance.DefaultMaxAge)})
		}
	}
	if cf := cc.Confirm; cf != nil {
		fp := p.with("confirm")
		travel := cf.TravelWithin
		if cf.Within != "" {
			if travel != "" {
				c.errf(fp.with("within"), "within is the older name of travel_within; write one of them")
			}
			travel = cf.Within
		}
		conf := &runtime.Confirm{ReadBack: cf.ReadBack, Within: c.duration(fp.with("travel_within"), travel, 5*time.Second),
			StartWithin: c.duration(fp.with("start_within"), cf.StartWithin, 0), Watch: c.duration(fp.with("watch"), cf.Watch, 0)}
		if conf.StartWithin > 0 && conf.StartWithin > conf.Within {
			c.errf(fp.with("start_within"), "start_within %s is longer than travel_within %s", conf.StartWithin, conf.Within)
		}
		switch cf.OnContradiction {
		case "", runtime.SafeAlarm:
		case runtime.SafeDrive:
			if cc.Safe.Kind == 0 {
				c.errf(fp.with("on_contradiction"), "on_contradiction: safe needs a safe value on %s.%s", device, cc.Name)
			}
		default:
			c.errf(fp.with("on_contradiction"), "on_contradiction is alarm or safe, not %q", cf.OnContradiction)
		}
		conf.OnDiscrepancy = cf.OnContradiction
		ways := 0
		for _, set := range []bool{cf.ReadBack, cf.Sensor != "", cf.Feedback != ""} {
			if set {
				ways++
			}
		}
		switch {
		case ways > 1:
			c.errf(fp, "confirm by one of read_back, feedback or a sensor condition, not more")
		case cf.ReadBack && !capa.ReadBack:
			c.errf(fp.with("read_back"), "%s.%s has no read-back; set read_back on the capability or confirm by a sensor", device, cc.Name)
		case cf.Sensor != "":
			if op, v, ok := c.condition(fp, cf.Sensor, cf.Op, &cf.Value); ok {
				conf.Sensor, conf.Op, conf.Value = cf.Sensor, op, v
			}
			if cf.When.Kind != 0 {
				if v, ok := c.value(fp.with("when"), &cf.When, capa.Type, capa.Enum); ok {
					conf.When = &v
				}
			}
		case cf.Feedback != "":
			fb, ok := c.caps[cf.Feedback]
			switch {
			case !ok:
				c.errf(fp.with("feedback"), "unknown reading %q (write device.capability)", cf.Feedback)
			case !fb.Readable():
				c.errf(fp.with("feedback"), "%s cannot be read", cf.Feedback)
			case fb.Type != capa.Type:
				c.errf(fp.with("feedback"), "%s is a %s and %s.%s a %s; a feedback reads what was commanded", cf.Feedback, fb.Type, device, cc.Name, capa.Type)
			default:
				conf.Feedback = cf.Feedback
			}
		case !cf.ReadBack:
			c.errf(fp, "confirm needs read_back: true, a feedback or a sensor condition")
		}
		if cf.When.Kind != 0 && cf.Sensor == "" {
			c.errf(fp.with("when"), "when names the value a sensor condition confirms; there is no sensor")
		}
		pol.Confirm = conf
	}
	if cc.Safe.Kind != 0 {
		if v, ok := c.value(p.with("safe"), &cc.Safe, capa.Type, capa.Enum); ok {
			pol.Safe = &v
			if pol.Envelope != nil {
				env := *pol.Envelope
				env.Type = capa.Type
				if ok, why := env.Check(v, governance.History{Current: v}, time.Time{}); !ok {
					c.errf(p.with("safe"), "the safe value %s is outside the envelope: %s", v, why)
				}
			}
		}
	}
	needSafe := func(key, what string) {
		if cc.Safe.Kind == 0 {
			c.errf(p.with(key), "%s needs a safe value to drive %s.%s to (add safe:)", what, device, cc.Name)
		}
	}
	if cc.TTL != "" {
		pol.TTL = c.duration(p.with("ttl"), cc.TTL, 0)
		if pol.TTL > 0 && pol.TTL < time.Second {
			c.errf(p.with("ttl"), "a ttl of %s is shorter than a second, which is how often it is checked", pol.TTL)
		}
		needSafe("ttl", "a ttl")
		if cc.Effects == nil || !isTrue(cc.Effects.Reversible) {
			c.errf(p.with("ttl"), "a ttl reverts a reversible actuation; declare effects: {reversible: true} on %s.%s", device, cc.Name)
		}
	}
	if len(cc.While) > 0 {
		needSafe("while", "a running interlock")
	}
	for _, k := range []struct {
		key string
		v   string
		to  *string
	}{{"on_start", cc.OnStart, &pol.OnStart}, {"on_stop", cc.OnStop, &pol.OnStop}} {
		switch k.v {
		case "", runtime.SafeKeep:
		case runtime.SafeDrive:
			needSafe(k.key, k.key+": safe")
		default:
			c.errf(p.with(k.key), "%s is safe or keep, not %q", k.key, k.v)
		}
		*k.to = k.v
	}
	return pol, len(c.errs) == n
}

func (c *checker) profile(p path, pc *ProfileConfig) governance.EffectProfile {
	reads, err := governance.ParseScopeSet(pc.Reads)
	if err != nil {
		c.errf(p.with("reads"), "%v", err)
	}
	writes, err := governance.ParseScopeSet(pc.Writes)
	if err != nil {
		c.errf(p.with("writes"), "%v", err)
	}
	return governance.EffectProfile{Reads: reads, Writes: writes, Reaches: pc.Reaches, Reversible: pc.Reversible, Contained: pc.Contained, Costs: pc.Costs}
}

func (c *checker) mode(p path, mc ModeConfig, known map[string]governance.Mode) (governance.Mode, bool) {
	n := len(c.errs)
	base, ok := governance.ShippedModes()[mc.Base]
	if !ok {
		c.errf(p.with("base"), "base %q is not a shipped mode (observe, supervised, interlocked, maintenance)", mc.Base)
		return governance.Mode{}, false
	}
	if _, dup := known[mc.Name]; dup {
		c.errf(p.with("name"), "mode %s is already defined", mc.Name)
	}
	if !namePattern.MatchString(mc.Name) {
		c.errf(p.with("name"), "%q is not a valid mode name", mc.Name)
	}
	m := base
	m.Name, m.Base = mc.Name, mc.Base
	if mc.Ceiling != nil {
		m.Ceiling = c.profile(p.with("ceiling"), mc.Ceiling)
	}
	if mc.AskAbove != nil {
		ask := c.profile(p.with("ask_above"), mc.AskAbove)
		m.AskAbove = &ask
	}
	if mc.ApprovalsRequired != 0 {
		m.ApprovalsRequired = mc.ApprovalsRequired
	}
	m.MaxDuration = c.duration(p.with("max_duration"), mc.MaxDuration, base.MaxDuration)
	if len(c.errs) == n {
		if err := governance.CheckConfigured(m); err != nil {
			c.errf(p, "%v", err)
		}
	}
	return m, len(c.errs) == n
}

func (c *checker) rule(p path, rc RuleConfig) (governance.Rule, bool) {
	n := len(c.errs)
	r := governance.Rule{ID: rc.ID, Principal: rc.Principal, Device: rc.Device, Capability: rc.Capability,
		Decision: governance.Decision(rc.Decision), Reason: rc.Reason, MadeBy: "configuration"}
	if r.Principal == "" {
		c.errf(p.with("principal"), "a rule names its principal (\"*\" for anyone)")
	}
	var capa devices.Capability
	known := false
	if rc.Device != "*" && rc.Capability != "*" {
		capa, known = c.caps[rc.Device+"."+rc.Capability]
		if !known {
			c.errf(p.with("device"), "unknown capability %s.%s", rc.Device, rc.Capability)
		}
	}
	for i := range rc.Values {
		if !known {
			c.errf(p.with("values"), "values need a single named device and capability")
			break
		}
		if v, ok := c.value(p.with("values", i), &rc.Values[i], capa.Type, capa.Enum); ok {
			r.Values.Set = append(r.Values.Set, v)
		}
	}
	if rc.Min != nil {
		r.Values.Min, r.Values.HasMin = *rc.Min, true
	}
	if rc.Max != nil {
		r.Values.Max, r.Values.HasMax = *rc.Max, true
	}
	if err := r.Validate(); err != nil {
		c.errf(p, "%v", err)
	}
	return r, len(c.errs) == n
}

func splitRef(s string) (string, string) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i+1:]
}

func (c *checker) journal(p path, jc JournalConfig) journal.Options {
	var o journal.Options
	if jc.MaxEvents < 0 {
		c.errf(p.with("max_events"), "cannot be negative")
	}
	o.MaxEvents = jc.MaxEvents
	o.MaxBytes = c.size(p.with("max_bytes"), jc.MaxBytes)
	o.KeepRecords = c.duration(p.with("keep_records"), jc.KeepRecords, 0)
	if jc.MaxRecords < 0 {
		c.errf(p.with("max_records"), "cannot be negative")
	}
	o.MaxRecords = jc.MaxRecords
	o.MaxFileSize = int(c.size(p.with("max_file_size"), jc.MaxFileSize))
	if o.MaxFileSize > 0 && o.MaxFileSize < 1<<20 {
		c.errf(p.with("max_file_size"), "%s is too small for a journal (at least 1MiB)", jc.MaxFileSize)
	}
	if jc.CheckpointEvery < 0 {
		c.errf(p.with("checkpoint_every"), "cannot be negative")
	} else {
		o.Checkpoint.Every = uint64(jc.CheckpointEvery)
	}
	o.Checkpoint.Interval = c.duration(p.with("checkpoint_interval"), jc.CheckpointInterval, 0)
	o.FlushInterval = c.duration(p.with("flush_interval"), jc.FlushInterval, 0)
	if o.FlushInterval > time.Minute {
		c.errf(p.with("flush_interval"), "%s is too long: a power cut loses up to this much of the readings (at most 1m)", jc.FlushInterval)
	}
	o.StoreInterval = c.duration(p.with("store_interval"), jc.StoreInterval, 0)
	if o.StoreInterval > time.Hour {
		c.errf(p.with("store_interval"), "%s is too long: the log grows until the store is written (at most 1h)", jc.StoreInterval)
	}
	return o
}

var sizePattern = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB)?$`)

// size parses "128MiB", "512KiB", "1GiB" or a number of bytes; empty is 0.
func (c *checker) size(p path, s string) int64 {
	if s == "" {
		return 0
	}
	m := sizePattern.FindStringSubmatch(s)
	n, err := strconv.ParseInt(m1(m), 10, 64)
	if m == nil || err != nil || n <= 0 {
		c.errf(p, "%q is not a size (write it like 128MiB, 512KiB, 1GiB or a number of bytes)", s)
		return 0
	}
	shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30}[m[2]]
	if n > (1<<62)>>shift {
		c.errf(p, "%q is too large", s)
		return 0
	}
	return n << shift
}

func m1(m []string) string {
	if len(m) < 2 {
		return ""
	}
	return m[1]
}

func (c *checker) users(ucs []UserConfig) []access.User {
	var out []access.User
	seen := map[string]bool{}
	for i, uc := range ucs {
		p := path{"users", i}
		u := access.User{Name: uc.Name}
		switch {
		case !namePattern.MatchString(uc.Name):
			c.errf(p.with("name"), "%q is not a valid user name (letters, digits, '-' and '_', at most 64)", uc.Name)
		case seen[uc.Name]:
			c.errf(p.with("name"), "user %s is defined twice", uc.Name)
		}
		seen[uc.Name] = true
		r, err := access.ParseRole(uc.Role)
		if err != nil {
			c.errf(p.with("role"), "%v", err)
		}
		u.Role = r
		hash := uc.PasswordHash
		switch {
		case hash != "" && uc.PasswordHashFile != "":
			c.errf(p, "give password_hash or password_hash_file, not both")
		case uc.PasswordHashFile != "":
			f := uc.PasswordHashFile
			if !filepath.IsAbs(f) {
				f = filepath.Join(filepath.Dir(c.file), f)
			}
			b, err := os.ReadFile(f)
			if err != nil {
				c.errf(p.with("password_hash_file"), "%v", err)
			}
			hash = strings.TrimSpace(string(b))
		case hash == "":
			c.errf(p, "user %s has no password_hash (make one with shadowgate hash-password)", uc.Name)
		}
		if hash != "" {
			if err := access.CheckHash([]byte(hash)); err != nil {
				c.errf(p.with("password_hash"), "%v", err)
			}
		}
		u.Hash = []byte(hash)
		if uc.MQTT != nil {
			u.Publish, u.Subscribe = uc.MQTT.Publish, uc.MQTT.Subscribe
			for k, f := range append(append([]string{}, uc.MQTT.Publish...), uc.MQTT.Subscribe...) {
				if !validFilter(f) {
					c.errf(p.with("mqtt"), "%q (filter %d) is not a valid MQTT topic filter", f, k+1)
				}
			}
		}
		out = append(out, u)
	}
	return out
}

// validFilter reports whether f is a valid MQTT topic filter.
func validFilter(f string) bool {
	if f == "" {
		return false
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return false
		}
		if strings.Contains(l, "+") && l != "+" {
			return false
		}
	}
	return true
}

func (c *checker) mqtt(p path, mc MQTTConfig, gatewayID string) *mqtt.Options {
	if mc.Enabled != nil && !*mc.Enabled {
		return nil
	}
	o := &mqtt.Options{Prefix: "shadowgate/" + gatewayID + "/", Listen: mc.Listen, MaxClients: mc.MaxClients,
		MaxQueued: mc.MaxQueued, CommandsPerMinute: mc.Commands.PerMinute, CommandBurst: mc.Commands.Burst}
	if o.Listen == "" {
		o.Listen = ":1883"
	}
	if mc.MaxClients < 0 || mc.Commands.PerMinute < 0 || mc.Commands.Burst < 0 {
		c.errf(p, "max_clients and commands cannot be negative")
	}
	if mc.MaxQueued < 0 || mc.MaxQueued > 1<<20 {
		c.errf(p.with("max_queued"), "%d is out of range (0 for the default 8192, at most 1048576)", mc.MaxQueued)
	}
	o.MaxPayload = int(c.size(p.with("max_payload"), mc.MaxPayload))
	if mc.Anonymous != "" {
		r, err := access.ParseRole(mc.Anonymous)
		if err != nil {
			c.errf(p.with("anonymous"), "%v", err)
		}
		o.Anonymous = &r
	}
	if t := mc.TLS; t != nil {
		o.TLSListen = t.Listen
		if t.Listen == "" || t.CertFile == "" || t.KeyFile == "" {
			c.errf(p.with("tls"), "tls needs listen, cert_file and key_file")
		} else if cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			c.errf(p.with("tls"), "loading the certificate: %v", err)
		} else {
			o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
	}
	if w := mc.Websocket; w != nil {
		if w.Listen == "" {
			c.errf(p.with("websocket", "listen"), "websocket needs listen")
		}
		o.WebsocketListen = w.Listen
	}
	return o
}

var uplinkSchemes = []string{"tcp://", "ssl://", "tls://", "ws://", "wss://", "mqtt://", "mqtts://"}

func (c *checker) uplink(p path, uc *UplinkConfig, gatewayID string) *uplink.Options {
	o := &uplink.Options{URL: uc.URL, ClientID: uc.ClientID, Username: uc.Username, Prefix: uc.Prefix,
		Forward: uplink.Forward{Events: true, State: true, Receipts: true, Approvals: true, Alarms: true}}
	ok := false
	for _, s := range uplinkSchemes {
		if strings.HasPrefix(uc.URL, s) && len(uc.URL) > len(s) {
			ok = true
		}
	}
	if !ok {
		c.errf(p.with("url"), "%q is not a broker url (tcp://host:1883, ssl://host:8883, ws:// or wss://)", uc.URL)
	}
	if o.ClientID == "" {
		o.ClientID = gatewayID
	}
	if o.Prefix == "" {
		o.Prefix = "shadowgate/" + gatewayID + "/"
	} else if !strings.HasSuffix(o.Prefix, "/") || strings.ContainsAny(o.Prefix, "#+") {
		c.errf(p.with("prefix"), "%q must end in / and hold no wildcard", o.Prefix)
	}
	if uc.PasswordFile != "" {
		b, err := os.ReadFile(uc.PasswordFile)
		if err != nil {
			c.errf(p.with("password_file"), "%v", err)
		}
		o.Password = strings.TrimRight(string(b), "\r\n")
	}
	if uc.CAFile != "" {
		pem, err := os.ReadFile(uc.CAFile)
		pool := x509.NewCertPool()
		if err != nil {
			c.errf(p.with("ca_file"), "%v", err)
		} else if !pool.AppendCertsFromPEM(pem) {
			c.errf(p.with("ca_file"), "%s holds no PEM certificate", uc.CAFile)
		}
		o.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if f := uc.Forward; f != nil {
		for _, x := range []struct {
			set *bool
			to  *bool
		}{{f.Events, &o.Forward.Events}, {f.State, &o.Forward.State}, {f.Receipts, &o.Forward.Receipts}, {f.Approvals, &o.Forward.Approvals},
			{f.Alarms, &o.Forward.Alarms}} {
			if x.set != nil {
				*x.to = *x.set
			}
		}
	}
	o.MaxBacklog = c.size(p.with("max_backlog"), uc.MaxBacklog)
	o.MaxCommandAge = c.duration(p.with("max_command_age"), uc.MaxCommandAge, 0)
	o.ReconnectMax = c.duration(p.with("reconnect_max"), uc.ReconnectMax, 0)
	return o
}

// people checks the users that tokens and the uplink name, and returns who
// is behind each.
func (c *checker) people(cfg *Config, b *Built) *people {
	pp := &people{tokens: map[string]string{}, uplink: map[string]string{}}
	users := map[string]bool{}
	for _, u := range b.Users {
		users[u.Name] = true
	}
	known := func(p path, user string) bool {
		if users[user] {
			return true
		}
		c.errf(p, "unknown user %q (name one of users)", user)
		return false
	}
	for i, tc := range cfg.Web.Tokens {
		if tc.User != "" && known(path{"web", "tokens", i, "user"}, tc.User) {
			pp.tokens[tc.Name] = tc.User
		}
	}
	if cfg.Uplink != nil && b.Uplink != nil && cfg.Uplink.User != "" && known(path{"uplink", "user"}, cfg.Uplink.User) {
		principal := b.Uplink.Principal
		if principal == "" {
			principal = "uplink:" + b.Uplink.ClientID
		}
		pp.uplink[principal] = cfg.Uplink.User
	}
	return pp
}

var tokenHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (c *checker) web(p path, wc WebConfig) *web.Options {
	if wc.Enabled != nil && !*wc.Enabled {
		return nil
	}
	o := &web.Options{Listen: wc.Listen}
	if o.Listen == "" {
		o.Listen = ":8080"
	}
	o.SessionTTL = c.duration(p.with("session_ttl"), wc.SessionTTL, 12*time.Hour)
	switch {
	case wc.CertFile == "" && wc.KeyFile == "":
	case wc.CertFile == "" || wc.KeyFile == "":
		c.errf(p, "give both cert_file and key_file for TLS")
	default:
		cert, err := tls.LoadX509KeyPair(wc.CertFile, wc.KeyFile)
		if err != nil {
			c.errf(p.with("cert_file"), "loading the certificate: %v", err)
		} else {
			o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
	}
	names := map[string]bool{}
	for i, tc := range wc.Tokens {
		tp := p.with("tokens", i)
		if !namePattern.MatchString(tc.Name) || names[tc.Name] {
			c.errf(tp.with("name"), "%q is not a valid token name, or is used twice", tc.Name)
		}
		names[tc.Name] = true
		r, err := access.ParseRole(tc.Role)
		if err != nil {
			c.errf(tp.with("role"), "%v", err)
		}
		if !tokenHash.MatchString(tc.TokenHash) {
			c.errf(tp.with("token_hash"), "want the SHA-256 of the token as 64 lowercase hex digits (shadowgate hash-token makes one)")
		}
		o.Tokens = append(o.Tokens, web.Token{Name: tc.Name, Role: r, Hash: tc.TokenHash})
	}
	return o
}

// alarms checks the alarms section.
func (c *checker) alarms(p path, ac AlarmsConfig) (time.Duration, map[runtime.AlarmKind]runtime.AlarmClass) {
	shelve := c.duration(p.with("max_shelve"), ac.MaxShelve, 8*time.Hour)
	classes := runtime.DefaultAlarmClasses()
	for _, k := range slices.Sorted(maps.Keys(ac.Classes)) {
		cc, kp := ac.Classes[k], p.with("classes", k)
		kind := runtime.AlarmKind(k)
		cl, ok := classes[kind]
		if !ok {
			c.errf(kp, "no alarm kind %q (want one of %s)", k, strings.Join(kindNames(), ", "))
			continue
		}
		if cc.Priority != "" {
			pr, err := runtime.ParsePriority(cc.Priority)
			if err != nil {
				c.errf(kp.with("priority"), "%v", err)
			}
			cl.Priority = pr
		}
		if cc.Latching != nil {
			cl.Latching = *cc.Latching
		}
		classes[kind] = cl
	}
	return shelve, classes
}

func kindNames() []string {
	out := make([]string, len(runtime.AlarmKinds))
	for i, k := range runtime.AlarmKinds {
		out[i] = string(k)
	}
	return out
}

// checkLabel checks a device's label: people read it on the console, so
// it is short printable text, one line, without spaces at its ends.
func checkLabel(l string) error {
	switch {
	case l == "":
		return nil
	case !utf8.ValidString(l):
		return errors.New("the label is not valid UTF-8")
	case utf8.RuneCountInString(l) > devices.MaxLabel:
		return fmt.Errorf("the label %q is %d characters long; at most %d", l, utf8.RuneCountInString(l), devices.MaxLabel)
	case strings.TrimSpace(l) != l:
		return fmt.Errorf("the label %q begins or ends with a space", l)
	}
	for _, r := range l {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("the label %q holds %U, which is not printable (write one line of text)", l, r)
		}
	}
	return nil
}
