package opcua

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gopcua/opcua/ua"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// Type is the OPC-UA driver's type in configuration files.
const Type = "opcua"

func init() {
	// Devices share the PLC's name as their address; oneNodeOneID keeps
	// what the gateway's rule of one address, one device would.
	devices.Register(devices.Factory{Type: Type, Configure: configure, SharedAddress: true})
}

// Defaults of the driver's options.
const (
	DefaultTimeout  = 2 * time.Second
	DefaultSampling = 250 * time.Millisecond
)

// Config is an OPC-UA driver's options, under the key opcua of its entry:
//
//	drivers:
//	  - name: plc-1
//	    type: opcua
//	    opcua:
//	      url: opc.tcp://192.168.1.20:4840
//	      security: {policy: Basic256Sha256, mode: SignAndEncrypt}
//	      server_thumbprint: "3f9a…"      # shadowgate opcua trust URL prints it
//	      certificate: opcua-client.der    # optional: made at first start if absent
//	      key: opcua-client.key
//	      auth: {username: gateway, password_file: plc-1.password}   # or leave out: anonymous
//	      timeout: 2s
//	      nodes:
//	        pump-1:
//	          command: {node: "ns=2;s=Pump.Command", read_back: "ns=2;s=Pump.Running"}
//	        tank-1:
//	          level: {node: "ns=2;s=Tank.Level", sampling: 250ms, deadband: 0.5}
//
// A device's address is the PLC's name ("plc-1"): every device of one
// driver is on its one server and has the same address.
type Config struct {
	// URL is the server's endpoint: opc.tcp://host:port[/path].
	URL string `yaml:"url"`
	// Security is the secure channel's policy and mode. Default None/None.
	Security SecurityConfig `yaml:"security"`
	// ServerThumbprint is the SHA-256 of the server certificate (DER), in
	// hexadecimal; colons and case do not matter. It is required unless
	// the policy is None, and checked whenever it is given: a server whose
	// endpoints present another certificate is not connected to. Only with
	// Basic256Sha256 does the session prove the server holds that
	// certificate's key; with None the pin catches a wrong PLC, not an
	// impostor that presents the right certificate.
	ServerThumbprint string `yaml:"server_thumbprint"`
	// Certificate and Key are the client's certificate (DER or PEM) and
	// RSA key (PEM, PKCS#1 or PKCS#8), relative to the state directory.
	// When security needs them and both are left out, they are made at
	// first start as opcua-<driver>.der and opcua-<driver>.key in the state
	// directory (RSA 2048, self-signed, with the application URI
	// urn:shadowgate:<host>:<driver>), kept 0600.
	Certificate string `yaml:"certificate"`
	Key         string `yaml:"key"`
	// Auth logs in with a user name; without it the session is anonymous.
	Auth *AuthConfig `yaml:"auth"`
	// Timeout bounds one request, written like 2s. Default 2s; 10ms to 1m.
	Timeout string `yaml:"timeout"`
	// Nodes say where each capability lives, by device id and then
	// capability name. Every capability needs one.
	Nodes map[string]map[string]NodeConfig `yaml:"nodes"`
}

// SecurityConfig is the secure channel's security.
type SecurityConfig struct {
	// Policy is None or Basic256Sha256.
	Policy string `yaml:"policy"`
	// Mode is None (with policy None), Sign or SignAndEncrypt (the default
	// with Basic256Sha256).
	Mode string `yaml:"mode"`
}

// AuthConfig is a user name login.
type AuthConfig struct {
	Username string `yaml:"username"`
	// PasswordFile holds the password (one line), relative to the state
	// directory. It is read when the driver is built.
	PasswordFile string `yaml:"password_file"`
}

// NodeConfig is where one capability lives on the server.
type NodeConfig struct {
	// Node is the variable written (an actuator) or read (a sensor), like
	// ns=2;s=Pump.Command, ns=3;i=1001, ns=1;g=<GUID> or ns=1;b=<base64>.
	Node string `yaml:"node"`
	// ReadBack is a separate variable an actuator is read back from (a
	// PLC's feedback tag); default the node itself.
	ReadBack string `yaml:"read_back"`
	// Sampling is how often the server samples the node for a
	// subscription, written like 250ms. Default 250ms; 10ms to 1h.
	Sampling string `yaml:"sampling"`
	// Deadband is the absolute change below which the server does not
	// report a number. Default 0 (every change).
	Deadband *float64 `yaml:"deadband"`
	// Mode is subscribe (the server reports changes; the default for a
	// sensor) or poll (the engine reads on the capability's poll interval;
	// the default for an actuator, which may subscribe to its read-back).
	Mode string `yaml:"mode"`
}

// The security policies and modes a configuration may name.
const (
	PolicyNone           = "None"
	PolicyBasic256Sha256 = "Basic256Sha256"
)

// point is one capability's place on the server, checked.
type point struct {
	node     *ua.NodeID // written, or read by a sensor
	readBack *ua.NodeID // read by an actuator; nil for a sensor or without read-back
	sampling time.Duration
	deadband float64
	watch    bool // subscribe
}

// readNode is the node a read of the capability reads.
func (p *point) readNode() *ua.NodeID {
	if p.readBack != nil {
		return p.readBack
	}
	return p.node
}

// settings are a driver's checked options.
type settings struct {
	url        string
	policy     string // a policy URI
	mode       ua.MessageSecurityMode
	thumbprint string // lower-case hex, or ""
	cert, key  string // paths as written, relative to the state directory
	username   string
	pwFile     string
	timeout    time.Duration
	points     map[string]map[string]*point
}

// configure is the driver's devices.Factory.Configure.
func configure(in devices.Instance, devs []devices.Device) devices.Builder {
	var cfg Config
	if !in.Decode(&cfg) {
		return nil
	}
	at := in.Options()
	s, ok := cfg.check(at)
	ok = ok && in.Claim("OPC-UA server", s.url, at.At("url"))
	s.points = map[string]map[string]*point{}
	for i := range devs {
		d := &devs[i]
		if !validName(d.Address) {
			in.Device(i).At("address").Errorf("%q is not a name for the PLC (1 to 64 of A-Z a-z 0-9 _ . -, like plc-1)", d.Address)
			ok = false
		} else if d.Address != devs[0].Address {
			in.Device(i).At("address").Errorf("%q: every device of driver %s is on its one server %s and has its name as address, as %s has %q", d.Address, in.Name(), s.url, devs[0].ID, devs[0].Address)
			ok = false
		}
		s.points[d.ID] = map[string]*point{}
		for k := range d.Capabilities {
			c := &d.Capabilities[k]
			// A write acts beyond the gateway, on the PLC: it reaches, as
			// its floor. A read asks the PLC and changes nothing there: it
			// is not an act that reaches (DESIGN §3), or a PLC's sensors
			// could not be read in supervised or observe mode.
			c.Floor = devices.Floor{Reaches: c.Kind == devices.KindActuator}
			nc, found := cfg.Nodes[d.ID][c.Name]
			if !found {
				in.Device(i).At("capabilities").Index(k).Errorf("capability %s has no node: add it under nodes.%s.%s of driver %s", c.Name, d.ID, c.Name, in.Name())
				ok = false
				continue
			}
			p, good := nc.point(at.At("nodes").At(d.ID).At(c.Name), c)
			ok = ok && good
			s.points[d.ID][c.Name] = p
		}
	}
	for _, id := range sortedKeys(cfg.Nodes) {
		d := deviceByID(devs, id)
		if d == nil {
			at.At("nodes").At(id).Errorf("no device %s on driver %s", id, in.Name())
			ok = false
			continue
		}
		for _, name := range sortedKeys(cfg.Nodes[id]) {
			if _, found := d.Capability(name); !found {
				at.At("nodes").At(id).At(name).Errorf("device %s has no capability %s", id, name)
				ok = false
			}
		}
	}
	ok = ok && oneNodeOneID(in, devs, s.points)
	if !ok {
		return nil
	}
	name := in.Name()
	return func(env devices.Env) (devices.Driver, error) {
		log, _ := env.Logger.(*slog.Logger)
		if log == nil {
			log = slog.Default().With("component", "opcua", "driver", name)
		}
		o := options{Name: name, URL: s.url, Policy: s.policy, Mode: s.mode, Thumbprint: s.thumbprint,
			Username: s.username, Timeout: s.timeout, StateDir: env.StateDir, Devices: env.Devices, Logger: log,
			points: s.points}
		if s.cert != "" {
			o.CertFile, o.KeyFile = inState(env.StateDir, s.cert), inState(env.StateDir, s.key)
		}
		if s.pwFile != "" {
			b, err := os.ReadFile(inState(env.StateDir, s.pwFile))
			if err != nil {
				return nil, fmt.Errorf("opcua driver %s: reading the password file: %w", name, err)
			}
			pw, _, _ := strings.Cut(string(b), "\n")
			o.Password = strings.TrimSuffix(pw, "\r")
			if o.Password == "" {
				return nil, fmt.Errorf("opcua driver %s: the password file %s is empty", name, s.pwFile)
			}
		}
		return newDriver(o)
	}
}

// check checks the options other than the nodes, reporting each problem at
// its key under at.
func (cfg *Config) check(at devices.Place) (settings, bool) {
	ok := true
	s := settings{url: cfg.URL, timeout: DefaultTimeout}
	if err := checkURL(cfg.URL); err != nil {
		at.At("url").Errorf("%v", err)
		ok = false
	}
	switch cfg.Security.Policy {
	case "", PolicyNone:
		s.policy = ua.SecurityPolicyURINone
		switch cfg.Security.Mode {
		case "", "None":
			s.mode = ua.MessageSecurityModeNone
		default:
			at.At("security").At("mode").Errorf("mode %q needs a policy: with policy None the mode is None (write policy: Basic256Sha256 to sign or encrypt)", cfg.Security.Mode)
			ok = false
		}
	case PolicyBasic256Sha256:
		s.policy = ua.SecurityPolicyURIBasic256Sha256
		switch cfg.Security.Mode {
		case "", "SignAndEncrypt":
			s.mode = ua.MessageSecurityModeSignAndEncrypt
		case "Sign":
			s.mode = ua.MessageSecurityModeSign
		default:
			at.At("security").At("mode").Errorf("mode %q with policy Basic256Sha256: want Sign or SignAndEncrypt", cfg.Security.Mode)
			ok = false
		}
	default:
		at.At("security").At("policy").Errorf("policy %q: want None or Basic256Sha256", cfg.Security.Policy)
		ok = false
	}
	if cfg.ServerThumbprint != "" {
		tp, err := normalThumbprint(cfg.ServerThumbprint)
		if err != nil {
			at.At("server_thumbprint").Errorf("%v", err)
			ok = false
		}
		s.thumbprint = tp
	} else if s.policy != ua.SecurityPolicyURINone && s.policy != "" {
		at.At("server_thumbprint").Errorf("the server certificate's SHA-256 thumbprint is required with policy %s: run shadowgate opcua trust %s and paste the line it prints", cfg.Security.Policy, cfg.URL)
		ok = false
	}
	switch {
	case (cfg.Certificate == "") != (cfg.Key == ""):
		at.At(map[bool]string{true: "key", false: "certificate"}[cfg.Key == ""]).Errorf("certificate and key go together: give both, or neither to have them made at first start")
		ok = false
	case cfg.Certificate != "" && s.mode == ua.MessageSecurityModeNone:
		at.At("certificate").Errorf("a client certificate is used only with policy Basic256Sha256; leave it out with policy None")
		ok = false
	}
	s.cert, s.key = cfg.Certificate, cfg.Key
	if cfg.Auth != nil {
		switch {
		case cfg.Auth.Username == "":
			at.At("auth").At("username").Errorf("a user name is required (or leave auth out to log in anonymously)")
			ok = false
		case cfg.Auth.PasswordFile == "":
			at.At("auth").At("password_file").Errorf("a password file is required: the file that holds the password of %s", cfg.Auth.Username)
			ok = false
		case s.mode == ua.MessageSecurityModeNone:
			// Priority 3, secure by default: a password is not sent over a
			// channel that neither signs nor encrypts.
			at.At("auth").Errorf("a password would cross the network in the clear with policy None; use policy Basic256Sha256 (mode SignAndEncrypt), or log in anonymously")
			ok = false
		case s.mode == ua.MessageSecurityModeSign:
			// A signed channel is not encrypted, and the password's own
			// protection is the server's to choose, in an endpoint list
			// nothing authenticates: it may say none.
			at.At("auth").Errorf("a password may cross the network in the clear over a channel that is signed and not encrypted; use mode SignAndEncrypt, or log in anonymously")
			ok = false
		}
		s.username, s.pwFile = cfg.Auth.Username, cfg.Auth.PasswordFile
	}
	if cfg.Timeout != "" {
		d, err := time.ParseDuration(cfg.Timeout)
		if err != nil || d < 10*time.Millisecond || d > time.Minute {
			at.At("timeout").Errorf("%q is not a duration between 10ms and 1m (write it like 2s or 500ms)", cfg.Timeout)
			ok = false
		}
		s.timeout = d
	}
	return s, ok
}

// point checks one node entry against its capability c, reporting each
// problem at its key under at.
func (nc NodeConfig) point(at devices.Place, c *devices.Capability) (*point, bool) {
	ok := true
	p := &point{sampling: DefaultSampling}
	n, err := parseNodeID(nc.Node)
	if err != nil {
		at.At("node").Errorf("%v", err)
		ok = false
	}
	p.node = n
	if nc.ReadBack != "" {
		switch {
		case c.Kind != devices.KindActuator:
			at.At("read_back").Errorf("read_back is for an actuator's feedback; sensor %s is read from its node", c.Name)
			ok = false
		case !c.ReadBack:
			at.At("read_back").Errorf("actuator %s has no read-back (write read_back: true on the capability, or leave read_back out here)", c.Name)
			ok = false
		default:
			rb, err := parseNodeID(nc.ReadBack)
			if err != nil {
				at.At("read_back").Errorf("%v", err)
				ok = false
			}
			p.readBack = rb
		}
	}
	switch nc.Mode {
	case "":
		p.watch = c.Kind == devices.KindSensor
	case "subscribe":
		if !c.Readable() {
			at.At("mode").Errorf("actuator %s has no read-back to subscribe to", c.Name)
			ok = false
		}
		p.watch = true
	case "poll":
		p.watch = false
	default:
		at.At("mode").Errorf("mode %q: want subscribe or poll", nc.Mode)
		ok = false
		p.watch = c.Kind == devices.KindSensor // so that no second problem follows from this one
	}
	if nc.Sampling != "" {
		d, err := time.ParseDuration(nc.Sampling)
		if err != nil || d < 10*time.Millisecond || d > time.Hour {
			at.At("sampling").Errorf("%q is not a duration between 10ms and 1h (write it like 250ms or 1s)", nc.Sampling)
			ok = false
		}
		if !p.watch {
			at.At("sampling").Errorf("sampling is for a subscription; %s is polled (mode: poll)", c.Name)
			ok = false
		}
		p.sampling = d
	}
	if nc.Deadband != nil {
		db := *nc.Deadband
		switch {
		case c.Type != value.TypeNumber:
			at.At("deadband").Errorf("a deadband is for numbers; %s is %s %s", c.Name, article(c.Type.String()), c.Type)
			ok = false
		case !p.watch:
			at.At("deadband").Errorf("a deadband is for a subscription; %s is polled (mode: poll)", c.Name)
			ok = false
		case db < 0 || math.IsNaN(db) || math.IsInf(db, 0):
			at.At("deadband").Errorf("deadband %v: want a finite number of 0 or more (an absolute change)", db)
			ok = false
		}
		p.deadband = db
	}
	return p, ok
}

// oneNodeOneID refuses two capabilities that write one node, or where one
// writes a node another reads: a second id for the same output would get
// around the first one's lock, dwell and pending approval. Reading one
// node from two capabilities is harmless.
func oneNodeOneID(in devices.Instance, devs []devices.Device, points map[string]map[string]*point) bool {
	type use struct {
		dev, capa string
		writes    bool
	}
	seen := map[string][]use{}
	ok := true
	for i := range devs {
		d := &devs[i]
		for k, c := range d.Capabilities {
			p := points[d.ID][c.Name]
			if p == nil || p.node == nil {
				continue
			}
			u := use{d.ID, c.Name, c.Kind == devices.KindActuator}
			key := p.node.String()
			for _, o := range seen[key] {
				if u.writes || o.writes {
					in.Device(i).At("capabilities").Index(k).Errorf("%s.%s reaches node %s, as %s.%s does; one output, one id", d.ID, c.Name, key, o.dev, o.capa)
					ok = false
				}
			}
			seen[key] = append(seen[key], u)
		}
	}
	return ok
}

// checkURL checks an endpoint URL: opc.tcp://host:port[/path].
func checkURL(s string) error {
	if s == "" {
		return fmt.Errorf("the server's url is required, like opc.tcp://192.168.1.20:4840")
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "opc.tcp" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an endpoint url (write it like opc.tcp://192.168.1.20:4840)", s)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return fmt.Errorf("%q has no port (OPC UA's is usually 4840: opc.tcp://%s:4840)", s, strings.Trim(u.Host, "[]"))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, port)
	}
	return nil
}

// validName reports whether s can name a PLC: 1 to 64 of A-Z a-z 0-9 _ . -.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// inState resolves a path of the options against the state directory.
func inState(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func deviceByID(devs []devices.Device, id string) *devices.Device {
	for i := range devs {
		if devs[i].ID == id {
			return &devs[i]
		}
	}
	return nil
}
