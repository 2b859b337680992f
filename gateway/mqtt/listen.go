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
	"github.com/mochi-mqtt/server/v2/packets"
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
	kind string // "tcp", "tls" or "ws"
	ln   net.Listener
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
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("mqtt %s listener on %s: %w", kind, addr, err))
			return
		}
		if tc != nil {
			ln = tls.NewListener(ln, tc)
		}
		got = append(got, bound{kind: kind, ln: ln})
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
	for i, l := range got {
		var ml listeners.Listener
		if l.kind == "ws" {
			ml = newWSListener(l.kind, l.ln, b.opts.Logger)
		} else {
			ml = listeners.NewNet(l.kind, l.ln)
		}
		if err := b.srv.AddListener(ml); err != nil {
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
		b.lns = append(b.lns, l.ln)
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

// shutdown stops serving: no new connection, every client disconnected,
// then the server closed.
//
// mochi's Close lists each listener's clients while holding the clients'
// read lock and takes it a second time inside; a client going away in
// between asks for the write lock, and both wait forever: the gateway
// never stops. So the listeners are closed and taken from mochi here
// (its Close then lists no clients by listener), and the clients are
// disconnected by this loop until Close has waited for the last one.
func (b *Broker) shutdown() error {
	b.mu.Lock()
	lns := b.lns
	kinds := make([]string, 0, len(b.addrs))
	for kind := range b.addrs {
		kinds = append(kinds, kind)
	}
	b.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close()
	}
	for _, kind := range kinds {
		b.srv.Listeners.Delete(kind)
	}
	stop := make(chan struct{})
	var drain sync.WaitGroup
	drain.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			// Again on every tick: a connection accepted just before its
			// listener closed joins late.
			for _, cl := range b.srv.Clients.GetAll() {
				if !cl.Closed() {
					_ = b.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
				}
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	err := b.srv.Close() // waits for every client's goroutine
	close(stop)
	drain.Wait()
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
