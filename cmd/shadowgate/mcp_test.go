//go:build !shadowgate_omit_mcp

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestInClear(t *testing.T) {
	for u, want := range map[string]bool{
		"http://127.0.0.1:8080/mcp": false, "http://[::1]:8080/mcp": false, "http://localhost:8080/mcp": false,
		"https://10.0.0.2:8443/mcp": false, "http://10.0.0.2:8080/mcp": true, "http://gw.local:8080/mcp": true,
		"http://127.0.0.1.evil.example/mcp": true,
	} {
		if _, got := inClear(u); got != want {
			t.Errorf("inClear(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestMCPEndpoint(t *testing.T) {
	for _, tc := range []struct{ flag, env, want, err string }{
		{"", "", defaultMCPURL, ""},
		{"", "https://gw.local:8080/mcp", "https://gw.local:8080/mcp", ""},
		{"http://10.0.0.2:8080/mcp", "https://gw.local:8080/mcp", "http://10.0.0.2:8080/mcp", ""},
		{"gw.local:8080", "", "", `--url: "gw.local:8080" is not an http:// or https:// address`},
		{"ftp://gw/mcp", "", "", "is not an http:// or https:// address"},
		{"http://agent:secret@gw/mcp", "", "", "put no credentials in the address"},
	} {
		got, err := mcpEndpoint(tc.flag, tc.env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("mcpEndpoint(%q, %q) = %q, %v; want an error with %q", tc.flag, tc.env, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("mcpEndpoint(%q, %q) = %q, %v; want %q", tc.flag, tc.env, got, err, tc.want)
		}
	}
}

func TestMCPToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-the-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, env, want, err string }{
		{"", "from-the-env", "from-the-env", ""},
		{file, "from-the-env", "from-the-file", ""},
		{"", "  \n", "", "no token: set $SHADOWGATE_MCP_TOKEN or give --token-file"},
		{"", "two words", "", "the token holds white space"},
		{filepath.Join(dir, "missing"), "", "", "--token-file: open"},
	} {
		got, err := mcpToken(tc.file, tc.env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("mcpToken(%q, %q) = %q, %v; want an error with %q", tc.file, tc.env, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("mcpToken(%q, %q) = %q, %v; want %q", tc.file, tc.env, got, err, tc.want)
		}
	}
}

func TestMCPProgressToken(t *testing.T) {
	for _, tc := range []struct {
		in, want any
	}{{"tok-1", "tok-1"}, {4, 4}, {float64(4), 4}, {4.5, nil}, {nil, nil}, {true, nil}, {float64(1 << 60), nil}} {
		if got := progressToken(tc.in); got != tc.want {
			t.Errorf("progressToken(%#v) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestMCPUsage(t *testing.T) {
	t.Setenv(envMCPToken, "")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mcp", "--token", "abc"}, exitUsage, "flag provided but not defined: -token"},
		{[]string{"mcp", "abc"}, exitUsage, `unexpected argument "abc" (the token goes in $SHADOWGATE_MCP_TOKEN or --token-file)`},
		{[]string{"mcp"}, exitUsage, "no token"},
		{[]string{"mcp", "--log-level", "loud"}, exitUsage, "--log-level"},
		{[]string{"mcp", "--help"}, exitOK, "usage: shadowgate mcp"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, strings.NewReader(""), &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q) = %d, %q; want %d with %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

func TestMCPGatewayNotRunning(t *testing.T) {
	t.Setenv(envMCPToken, "sg-demo-agent-token")
	url := "http://127.0.0.1:" + strconv.Itoa(freePort(t)) + "/mcp"
	var stdout, stderr bytes.Buffer
	if code := run([]string{"mcp", "--url", url}, strings.NewReader(""), &stdout, &stderr); code != exitUnavailable ||
		!strings.Contains(stderr.String(), "is `shadowgate serve` running, with mcp.enabled?") || stdout.Len() != 0 {
		t.Errorf("shadowgate mcp with no gateway = %d, %q, stdout %q; want %d saying why, and nothing on stdout", code, stderr.String(),
			stdout.String(), exitUnavailable)
	}
}

// TestMCPBridge runs the bridge between a Go client on pipes and an
// upstream MCP server over HTTP: the tools follow the upstream's as they
// change, progress comes through, and a gateway gone is a tool error
// that says the request may or may not have arrived.
func TestMCPBridge(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "v0"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "heard " + in.Text})
		}
		return nil, map[string]string{"echo": in.Text}, nil
	})
	var auth atomic.Value
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()

	b := &bridge{endpoint: hs.URL, token: "tok-1", log: slog.New(slog.NewTextHandler(t.Output(), nil)), relist: make(chan struct{}, 1)}
	ctx := t.Context()
	if err := b.connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if got := auth.Load(); got != "Bearer tok-1" {
		t.Errorf("the bridge sent Authorization %q", got)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- b.serve(ctx, inR, outW) }() // owned by the test, which waits for served

	changed := make(chan struct{}, 8)
	progress := make(chan string, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "v0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		},
	})
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var out []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tool.Name)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("tools = %v, want the upstream's", got)
	}
	mcp.AddTool(up, &mcp.Tool{Name: "second"}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	for got := names(); !slices.Equal(got, []string{"echo", "second"}); got = names() {
		<-changed // the bridge tells the host when it has mirrored them
	}
	up.RemoveTools("second")
	for got := names(); !slices.Equal(got, []string{"echo"}); got = names() {
		<-changed
	}

	p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
	p.SetProgressToken("p-1")
	res, err := cs.CallTool(ctx, p)
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"echo":"hi"`) {
		t.Fatalf("echo through the bridge = %v, %v", res, err)
	}
	if msg := <-progress; msg != "heard hi" {
		t.Errorf("progress through the bridge = %q", msg)
	}

	// The gateway goes away: the call is a tool error, not a crash.
	hs.CloseClientConnections()
	hs.Close()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "may or may not have reached it") {
		t.Errorf("a call with the gateway gone = %+v, %v; want a tool error saying it may have arrived", res, err)
	}
	_ = cs.Close()
	_ = inW.Close()
	if err := <-served; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("serve = %v after the host closed", err)
	}
}

// TestMCPBridgeFollowsNoRedirect: a gateway that redirects elsewhere
// never gets the bridge to send the token there.
func TestMCPBridgeFollowsNoRedirect(t *testing.T) {
	var got atomic.Value
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		http.Error(w, "no", http.StatusBadGateway)
	}))
	defer elsewhere.Close()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer gw.Close()
	b := &bridge{endpoint: gw.URL + "/mcp", token: "tok-1", log: slog.New(slog.NewTextHandler(t.Output(), nil)), relist: make(chan struct{}, 1)}
	err := b.connect(t.Context())
	if err == nil || !strings.Contains(err.Error(), "follows no redirect") {
		t.Errorf("connect through a redirect = %v, want refused, saying so", err)
	}
	if a, _ := got.Load().(string); a != "" {
		t.Errorf("the redirect's target received Authorization %q", a)
	}
	// Nor does the token go to another host by any other way.
	got.Store("")
	resp, err := gatewayClient(gw.URL, "tok-1").Get(elsewhere.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a, _ := got.Load().(string); a != "" {
		t.Errorf("another host received Authorization %q", a)
	}
}

// TestMCPBridgeGatewayRestarted: a gateway that restarted has forgotten
// the bridge's session and never took the call: the bridge opens a new
// session and calls again, once, and the host gets the answer.
func TestMCPBridgeGatewayRestarted(t *testing.T) {
	var calls atomic.Int32
	gateway := func() http.Handler {
		up := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "v0"}, nil)
		mcp.AddTool(up, &mcp.Tool{Name: "count"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, map[string]int32{"calls": calls.Add(1)}, nil
		})
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	}
	var h atomic.Value
	h.Store(gateway())
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Load().(http.Handler).ServeHTTP(w, r) }))
	defer hs.Close()
	b := &bridge{endpoint: hs.URL, token: "tok-1", log: slog.New(slog.NewTextHandler(t.Output(), nil)), relist: make(chan struct{}, 1)}
	ctx := t.Context()
	if err := b.connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- b.serve(ctx, inR, outW) }() // owned by the test, which waits for served
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "v0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func() string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	if got := call(); got != `{"calls":1}` {
		t.Fatalf("before the restart: %s", got)
	}
	h.Store(gateway()) // a restart: the old session is unknown now
	if got := call(); got != `{"calls":2}` {
		t.Errorf("the first call after the restart = %s, want the gateway's answer", got)
	}
	_ = cs.Close()
	_ = inW.Close()
	if err := <-served; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("serve = %v after the host closed", err)
	}
}

// TestMCPBridgeStartsWhileListingsAreRefused: a gateway in a mode that
// admits no agent refuses its listings; the bridge serves the host all
// the same, with no tools, and mirrors them once the gateway says its
// tools changed.
func TestMCPBridgeStartsWhileListingsAreRefused(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "v0"}, nil)
	var refusing atomic.Bool
	refusing.Store(true)
	up.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasSuffix(method, "/list") && refusing.Load() {
				return nil, &jsonrpc.Error{Code: -32001, Message: "refused: mode maintenance admits no AI agent"}
			}
			return next(ctx, method, req)
		}
	})
	echo := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, echo)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	defer hs.Close()
	b := &bridge{endpoint: hs.URL, token: "tok-1", log: slog.New(slog.NewTextHandler(t.Output(), nil)), relist: make(chan struct{}, 1)}
	ctx := t.Context()
	if err := b.connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- b.serve(ctx, inR, outW) }() // owned by the test, which waits for served
	changed := make(chan struct{}, 8)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "v0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("the host connecting while the gateway refuses listings: %v", err)
	}
	names := func() []string {
		var out []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tool.Name)
		}
		return out
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("tools while the gateway refuses listings = %v, want none", got)
	}
	refusing.Store(false)
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, echo) // the gateway tells its agents to list again
	for got := names(); !slices.Equal(got, []string{"echo"}); got = names() {
		<-changed
	}
	_ = cs.Close()
	_ = inW.Close()
	if err := <-served; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("serve = %v after the host closed", err)
	}
}
