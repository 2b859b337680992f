package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// ErrClosed is returned by Listen and Run after Close.
var ErrClosed = errors.New("mqtt broker closed")

// Listen binds every configured listener (plain TCP, TLS, websocket) and
// hands them to the broker, which serves them once Run is called. After it
// returns nil, the ports accept connections: a client that connects before
// Run waits for its CONNACK until Run serves. If a listener cannot be bound,
// Listen releases the ones it bound and returns an error that names each
// listener that failed and its address. Listen binds once; a second call
// returns the first call's result. Run calls it if nobody did.
func (b *Broker) Listen() error {
	b.listenOnce.Do(func() { b.listenErr = b.bind() })
	return b.listenErr
}

// bound is one listener Listen bound.
type bound struct {
	kind    string // "tcp", "tls" or "ws"
	ln      net.Listener
	tracked *trackedListener // ln, or what it wraps
	served  listeners.Listener
}

func (b *Broker) bind() error {
	b.mu.Lock()
	closed := b.phase == phaseClosed
	b.mu.Unlock()
	if closed {
		return ErrClosed
	}
	var got []bound
	var errs []error
	try := func(kind, addr string, tc *tls.Config) {
		if addr == "" {
			return
		}
		raw, err := net.Listen("tcp", addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("mqtt %s listener on %s: %w", kind, addr, err))
			return
		}
		tl := track(raw)
		var ln net.Listener = tl
		if tc != nil {
			ln = tls.NewListener(tl, tc)
		}
		got = append(got, bound{kind: kind, ln: ln, tracked: tl})
	}
	try("tcp", b.opts.Listen, nil)
	try("tls", b.opts.TLSListen, b.opts.TLS)
	try("ws", b.opts.WebsocketListen, nil)
	if len(errs) > 0 {
		for _, l := range got {
			_ = l.ln.Close()
		}
		return errors.Join(errs...)
	}
	for i := range got {
		l := &got[i]
		if l.kind == "ws" {
			l.served = newWSListener(l.kind, l.ln, b.opts.Logger)
		} else {
			l.served = listeners.NewNet(l.kind, l.ln)
		}
		if err := b.srv.AddListener(l.served); err != nil {
			for _, rest := range got[i:] {
				_ = rest.ln.Close()
			}
			return fmt.Errorf("mqtt %s listener on %s: %w", l.kind, l.ln.Addr(), err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range got {
		b.addrs[l.kind] = l.ln.Addr().String()
		b.lns = append(b.lns, l.tracked)
		b.served = append(b.served, l.served)
	}
	if b.phase == phaseNew {
		b.phase = phaseListening
	}
	return nil
}

// Close releases what Listen bound, for a broker that will not serve
// (another part of the gateway failed to start). Listen and Run return
// ErrClosed after it. Once Run has started, Close does nothing: cancel
// Run's context to stop the broker.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.phase == phaseRunning || b.phase == phaseClosed {
		b.mu.Unlock()
		return nil
	}
	b.phase = phaseClosed
	b.mu.Unlock()
	b.listenOnce.Do(func() { b.listenErr = ErrClosed })
	return b.srv.Close() // closes the listeners mochi holds
}

// shutdown stops serving: no new connection, every connection closed,
// then the server closed once every connection's goroutine has ended.
//
// mochi's Close alone is not enough. It lists each listener's clients
// holding the clients' read lock and takes it a second time inside; a
// client being deleted in between queues for the write lock and both wait
// forever. And it disconnects only clients that sent CONNECT, politely: a
// connection that never sent one, or a client that stopped reading (its
// writer stuck in a write, holding the client's lock), would keep it
// waiting for ever. So the listeners are stopped and taken out of mochi
// here, and every connection they accepted is closed under it.
func (b *Broker) shutdown() error {
	b.mu.Lock()
	tracked, served := b.lns, b.served
	kinds := make([]string, 0, len(b.addrs))
	for kind := range b.addrs {
		kinds = append(kinds, kind)
	}
	b.mu.Unlock()
	for _, ml := range served {
		ml.Close(func(string) {}) // stop accepting; the clients go below
	}
	for _, kind := range kinds {
		b.srv.Listeners.Delete(kind)
	}
	for _, tl := range tracked {
		tl.closeAll()
	}
	return b.srv.Close() // waits for every connection's goroutine
}

// trackedListener is a listener that keeps the connections it accepted,
// so that a stop can close every one of them, and takes no more once it
// is closed.
type trackedListener struct {
	net.Listener
	// mu guards conns and closed.
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func track(ln net.Listener) *trackedListener {
	return &trackedListener{Listener: ln, conns: map[*trackedConn]struct{}{}}
}

// Accept returns the next connection, kept until it is closed.
func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// closeAll closes the listener and every connection it accepted.
func (l *trackedListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	_ = l.Listener.Close()
	for _, c := range conns {
		_ = c.Close()
	}
}

// trackedConn is a connection its listener forgets once it is closed.
type trackedConn struct {
	net.Conn
	l    *trackedListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		defer c.l.mu.Unlock()
		delete(c.l.conns, c)
	})
	return err
}

// The phases of a broker, guarded by Broker.mu.
const (
	phaseNew = iota
	phaseListening
	phaseRunning
	phaseClosed
)

// wsListener serves MQTT over websockets on a listener that Listen bound.
// (mochi's own websocket listener binds only when it starts serving, too
// late to report a port that is taken.) Each connection is a websocket
// with the "mqtt" subprotocol that carries MQTT packets in binary
// messages.
type wsListener struct {
	id  string
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
	up  websocket.Upgrader

	// establish is set by Serve before the server accepts a connection.
	establish listeners.EstablishFn
}

func newWSListener(id string, ln net.Listener, log *slog.Logger) *wsListener {
	l := &wsListener{id: id, ln: ln, log: log, up: websocket.Upgrader{
		Subprotocols: []string{"mqtt"},
		// A websocket client authenticates like any other MQTT client; a
		// browser's origin says nothing about who it is.
		CheckOrigin: func(*http.Request) bool { return true },
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("/", l.handle)
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return l
}

func (l *wsListener) ID() string       { return l.id }
func (l *wsListener) Address() string  { return l.ln.Addr().String() }
func (l *wsListener) Protocol() string { return "ws" }

// Init does nothing: Listen bound the port already.
func (l *wsListener) Init(*slog.Logger) error { return nil }

// Serve accepts websocket connections until Close.
func (l *wsListener) Serve(establish listeners.EstablishFn) {
	l.establish = establish
	if err := l.srv.Serve(l.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		l.log.Error("mqtt websocket listener stopped", "address", l.Address(), "error", err)
	}
}

// Close stops accepting connections and closes the clients of this
// listener.
func (l *wsListener) Close(closeClients listeners.CloseFn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
	_ = l.ln.Close() // Shutdown closes it only if Serve ran
	closeClients(l.id)
}

func (l *wsListener) handle(w http.ResponseWriter, r *http.Request) {
	c, err := l.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	defer c.Close()
	if err := l.establish(l.id, &wsConn{Conn: c.NetConn(), ws: c}); err != nil {
		l.log.Debug("mqtt websocket client ended", "remote", r.RemoteAddr, "error", err)
	}
}

// wsConn is a websocket as the byte stream MQTT reads and writes: the
// payloads of binary messages, one after another. Addresses and deadlines
// are those of the connection below.
type wsConn struct {
	net.Conn
	ws *websocket.Conn
	r  io.Reader // the rest of the message being read

	// wmu makes each Write one message, whoever writes.
	wmu sync.Mutex
}

// errTextFrame is returned by Read for a text message, which MQTT over
// websockets does not allow.
var errTextFrame = errors.New("a websocket text message; MQTT travels in binary messages")

func (c *wsConn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			typ, r, err := c.ws.NextReader()
			if err != nil {
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				return 0, errTextFrame
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil
			if n == 0 && len(p) > 0 {
				continue // an empty message, or the end of one: read on
			}
			err = nil
		}
		return n, err
	}
}

func (c *wsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *wsConn) Close() error { return c.ws.Close() }
