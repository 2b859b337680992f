//go:build !shadowgate_omit_mcp

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The environment `shadowgate mcp` reads: the token is never a flag, so
// that it shows in no process list and no shell history.
const (
	envMCPURL   = "SHADOWGATE_MCP_URL"
	envMCPToken = "SHADOWGATE_MCP_TOKEN"
	// defaultMCPURL is the console's default address on loopback.
	defaultMCPURL = "http://127.0.0.1:8080/mcp"
)

const mcpUsage = `usage: shadowgate mcp [--url URL] [--token-file F] [--log-level L]

Serves MCP on standard input and output for an agent host, by bridging to
the running gateway's /mcp endpoint: the journal belongs to "serve", so
this process holds no state and decides nothing. Every call is judged by
the gateway as mcp:<token name>.

  --url URL         the gateway's MCP endpoint (default $SHADOWGATE_MCP_URL,
                    or http://127.0.0.1:8080/mcp)
  --token-file F    a file holding the bearer token (default: the token in
                    $SHADOWGATE_MCP_TOKEN); never give the token itself as a flag
  --log-level L     debug, info, warn (default) or error, on standard error
`

// mcpCmd is `shadowgate mcp`. It exits 0 when the agent host closes
// standard input, 1 on a usage error, 3 when the gateway refuses the
// token, and 5 when the gateway cannot be reached.
func mcpCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	endpoint := fs.String("url", "", "")
	tokenFile := fs.String("token-file", "", "")
	level := fs.String("log-level", "warn", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, mcpUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "shadowgate mcp: %v\n\n%s", err, mcpUsage)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shadowgate mcp: unexpected argument %q (the token goes in $%s or --token-file)\n\n%s",
			fs.Arg(0), envMCPToken, mcpUsage)
		return exitUsage
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "shadowgate mcp: --log-level: %q is not debug, info, warn or error\n", *level)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv})).With("component", "mcp-bridge")
	target, err := mcpEndpoint(*endpoint, os.Getenv(envMCPURL))
	if err != nil {
		fmt.Fprintf(stderr, "shadowgate mcp: %v\n", err)
		return exitUsage
	}
	if host, clear := inClear(target); clear {
		log.Warn("the token goes to the gateway in clear, over plain HTTP off this machine: anyone on the path can read it and act as the agent; use https:// (the gateway's web.cert_file and web.key_file)",
			"host", host)
	}
	token, err := mcpToken(*tokenFile, os.Getenv(envMCPToken))
	if err != nil {
		fmt.Fprintf(stderr, "shadowgate mcp: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bridge{endpoint: target, token: token, log: log, relist: make(chan struct{}, 1)}
	if err := b.connect(ctx); err != nil {
		fmt.Fprintf(stderr, "shadowgate mcp: %v\n", err)
		if errors.Is(err, errTokenRefused) {
			return exitRefused
		}
		return exitUnavailable
	}
	defer b.close()
	if err := b.serve(ctx, io.NopCloser(stdin), nopWriteCloser{stdout}); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "shadowgate mcp: %v\n", err)
		return exitUnavailable
	}
	return exitOK
}

// mcpEndpoint is the endpoint from the flag, else the environment, else
// the default; it must be an http:// or https:// URL.
func mcpEndpoint(flagValue, env string) (string, error) {
	s := flagValue
	if s == "" {
		s = env
	}
	if s == "" {
		s = defaultMCPURL
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url: %q is not an http:// or https:// address such as %s", s, defaultMCPURL)
	}
	if u.User != nil {
		return "", errors.New("--url: put no credentials in the address; the token goes in $" + envMCPToken + " or --token-file")
	}
	return u.String(), nil
}

// inClear reports whether endpoint (an address mcpEndpoint accepted)
// sends the token in clear off this machine: plain HTTP to a host that
// is not loopback.
func inClear(endpoint string) (string, bool) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" {
		return "", false
	}
	host := u.Hostname()
	if host == "localhost" {
		return host, false
	}
	ip, err := netip.ParseAddr(host)
	return host, err != nil || !ip.IsLoopback()
}

// mcpToken reads the token from the file, else takes the environment's.
func mcpToken(file, env string) (string, error) {
	tok := env
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		tok = string(b)
	}
	tok = strings.TrimSpace(tok)
	switch {
	case tok == "":
		return "", errors.New("no token: set $" + envMCPToken + " or give --token-file (a token from web.tokens named in mcp.tokens)")
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", errors.New("the token holds white space: give the token alone, as shadowgate hash-token printed it")
	}
	return tok, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// errTokenRefused is returned by connect when the gateway refuses the
// token (401 or 403).
var errTokenRefused = errors.New("the gateway refused the token")

// bridge is one agent host's session with the gateway: a server on
// standard input and output whose tools and resources are the gateway's,
// each call forwarded to the gateway's /mcp. It keeps nothing and judges
// nothing. Its goroutines are the SDK's, which end with the sessions
// that close ends, and follow, which serve starts and waits for.
type bridge struct {
	endpoint, token string
	log             *slog.Logger
	// local is the agent host's session, for forwarding progress; srv is
	// its server, whose tools follow the gateway's.
	local atomic.Pointer[mcp.ServerSession]
	srv   atomic.Pointer[mcp.Server]

	// relist says the gateway's tools changed; follow lists them again.
	relist chan struct{}
	// tools are the names mirrored last, by serve and then by follow,
	// one after the other.
	tools []string

	// mu guards up; a lost connection is made again on the next call.
	mu sync.Mutex
	up *mcp.ClientSession
}

// bearerTransport sets the token on every request to the gateway's
// host, and on no other.
type bearerTransport struct {
	token, host string
	next        http.RoundTripper
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != t.host {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

// gatewayClient is the HTTP client for the gateway at endpoint: it sends
// the token to the endpoint's host only, and follows no redirect, so that
// the token never leaves for another address.
func gatewayClient(endpoint, token string) *http.Client {
	host := ""
	if u, err := url.Parse(endpoint); err == nil {
		host = u.Host
	}
	return &http.Client{Transport: bearerTransport{token: token, host: host, next: http.DefaultTransport},
		CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			return fmt.Errorf("the gateway redirected to %s, and the bridge follows no redirect (it would take the token along): give --url the address itself",
				r.URL.Redacted())
		}}
}

// connect opens a session with the gateway.
func (b *bridge) connect(ctx context.Context) error {
	c := mcp.NewClient(&mcp.Implementation{Name: "shadowgate-mcp", Version: version}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, r *mcp.ProgressNotificationClientRequest) {
			if ss := b.local.Load(); ss != nil {
				if err := ss.NotifyProgress(ctx, r.Params); err != nil {
					b.log.Debug("progress not forwarded", "error", err)
				}
			}
		},
		// The gateway's tools change with its devices (their hints and
		// descriptions); the host is told in turn.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case b.relist <- struct{}{}:
			default: // one is due already
			}
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.endpoint, HTTPClient: gatewayClient(b.endpoint, b.token)}, nil)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "Unauthorized") || strings.Contains(msg, "Forbidden") {
			return fmt.Errorf("%w at %s: is the token in web.tokens, and named in mcp.tokens? (%v)", errTokenRefused, b.endpoint, err)
		}
		return fmt.Errorf("reaching the gateway at %s (is `shadowgate serve` running, with mcp.enabled?): %w", b.endpoint, err)
	}
	b.mu.Lock()
	old := b.up
	b.up = cs
	b.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	b.log.Info("connected to the gateway", "url", b.endpoint, "protocol", cs.InitializeResult().ProtocolVersion)
	return nil
}

// session is the gateway's session, made again if the last call lost it.
func (b *bridge) session(ctx context.Context) (*mcp.ClientSession, error) {
	b.mu.Lock()
	cs := b.up
	b.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	if err := b.connect(ctx); err != nil {
		return nil, err
	}
	return b.session(ctx)
}

// lost forgets the session cs after a failed call.
func (b *bridge) lost(cs *mcp.ClientSession) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.up == cs {
		b.up = nil
		_ = cs.Close()
	}
}

func (b *bridge) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.up != nil {
		_ = b.up.Close()
		b.up = nil
	}
}

// serve mirrors the gateway's tools and resources on in and out until
// the agent host closes in or ctx ends.
func (b *bridge) serve(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	cs, err := b.session(ctx)
	if err != nil {
		return err
	}
	info := cs.InitializeResult()
	srv := mcp.NewServer(&mcp.Implementation{Name: info.ServerInfo.Name, Title: info.ServerInfo.Title, Version: info.ServerInfo.Version},
		&mcp.ServerOptions{Instructions: info.Instructions, Logger: b.log,
			// Tools and resources are said to exist, and to change, even
			// while the host's server has none: the gateway's come later
			// when it refused to list them at first.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true},
				Resources: &mcp.ResourceCapabilities{ListChanged: true}}})
	b.srv.Store(srv)
	// A gateway that refuses a listing (in a mode that admits no agent)
	// is served with what it lists: nothing, until it says its tools
	// changed, which it does when agents are admitted again.
	refused := func(what string, err error) error {
		if fromGateway(err) == nil {
			return err
		}
		b.log.Warn("the gateway refused a listing; serving without it until the gateway's tools change", "listing", what, "error", err)
		return nil
	}
	if err := b.mirrorTools(ctx, cs); err != nil {
		if err := refused("tools", err); err != nil {
			return err
		}
	}
	for res, err := range cs.Resources(ctx, nil) {
		if err != nil {
			if err := refused("resources", err); err != nil {
				return fmt.Errorf("listing the gateway's resources: %w", err)
			}
			break
		}
		srv.AddResource(res, b.readResource)
	}
	for tmpl, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			if err := refused("resource templates", err); err != nil {
				return fmt.Errorf("listing the gateway's resource templates: %w", err)
			}
			break
		}
		srv.AddResourceTemplate(tmpl, b.readResource)
	}
	ss, err := srv.Connect(ctx, &mcp.IOTransport{Reader: in, Writer: out}, nil)
	if err != nil {
		return fmt.Errorf("serving on standard input and output: %w", err)
	}
	b.local.Store(ss)
	stopped := context.AfterFunc(ctx, func() { _ = ss.Close() })
	defer stopped()
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { b.follow(fctx) })
	defer wg.Wait()
	defer cancel()
	return ss.Wait()
}

// follow mirrors the gateway's tools again each time it says they
// changed, until ctx ends.
func (b *bridge) follow(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.relist:
		}
		cs, err := b.session(ctx)
		if err == nil {
			err = b.mirrorTools(ctx, cs)
		}
		if err != nil && ctx.Err() == nil {
			b.log.Warn("the gateway's tools not mirrored again", "error", err)
		}
	}
}

// mirrorTools gives the host's server the gateway's tools as cs lists
// them now, and removes those it no longer lists.
func (b *bridge) mirrorTools(ctx context.Context, cs *mcp.ClientSession) error {
	srv := b.srv.Load()
	if srv == nil {
		return nil
	}
	seen := map[string]bool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing the gateway's tools: %w", err)
		}
		seen[tool.Name] = true
		srv.AddTool(tool, b.callTool)
	}
	var gone []string
	for _, name := range b.tools {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	srv.RemoveTools(gone...)
	b.tools = slices.Sorted(maps.Keys(seen))
	return nil
}

// callTool forwards a call, with its progress token, to the gateway. A
// protocol error comes back as the gateway gave it; a lost connection is
// a tool error that says the request may or may not have arrived.
func (b *bridge) callTool(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	// The SDK does not recover a handler's panic: it would end the bridge.
	defer func() {
		if p := recover(); p != nil {
			b.log.Error("a call panicked", "tool", req.Params.Name, "panic", p)
			res, err = toolFailure("the bridge failed on this call (its log says why); look with journal_tail before asking again"), nil
		}
	}()
	cs, err := b.session(ctx)
	if err != nil {
		return toolFailure("the gateway cannot be reached: " + err.Error()), nil
	}
	// Only the progress token crosses: the rest of _meta belongs to the
	// protocol version of each side, which need not be the same.
	p := &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments}
	if tok := progressToken(req.Params.GetProgressToken()); tok != nil {
		p.SetProgressToken(tok)
	}
	res, err = cs.CallTool(ctx, p)
	if errors.Is(err, mcp.ErrSessionMissing) {
		// The gateway restarted, or ended the session: it never took
		// the call, so it goes again, once, on a new session.
		b.lost(cs)
		b.log.Info("the gateway's session is gone; calling again on a new one", "tool", req.Params.Name)
		if cs, err = b.session(ctx); err != nil {
			return toolFailure("the gateway cannot be reached: " + err.Error()), nil
		}
		res, err = cs.CallTool(ctx, p)
	}
	if err == nil {
		return res, nil
	}
	if we := fromGateway(err); we != nil {
		return nil, we
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	b.lost(cs)
	b.log.Warn("a call to the gateway failed", "tool", req.Params.Name, "error", err)
	return toolFailure("the gateway did not answer (" + err.Error() + "). The request may or may not have reached it: " +
		"look with journal_tail or get_approval before asking again."), nil
}

func (b *bridge) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	cs, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI})
	if errors.Is(err, mcp.ErrSessionMissing) {
		b.lost(cs) // never read: read again, once, on a new session
		if cs, err = b.session(ctx); err != nil {
			return nil, err
		}
		res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI})
	}
	if err != nil {
		if we := fromGateway(err); we != nil {
			return nil, we
		}
		b.lost(cs)
		return nil, fmt.Errorf("reading %s from the gateway: %w", req.Params.URI, err)
	}
	return res, nil
}

// codeRejected is the SDK's code for a message its transport could not
// deliver: the gateway never answered it.
const codeRejected = -32005

// fromGateway is the protocol error the gateway answered with (an
// unknown tool, invalid parameters), to pass on as it is; nil for any
// other error, the transport's own included.
func fromGateway(err error) *jsonrpc.Error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != codeRejected {
		return we
	}
	return nil
}

// progressToken is a progress token as the SDK takes it, a string or an
// int: JSON numbers arrive as float64. A token that is neither is not
// forwarded, and the call goes on without progress.
func progressToken(tok any) any {
	switch v := tok.(type) {
	case string, int:
		return v
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int(v)
		}
	}
	return nil
}

func toolFailure(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
