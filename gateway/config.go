package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"os"
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
	// MaxFileSize caps the file; past it the journal fails closed, as on a
	// full disk. Default none (on 32-bit ARM keep the file well under 1GiB).
	MaxFileSize string `yaml:"max_file_size"`
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
	// Type is the driver: "sim" in this build.
	Type string `yaml:"type"`
	// Sim holds the options of a sim driver.
	Sim *SimConfig `yaml:"sim"`
}

// SimConfig are the options of the simulated greenhouse.
type SimConfig struct {
	// StateFile keeps the simulated world across restarts of the gateway,
	// as real hardware would be. A relative path is in the state directory.
	StateFile string `yaml:"state_file"`
	// Faults rehearse failures without hardware, by device id.
	Faults map[string]SimFaultConfig `yaml:"faults"`
}

// SimFaultConfig is a fault injected into one simulated device.
type SimFaultConfig struct {
	Offline bool `yaml:"offline"`
	// Stuck makes writes succeed without moving the actuator.
	Stuck bool `yaml:"stuck"`
	// WriteDelay delays a write before it takes effect; AckDelay delays the
	// answer after it took effect; ReadDelay delays reads.
	WriteDelay string `yaml:"write_delay"`
	AckDelay   string `yaml:"ack_delay"`
	ReadDelay  string `yaml:"read_delay"`
	// WriteError and ReadError make calls fail with this message.
	WriteError string `yaml:"write_error"`
	ReadError  string `yaml:"read_error"`
}

// DeviceConfig is one device.
type DeviceConfig struct {
	ID           string             `yaml:"id"`
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
}

// EffectsConfig declares what an actuator does. Undeclared means the worst case.
type EffectsConfig struct {
	Reversible bool `yaml:"reversible"`
	Contained  bool `yaml:"contained"`
	Costs      bool `yaml:"costs"`
	Reaches    bool `yaml:"reaches"`
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
	ReadBack bool      `yaml:"read_back"`
	Sensor   string    `yaml:"sensor"`
	Op       string    `yaml:"op"`
	Value    yaml.Node `yaml:"value"`
	Within   string    `yaml:"within"`
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

// ConfigError is one problem in a configuration file, with where it is.
type ConfigError struct {
	File string
	Line int
	// Path is where in the document: "devices[2].capabilities[0].envelope".
	Path string
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
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
// line and what is wrong; all errors found are returned, joined.
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
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return nil, yamlError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &ConfigError{File: file, Line: extra.Line, Msg: "more than one YAML document; a configuration is one document"}
	}
	c := &checker{file: file, root: root.Content[0]}
	b := c.build(&cfg)
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return b, nil
}

// yamlError turns a yaml error into ConfigErrors with lines.
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
			errs = append(errs, &ConfigError{File: file, Line: line, Msg: msg})
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
	return &ConfigError{File: file, Line: line, Msg: msg}
}
