package plc

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/server"
	"github.com/gopcua/opcua/ua"
	"github.com/gopcua/opcua/uasc"
)

// NamespaceURI is the URI of the PLC's namespace. Its index is
// [NamespaceIndex]; a client should still look it up by URI.
const NamespaceURI = "urn:shadowgate:firmware-fixtures:opcua-plc"

// NamespaceIndex is the index the PLC's namespace gets on the server: 0
// is the standard namespace and the PLC's is the only other one.
const NamespaceIndex = 1

// ApplicationURI is the default application URI of the server, the URI
// SAN of the certificate it makes.
const ApplicationURI = "urn:shadowgate:firmware-fixtures:opcua-plc:server"

// Security is an endpoint's security policy and mode.
type Security int

// Security modes. Only SecurityNone works; see the package documentation.
const (
	// SecurityNone is policy None, mode None, anonymous.
	SecurityNone Security = iota
	// SecurityBasic256Sha256Sign is policy Basic256Sha256, mode Sign.
	SecurityBasic256Sha256Sign
	// SecurityBasic256Sha256SignAndEncrypt is policy Basic256Sha256, mode
	// SignAndEncrypt.
	SecurityBasic256Sha256SignAndEncrypt
)

func (s Security) String() string {
	switch s {
	case SecurityNone:
		return "None"
	case SecurityBasic256Sha256Sign:
		return "Basic256Sha256/Sign"
	case SecurityBasic256Sha256SignAndEncrypt:
		return "Basic256Sha256/SignAndEncrypt"
	}
	return "Security(" + strconv.Itoa(int(s)) + ")"
}

// NoResponse as the delay of [PLC.StallWrites] means the response is never
// sent: a lost response.
const NoResponse time.Duration = -1

// Options configure [Start]. The zero value serves security None on a free
// 127.0.0.1 port with a fresh self-signed certificate.
type Options struct {
	// Addr is host:port to listen on and to advertise in the endpoint URL.
	// Empty picks a free port on 127.0.0.1. The host must be one a client
	// can dial (not 0.0.0.0 or empty): the gopcua server advertises what
	// it listens on.
	Addr string

	// Security lists the endpoints to offer. Empty means SecurityNone.
	// Any Basic256Sha256 mode makes Start fail with
	// ErrSecurityUnsupported.
	Security []Security

	// Certificate (DER) and PrivateKey are the server's certificate and
	// key. Both nil makes a self-signed RSA 2048 certificate whose URI SAN
	// is ApplicationURI. The certificate is advertised in the endpoints
	// even for SecurityNone, so a client can pin its thumbprint.
	Certificate []byte
	PrivateKey  *rsa.PrivateKey

	// Tick is the physics period. Default 50ms. A negative Tick runs no
	// ticker: time only passes through [PLC.Advance] (for deterministic
	// tests).
	Tick time.Duration

	// FeedbackDelay is how long Pump.Running takes to follow
	// Pump.Command. Default 300ms. It is measured in physics time and
	// resolved to one Tick.
	FeedbackDelay time.Duration

	// FillRate is how fast the level rises while the pump runs, in percent
	// per second. Default 5. DrainRate is how fast it falls while the
	// valve is open, in percent per second. Default 3.
	FillRate, DrainRate float64

	// Logger receives the PLC's own lines and, at Debug, the gopcua
	// server's. Nil discards them. The gopcua server also prints through
	// the standard log package: see [Quiet].
	Logger *slog.Logger
}

// PLC is a running simulated PLC. Its methods are safe for concurrent use.
//
// Goroutines: the physics ticker is owned by PLC and stopped by Close; each
// gopcua server instance (one per Start or Restart) is stopped before the
// next starts or by Close, along with the goroutines that send delayed
// write responses.
type PLC struct {
	opts    Options
	host    string
	port    int
	cert    []byte
	key     *rsa.PrivateKey
	logger  *slog.Logger
	stop    chan struct{} // closed by Close; stops the physics
	physics sync.WaitGroup

	// smu serializes Restart and Close and guards the fields below it.
	smu    sync.RWMutex
	inst   *instance
	closed bool

	// mu guards the tag state below it. It is never held while calling
	// into the gopcua server.
	mu       sync.Mutex
	values   map[Tag]any
	locked   map[Tag]bool
	writes   map[Tag]int
	rejected map[Tag]int
	stallN   int
	stallFor time.Duration
	stuck    bool
	simNow   time.Duration // physics time
	cmdAt    time.Duration // physics time of the last Pump.Command change
}

// instance is one gopcua server run.
type instance struct {
	srv    *server.Server
	space  *space
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards stopped; sends may only be added to while not stopped.
	mu      sync.Mutex
	stopped bool
	sends   sync.WaitGroup // goroutines sending delayed write responses
}

// Start starts a PLC and its server. The server is listening when Start
// returns.
func Start(opts Options) (*PLC, error) {
	for _, s := range opts.Security {
		if s != SecurityNone {
			return nil, fmt.Errorf("starting opc-ua plc with %v: %w", s, ErrSecurityUnsupported)
		}
	}
	if opts.Tick == 0 {
		opts.Tick = 50 * time.Millisecond
	}
	if opts.FeedbackDelay == 0 {
		opts.FeedbackDelay = 300 * time.Millisecond
	}
	if opts.FillRate == 0 {
		opts.FillRate = 5
	}
	if opts.DrainRate == 0 {
		opts.DrainRate = 3
	}
	p := &PLC{
		opts:     opts,
		logger:   opts.Logger,
		stop:     make(chan struct{}),
		values:   map[Tag]any{},
		locked:   map[Tag]bool{},
		writes:   map[Tag]int{},
		rejected: map[Tag]int{},
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	for _, d := range tagDefs {
		p.values[d.tag] = d.initial
	}

	switch {
	case opts.Certificate == nil && opts.PrivateKey == nil:
		cert, key, err := NewCertificate(ApplicationURI)
		if err != nil {
			return nil, err
		}
		p.cert, p.key = cert, key
	case opts.Certificate != nil && opts.PrivateKey != nil:
		p.cert, p.key = opts.Certificate, opts.PrivateKey
	default:
		return nil, errors.New("starting opc-ua plc: Certificate and PrivateKey go together")
	}

	var err error
	p.host, p.port, err = resolveAddr(opts.Addr)
	if err != nil {
		return nil, err
	}
	inst, err := p.startInstance()
	if err != nil {
		return nil, err
	}
	p.inst = inst
	if opts.Tick > 0 {
		p.physics.Add(1)
		go p.runPhysics()
	}
	p.logger.Info("opc-ua plc listening", "url", p.URL(), "namespace", NamespaceURI)
	return p, nil
}

// resolveAddr splits addr, picking a free 127.0.0.1 port for an empty addr
// or port 0 (the gopcua server cannot listen on port 0 and tell the port).
func resolveAddr(addr string) (string, int, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("parsing address %q: %w", addr, err)
	}
	if host == "" {
		return "", 0, fmt.Errorf("parsing address %q: the host must be one clients can dial", addr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("parsing address %q: bad port", addr)
	}
	if port == 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", 0, fmt.Errorf("picking a free port on %s: %w", host, err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return "", 0, fmt.Errorf("picking a free port on %s: %w", host, err)
		}
	}
	return host, port, nil
}

// startInstance builds and starts a gopcua server on the PLC's address.
func (p *PLC) startInstance() (*instance, error) {
	opts := []server.Option{
		server.EndPoint(p.host, p.port),
		server.EnableSecurity("None", ua.MessageSecurityModeNone),
		server.EnableAuthMode(ua.UserTokenTypeAnonymous),
		server.Certificate(p.cert),
		server.PrivateKey(p.key),
		server.ServerName("Shadowgate OPC-UA PLC simulator"),
		server.ManufacturerName("Shadowgate"),
		server.ProductName("opcua-plc"),
	}
	if p.opts.Logger != nil {
		opts = append(opts, server.SetLogger(gopcuaLogger{p.opts.Logger.With("component", "gopcua")}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	inst := &instance{srv: server.New(opts...), ctx: ctx, cancel: cancel}
	inst.space = newSpace(p, inst.srv)
	// RegisterHandler keeps the first handler for a type and Start only
	// adds the defaults after, so this one replaces the server's Write.
	inst.srv.RegisterHandler(id.WriteRequest_Encoding_DefaultBinary,
		func(sc *uasc.SecureChannel, r ua.Request, reqID uint32) (ua.Response, error) {
			return p.handleWrite(inst, sc, r, reqID)
		})
	if err := inst.srv.Start(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("starting opc-ua server on %s: %w", net.JoinHostPort(p.host, strconv.Itoa(p.port)), err)
	}
	return inst, nil
}

// stopInstance stops a server and waits for what the PLC started for it.
func (p *PLC) stopInstance(inst *instance) {
	// The server's Close closes its listener, then waits (up to 10s) for
	// its connection goroutines, which only end when a client hangs up.
	// Hang up on the clients until it returns: a connection accepted just
	// before the listener closed is caught by a later pass.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = inst.srv.Close()
	}()
	t := time.NewTicker(20 * time.Millisecond)
	for done := false; !done; {
		dropConns(p.port)
		select {
		case <-closed:
			done = true
		case <-t.C:
		}
	}
	t.Stop()
	dropConns(p.port)

	// Subscription goroutines stop only when their subscription is
	// deleted; closing the server does not delete them.
	if ss := inst.srv.SubscriptionService; ss != nil {
		ss.Mu.Lock()
		ids := make([]uint32, 0, len(ss.Subs))
		for id := range ss.Subs {
			ids = append(ids, id)
		}
		ss.Mu.Unlock()
		for _, id := range ids {
			ss.DeleteSubscription(id)
		}
	}
	// Cancel only now: until the connection goroutines have ended, one may
	// be handing a message to the server's dispatcher, which reads it only
	// while the context is live (server/channel_broker.go:115 sends without
	// a select, so it would block forever).
	inst.mu.Lock()
	inst.stopped = true
	inst.mu.Unlock()
	inst.cancel()
	inst.sends.Wait()
}

// URL returns the endpoint URL, opc.tcp://host:port.
func (p *PLC) URL() string {
	return "opc.tcp://" + net.JoinHostPort(p.host, strconv.Itoa(p.port))
}

// Addr returns host:port.
func (p *PLC) Addr() string { return net.JoinHostPort(p.host, strconv.Itoa(p.port)) }

// Namespace returns [NamespaceURI].
func (p *PLC) Namespace() string { return NamespaceURI }

// NodeID returns the node id of a tag, "ns=1;s=<tag>".
func (p *PLC) NodeID(t Tag) string { return NodeID(t) }

// NodeID returns the node id of a tag, "ns=1;s=<tag>".
func NodeID(t Tag) string {
	return "ns=" + strconv.Itoa(NamespaceIndex) + ";s=" + string(t)
}

// CertificateDER returns the server certificate. The caller must not
// modify it.
func (p *PLC) CertificateDER() []byte { return p.cert }

// Thumbprint returns the SHA-256 of the server certificate's DER, in lower
// case hex.
func (p *PLC) Thumbprint() string {
	sum := sha256.Sum256(p.cert)
	return hex.EncodeToString(sum[:])
}

// Close stops the server and the physics and waits for every goroutine
// the PLC started. It also closes the client connections as far as the
// gopcua server does (see the package documentation). It is safe to call
// more than once; later calls return nil.
func (p *PLC) Close() error {
	p.smu.Lock()
	if p.closed {
		p.smu.Unlock()
		return nil
	}
	p.closed = true
	inst := p.inst
	p.inst = nil
	p.smu.Unlock()

	close(p.stop)
	p.physics.Wait()
	if inst != nil {
		p.stopInstance(inst)
	}
	p.logger.Info("opc-ua plc closed", "url", p.URL())
	return nil
}

// Restart plays a PLC reboot: it stops the server, closing its secure
// channels and dropping its sessions and subscriptions, and starts a new
// one on the same address. The tags keep their values and the physics
// keeps running. Clients must reconnect and create their sessions and
// subscriptions again. It returns ErrClosed after Close.
func (p *PLC) Restart() error {
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.inst != nil {
		p.stopInstance(p.inst)
		p.inst = nil
	}
	inst, err := p.startInstance()
	if err != nil {
		return fmt.Errorf("restarting: %w", err)
	}
	p.inst = inst
	p.logger.Info("opc-ua plc restarted", "url", p.URL())
	return nil
}

// notify tells subscribers of the current server that tags changed. It
// does nothing while the server is down (during Restart or after Close).
func (p *PLC) notify(tags ...Tag) {
	if len(tags) == 0 {
		return
	}
	p.smu.RLock()
	defer p.smu.RUnlock()
	if p.inst == nil {
		return
	}
	for _, t := range tags {
		p.inst.srv.ChangeNotification(ua.NewStringNodeID(p.inst.space.id, string(t)))
	}
}
