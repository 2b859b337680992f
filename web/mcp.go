//go:build !shadowgate_omit_mcp

package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
)

// maxSessions is how many MCP sessions one token may hold open at once.
// A session lasts until its client ends it or it is idle for 30 minutes.
const maxSessions = 8

// codeRefused is the JSON-RPC error code of a listing refused because
// the mode in force admits no agent.
const codeRefused = -32001

// mcpSurface is the MCP endpoint's state. Its goroutines are the SDK's:
// each session's, which end when the session ends or times out, and all
// of which close ends at shutdown; and watchModes, which close ends and
// waits for, as does the server's shutdown of its event streams.
type mcpSurface struct {
	web     *Server
	opts    MCPOptions
	handler http.Handler
	srv     *mcp.Server

	// refreshing makes a refresh of the tools one step, from working out
	// their hints to adding them: an older refresh finishing last would
	// leave stale hints. It is held across the SDK's AddTool, which only
	// queues the list_changed notifications it sends.
	refreshing sync.Mutex

	// stopWatch ends watchModes, which closes watched when it returns.
	stopWatch context.CancelFunc
	watched   chan struct{}

	// mu guards limits, over, hints, deviceURIs, turnedAway, sessions,
	// opening and admitting.
	mu     sync.Mutex
	limits map[string]*tokenLimits // by token name
	over   map[string]bool         // by token name and budget: its last call was over the rate
	hints  string                  // the tools' descriptions and annotations as last added
	// deviceURIs are the device resources as last added.
	deviceURIs []string
	// turnedAway is, by token, the mode in which it was last refused for
	// the mode: the journal says so once, not at every call.
	turnedAway map[string]string
	// sessions are the token of each session opened, by session id;
	// opening counts, by token, the sessions being opened now.
	sessions map[string]string
	opening  map[string]int
	// admitting is whether the mode in force admitted agents when
	// watchModes last looked.
	admitting bool
}

// tokenLimits are a token's budgets: its tool calls and resource reads,
// and its HTTP requests of any kind.
type tokenLimits struct {
	calls, requests *rate.Limiter
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
// redirect to its login page. It returns an error only in a build
// without MCP (mcp_off.go).
func (s *Server) mountMCP() error {
	if s.opts.MCP == nil {
		s.e.Pre(mcpNotServed("this gateway serves no MCP: its configuration does not turn it on (mcp: {enabled: true, tokens: [...]})"))
		return nil
	}
	o := *s.opts.MCP
	if o.PerMinute <= 0 {
		o.PerMinute = 60
	}
	if o.Burst <= 0 {
		o.Burst = 10
	}
	m := &mcpSurface{web: s, opts: o, limits: map[string]*tokenLimits{}, over: map[string]bool{}, turnedAway: map[string]string{},
		sessions: map[string]string{}, opening: map[string]int{}, watched: make(chan struct{})}
	m.srv = mcp.NewServer(&mcp.Implementation{Name: "shadowgate", Title: "Shadowgate", Version: o.Version},
		&mcp.ServerOptions{Instructions: mcpInstructions, Logger: s.log.With("component", "mcp")})
	m.refresh(false)
	m.srv.AddReceivingMiddleware(m.listings)
	m.admitting = m.admits(s.eng.Mode(context.Background()).Name)
	ctx, stop := context.WithCancel(context.Background())
	m.stopWatch = stop
	go func() { // owned by the surface: close ends it and waits for watched
		defer close(m.watched)
		ctx, stop := m.untilBye(ctx)
		defer stop()
		m.watchModes(ctx)
	}()
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
	return nil
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
			case id.Role.AtLeast(access.Approver):
				// The same token answers approvals on the API: an agent
				// holding it could approve its own requests. Said first:
				// naming it in mcp.tokens would not help.
				return problem(http.StatusForbidden, "token "+id.User+" is "+article(id.Role.String())+" "+id.Role.String()+
					"; an agent's token is a viewer or an operator, so that it can never answer an approval: give the agent a token of its own")
			case !slices.Contains(m.opts.Tokens, id.User):
				return problem(http.StatusForbidden, "token "+id.User+" is not admitted to MCP: name it in mcp.tokens")
			}
			agent := &identity{User: id.User, Role: id.Role, Principal: "mcp:" + id.User, Token: true}
			if wait, ok := m.allow(id.User, true, s.opts.Now()); !ok {
				secs := int(wait.Round(time.Second)/time.Second) + 1
				h.Set("Retry-After", strconv.Itoa(secs))
				return problem(http.StatusTooManyRequests, fmt.Sprintf("token %s is over its %d requests a minute to %s; try again in %ds",
					id.User, 2*m.opts.PerMinute, MCPPath, secs))
			}
			r := c.Request()
			// A POST without a session id opens a session.
			opening := r.Method == http.MethodPost && r.Header.Get(sessionIDHeader) == ""
			if opening {
				if !m.reserve(id.User) {
					return problem(http.StatusTooManyRequests, fmt.Sprintf("token %s has %d MCP sessions open, the most a token may: end one (DELETE %s with its Mcp-Session-Id) or let one idle out (30 minutes)",
						id.User, maxSessions, MCPPath))
				}
			}
			// Where the agent reached the console, for the links it is
			// given; never a header the client sent.
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			r.Header.Set(consoleHeader, scheme+"://"+r.Host)
			r = r.WithContext(context.WithValue(r.Context(), mcpIdentityKey{}, agent))
			if !opening {
				m.handler.ServeHTTP(c.Response(), r)
				return nil
			}
			// The session is counted, and the reservation given back,
			// before the first byte of the answer leaves: a client that
			// sends its next request as soon as it reads this one (the
			// SDK's client follows a refused discovery with its
			// initialize) must find them settled.
			w := &settleWriter{ResponseWriter: c.Response(), settle: func(h http.Header) {
				m.opened(r, h.Get(sessionIDHeader), agent)
				m.unreserve(id.User)
			}}
			defer w.done()
			m.handler.ServeHTTP(w, r)
			return nil
		})(c)
	}
}

// settleWriter calls settle once, before the first byte of the response
// is written or flushed, or when the handler returns without writing.
type settleWriter struct {
	http.ResponseWriter
	once   sync.Once
	settle func(http.Header)
}

func (w *settleWriter) done() { w.once.Do(func() { w.settle(w.Header()) }) }

func (w *settleWriter) WriteHeader(code int) {
	w.done()
	w.ResponseWriter.WriteHeader(code)
}

func (w *settleWriter) Write(b []byte) (int, error) {
	w.done()
	return w.ResponseWriter.Write(b)
}

func (w *settleWriter) Flush() {
	w.done()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *settleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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

// sessionIDHeader is the header of the streamable HTTP transport that
// names a session.
const sessionIDHeader = "Mcp-Session-Id"

// serverFor returns the server, for a request the gate let in. The SDK
// calls it for every request, not only for a new session.
func (m *mcpSurface) serverFor(r *http.Request) *mcp.Server {
	if id, _ := r.Context().Value(mcpIdentityKey{}).(*identity); id == nil {
		return nil // the verifier refused it already
	}
	return m.srv
}

// reserve takes one of the token's sessions for a request that may open
// one, unless it holds maxSessions (those open and those being opened);
// unreserve gives it back once the request is answered.
func (m *mcpSurface) reserve(token string) bool {
	live := map[string]bool{}
	for ss := range m.srv.Sessions() {
		live[ss.ID()] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.opening[token]
	for id, t := range m.sessions {
		switch {
		case !live[id]:
			delete(m.sessions, id) // ended, or idled out
		case t == token:
			n++
		}
	}
	if n >= maxSessions {
		return false
	}
	m.opening[token]++
	return true
}

func (m *mcpSurface) unreserve(token string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.opening[token]--; m.opening[token] <= 0 {
		delete(m.opening, token)
	}
}

// opened records the session sid that r opened, if it is open and its
// handshake done: it counts against the token's sessions, and the
// journal records the agent's login, once a session. A request that
// opened none (a rejected handshake, a stray call) records nothing.
func (m *mcpSurface) opened(r *http.Request, sid string, id *identity) {
	if sid == "" {
		return
	}
	var ss *mcp.ServerSession
	for s := range m.srv.Sessions() {
		if s.ID() == sid {
			ss = s
		}
	}
	if ss == nil || ss.InitializeParams() == nil {
		return
	}
	m.mu.Lock()
	_, known := m.sessions[sid]
	m.sessions[sid] = id.User
	m.mu.Unlock()
	if known {
		return
	}
	remote := r.RemoteAddr
	if host, _, err := net.SplitHostPort(remote); err == nil {
		remote = host
	}
	if _, err := m.web.eng.Note(r.Context(), runtime.KindLogin, "", runtime.LoginBody{
		Surface: "mcp", User: id.User, Remote: remote, Action: "login"}); err != nil {
		m.web.log.Warn("mcp session not journaled", "token", id.User, "error", err)
	}
}

// close ends watchModes and every MCP session, so that their event
// streams do not hold up the server's shutdown.
func (m *mcpSurface) close() {
	m.stopWatch()
	<-m.watched
	for ss := range m.srv.Sessions() {
		_ = ss.Close()
	}
}

// allow spends one of the token's tool calls (requests false) or one of
// its HTTP requests (requests true), or says when the next one may come.
// The log says when a token goes over a rate, once, not at every call
// refused.
func (m *mcpSurface) allow(token string, requests bool, now time.Time) (time.Duration, bool) {
	m.mu.Lock()
	tl := m.limits[token]
	if tl == nil {
		perSecond := float64(m.opts.PerMinute) / 60
		tl = &tokenLimits{calls: rate.NewLimiter(rate.Limit(perSecond), m.opts.Burst),
			requests: rate.NewLimiter(rate.Limit(2*perSecond), int(min(2*float64(m.opts.Burst)+10, math.MaxInt32)))}
		m.limits[token] = tl
	}
	l, key, budget := tl.calls, token, "calls"
	if requests {
		l, key, budget = tl.requests, token+" requests", "requests"
	}
	m.mu.Unlock()
	r := l.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	m.mu.Lock()
	first := d > 0 && !m.over[key]
	m.over[key] = d > 0
	m.mu.Unlock()
	if first {
		m.web.log.Warn("mcp token over its rate", "token", token, "budget", budget, "per_minute", m.opts.PerMinute)
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

// admits reports whether mode admits agents: one named in
// MCPOptions.Modes, or when none is named, any mode but maintenance and
// the modes based on it, as the engine knows them now. A mode the engine
// does not know admits none.
func (m *mcpSurface) admits(mode string) bool {
	if len(m.opts.Modes) > 0 {
		return slices.Contains(m.opts.Modes, mode)
	}
	if mode == governance.ModeMaintenance {
		return false
	}
	for _, md := range m.web.eng.Modes() {
		if md.Name == mode {
			return md.Base != governance.ModeMaintenance
		}
	}
	_, shipped := governance.ShippedModes()[mode]
	return shipped
}

// refusal is the error an agent gets in a mode that admits none.
func (m *mcpSurface) refusal(mode string) error {
	if len(m.opts.Modes) > 0 {
		return fmt.Errorf("refused: mode %s admits no AI agent (mcp.modes names %s); a person decides, in the console", mode,
			strings.Join(m.opts.Modes, ", "))
	}
	return fmt.Errorf("refused: mode %s admits no AI agent (in maintenance, and in a mode based on it, writes run without asking anyone); a person decides, in the console", mode)
}

// admitted reports whether the token's agent may call tools in the mode
// in force. The first refusal of a token in a mode is journaled, as a
// "refused" login on the surface mcp with the mode as why; the next, only
// after the token was admitted again.
func (m *mcpSurface) admitted(ctx context.Context, token, mode string) bool {
	ok := m.admits(mode)
	m.mu.Lock()
	first := !ok && m.turnedAway[token] != mode
	if ok {
		delete(m.turnedAway, token)
	} else {
		m.turnedAway[token] = mode
	}
	m.mu.Unlock()
	if !ok {
		m.cancelAgentRuns(mode) // watchModes may not have seen the change in force yet
	}
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

// listings is the server's receiving middleware for the listings of
// tools, resources and resource templates. In a mode that admits no
// agent a listing is refused (a protocol error, codeRefused, saying why),
// so that an agent learns nothing of the devices; otherwise the tools are
// brought up to date first: devices come and go, and the hints go with
// them (connected agents are told the list changed).
func (m *mcpSurface) listings(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list", "resources/list", "resources/templates/list":
		default:
			return next(ctx, method, req)
		}
		token := ""
		if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
			token = strings.TrimPrefix(extra.TokenInfo.UserID, "mcp:")
		}
		if mode := m.web.eng.Mode(ctx).Name; !m.admitted(ctx, token, mode) {
			return nil, &jsonrpc.Error{Code: codeRefused, Message: m.refusal(mode).Error()}
		}
		m.refresh(false)
		res, err := next(ctx, method, req)
		if lt, ok := res.(*mcp.ListToolsResult); ok && err == nil && !m.roleOf(token).AtLeast(access.Operator) {
			// A viewer's token is not offered the tools it may never call.
			out := *lt
			out.Tools = slices.DeleteFunc(slices.Clone(lt.Tools), func(t *mcp.Tool) bool { return operatorTools[t.Name] })
			return &out, nil
		}
		return res, err
	}
}

// operatorTools are the tools that need an operator's token.
var operatorTools = map[string]bool{toolRequestWrite: true, toolRunPlan: true}

// roleOf is the role of the API token named token; a token not known is
// a viewer's, offered the least.
func (m *mcpSurface) roleOf(token string) access.Role {
	if i := slices.IndexFunc(m.web.opts.Tokens, func(t Token) bool { return t.Name == token }); i >= 0 {
		return m.web.opts.Tokens[i].Role
	}
	return access.Viewer
}

// watchModes follows the journal until ctx ends. When a device comes or
// goes, the tools' hints are worked out again. At each change of the
// mode or of the configuration (a reload may base the mode in force on
// maintenance) it looks at whether the mode in force admits agents: if
// not, it cancels the runs agents started, which would otherwise go on
// acting as mcp:<token> in a mode that admits none. When admission
// changes either way, the tools are added again, so that connected agents
// are told to list them again.
//
// The engine journals a change before it puts it in force: a mode change
// names its mode, and a reload is looked at again a moment later. The
// engine judges a run's steps without knowing mcp.modes, so a step that
// runs between the change and this cancel is judged by the new mode
// alone; a call an agent makes in the meantime is refused, and cancels
// the runs too.
func (m *mcpSurface) watchModes(ctx context.Context) {
	since := m.web.eng.FromNow()
	m.modeChanged(ctx, "")
	_ = m.web.eng.Subscribe(ctx, since, func(ev runtime.Event) error {
		switch ev.Kind {
		case runtime.KindModeChanged:
			var b runtime.ModeChangedBody
			_ = json.Unmarshal(ev.Body, &b) // without a mode named, the mode in force
			m.modeChanged(ctx, b.To)
		case runtime.KindDeviceOnline, runtime.KindDeviceOffline:
			// The hints follow the devices; agents are told when they
			// change, not only when they next list the tools.
			m.refresh(false)
		case runtime.KindConfigChanged:
			m.modeChanged(ctx, "")
			t := time.NewTimer(200 * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				m.modeChanged(ctx, "")
			case <-ctx.Done():
			}
		}
		return nil
	})
}

// modeChanged cancels the agents' runs when mode (the mode in force if
// empty) admits no agent, and adds the tools again when admission
// changed.
func (m *mcpSurface) modeChanged(ctx context.Context, mode string) {
	if mode == "" {
		mode = m.web.eng.Mode(ctx).Name
	}
	ok := m.admits(mode)
	m.mu.Lock()
	changed := ok != m.admitting
	m.admitting = ok
	m.mu.Unlock()
	if !ok {
		m.cancelAgentRuns(mode)
	}
	if changed {
		m.refresh(true)
	}
}

// cancelAgentRuns cancels every run an agent started that has not ended.
func (m *mcpSurface) cancelAgentRuns(mode string) {
	for _, r := range m.web.eng.Runs() {
		if r.Status == runtime.RunEnded || !strings.HasPrefix(r.Principal, "mcp:") {
			continue
		}
		err := m.web.eng.CancelRun(r.ID, "the gateway", "mode "+mode+" admits no AI agent")
		switch {
		case err == nil:
			m.web.log.Info("agent's run cancelled", "run", r.ID, "principal", r.Principal, "mode", mode)
		case !errors.Is(err, runtime.ErrRunEnded):
			m.web.log.Warn("agent's run not cancelled", "run", r.ID, "principal", r.Principal, "mode", mode, "error", err)
		}
	}
}
