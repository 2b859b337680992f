package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config is the gateway's configuration file, as written. Load checks it
// strictly and Build turns it into what the runtime and drivers need.
type Config struct {
	Gateway   GatewayConfig   `yaml:"gateway"`
	Mode      string          `yaml:"mode"`
	Approvals ApprovalsConfig `yaml:"approvals"`
	Drivers   []DriverConfig  `yaml:"drivers"`
	Devices   []DeviceConfig  `yaml:"devices"`
	Modes     []ModeConfig    `yaml:"modes"`
	Rules     []RuleConfig    `yaml:"rules"`
	Plans     []PlanConfig    `yaml:"plans"`
	Leases    LeaseDefaults   `yaml:"leases"`
	Journal   JournalConfig   `yaml:"journal"`
	Users     []UserConfig    `yaml:"users"`
	MQTT      MQTTConfig      `yaml:"mqtt"`
	Uplink    *UplinkConfig   `yaml:"uplink"`
	Web       WebConfig       `yaml:"web"`
	Alarms    AlarmsConfig    `yaml:"alarms"`

	// MCP serves AI agents on the console's port; nil or not enabled is off.
	MCP *MCPConfig `yaml:"mcp"`

	// Integrations connect the gateway to tools people already run.
	Integrations IntegrationsConfig `yaml:"integrations"`
}

// AlarmsConfig sets how alarms behave.
type AlarmsConfig struct {
	// MaxShelve bounds how long an admin may shelve an alarm. Default 8h.
	MaxShelve string `yaml:"max_shelve"`
	// Classes sets the priority and latching of each kind of alarm:
	// discrepancy, unconfirmed, drift, interlock, safe_drive, locked,
	// schedule.
	Classes map[string]AlarmClassConfig `yaml:"classes"`
}

// AlarmClassConfig is the priority (critical, high, medium, low) and the
// latching of one kind of alarm; what is left out keeps its default.
type AlarmClassConfig struct {
	Priority string `yaml:"priority"`
	Latching *bool  `yaml:"latching"`
}

// WebConfig is the console and the HTTP API.
type WebConfig struct {
	// Enabled turns the console off when false. Default on.
	Enabled *bool `yaml:"enabled"`
	// Listen is the address. Default ":8080".
	Listen   string `yaml:"listen"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// SessionTTL is how long a login lasts. Default 12h.
	SessionTTL string `yaml:"session_ttl"`
	// Tokens are API clients' bearer tokens, stored as SHA-256 hex.
	Tokens []TokenConfig `yaml:"tokens"`
}

// TokenConfig is one API client.
type TokenConfig struct {
	Name string `yaml:"name"`
	Role string `yaml:"role"`
	// User is the person who holds the token, one of users. Four-eyes
	// counts people: a token's holder approving through the API is the same
	// person as on MQTT or the console. A token without one is a person of
	// its own, "token:<name>".
	User string `yaml:"user"`
	// TokenHash is the SHA-256 of the token in hex; shadowgate hash-token
	// makes a token and its hash.
	TokenHash string `yaml:"token_hash"`
}

// UplinkConfig connects the gateway to a site or fleet broker.
type UplinkConfig struct {
	// URL is tcp://host:1883, ssl://host:8883, ws:// or wss://.
	URL string `yaml:"url"`
	// ClientID defaults to the gateway id.
	ClientID string `yaml:"client_id"`
	// User is the person behind commands and answers from upstream, one of
	// users. Without one the uplink is a person of its own,
	// "uplink:<client id>".
	User     string `yaml:"user"`
	Username string `yaml:"username"`
	// PasswordFile holds the password.
	PasswordFile string `yaml:"password_file"`
	// CAFile, if set, is the CA bundle that signs the broker's certificate.
	CAFile string `yaml:"ca_file"`
	// Prefix is the upstream topic prefix. Default shadowgate/<gateway-id>/.
	Prefix  string         `yaml:"prefix"`
	Forward *ForwardConfig `yaml:"forward"`
	// MaxBacklog bounds the outbox. Default 16MiB.
	MaxBacklog string `yaml:"max_backlog"`
	// MaxCommandAge is how old an upstream command may be. Default 30s.
	MaxCommandAge string `yaml:"max_command_age"`
	// ReconnectMax bounds the wait between reconnects. Default 30s.
	ReconnectMax string `yaml:"reconnect_max"`
}

// ForwardConfig says what goes upstream; each defaults to true.
type ForwardConfig struct {
	Events    *bool `yaml:"events"`
	State     *bool `yaml:"state"`
	Receipts  *bool `yaml:"receipts"`
	Approvals *bool `yaml:"approvals"`
	Alarms    *bool `yaml:"alarms"`
}

// UserConfig is one account of the MQTT broker and the console.
type UserConfig struct {
	Name string `yaml:"name"`
	// Role is viewer, operator, approver or admin.
	Role string `yaml:"role"`
	// PasswordHash is a bcrypt hash (shadowgate hash-password makes one);
	// PasswordHashFile names a file holding it instead.
	PasswordHash     string `yaml:"password_hash"`
	PasswordHashFile string `yaml:"password_hash_file"`
	// MQTT narrows what the user may publish and subscribe to.
	MQTT *UserMQTTConfig `yaml:"mqtt"`
}

// UserMQTTConfig lists MQTT topic filters. An absent list means the
// role's defaults; an empty one ([]) means none.
type UserMQTTConfig struct {
	Publish   []string `yaml:"publish"`
	Subscribe []string `yaml:"subscribe"`
}

// MQTTConfig is the embedded broker.
type MQTTConfig struct {
	// Enabled turns the broker off when false. Default on.
	Enabled *bool `yaml:"enabled"`
	// Listen is the plain TCP address. Default ":1883".
	Listen string `yaml:"listen"`
	// TLS serves MQTT over TLS too.
	TLS *TLSListenConfig `yaml:"tls"`
	// Websocket serves MQTT over websockets too.
	Websocket *ListenConfig `yaml:"websocket"`
	// Anonymous is the role of a client without a username; absent means
	// such clients are refused.
	Anonymous string `yaml:"anonymous"`
	// MaxClients caps connected clients. Default 100.
	MaxClients int `yaml:"max_clients"`
	// MaxPayload bounds a command payload. Default 64KiB.
	MaxPayload string `yaml:"max_payload"`
	// MaxQueued bounds the messages waiting to be written to one client.
	// Default 8192.
	MaxQueued int `yaml:"max_queued"`
	// Commands bounds each user's commands.
	Commands RateConfig `yaml:"commands"`
}

// ListenConfig is an address to listen on.
type ListenConfig struct {
	Listen string `yaml:"listen"`
}

// TLSListenConfig is an address with a certificate.
type TLSListenConfig struct {
	Listen   string `yaml:"listen"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// RateConfig is a rate with a burst.
type RateConfig struct {
	PerMinute int `yaml:"per_minute"`
	Burst     int `yaml:"burst"`
}

// JournalConfig bounds what the journal keeps. The defaults suit an SD card.
type JournalConfig struct {
	// MaxEvents bounds the events kept. Default 500000.
	MaxEvents int `yaml:"max_events"`
	// MaxBytes bounds the bytes of the events kept: "128MiB" (the default),
	// "512KiB", "1GiB" or a plain number of bytes.
	MaxBytes string `yaml:"max_bytes"`
	// KeepRecords is how long ended attempts, answered approvals and ended
	// runs are kept. Default 720h (30 days).
	KeepRecords string `yaml:"keep_records"`
	// MaxRecords bounds the ended records kept; past it the oldest go,
	// though younger than KeepRecords. Default 100000.
	MaxRecords int `yaml:"max_records"`
	// MaxFileSize caps the file; past it the journal fails closed, as on a
	// full disk. Default none (on 32-bit ARM keep the file well under 1GiB).
	MaxFileSize string `yaml:"max_file_size"`
	// CheckpointEvery is how many events at most go by between signed
	// checkpoints. Default 1000.
	CheckpointEvery int `yaml:"checkpoint_every"`
	// CheckpointInterval is how long at most goes by between checkpoints
	// while events are written. Default 1m.
	CheckpointInterval string `yaml:"checkpoint_interval"`
	// FlushInterval bounds how long a reading or other telemetry waits
	// for the log's next fdatasync when no actuation record, approval,
	// rule or mode change (each written at once) comes first. A power cut
	// loses at most this much of the readings, never an intent or a
	// receipt; the journal's readers see a reading once it is written.
	// Default 30s, at most 1m.
	FlushInterval string `yaml:"flush_interval"`
	// StoreInterval bounds how long the store (bbolt) lags the log: the
	// log is written to it in the background this often, or sooner once
	// 8192 events or 4MiB wait. Default 30m, at most 1h.
	StoreInterval string `yaml:"store_interval"`
}

// GatewayConfig names the gateway and where it keeps its state.
type GatewayConfig struct {
	// ID names this gateway in topics and logs. Default "shadowgate".
	ID string `yaml:"id"`
	// StateDir holds the journal. Default /var/lib/shadowgate.
	StateDir string `yaml:"state_dir"`
}

// ApprovalsConfig bounds how people answer.
type ApprovalsConfig struct {
	// Timeout is how long a request waits for an answer. Default 10m.
	Timeout string `yaml:"timeout"`
	// OperateWithin is how long an approval's authorization is valid. Default 15s.
	OperateWithin string `yaml:"operate_within"`
	// MaxRuleTTL caps a rule added with an approval. Default 24h.
	MaxRuleTTL string `yaml:"max_rule_ttl"`
}

// LeaseDefaults bound a single command.
type LeaseDefaults struct {
	Command LeaseConfig `yaml:"command"`
}

// DriverConfig is one driver instance.
type DriverConfig struct {
	Name string `yaml:"name"`
	// Type is the driver, one this build has (devices.DriverTypes).
	Type string `yaml:"type"`
	// Options holds every other key of the entry. The one named after the
	// type ("sim" for a sim driver) holds the driver's own options, which
	// its package documents and its factory decodes and checks; any other
	// key is an error.
	Options map[string]yaml.Node `yaml:",inline"`
}

// DeviceConfig is one device.
type DeviceConfig struct {
	ID string `yaml:"id"`
	// Label is what people call the device in the console, "Pump 1";
	// optional, at most 40 printable characters. The id stays its name
	// in commands, rules and the journal.
	Label        string             `yaml:"label"`
	Area         string             `yaml:"area"`
	Driver       string             `yaml:"driver"`
	Address      string             `yaml:"address"`
	Capabilities []CapabilityConfig `yaml:"capabilities"`
}

// CapabilityConfig is one capability of a device, with its safety features.
type CapabilityConfig struct {
	Name       string            `yaml:"name"`
	Kind       string            `yaml:"kind"`
	Type       string            `yaml:"type"`
	Unit       string            `yaml:"unit"`
	Enum       []string          `yaml:"enum"`
	ReadBack   bool              `yaml:"read_back"`
	Poll       string            `yaml:"poll"`
	Effects    *EffectsConfig    `yaml:"effects"`
	Envelope   *EnvelopeConfig   `yaml:"envelope"`
	Interlocks []ConditionConfig `yaml:"interlocks"`
	Confirm    *ConfirmConfig    `yaml:"confirm"`
	Safe       yaml.Node         `yaml:"safe"`
	// TTL makes an actuation to a value other than safe a dead man: it
	// reverts to safe after this long unless the same value is commanded
	// again. Only a reversible actuator has one.
	TTL string `yaml:"ttl"`
	// While holds running interlocks: while the actuator is away from
	// safe, each must hold, or it is driven to safe.
	While []ConditionConfig `yaml:"while"`
	// OnStart is "keep" (the default) or "safe"; OnStop is "safe" (the
	// default when there is a safe value) or "keep".
	OnStart string `yaml:"on_start"`
	OnStop  string `yaml:"on_stop"`
}

// EffectsConfig declares what an actuator does. Without it an actuator is
// judged as the worst case. Reversible and Contained left out mean false
// (the wider side); Costs and Reaches left out take the driver's floor.
// A field declared narrower than the driver's floor is an error.
type EffectsConfig struct {
	Reversible *bool `yaml:"reversible"`
	Contained  *bool `yaml:"contained"`
	Costs      *bool `yaml:"costs"`
	Reaches    *bool `yaml:"reaches"`
}

// EnvelopeConfig bounds an actuator's values and changes.
type EnvelopeConfig struct {
	Min      *float64    `yaml:"min"`
	Max      *float64    `yaml:"max"`
	Step     float64     `yaml:"step"`
	Allowed  []yaml.Node `yaml:"allowed"`
	MaxRate  int         `yaml:"max_rate"`
	MinDwell string      `yaml:"min_dwell"`
}

// ConditionConfig is an interlock: a reading compared with a value.
type ConditionConfig struct {
	Sensor string    `yaml:"sensor"`
	Op     string    `yaml:"op"`
	Value  yaml.Node `yaml:"value"`
	MaxAge string    `yaml:"max_age"`
}

// ConfirmConfig says how an actuation is verified.
type ConfirmConfig struct {
	ReadBack bool `yaml:"read_back"`
	// Feedback names a sensor that must come to equal the commanded value:
	// a relay's auxiliary contact, a valve's limit switch.
	Feedback string    `yaml:"feedback"`
	Sensor   string    `yaml:"sensor"`
	Op       string    `yaml:"op"`
	Value    yaml.Node `yaml:"value"`
	// TravelWithin bounds the wait for the value or condition (Within is
	// its older name). Default 5s.
	TravelWithin string `yaml:"travel_within"`
	Within       string `yaml:"within"`
	// When is the value whose acts a sensor condition confirms; for a
	// bool actuator it defaults to true, and an act to false is confirmed
	// by the condition no longer holding.
	When yaml.Node `yaml:"when"`
	// StartWithin, if set, is how soon the confirming reading must move.
	StartWithin string `yaml:"start_within"`
	// Watch, if set, keeps watching for this long after the value was
	// reached: leaving it is "returned".
	Watch string `yaml:"watch"`
	// OnContradiction is "alarm" (the default) or "safe": drive the
	// actuator to safe after a discrepancy.
	OnContradiction string `yaml:"on_contradiction"`
}

// ProfileConfig is an effect profile in a mode.
type ProfileConfig struct {
	Reads      []string `yaml:"reads"`
	Writes     []string `yaml:"writes"`
	Reaches    bool     `yaml:"reaches"`
	Reversible bool     `yaml:"reversible"`
	Contained  bool     `yaml:"contained"`
	Costs      bool     `yaml:"costs"`
}

// ModeConfig is a configured mode narrowing a shipped one.
type ModeConfig struct {
	Name              string         `yaml:"name"`
	Base              string         `yaml:"base"`
	Ceiling           *ProfileConfig `yaml:"ceiling"`
	AskAbove          *ProfileConfig `yaml:"ask_above"`
	ApprovalsRequired int            `yaml:"approvals_required"`
	MaxDuration       string         `yaml:"max_duration"`
}

// RuleConfig is a standing rule.
type RuleConfig struct {
	ID         string      `yaml:"id"`
	Principal  string      `yaml:"principal"`
	Device     string      `yaml:"device"`
	Capability string      `yaml:"capability"`
	Decision   string      `yaml:"decision"`
	Values     []yaml.Node `yaml:"values"`
	Min        *float64    `yaml:"min"`
	Max        *float64    `yaml:"max"`
	Reason     string      `yaml:"reason"`
}

// LeaseConfig bounds a run.
type LeaseConfig struct {
	MaxSteps      int    `yaml:"max_steps"`
	MaxWall       string `yaml:"max_wall"`
	MaxActuations int    `yaml:"max_actuations"`
}

// ConfigError is one problem in a configuration file, with where it is.
type ConfigError struct {
	File string
	Line int
	// Column is the column of the value at fault, from 1; zero when the
	// parser does not say.
	Column int
	// Path is where in the document: "devices[2].capabilities[0].envelope".
	Path string
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteString(":" + strconv.Itoa(e.Column))
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// MaxConfigSize bounds a configuration file.
const MaxConfigSize = 4 << 20

// LoadFile reads and checks a configuration file.
func LoadFile(path string) (*Built, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	return Load(path, data)
}

// Load parses and checks a configuration. Every error names the file, the
// line and column, the key path and what is wrong, in the terms of the file
// (never of the program); all errors found are returned, joined.
func Load(file string, data []byte) (*Built, error) {
	if len(data) > MaxConfigSize {
		return nil, &ConfigError{File: file, Msg: "the file is larger than 4 MiB"}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(file, err)
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, &ConfigError{File: file, Line: 1, Msg: "the configuration is empty"}
	}
	c := &checker{file: file, root: root.Content[0], budget: maxShapeNodes}
	c.shape(c.root, reflect.TypeFor[Config](), path{})
	shapeErrs := c.errs
	c.errs = nil
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		var te *yaml.TypeError
		if len(shapeErrs) == 0 {
			return nil, yamlError(file, err)
		}
		if !errors.As(err, &te) {
			return nil, errors.Join(shapeErrs...)
		}
		// The decoder went on past the values shape reported; what it
		// filled in is checked below, so that every error is reported.
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &ConfigError{File: file, Line: extra.Line, Msg: "more than one YAML document; a configuration is one document"}
	}
	b := c.build(&cfg)
	if len(shapeErrs) > 0 {
		return nil, errors.Join(append(shapeErrs, unrelated(c.errs, shapeErrs)...)...)
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	// The file checked: its sections parse as plain data too.
	_ = yaml.Unmarshal(data, &b.raw)
	return b, nil
}

// unrelated returns the errors of errs at no place at, above or below a
// place of a shape error: those may only echo the value shape refused.
func unrelated(errs, shapeErrs []error) []error {
	var out []error
	for _, err := range errs {
		ce, ok := err.(*ConfigError)
		if !ok {
			continue
		}
		related := false
		for _, se := range shapeErrs {
			if s, ok := se.(*ConfigError); ok && (within(ce.Path, s.Path) || within(s.Path, ce.Path)) {
				related = true
				break
			}
		}
		if !related {
			out = append(out, err)
		}
	}
	return out
}

// within reports whether key path p is at or below key path q.
func within(p, q string) bool {
	return q == "" || p == q || strings.HasPrefix(p, q+".") || strings.HasPrefix(p, q+"[")
}

// maxShapeNodes bounds the nodes shape visits, aliases expanded, so that
// an alias bomb cannot make it run for long; past it the decoder judges.
const maxShapeNodes = 1 << 20

var nodeType = reflect.TypeFor[yaml.Node]()

// yaml11Bools are the words YAML 1.1 read as booleans. YAML 1.2 reads them
// as text, so in a bool they are an error: a person who wrote "enabled: no"
// should not be guessed at.
var yaml11Bools = map[string]bool{"y": true, "yes": true, "n": true, "no": true, "on": true, "off": true}

// shape checks node n against the configuration type t before decoding, so
// that every error names the place in the file and says what was expected
// in words, not in Go types: unknown and repeated keys, a list where a
// mapping belongs, text where a number or a bool belongs, YAML 1.1 booleans.
// Values that are themselves YAML nodes (device values) are checked later.
func (c *checker) shape(n *yaml.Node, t reflect.Type, p path) {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || c.budget <= 0 {
		return
	}
	c.budget--
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nodeType || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			c.shapeErr(n, p, "expected a mapping of keys (key: value), found "+found(n))
			return
		}
		c.shapeStruct(n, t, p, map[string]int{})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			c.shapeErr(n, p, "expected a mapping of names to settings, found "+found(n))
			return
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if c.repeated(k, p, seen) {
				continue
			}
			c.shape(n.Content[i+1], t.Elem(), p.with(k.Value))
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			c.shapeErr(n, p, "expected a list, found "+found(n))
			return
		}
		for i, el := range n.Content {
			c.shape(el, t.Elem(), p.with(i))
		}
	default:
		c.shapeScalar(n, t, p)
	}
}

// shapeStruct checks the keys of mapping n against the fields of struct t.
// seen holds the keys met so far, across merged mappings.
func (c *checker) shapeStruct(n *yaml.Node, t reflect.Type, p path, seen map[string]int) {
	fields := map[string]reflect.Type{}
	var names []string
	// rest is the element type of an inline map, which takes every other
	// key; its keys are checked by whoever reads the map.
	var rest reflect.Type
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" && opts == "inline" && f.Type.Kind() == reflect.Map {
				rest = f.Type.Elem()
				continue
			}
			if name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct {
				// An inline struct's keys are the outer mapping's: a
				// driver's options embed the serial port's settings.
				collect(f.Type)
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			fields[name] = f.Type
			names = append(names, name)
		}
	}
	collect(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			for v != nil && v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			switch {
			case v != nil && v.Kind == yaml.MappingNode && c.budget > 0:
				c.budget--
				c.shapeStruct(v, t, p, seen)
			case v != nil && v.Kind == yaml.SequenceNode:
				for _, m := range v.Content {
					for m != nil && m.Kind == yaml.AliasNode {
						m = m.Alias
					}
					if m != nil && m.Kind == yaml.MappingNode && c.budget > 0 {
						c.budget--
						c.shapeStruct(m, t, p, seen)
					}
				}
			}
			continue
		}
		if c.repeated(k, p, seen) {
			continue
		}
		ft, ok := fields[k.Value]
		if !ok && rest != nil {
			ft, ok = rest, true
		}
		if !ok {
			c.shapeErr(k, p.with(k.Value), "unknown key "+strconv.Quote(k.Value)+" (known keys here: "+strings.Join(names, ", ")+")")
			continue
		}
		c.shape(v, ft, p.with(k.Value))
	}
}

// repeated reports, as an error, a key that is not text or that appears
// twice in one mapping.
func (c *checker) repeated(k *yaml.Node, p path, seen map[string]int) bool {
	if k.Kind != yaml.ScalarNode {
		c.shapeErr(k, p, "a key must be a name, found "+found(k))
		return true
	}
	if line, dup := seen[k.Value]; dup {
		c.shapeErr(k, p.with(k.Value), "key "+strconv.Quote(k.Value)+" appears twice (first on line "+strconv.Itoa(line)+")")
		return true
	}
	seen[k.Value] = k.Line
	return false
}

// shapeScalar checks a value of a scalar type: a bool, a number or text.
func (c *checker) shapeScalar(n *yaml.Node, t reflect.Type, p path) {
	var want string
	switch t.Kind() {
	case reflect.Bool:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
			return
		}
		if n.Kind == yaml.ScalarNode && yaml11Bools[strings.ToLower(n.Value)] {
			c.shapeErr(n, p, strconv.Quote(n.Value)+" is not a boolean in YAML 1.2: write true or false")
			return
		}
		want = "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		want = "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.String:
		if n.Kind == yaml.ScalarNode {
			return
		}
		want = "a single value (text)"
	default:
		return // no such field in the configuration types
	}
	// The decoder would cut 1.5 down to 1 for a whole number: only an
	// integer may go there.
	whole := strings.HasPrefix(want, "a whole number")
	if n.Kind == yaml.ScalarNode && t.Kind() != reflect.Bool && (!whole || n.ShortTag() == "!!int") &&
		n.Decode(reflect.New(t).Interface()) == nil {
		return
	}
	msg := "expected " + want + ", found " + found(n)
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		msg += " (a quoted value is text; remove the quotes)"
	} else if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") && whole {
		msg += " (out of range, or not whole)"
	}
	c.shapeErr(n, p, msg)
}

// found describes a node for an error message.
func found(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping (key: value)"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		return "the number " + v
	case "!!bool":
		return "the boolean " + v
	}
	return "the text " + strconv.Quote(v)
}

func (c *checker) shapeErr(n *yaml.Node, p path, msg string) {
	c.errs = append(c.errs, &ConfigError{File: c.file, Line: n.Line, Column: n.Column, Path: p.String(), Msg: msg})
}

// goTypes matches the program's own type names in a decoder message: a
// name qualified by its package ("in type gateway.Config"), never a word
// of the parser's own ("not allowed in this context").
var goTypes = regexp.MustCompile(` (in|into) (type )?[*\[\]]*[a-zA-Z0-9_]+\.[a-zA-Z0-9_.]+`)

// yamlError turns a parser error into ConfigErrors with lines, in words
// about the file: the program's type names are dropped.
func yamlError(file string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		errs := make([]error, 0, len(te.Errors))
		for _, msg := range te.Errors {
			line := 0
			if rest, ok := strings.CutPrefix(msg, "line "); ok {
				if i := strings.Index(rest, ": "); i > 0 {
					line, _ = strconv.Atoi(rest[:i])
					msg = rest[i+2:]
				}
			}
			errs = append(errs, &ConfigError{File: file, Line: line, Msg: plainYAML(msg)})
		}
		return errors.Join(errs...)
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			line, _ = strconv.Atoi(rest[:i])
			msg = rest[i+2:]
		}
	}
	return &ConfigError{File: file, Line: line, Msg: plainYAML(msg)}
}

// plainYAML rewrites a decoder message without the program's type names.
func plainYAML(msg string) string {
	if rest, ok := strings.CutPrefix(msg, "field "); ok {
		if name, _, ok := strings.Cut(rest, " not found"); ok {
			return "unknown key " + strconv.Quote(name)
		}
	}
	if rest, ok := strings.CutPrefix(msg, "cannot unmarshal "); ok {
		if _, v, ok := strings.Cut(rest, " `"); ok {
			v, _, _ = strings.Cut(v, "`")
			return "the value " + strconv.Quote(v) + " is not the kind of value this key takes"
		}
		return "a value is not the kind this key takes"
	}
	return goTypes.ReplaceAllString(msg, "")
}
