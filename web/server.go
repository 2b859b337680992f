// Package web is the gateway's HTTP surface, built on echo: the JSON API
// under /api/v1, server-sent events, /healthz, /readyz, /metrics, and the
// console, a few server-rendered pages with a little plain JavaScript for
// live updates, all embedded in the binary.
//
// Everyone logs in. People use a session cookie (HttpOnly, SameSite=Strict,
// with an expiry) and every cookie-authenticated POST carries a CSRF token;
// API clients use bearer tokens from the configuration, stored hashed.
// Roles: a viewer reads, an operator commands and acknowledges alarms (with
// a comment), an approver answers approvals, an admin also changes rules,
// resolves unknown actuations and shelves alarms. Every page's header
// counts the alarms that stand (unacknowledged, active; shelved ones
// apart), kept current from the event stream.
// Errors are JSON {"error", "detail"} with the status that fits. The
// detail of a client's mistake says what it got wrong; a failure that is
// not its doing (the journal cannot be read, say) never shows the error's
// text: the detail is a public message, and "error_id" names the log line
// that has the detail. Console pages show the same message and id.
//
// /readyz says whether the gateway can do its work, with each driver's
// link state; the Devices page shows the links too.
//
// Every number a client sends (a sequence, a count, a duration) is checked
// where it enters against its range, and a redirect after login stays on
// this site. Wrong passwords and wrong bearer tokens count against their
// address in one limiter: five lock it out for a minute (429), and the
// journal gets one summary per address and minute, not one event a guess.
package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
)

// SessionStore keeps console sessions.
type SessionStore interface {
	Put(cookie string, s store.Session) error
	Get(cookie string, now time.Time) (store.Session, bool, error)
	Delete(cookie string) error
	Prune(now time.Time) (int, error)
}

// Token is an API client's bearer token, stored as the SHA-256 of the token.
type Token struct {
	Name string
	Role access.Role
	// Hash is the SHA-256 of the token, in hex.
	Hash string
}

// Options configure the server. The zero value of each field means its
// default.
type Options struct {
	// Listen is the address; Listener, if set, is used instead (tests).
	Listen   string
	Listener net.Listener
	TLS      *tls.Config
	Users    *access.Users
	Tokens   []Token
	Sessions SessionStore
	// SessionTTL is how long a login lasts. Default 12h.
	SessionTTL time.Duration
	// MaxRuleTTL is the longest rule_for an answer may ask; it should be
	// the engine's MaxRuleTTL. Default 24h, the engine's default.
	MaxRuleTTL time.Duration
	// Verify checks the journal's chain; nil means it cannot be checked.
	Verify func(context.Context) (store.Report, error)
	// Backup writes a consistent copy of the journal file; nil means none
	// can be taken.
	Backup func(w io.Writer) (int64, error)
	// Stats, if set, are shown on the overview and as metrics.
	MQTTStats   func() MQTTStats
	UplinkStats func() UplinkStats
	Metrics     *Metrics
	Logger      *slog.Logger
	Now         func() time.Time
	// MCP, if set, serves the MCP endpoint for AI agents (see MCPOptions).
	MCP *MCPOptions
}

// MQTTStats and UplinkStats are what the console shows of the other surfaces.
type MQTTStats struct {
	Clients, DeniedPublishes, FailedLogins int64
}

// UplinkStats describe the link upstream.
type UplinkStats struct {
	Connected      bool
	Backlog        int
	BacklogBytes   int64
	Dropped, Sent  int64
	Configured     bool
	Broker         string
	IgnoredRetains int64
}

// Server is the HTTP surface.
type Server struct {
	opts Options
	eng  *runtime.Engine
	// backingUp is held while a journal backup is streamed.
	backingUp sync.Mutex
	e         *echo.Echo
	log       *slog.Logger
	limiter   *access.Limiter
	pages     *pages

	// mu guards bye, ln, serving, closed and ends.
	mu      sync.Mutex
	bye     chan struct{} // closed at shutdown, to end event streams
	ln      net.Listener  // bound by Listen
	serving bool          // Run has taken ln
	closed  bool          // Close released ln before Run
	// ends has, by session cookie, a channel for each event stream of
	// that session: logging out closes them, and the streams end.
	ends map[string]map[chan struct{}]struct{}

	// health is the drivers' link state, asked at most once a second.
	health healthCache
	// witness is the engine's health in public words.
	witness healthNote
	// hist is the last hour of readings, for the sparklines.
	hist history
}

// New builds the server and its routes.
func New(eng *runtime.Engine, opts Options) (*Server, error) {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.MaxRuleTTL <= 0 {
		opts.MaxRuleTTL = 24 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Users == nil {
		opts.Users, _ = access.NewUsers(nil)
	}
	if opts.Sessions == nil {
		return nil, errors.New("the web server needs a session store")
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	pg, err := loadPages()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, eng: eng, log: opts.Logger, limiter: access.NewLimiter(opts.Logger, opts.Now),
		pages: pg, bye: make(chan struct{}), ends: map[string]map[chan struct{}]struct{}{}}
	s.limiter.Summarize = s.noteFailures
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = echo.ExtractIPDirect() // no proxy in front: the peer is the client
	e.HTTPErrorHandler = s.errorHandler
	e.Server.ReadHeaderTimeout = 10 * time.Second
	e.Server.RegisterOnShutdown(s.closeStreams)
	e.Use(middleware.Recover())
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection: "0", ContentTypeNosniff: "nosniff", XFrameOptions: "DENY",
		ContentSecurityPolicy: "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'",
		ReferrerPolicy:        "no-referrer", HSTSMaxAge: 31536000,
	}))
	e.Use(middleware.BodyLimit("64K"))
	// Pages, assets and API answers are compressed for a client that
	// accepts gzip (a phone on a weak link); the event stream never is,
	// since each event must leave when it is written.
	e.Use(middleware.GzipWithConfig(middleware.GzipConfig{MinLength: 1024, Skipper: isStream}))
	s.e = e
	s.routes()
	if err := s.mountMCP(); err != nil {
		return nil, err
	}
	opts.Metrics.watch(eng, opts.MQTTStats, opts.UplinkStats, opts.Now)
	return s, nil
}

// streamPath is the route of the server-sent event stream.
const streamPath = "/api/v1/events/stream"

// isStream reports whether c is a request for the event stream, which is
// never compressed.
func isStream(c echo.Context) bool {
	return c.Path() == streamPath || strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/event-stream")
}

// Handler returns the server's handler, for tests.
func (s *Server) Handler() http.Handler { return s.e }

// Listen binds the console's address, or takes Options.Listener, so that a
// port in use is an error before anything is served; the error names the
// address ("console: listen tcp 127.0.0.1:8080: bind: address already in
// use"). Run serves on what Listen bound, and binds by itself when Listen
// was not called. A second call does nothing.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("console: the server is closed")
	case s.ln != nil:
		return nil
	}
	ln := s.opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.opts.Listen); err != nil {
			return fmt.Errorf("console: %w", err)
		}
	}
	if s.opts.TLS != nil {
		ln = tls.NewListener(ln, withHTTP2(s.opts.TLS))
	}
	s.ln = ln
	return nil
}

// withHTTP2 returns a copy of cfg that offers HTTP/2 first. http.Server
// speaks HTTP/2 on a TLS listener of its own making, not on one it is
// given, unless the listener's ALPN offers "h2". Over HTTP/2 every console
// page's event stream shares one connection; over HTTP/1.1 a browser
// keeps six a host, and a seventh tab waits.
func withHTTP2(cfg *tls.Config) *tls.Config {
	cfg = cfg.Clone()
	if !slices.Contains(cfg.NextProtos, "h2") {
		cfg.NextProtos = append([]string{"h2"}, cfg.NextProtos...)
	}
	if !slices.Contains(cfg.NextProtos, "http/1.1") {
		cfg.NextProtos = append(cfg.NextProtos, "http/1.1")
	}
	return cfg
}

// Addr returns the address the console is bound to, or "" before Listen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close releases the listener of a server that Listen bound and Run never
// served, and makes later calls of Listen and Run fail. Once Run has
// started, Run owns the listener and Close does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.serving {
		return nil
	}
	s.closed = true
	if s.ln == nil {
		return nil
	}
	err := s.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Run serves until ctx is done, then shuts down, ending event streams. It
// binds first if Listen was not called.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	ln, closed := s.ln, s.closed
	s.serving = true
	s.mu.Unlock()
	if closed {
		return errors.New("console: the server is closed")
	}
	s.log.Info("console serving", "address", ln.Addr().String(), "tls", s.opts.TLS != nil)
	done := make(chan error, 1)
	go func() { // owned by Run, which waits for done
		err := s.e.Server.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	pruned := time.NewTicker(time.Hour)
	defer pruned.Stop()
	flush := time.NewTicker(10 * time.Second) // the last summary of failed logins is late by at most this
	defer flush.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-flush.C:
			s.limiter.Flush()
			continue
		case <-pruned.C:
			if _, err := s.opts.Sessions.Prune(s.opts.Now()); err != nil {
				s.log.Warn("sessions not pruned", "error", err)
			}
			continue
		case <-ctx.Done():
		}
		break
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.e.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A connection that never sent a request (a browser opens spare
		// ones) counts as idle only after 5 s, and a request may still be
		// running: they are cut, and the stop is clean all the same.
		s.log.Warn("console connections cut at the stop", "after", "5s")
		err = s.e.Server.Close()
	}
	if err2 := <-done; err == nil {
		err = err2
	}
	return err
}

func (s *Server) closeStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.bye:
	default:
		close(s.bye)
	}
}

// apiError is the JSON body of every error. Detail is public: what the
// client got wrong, or, for a failure that is not its doing, a message
// that quotes no internal error, with ErrorID naming the log line that
// has the detail.
type apiError struct {
	Error   string `json:"error"`
	Detail  string `json:"detail,omitempty"`
	ErrorID string `json:"error_id,omitempty"`
}

// problem returns an error with a status and a detail for the client.
func problem(status int, detail string) error {
	return echo.NewHTTPError(status, detail)
}

// internal returns the error for a failure that is not the client's
// doing: err goes to the log with a new error id, and the client gets
// the status, public and that id. public must not quote err.
func (s *Server) internal(c echo.Context, status int, public string, err error) error {
	return &echo.HTTPError{Code: status, Message: command.Internal(s.log, public, err, "method", c.Request().Method, "path", c.Path())}
}

// public returns what a client may read of err: the status, the detail,
// and the error id of a failure that is not its doing. Errors from
// problem are public by design; anything else with a status of 500 or
// more is logged with an id, and the client gets only the id and words
// of ours, never the error's text.
func (s *Server) public(c echo.Context, err error) (status int, detail, errorID string) {
	var he *echo.HTTPError
	if !errors.As(err, &he) {
		pe := command.Internal(s.log, "internal error", err, "method", c.Request().Method, "path", c.Path())
		return http.StatusInternalServerError, pe.Message, pe.ID
	}
	status, detail = he.Code, http.StatusText(he.Code)
	var hidden error // the text the client must not see
	switch m := he.Message.(type) {
	case *command.PublicError:
		return status, m.Message, m.ID
	case string:
		detail = m
	case error:
		detail, hidden = m.Error(), m
	}
	if status < http.StatusInternalServerError {
		return status, detail, ""
	}
	if hidden != nil {
		detail = "internal error"
	}
	cause := he.Internal
	if cause == nil {
		cause = he
	}
	pe := command.Internal(s.log, detail, cause, "method", c.Request().Method, "path", c.Path())
	return status, pe.Message, pe.ID
}

func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, detail, errorID := s.public(c, err)
	if isPage(c) && status == http.StatusUnauthorized {
		if c.QueryParam("fragment") == "1" {
			// A page's live update: the page, not the update, goes to
			// the login, so the login is never drawn inside a page.
			_ = c.String(http.StatusUnauthorized, "session ended; log in again")
			return
		}
		_ = c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(safeNext(c.Request().URL.RequestURI())))
		return
	}
	detail = clipDetail(detail)
	body := apiError{Error: http.StatusText(status), Detail: detail, ErrorID: errorID}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	if isPage(c) {
		d := pageData{Title: body.Error, Error: detail, ErrorID: errorID, User: userOf(c)}
		if d.User != nil {
			d.Alarms, d.Status = s.alarmCounts(), s.status(c.Request().Context(), "error")
		}
		_ = s.pages.render(c, status, "error", d)
		return
	}
	_ = c.JSON(status, body)
}
