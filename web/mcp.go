package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/runtime"
)

// MCPPath is where the MCP endpoint is served, on the console's port.
const MCPPath = "/mcp"

// MCPOptions turn on the MCP endpoint, [MCPPath]: the Model Context
// Protocol over streamable HTTP, for AI agents. An agent calls tools that
// run through the same code as the API: every read and write is a step
// the engine judges and journals, as the principal "mcp:<token name>".
// An agent never answers an approval, changes the mode or makes a rule.
type MCPOptions struct {
	// Tokens names the API tokens (Options.Tokens) an agent may use; any
	// other token is refused with 403. A viewer token lists, reads and
	// follows; an operator token also requests writes and starts plans. An
	// approver's or an admin's token is refused (403) even if named: on
	// the API it answers approvals, and an agent must never approve.
	Tokens []string
	// PerMinute and Burst bound each token's tool calls. Defaults 60 and
	// 10; a call over the bound is refused, saying when to try again.
	PerMinute, Burst int
	// Modes are the modes in which agents may call tools. In any other
	// mode every tool call is refused, saying so. Empty means every mode.
	Modes []string
	// ConsoleURL is the console's address as a person reaches it
	// ("https://gw.local:8080"), for the links an agent shows its user.
	// Empty means the scheme and host of the agent's own request.
	ConsoleURL string
	// Version is the gateway's version, told to clients.
	Version string
}

// mcpSurface is the MCP endpoint's state. Its goroutines are the SDK's:
// each session's, which end when the session ends or times out, and all
// of which close ends at shutdown.
type mcpSurface struct {
	web     *Server
	opts    MCPOptions
	handler http.Handler
	srv     *mcp.Server

	// mu guards limits, over, hints, deviceURIs and turnedAway.
	mu     sync.Mutex
	limits map[string]*rate.Limiter // by token name
	over   map[string]bool          // by token name: its last call was over the rate
	hints  string                   // the tools' descriptions and annotations as last added
	// deviceURIs are the device resources as last added.
	deviceURIs []string
	// turnedAway is, by token, the mode in which it was last refused for
	// the mode: the journal says so once, not at every call.
	turnedAway map[string]string
}

// mcpIdentityKey carries the caller's identity from the gate to the
// token verifier.
type mcpIdentityKey struct{}

// consoleHeader carries the console's address, as the agent reached it,
// from the gate to the tools.
const consoleHeader = "X-Shadowgate-Console"

// mountMCP serves [MCPPath] when Options.MCP is set. The endpoint is
// taken before routing, so that an agent's failures are answered as an
// agent needs (JSON, 401 with WWW-Authenticate), never by the console's
// redirect to its login page.
func (s *Server) mountMCP() {
	if s.opts.MCP == nil {
		return
	}
	o := *s.opts.MCP
	if o.PerMinute <= 0 {
		o.PerMinute = 60
	}
	if o.Burst <= 0 {
		o.Burst = 10
	}
	m := &mcpSurface{web: s, opts: o, limits: map[string]*rate.Limiter{}, over: map[string]bool{}, turnedAway: map[string]string{}}
	m.srv = mcp.NewServer(&mcp.Implementation{Name: "shadowgate", Title: "Shadowgate", Version: o.Version},
		&mcp.ServerOptions{Instructions: mcpInstructions, Logger: s.log.With("component", "mcp")})
	m.refresh()
	// A listing is brought up to date first: devices come and go, and
	// the hints go with them (connected agents are told the list changed).
	m.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" || method == "resources/list" {
				m.refresh()
			}
			return next(ctx, method, req)
		}
	})
	stream := mcp.NewStreamableHTTPHandler(m.serverFor, &mcp.StreamableHTTPOptions{
		SessionTimeout: 30 * time.Minute,
		Logger:         s.log.With("component", "mcp"),
		// The console may listen on every interface with its own TLS;
		// the bearer token, not the Host header, says who may come in.
		DisableLocalhostProtection: true,
	})
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		id, _ := r.Context().Value(mcpIdentityKey{}).(*identity)
		if id == nil {
			return nil, auth.ErrInvalidToken
		}
		// The token does not expire; the SDK wants a time. UserID binds
		// a session to its token: another token cannot use it (403). The
		// tools look the token's role up at each call.
		return &auth.TokenInfo{UserID: id.Principal, Expiration: s.opts.Now().Add(24 * time.Hour)}, nil
	}
	m.handler = http.NewCrossOriginProtection().Handler(auth.RequireBearerToken(verify, nil)(stream))
	s.e.Pre(m.gate)
	s.e.Server.RegisterOnShutdown(m.close)
}

// gate answers [MCPPath]: it identifies the caller by the same token
// check as the API (wrong tokens count against the address in the same
// limiter), admits only a token named in MCPOptions.Tokens, and hands
// the request to the SDK's handler.
func (m *mcpSurface) gate(next echo.HandlerFunc) echo.HandlerFunc {
	s := m.web
	return func(c echo.Context) (err error) {
		if c.Request().URL.Path != MCPPath {
			return next(c)
		}
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("mcp: panic: %v", p)
			}
			if err != nil {
				s.mcpProblem(c, err)
				err = nil
			}
		}()
		c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, 1<<20)
		return s.identify(func(c echo.Context) error {
			id := userOf(c)
			switch {
			case id == nil || !id.Token:
				h.Set("WWW-Authenticate", `Bearer realm="shadowgate"`)
				return problem(http.StatusUnauthorized, "send Authorization: Bearer <token> with a token named in mcp.tokens")
			case !slices.Contains(m.opts.Tokens, id.User):
				return problem(http.StatusForbidden, "token "+id.User+" is not admitted to MCP: name it in mcp.tokens")
			case id.Role.AtLeast(access.Approver):
				// The same token answers approvals on the API: an agent
				// holding it could approve its own requests.
				return problem(http.StatusForbidden, "token "+id.User+" is "+article(id.Role.String())+" "+id.Role.String()+
					"; an agent's token is a viewer or an operator, so that it can never answer an approval")
			}
			agent := &identity{User: id.User, Role: id.Role, Principal: "mcp:" + id.User, Token: true}
			r := c.Request()
			// Where the agent reached the console, for the links it is
			// given; never a header the client sent.
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			r.Header.Set(consoleHeader, scheme+"://"+r.Host)
			r = r.WithContext(context.WithValue(r.Context(), mcpIdentityKey{}, agent))
			m.handler.ServeHTTP(c.Response(), r)
			return nil
		})(c)
	}
}

// mcpProblem writes err as the API's JSON error, never a page.
func (s *Server) mcpProblem(c echo.Context, err error) {
	if c.Response().Committed {
		return
	}
	status, detail, errorID := s.public(c, err)
	if status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="shadowgate"`)
	}
	_ = c.JSON(status, apiError{Error: http.StatusText(status), Detail: clipDetail(detail), ErrorID: errorID})
}

// serverFor returns the server for a new session: its tools'
// annotations are brought up to date with the effect profiles as they
// are now, and the journal records that the agent connected.
func (m *mcpSurface) serverFor(r *http.Request) *mcp.Server {
	s := m.web
	id, _ := r.Context().Value(mcpIdentityKey{}).(*identity)
	if id == nil {
		return nil // the verifier refused it already
	}
	m.refresh()
	remote := r.RemoteAddr
	if host, _, err := net.SplitHostPort(remote); err == nil {
		remote = host
	}
	if _, err := s.eng.Note(r.Context(), runtime.KindLogin, "", runtime.LoginBody{
		Surface: "mcp", User: id.User, Remote: remote, Action: "login"}); err != nil {
		s.log.Warn("mcp session not journaled", "token", id.User, "error", err)
	}
	return m.srv
}

// close ends every MCP session, so that their event streams do not hold
// up the server's shutdown.
func (m *mcpSurface) close() {
	for ss := range m.srv.Sessions() {
		_ = ss.Close()
	}
}

// allow spends one of the token's calls, or says when the next one may
// come.
// The log says when a token goes over its rate, once, not at every
// call refused.
func (m *mcpSurface) allow(token string, now time.Time) (time.Duration, bool) {
	m.mu.Lock()
	l := m.limits[token]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(float64(m.opts.PerMinute)/60), m.opts.Burst)
		m.limits[token] = l
	}
	m.mu.Unlock()
	r := l.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	m.mu.Lock()
	first := d > 0 && !m.over[token]
	m.over[token] = d > 0
	m.mu.Unlock()
	if first {
		m.web.log.Warn("mcp token over its rate", "token", token, "per_minute", m.opts.PerMinute)
	}
	return d, d <= 0
}

// untilBye returns a context that ends with ctx or when the server shuts
// down, and the function that releases it.
func (m *mcpSurface) untilBye(ctx context.Context) (context.Context, context.CancelFunc) {
	m.web.mu.Lock()
	bye := m.web.bye
	m.web.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	go func() { // owned by the caller, whose cancel ends it
		select {
		case <-bye:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// admitted reports whether the token's agent may call tools in the mode
// in force. The first refusal of a token in a mode is journaled, as a
// "refused" login on the surface mcp with the mode as why; the next, only
// after the token was admitted again.
func (m *mcpSurface) admitted(ctx context.Context, token, mode string) bool {
	ok := len(m.opts.Modes) == 0 || slices.Contains(m.opts.Modes, mode)
	m.mu.Lock()
	first := !ok && m.turnedAway[token] != mode
	if ok {
		delete(m.turnedAway, token)
	} else {
		m.turnedAway[token] = mode
	}
	m.mu.Unlock()
	if first {
		if _, err := m.web.eng.Note(ctx, runtime.KindLogin, "", runtime.LoginBody{Action: "refused", Surface: "mcp", User: token,
			Why: "mode " + mode + " admits no AI agent"}); err != nil {
			m.web.log.Warn("an agent turned away, not journaled", "token", token, "mode", mode, "error", err)
		}
	}
	return ok
}

// needRole is the tool error for an agent whose token lacks min.
func needRole(id *identity, min access.Role, tool string) error {
	return fmt.Errorf("%s needs a token with the %s role; token %s is %s %s", tool, min, id.User, article(id.Role.String()), id.Role)
}

// jsonText is v as indented JSON, for a tool's text content.
func jsonText(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
