package mqtt

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
)

// Options configure the broker. The zero value of each field means its
// default.
type Options struct {
	// Prefix is the gateway's topic prefix, ending in "/":
	// "shadowgate/<gateway-id>/".
	Prefix string
	// Listen is the plain TCP address; empty means no plain listener.
	Listen string
	// TLSListen with TLS serves MQTT over TLS.
	TLSListen string
	TLS       *tls.Config
	// WebsocketListen serves MQTT over websockets.
	WebsocketListen string
	// MaxClients caps connected clients. Default 100.
	MaxClients int
	// MaxPayload bounds a command payload. Default 64 KiB.
	MaxPayload int
	// MaxQueued bounds the messages waiting to be written to one client;
	// past it, messages to that client are dropped. Default 8192, mochi's:
	// a queue of 1024 dropped 3 to 7% of a four-publisher QoS 0 flood to
	// one subscriber. Each queue costs up to 64 KiB once reconnects reuse
	// its memory, 6.4 MiB at the default max_clients of 100; a gateway
	// with many more clients may set it lower.
	MaxQueued int
	// Users may connect; Anonymous, if set, is the role a client without a
	// username gets. Nil refuses anonymous clients.
	Users     *access.Users
	Anonymous *access.Role
	// CommandsPerMinute and CommandBurst bound each principal's commands.
	// Defaults 60 and 20.
	CommandsPerMinute, CommandBurst int
	// CommandTimeout bounds one command's governed step. Default 30s.
	CommandTimeout time.Duration
	Logger         *slog.Logger
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// HomeAssistant, if set, announces every capability to Home Assistant
	// by MQTT discovery. Nil announces nothing.
	HomeAssistant *HomeAssistant
	// HomeAssistantRecord is the file where the broker lists the discovery
	// topics it announced, so that a later start removes the entities of
	// devices that are gone, and all of them once HomeAssistant is nil.
	// Empty keeps no record.
	HomeAssistantRecord string
}

func (o *Options) setDefaults() {
	if o.MaxClients <= 0 {
		o.MaxClients = 100
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = 64 << 10
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = 8192
	}
	if o.CommandsPerMinute <= 0 {
		o.CommandsPerMinute = 60
	}
	if o.CommandBurst <= 0 {
		o.CommandBurst = 20
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Stats count what the broker refused and did.
type Stats struct {
	Clients         int64
	DeniedPublishes int64
	DeniedSubscribe int64
	FailedLogins    int64
	// RefusedConnects counts clients that gave the right password but were
	// refused: a will the ACL does not allow, or another user's client id.
	RefusedConnects int64
	Commands        int64
	RateLimited     int64
}

// Broker is the embedded MQTT broker with the gateway's auth, ACL and
// command topics. Every command is a governed run of the engine.
type Broker struct {
	opts    Options
	eng     *runtime.Engine
	srv     *mochi.Server
	replier *mochi.Client // publishes replies that carry v5 properties
	log     *slog.Logger
	disp    *command.Dispatcher
	limiter *access.Limiter
	rate    *rates

	// haActuators are the actuators announced to Home Assistant, by
	// "device/capability"; haSaid bounds, per principal, the commands not
	// taken that are said on their outcome topics. Both are set by New.
	haActuators map[string]bool
	haSaid      *rates

	// defPub and defSub are the filters of a user who lists none (defPub
	// for an operator or above), and anon the anonymous user, or nil: set
	// by New, so that the ACL check of every publish and delivery
	// allocates nothing.
	defPub, defSub []string
	anon           *access.User

	deniedPub, deniedSub, failedLogins, refusedConnects, commands, rateLimited atomic.Int64

	// offline is the stop's watch on the sending of "offline", while it
	// waits for it; nil otherwise.
	offline atomic.Pointer[offlineWatch]

	// followed is the sequence of the last event the journal's follower
	// published, so that a stop can wait for it to catch up.
	followed atomic.Uint64

	// sessions binds client ids to the users that hold them.
	sessions sessions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// parked are the runs of MQTT commands restored waiting for approval.
	parked []runtime.RunRecord

	// listenOnce makes Listen bind once; listenErr is its result.
	listenOnce sync.Once
	listenErr  error

	// mu guards addrs, lns, served, phase and stopping.
	mu       sync.Mutex
	addrs    map[string]string
	lns      []*trackedListener   // what Listen bound, and the connections they took
	served   []listeners.Listener // the same, as mochi serves them
	phase    int                  // phaseNew, phaseListening, phaseRunning or phaseClosed
	stopping bool
}

// spawn runs fn in a goroutine the broker waits for, unless it is stopping.
func (b *Broker) spawn(fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopping {
		return
	}
	b.wg.Go(fn)
}

// New builds the broker without binding a port: Listen binds its
// listeners and Run serves.
func New(eng *runtime.Engine, opts Options) (*Broker, error) {
	opts.setDefaults()
	if !strings.HasSuffix(opts.Prefix, "/") || strings.ContainsAny(opts.Prefix, "#+") {
		return nil, fmt.Errorf("topic prefix %q must end in / and hold no wildcard", opts.Prefix)
	}
	if opts.Users == nil {
		opts.Users, _ = access.NewUsers(nil)
	}
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumMessageExpiryInterval = 0 // retained state never expires
	caps.MaximumClients = int64(opts.MaxClients)
	caps.MaximumClientWritesPending = int32(min(opts.MaxQueued, 1<<20))
	// A packet may carry a command of MaxPayload with room for its topic
	// and properties; larger ones are refused by the broker itself.
	caps.MaximumPacketSize = uint32(opts.MaxPayload + 64<<10)
	b := &Broker{opts: opts, eng: eng, log: opts.Logger, addrs: map[string]string{}, parked: eng.Parked("mqtt"),
		sessions: sessions{claims: map[string]claim{}},
		limiter:  access.NewLimiter(opts.Logger, opts.Now), rate: newRates(opts.CommandsPerMinute, opts.CommandBurst, opts.Now)}
	b.limiter.Summarize = b.noteFailures
	b.defPub = []string{opts.Prefix + "cmd/#", opts.Prefix + "run/#"}
	b.defSub = []string{opts.Prefix + "#"}
	if opts.Anonymous != nil {
		b.anon = &access.User{Name: "anonymous", Role: *opts.Anonymous}
	}
	if ha := opts.HomeAssistant; ha != nil {
		b.haActuators = map[string]bool{}
		b.haSaid = newRates(opts.CommandsPerMinute, opts.CommandBurst, opts.Now)
		for _, d := range ha.Devices {
			for _, c := range d.Capabilities {
				if c.Kind == devices.KindActuator {
					b.haActuators[d.ID+"/"+c.Name] = true
				}
			}
		}
	}
	b.disp = &command.Dispatcher{Engine: eng, Origin: "mqtt", Log: opts.Logger,
		Spawn: func(fn func(context.Context)) { b.spawn(func() { fn(b.ctx) }) }}
	b.srv = mochi.New(&mochi.Options{
		Capabilities: caps, InlineClient: true, SysTopicResendInterval: 30,
		// mochi warns about every dropped connection and refused login
		// (which the hook already logs, rate-limited); only its errors
		// are worth an operator's attention.
		Logger: slog.New(minLevel{opts.Logger.Handler(), slog.LevelError}).With("part", "mochi"),
	})
	b.replier = b.srv.NewClient(nil, mochi.LocalListener, replierID, true)
	b.replier.Properties.ProtocolVersion = 5
	if err := b.srv.AddHook(&hook{b: b}, nil); err != nil {
		return nil, fmt.Errorf("adding the broker hook: %w", err)
	}
	if opts.TLSListen != "" && opts.TLS == nil {
		return nil, errors.New("mqtt tls listener without a certificate")
	}
	return b, nil
}

// Addr returns the bound address of a listener, "tcp", "tls" or "ws",
// once Listen has bound it, or "".
func (b *Broker) Addr(kind string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addrs[kind]
}

// Run serves until ctx is done, then closes every client and the
// listeners, and waits for the broker's goroutines. It calls Listen if
// nobody did, and returns its error. It publishes the retained state,
// pending approvals and standing alarms first, then follows the journal.
// Run may be called once.
func (b *Broker) Run(ctx context.Context) error {
	if err := b.Listen(); err != nil {
		return err
	}
	b.mu.Lock()
	phase := b.phase
	if phase == phaseListening {
		b.phase = phaseRunning
	}
	b.mu.Unlock()
	switch phase {
	case phaseClosed:
		return ErrClosed
	case phaseRunning:
		return errors.New("mqtt broker already running")
	}
	b.ctx, b.cancel = context.WithCancel(ctx)
	defer b.cancel()
	since := b.eng.RestoredSeq()
	fold := command.NewFold(b.eng)
	b.publishInitial(b.ctx, fold)
	ha := b.startHA(since)
	// The birth message: the gateway serves. It says offline as it stops.
	if err := b.srv.Publish(b.opts.Prefix+TopicStatus, []byte("online"), true, 1); err != nil {
		b.log.Warn("mqtt publish failed", "topic", TopicStatus, "error", err)
	}
	if err := b.srv.Serve(); err != nil {
		return fmt.Errorf("serving mqtt: %w", err)
	}
	b.log.Info("mqtt broker serving", "tcp", b.Addr("tcp"), "tls", b.Addr("tls"), "ws", b.Addr("ws"), "prefix", b.opts.Prefix)
	// The follower outlives the broker's context by the catch-up below.
	followCtx, stopFollow := context.WithCancel(context.WithoutCancel(b.ctx))
	defer stopFollow()
	b.followed.Store(since)
	b.spawn(func() { b.follow(followCtx, fold, ha, since) })
	b.spawn(func() { b.flushFailures(b.ctx) })
	b.answerParked()
	<-b.ctx.Done()
	// What the journal says last (the drives to safe of a stop) is
	// published before the offline: the retained state of an actuator
	// driven off must not say ON while the gateway is away.
	b.catchUp(followCatchUp)
	stopFollow()
	// Subscribers still connected hear it before they are closed; the
	// retained message says so to whoever bridges this broker.
	b.sayOffline()
	err := b.shutdown()
	b.mu.Lock()
	b.stopping = true
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

// followCatchUp bounds a stop's wait for the follower.
const followCatchUp = 2 * time.Second

// catchUp waits, up to max, until the follower has published every
// event the journal held when it was called.
func (b *Broker) catchUp(max time.Duration) {
	target := b.eng.LastSeq()
	deadline := time.Now().Add(max)
	for b.followed.Load() < target {
		if time.Now().After(deadline) {
			b.log.Warn("mqtt stops before publishing the journal's last events", "published", b.followed.Load(), "last", target)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// flushFailures journals the summaries of failed logins that are due, so
// that the last one of a flood is late by at most its interval. It runs in
// b.wg until ctx ends.
func (b *Broker) flushFailures(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.limiter.Flush()
			return
		case <-t.C:
			b.limiter.Flush()
		}
	}
}

// noteFailures journals one summary of failed logins: one event per
// address per window, never one per guess, and never a password.
func (b *Broker) noteFailures(sum access.Summary) {
	// Its own context: the connection that closed the window may be gone.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.eng.Note(ctx, runtime.KindLogin, "", command.LoginFailures(sum)); err != nil {
		b.log.Warn("failed logins not journaled", "remote", sum.Remote, "failures", sum.Failures, "error", err)
	}
}

// Stats returns the counters.
func (b *Broker) Stats() Stats {
	return Stats{
		Clients:         b.srv.Info.ClientsConnected,
		DeniedPublishes: b.deniedPub.Load(),
		DeniedSubscribe: b.deniedSub.Load(),
		FailedLogins:    b.failedLogins.Load(),
		RefusedConnects: b.refusedConnects.Load(),
		Commands:        b.commands.Load(),
		RateLimited:     b.rateLimited.Load(),
	}
}

// hook is the broker's auth, ACL and command hook.
type hook struct {
	mochi.HookBase
	b *Broker
	// admitted holds the clients OnConnect let in, for OnConnectAuthenticate.
	admitted sync.Map // *mochi.Client -> struct{}
	retain   retainOrder
}

func (h *hook) ID() string { return "shadowgate" }

func (h *hook) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnConnect, mochi.OnConnectAuthenticate, mochi.OnSessionEstablished,
		mochi.OnACLCheck, mochi.OnPublish, mochi.OnPacketSent, mochi.OnPacketRead,
		mochi.OnWill, mochi.OnRetainMessage, mochi.OnPacketProcessed}, []byte{b})
}

// clientUser is who a connected client is: its user, or the anonymous role.
func (b *Broker) clientUser(cl *mochi.Client) (*access.User, bool) {
	return b.userNamed(string(cl.Properties.Username))
}

// userNamed returns a configured user, or the anonymous one for "".
func (b *Broker) userNamed(name string) (*access.User, bool) {
	if name == "" {
		return b.anon, b.anon != nil
	}
	return b.opts.Users.Lookup(name)
}

// OnConnect decides whether a client may connect, and refuses it with the
// CONNACK code that says why: wrong credentials, a will the client may not
// leave, or a client id that holds another user's session. It runs before
// OnConnectAuthenticate, which only confirms what OnConnect decided.
func (h *hook) OnConnect(cl *mochi.Client, pk packets.Packet) error {
	code := h.b.admit(cl, pk)
	if code != packets.CodeSuccess {
		_ = h.b.srv.SendConnack(cl, connackCode(cl, code), false, nil)
		return code
	}
	h.admitted.Store(cl, struct{}{})
	return nil
}

func (h *hook) OnConnectAuthenticate(cl *mochi.Client, _ packets.Packet) bool {
	_, ok := h.admitted.LoadAndDelete(cl)
	return ok
}

// OnSessionEstablished releases the claim on the client id: the broker
// now holds the session itself, under the same user.
func (h *hook) OnSessionEstablished(cl *mochi.Client, _ packets.Packet) {
	h.b.sessions.settled(cl.ID, string(cl.Properties.Username))
}

// authenticate checks a CONNECT's credentials and returns its user.
func (b *Broker) authenticate(cl *mochi.Client, pk packets.Packet) (*access.User, bool) {
	addr := cl.Net.Remote
	name := string(pk.Connect.Username)
	if b.limiter.Blocked(addr) {
		b.failedLogins.Add(1)
		b.limiter.Failed("mqtt", addr, name, "too many failures from this address; waiting")
		return nil, false
	}
	if name == "" && len(pk.Connect.Password) == 0 {
		if b.opts.Anonymous != nil {
			return b.userNamed("")
		}
		b.failedLogins.Add(1)
		b.limiter.Failed("mqtt", addr, "", "anonymous clients are refused")
		return nil, false
	}
	// Remembered for a while after bcrypt accepts it: MQTT clients
	// reconnect often, sometimes all at once, and a wrong password still
	// costs bcrypt.
	u, ok := b.opts.Users.CheckCached(name, pk.Connect.Password)
	if !ok {
		b.failedLogins.Add(1)
		b.limiter.Failed("mqtt", addr, name, "wrong user or password")
		return nil, false
	}
	b.limiter.Succeeded(addr)
	return u, true
}

// defaultPublish and defaultSubscribe are the filters of a user who lists none.
func (b *Broker) defaultPublish(r access.Role) []string {
	if !r.AtLeast(access.Operator) {
		return nil
	}
	return b.defPub
}

func (b *Broker) defaultSubscribe() []string { return b.defSub }

// allowed reports whether the client may publish to a topic (write) or
// subscribe to a filter.
func (b *Broker) allowed(cl *mochi.Client, topic string, write bool) bool {
	u, ok := b.clientUser(cl)
	if !ok {
		return false
	}
	return b.userMay(u, topic, write)
}

// userMay reports whether a user may publish to a topic (write) or
// subscribe to a filter.
func (b *Broker) userMay(u *access.User, topic string, write bool) bool {
	if write {
		if rel, under := strings.CutPrefix(topic, b.opts.Prefix); under && command.IsOutput(rel) {
			return false // only the gateway speaks here
		}
		if b.haOwned(topic) {
			return false // a forged config could point Home Assistant past the judge
		}
		if !u.Role.AtLeast(access.Operator) {
			return false
		}
		filters := u.Publish
		if filters == nil {
			filters = b.defaultPublish(u.Role)
		}
		for _, f := range filters {
			if Matches(f, topic) {
				return true
			}
		}
		return false
	}
	filters := u.Subscribe
	if filters == nil {
		filters = b.defaultSubscribe()
	}
	for _, f := range filters {
		if Covers(f, topic) {
			return true
		}
	}
	return false
}

func (h *hook) OnACLCheck(cl *mochi.Client, topic string, write bool) bool {
	if cl.Net.Inline {
		return true
	}
	ok := h.b.allowed(cl, topic, write)
	if !ok {
		if write {
			h.b.deniedPub.Add(1)
		} else {
			h.b.deniedSub.Add(1)
		}
		h.b.log.Debug("mqtt acl denied", "client", cl.ID, "user", string(cl.Properties.Username), "topic", topic, "write", write)
	}
	return ok
}

// OnPublish takes the command topics: each publish there is a governed
// run, answered with a reply, and never delivered to subscribers.
func (h *hook) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	out, err := h.onPublish(cl, pk)
	h.retain.retaining(cl, err == nil && out.FixedHeader.Retain && !out.Ignore, h.retainAvailable())
	return out, err
}

func (h *hook) onPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	b := h.b
	if cl.Net.Inline {
		return pk, nil
	}
	rel, under := strings.CutPrefix(pk.TopicName, b.opts.Prefix)
	if !under {
		return pk, nil // an ordinary topic the ACL allowed
	}
	b.handle(cl, pk, rel)
	return pk, packets.CodeSuccessIgnore
}

// minLevel is a slog handler that drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
