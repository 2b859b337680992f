//go:build !shadowgate_omit_mcp

package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
)

// bearer sets the Authorization header of every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpSite is a site with the MCP endpoint on, for the viewer and
// operator tokens (not the approver's).
func mcpSite(t testing.TB, o siteOptions, mo MCPOptions) *site {
	t.Helper()
	if mo.Tokens == nil {
		mo.Tokens = []string{"viewer", "operator"}
	}
	o.options = func(wo *Options) { wo.MCP = &mo }
	return newSite(t, o)
}

// agent connects the Go SDK's client to the site's /mcp with a token.
func (s *site) agent(t testing.TB, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v0"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.srv.URL + MCPPath,
		HTTPClient: &http.Client{Transport: bearer{"tok-" + token, http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func mustAgent(t testing.TB, s *site, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := s.agent(t, token, opts)
	if err != nil {
		t.Fatalf("connecting as %s: %v", token, err)
	}
	return cs
}

// callTool calls a tool and returns its structured content as a map and
// its text; a protocol error fails the test.
func callTool(t *testing.T, cs *mcp.ClientSession, p *mcp.CallToolParams) (map[string]any, string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), p)
	if err != nil {
		t.Fatalf("CallTool(%s): protocol error %v", p.Name, err)
	}
	var text string
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	out, _ := res.StructuredContent.(map[string]any)
	return out, text, res.IsError
}

func TestMCPToolsAndAnnotations(t *testing.T) {
	s := mcpSite(t, siteOptions{labels: map[string]string{"valve-1": "Main valve"}}, MCPOptions{})
	list := func(cs *mcp.ClientSession) map[string]*mcp.Tool {
		got := map[string]*mcp.Tool{}
		for tool, err := range cs.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			got[tool.Name] = tool
		}
		return got
	}
	// A viewer's token is offered only what it may call.
	if got := list(mustAgent(t, s, "viewer", nil)); got[toolRequestWrite] != nil || got[toolRunPlan] != nil || got[toolRead] == nil {
		t.Errorf("a viewer's tools = %v, want no request_write or run_plan", slices.Collect(maps.Keys(got)))
	}
	cs := mustAgent(t, s, "operator", nil)
	got := list(cs)
	for _, name := range []string{toolListDevices, toolRead, toolRequestWrite, toolRunPlan, toolGetApproval, toolJournalTail} {
		if got[name] == nil {
			t.Fatalf("tool %s is not listed (got %v)", name, len(got))
		}
	}
	// The write tool's hints are the actuators' profiles: valve-1.open is
	// declared reversible and stays here, so it is not destructive.
	d, c, ok := s.eng.Capability("valve-1", "open")
	if !ok {
		t.Fatal("valve-1.open is not online")
	}
	pol, _ := s.eng.Policy("valve-1", "open")
	p := runtime.Profile(&d, &c, &pol)
	w := got[toolRequestWrite]
	if w.Annotations.ReadOnlyHint || *w.Annotations.DestructiveHint != !p.Reversible || *w.Annotations.OpenWorldHint != p.Reaches {
		t.Errorf("request_write annotations = %+v, want from the profile %v", w.Annotations, p)
	}
	if !strings.Contains(w.Description, "valve-1.open") || !strings.Contains(w.Description, p.String()) {
		t.Errorf("request_write's description does not show valve-1.open's profile %q:\n%s", p, w.Description)
	}
	for _, name := range []string{toolListDevices, toolRead, toolGetApproval, toolJournalTail} {
		if a := got[name].Annotations; !a.ReadOnlyHint || *a.DestructiveHint {
			t.Errorf("%s annotations = %+v, want read-only and not destructive", name, a)
		}
	}
	// The plans only read and wait.
	if a := got[toolRunPlan].Annotations; !a.ReadOnlyHint {
		t.Errorf("run_plan annotations = %+v, want read-only: no plan writes", a)
	}
	// The same profile is in list_devices, per capability.
	out, _, isErr := callTool(t, cs, &mcp.CallToolParams{Name: toolListDevices, Arguments: map[string]any{}})
	if isErr {
		t.Fatalf("list_devices failed: %v", out)
	}
	b, _ := json.Marshal(out)
	if !strings.Contains(string(b), `"profile":"`+p.String()+`"`) || !strings.Contains(string(b), `"mode":"supervised"`) {
		t.Errorf("list_devices does not show valve-1.open's profile %q or the mode: %s", p, b)
	}
	if !strings.Contains(string(b), `"id":"valve-1","label":"Main valve"`) {
		t.Errorf("list_devices does not give valve-1's label: %s", b)
	}
}

func TestMCPReadWriteApprove(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{})
	progress := make(chan string, 16)
	op := mustAgent(t, s, "operator", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		progress <- r.Params.Message
	}})

	out, text, isErr := callTool(t, op, &mcp.CallToolParams{Name: toolRead, Arguments: map[string]any{"device": "tank-1", "capability": "level"}})
	if isErr || out["outcome"] != "completed" || out["reading"] == nil {
		t.Fatalf("read tank-1.level = %v %s", out, text)
	}

	// A write asks (the mode is supervised): it returns at once.
	out, text, isErr = callTool(t, op, &mcp.CallToolParams{Name: toolRequestWrite, Arguments: map[string]any{
		"device": "valve-1", "capability": "open", "value": true, "reason": "the seedlings are dry"}})
	apID, _ := out["approval_id"].(string)
	if isErr || out["outcome"] != "pending_approval" || apID == "" ||
		!strings.HasSuffix(out["console_url"].(string), "/approvals#approval-"+apID) || !strings.HasPrefix(out["console_url"].(string), s.srv.URL) {
		t.Fatalf("request_write = %v %s, want pending_approval with an id and a link", out, text)
	}
	ap, ok := s.eng.Approval(apID)
	if !ok || ap.Principal != "mcp:operator" || ap.Reason != "the seedlings are dry" {
		t.Fatalf("the approval = %+v, want asked by mcp:operator with the reason", ap)
	}
	out, _, _ = callTool(t, op, &mcp.CallToolParams{Name: toolGetApproval, Arguments: map[string]any{"approval_id": apID}})
	if out["status"] != "pending" || out["done"] != false {
		t.Fatalf("get_approval before the answer = %v", out)
	}

	// The agent waits; once it is told it waits, a person approves in
	// the API, and the agent hears of it as progress, then gets the
	// receipt.
	p := &mcp.CallToolParams{Name: toolGetApproval, Arguments: map[string]any{"approval_id": apID, "wait_seconds": 60}}
	p.SetProgressToken("follow-1")
	type called struct {
		out   map[string]any
		text  string
		isErr bool
	}
	done := make(chan called, 1)
	go func() { // owned by the test, which receives from done
		res, err := op.CallTool(t.Context(), p)
		if err != nil {
			done <- called{text: err.Error(), isErr: true}
			return
		}
		out, _ := res.StructuredContent.(map[string]any)
		done <- called{out: out, text: res.Content[0].(*mcp.TextContent).Text, isErr: res.IsError}
	}()
	if msg := <-progress; !strings.HasPrefix(msg, "waiting: waiting for a person") {
		t.Fatalf("first progress = %q", msg)
	}
	s.expect("POST", "/api/v1/approvals/"+apID, "approver", `{"decision":"approve","device":"valve-1","capability":"open","value":true}`,
		200, `"status":"approved"`)
	r := <-done
	out, text, isErr = r.out, r.text, r.isErr
	act, _ := out["act"].(map[string]any)
	if isErr || out["status"] != "approved" || out["done"] != true || act == nil || act["result"] != "confirmed" ||
		out["outcome"] == nil {
		t.Fatalf("get_approval after approval = %s, want approved, done, confirmed with the attempt's receipt", text)
	}
	if msg := <-progress; !strings.HasPrefix(msg, "approved by api:approver") {
		t.Errorf("progress after the answer = %q, want who approved", msg)
	}
	if !strings.Contains(out["summary"].(string), "approved by api:approver") {
		t.Errorf("summary = %q", out["summary"])
	}

	// The journal names the agent.
	_, text, _ = callTool(t, op, &mcp.CallToolParams{Name: toolJournalTail, Arguments: map[string]any{"limit": 50, "kinds": "approval_requested"}})
	if !strings.Contains(text, `"principal":"mcp:operator"`) {
		t.Errorf("journal_tail has no approval requested by mcp:operator: %s", text)
	}
	// And that it connected.
	_, text, _ = callTool(t, op, &mcp.CallToolParams{Name: toolJournalTail, Arguments: map[string]any{"kinds": "login"}})
	if !strings.Contains(text, `"surface":"mcp"`) || !strings.Contains(text, `"user":"operator"`) {
		t.Errorf("journal_tail has no login of operator on mcp: %s", text)
	}
}

func TestMCPRefusals(t *testing.T) {
	s := mcpSite(t, siteOptions{mode: governance.ModeObserve}, MCPOptions{})
	op := mustAgent(t, s, "operator", nil)
	// The judge refuses: a tool error with its reason, not a protocol error.
	out, text, isErr := callTool(t, op, &mcp.CallToolParams{Name: toolRequestWrite, Arguments: map[string]any{
		"device": "valve-1", "capability": "open", "value": true, "reason": "test"}})
	if !isErr || out["outcome"] != "refused" || !strings.Contains(text, "mode observe does not permit it") {
		t.Fatalf("a write in observe = %v %q, want a tool error with the judge's reason", out, text)
	}
	// A viewer token cannot ask for a write at all.
	view := mustAgent(t, s, "viewer", nil)
	_, text, isErr = callTool(t, view, &mcp.CallToolParams{Name: toolRequestWrite, Arguments: map[string]any{
		"device": "valve-1", "capability": "open", "value": true, "reason": "test"}})
	if !isErr || !strings.Contains(text, "needs a token with the operator role; token viewer is a viewer") {
		t.Fatalf("a viewer's write = %q", text)
	}
	// Bad arguments name the field.
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"device": "valve-1", "capability": "open", "value": nil, "reason": "x"}, `argument "value"`},
		{map[string]any{"device": "valve-1", "capability": "open", "value": true, "reason": " "}, `argument "reason"`},
		{map[string]any{"device": "valve-1", "capability": "open", "value": "wide", "reason": "x"}, `field "value"`},
		{map[string]any{"device": "tank-1", "capability": "level", "value": 3, "reason": "x"}, `argument "capability": level of tank-1 is a sensor`},
		{map[string]any{"device": "valve-1", "capability": "open", "value": true}, `reason`},
		{map[string]any{"device": "valve-1", "capability": "open", "value": true, "reason": "x", "extra": 1}, `extra`},
		{map[string]any{"device": "valve-1", "capability": "open", "value": true, "reason": "x", "request_id": strings.Repeat("r", 129)}, `argument "request_id": at most 128`},
	} {
		_, text, isErr := callTool(t, op, &mcp.CallToolParams{Name: toolRequestWrite, Arguments: tc.args})
		if !isErr || !strings.Contains(text, tc.want) {
			t.Errorf("request_write(%v) = %q, want a tool error naming %q", tc.args, text, tc.want)
		}
	}
}

func TestMCPRateLimit(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{PerMinute: 1, Burst: 2})
	op := mustAgent(t, s, "operator", nil)
	view := mustAgent(t, s, "viewer", nil)
	list := &mcp.CallToolParams{Name: toolListDevices, Arguments: map[string]any{}}
	for i := range 2 {
		if _, text, isErr := callTool(t, op, list); isErr {
			t.Fatalf("call %d within the burst = %q", i+1, text)
		}
	}
	_, text, isErr := callTool(t, op, list)
	if !isErr || !strings.Contains(text, "token operator is over its 1 calls a minute; try again in") {
		t.Errorf("a call over the rate = %q", text)
	}
	// Each token has its own.
	if _, text, isErr := callTool(t, view, list); isErr {
		t.Errorf("another token's call = %q", text)
	}
}

func TestMCPModeForbidsAgents(t *testing.T) {
	s := mcpSite(t, siteOptions{mode: governance.ModeObserve}, MCPOptions{Modes: []string{governance.ModeSupervised}})
	view := mustAgent(t, s, "viewer", nil)
	_, text, isErr := callTool(t, view, &mcp.CallToolParams{Name: toolRead, Arguments: map[string]any{"device": "tank-1", "capability": "level"}})
	if !isErr || !strings.Contains(text, "mode observe admits no AI agent") {
		t.Fatalf("a read in a mode that admits no agent = %q", text)
	}
	callTool(t, view, &mcp.CallToolParams{Name: toolListDevices, Arguments: map[string]any{}})
	if _, err := view.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "shadowgate://devices/tank-1"}); err == nil ||
		!strings.Contains(err.Error(), "mode observe admits no AI agent") {
		t.Errorf("reading a resource in a mode that admits no agent: %v", err)
	}
	// The journal says so, once.
	_, text, _ = callTool(t, view, &mcp.CallToolParams{Name: toolJournalTail, Arguments: map[string]any{"kinds": "login"}})
	if !isErr || !strings.Contains(text, "mode observe admits no AI agent") {
		t.Fatalf("journal_tail in a mode that admits no agent = %q, want it refused too", text)
	}
	var turnedAway int
	s.waitSeq(t)
	evs, err := s.eng.Events(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == runtime.KindLogin && strings.Contains(string(ev.Body), `"action":"refused"`) &&
			strings.Contains(string(ev.Body), `"why":"mode observe admits no AI agent"`) && strings.Contains(string(ev.Body), `"user":"viewer"`) {
			turnedAway++
		}
	}
	if turnedAway != 1 {
		t.Errorf("the journal has %d refusals of viewer for the mode, want 1 for three calls", turnedAway)
	}
}

func TestMCPAuth(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{})
	// A token not admitted to MCP, and a wrong one, cannot connect.
	if _, err := s.agent(t, "approver", nil); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("connecting with a token not in mcp.tokens: %v, want 403", err)
	}
	if _, err := s.agent(t, "nobody", nil); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("connecting with a wrong token: %v, want 401", err)
	}
	// A session belongs to its token: another token cannot use it.
	op := mustAgent(t, s, "operator", nil)
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+MCPPath,
		strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_devices","arguments":{}}}`))
	req.Header.Set("Authorization", "Bearer tok-viewer")
	req.Header.Set("Mcp-Session-Id", op.ID())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if op.ID() == "" || resp.StatusCode != http.StatusForbidden {
		t.Errorf("the viewer's token on the operator's session %q = %d, want 403", op.ID(), resp.StatusCode)
	}
	// Nor an approver's, even named: it could answer its own requests.
	named := mcpSite(t, siteOptions{}, MCPOptions{Tokens: []string{"operator", "approver", "admin"}})
	for _, tok := range []string{"approver", "admin"} {
		if _, err := named.agent(t, tok, nil); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("connecting with the %s token named in mcp.tokens: %v, want 403", tok, err)
		}
		code, body := named.call(http.MethodPost, MCPPath, tok, `{}`)
		if code != http.StatusForbidden || !strings.Contains(body, "an agent's token is a viewer or an operator") {
			t.Errorf("POST /mcp as %s = %d %s", tok, code, body)
		}
	}
	// Without a token: 401 with WWW-Authenticate, JSON, never the login page.
	req, _ = http.NewRequest(http.MethodPost, s.srv.URL+MCPPath, strings.NewReader(`{}`))
	resp, err = (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("POST /mcp without a token = %d %v", resp.StatusCode, resp.Header)
	}
	// An approver's token not named is told why naming it would not do.
	if code, body := s.call(http.MethodPost, MCPPath, "approver", `{}`); code != http.StatusForbidden ||
		!strings.Contains(body, "an agent's token is a viewer or an operator") || strings.Contains(body, "name it in mcp.tokens") {
		t.Errorf("POST /mcp as an approver not named = %d %s", code, body)
	}
	// Off unless configured: 404 saying so, in JSON, to any token or
	// none, never the login page, and no failed login counted.
	plain := newSite(t, siteOptions{})
	for _, tok := range []string{"operator", "nobody", "nobody", "nobody", "nobody", ""} {
		code, body := plain.call(http.MethodPost, MCPPath, tok, `{}`)
		if code != http.StatusNotFound || !strings.Contains(body, "serves no MCP") {
			t.Errorf("POST /mcp as %q without MCP configured = %d %s", tok, code, body)
		}
	}
	plain.expect("GET", "/api/v1/devices", "viewer", "", 200, "valve-1") // not locked out
}

// FuzzMCPArguments sends any JSON as any tool's arguments, as an agent
// may: the answer is a tool result, or a protocol error for invalid
// parameters, never a panic (which guard would turn into an "internal
// error") and never an act without a judgement.
func FuzzMCPArguments(f *testing.F) {
	tools := []string{toolListDevices, toolRead, toolRequestWrite, toolRunPlan, toolGetApproval, toolJournalTail}
	for _, seed := range []string{
		`{}`, `null`, `[]`, `"x"`,
		`{"device":"tank-1","capability":"level"}`,
		`{"device":"valve-1","capability":"open","value":true,"reason":"dry"}`,
		`{"device":"valve-1","capability":"open","value":1e400,"reason":"x"}`,
		`{"device":"valve-1","capability":"open","value":{"a":[1]},"reason":"x","request_id":"r1"}`,
		`{"device":5,"capability":null}`,
		`{"plan":"flush","reason":"x"}`, `{"plan":"../x","reason":"` + strings.Repeat("a", 600) + `"}`,
		`{"approval_id":"apr-0","wait_seconds":-1}`, `{"approval_id":"apr-0","wait_seconds":61}`,
		`{"limit":100000}`, `{"limit":5,"kinds":"acted,,refused","device":"\u0000"}`,
	} {
		for i := range tools {
			f.Add(uint8(i), seed)
		}
	}
	s := mcpSite(f, siteOptions{}, MCPOptions{PerMinute: 1 << 30, Burst: 1 << 30})
	cs := mustAgent(f, s, "operator", nil)
	f.Fuzz(func(t *testing.T, tool uint8, args string) {
		if !json.Valid([]byte(args)) {
			t.Skip()
		}
		name := tools[int(tool)%len(tools)]
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("%s(%s): %v, want a tool result or invalid params", name, args, err)
			}
			return
		}
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok && strings.Contains(tc.Text, "internal error") {
				t.Fatalf("%s(%s) = %q: a failure of the gateway", name, args, tc.Text)
			}
		}
	})
}

func TestMCPRunPlan(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{})
	op := mustAgent(t, s, "operator", nil)
	out, text, isErr := callTool(t, op, &mcp.CallToolParams{Name: toolRunPlan, Arguments: map[string]any{"plan": "flush", "reason": "check the tank"}})
	run, _ := out["run"].(map[string]any)
	if isErr || run == nil || run["plan"] != "flush" || run["principal"] != "mcp:operator" {
		t.Fatalf("run_plan flush = %s, want a run of flush by mcp:operator", text)
	}
	_, text, isErr = callTool(t, op, &mcp.CallToolParams{Name: toolRunPlan, Arguments: map[string]any{"plan": "drain", "reason": "x"}})
	if !isErr || !strings.Contains(text, "drain") {
		t.Errorf("run_plan of an unknown plan = %q, want a tool error naming it", text)
	}
	view := mustAgent(t, s, "viewer", nil)
	_, text, isErr = callTool(t, view, &mcp.CallToolParams{Name: toolRunPlan, Arguments: map[string]any{"plan": "flush", "reason": "x"}})
	if !isErr || !strings.Contains(text, "run_plan needs a token with the operator role") {
		t.Errorf("a viewer's run_plan = %q", text)
	}
}

// TestMCPHintsFollowTheDevices: an actuator that goes offline leaves the
// write tool's description, and with no actuator known the write tool's
// hints are the worst case: destructive and open-world.
func TestMCPHintsFollowTheDevices(t *testing.T) {
	var wrapped *devicetest.Driver
	s := mcpSite(t, siteOptions{driver: func(d devices.Driver) devices.Driver {
		wrapped = devicetest.Wrap(d, devicetest.Options{})
		return wrapped
	}}, MCPOptions{})
	changed := make(chan struct{}, 8)
	op := mustAgent(t, s, "operator", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	tools := func() map[string]*mcp.Tool {
		got := map[string]*mcp.Tool{}
		for tool, err := range op.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			got[tool.Name] = tool
		}
		return got
	}
	if w := tools()[toolRequestWrite]; !strings.Contains(w.Description, "valve-1.open") || *w.Annotations.DestructiveHint {
		t.Fatalf("request_write with valve-1 online = %+v %q", w.Annotations, w.Description)
	}
	wrapped.SetFault("valve-1", devicetest.Fault{Offline: true})
	// A step refreshes the engine's view of the devices, and the agent is
	// told the tools changed without listing them.
	callTool(t, op, &mcp.CallToolParams{Name: toolRead, Arguments: map[string]any{"device": "tank-1", "capability": "level"}})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was not told the tools changed when valve-1 went offline")
	}
	w := tools()[toolRequestWrite]
	if !strings.Contains(w.Description, "valve-1.open: not online now") || !*w.Annotations.DestructiveHint || !*w.Annotations.OpenWorldHint {
		t.Errorf("request_write with valve-1 offline = %+v %q, want the worst case, saying why", w.Annotations, w.Description)
	}
}

// TestMCPHintsTakeTheWorstOfAnActuatorAway: an irreversible actuator
// makes request_write destructive, and so does one whose device is
// away, whose profile is not known, though a reversible one is online.
func TestMCPHintsTakeTheWorstOfAnActuatorAway(t *testing.T) {
	var wrapped *devicetest.Driver
	s := mcpSite(t, siteOptions{devices: []string{"tank-1", "valve-1", "pump-1"},
		policies: map[string]runtime.CapPolicy{"pump-1.on": {Effects: &runtime.Declared{Contained: true}}},
		driver: func(d devices.Driver) devices.Driver {
			wrapped = devicetest.Wrap(d, devicetest.Options{})
			return wrapped
		}}, MCPOptions{})
	op := mustAgent(t, s, "operator", nil)
	write := func() *mcp.Tool {
		for tool, err := range op.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name == toolRequestWrite {
				return tool
			}
		}
		t.Fatal("no request_write")
		return nil
	}
	if w := write(); !*w.Annotations.DestructiveHint || !strings.Contains(w.Description, "pump-1.on") {
		t.Fatalf("request_write with an irreversible pump-1.on online = %+v %q, want destructive", w.Annotations, w.Description)
	}
	out, _, _ := callTool(t, op, &mcp.CallToolParams{Name: toolListDevices, Arguments: map[string]any{}})
	if b, _ := json.Marshal(out); !strings.Contains(string(b), `"destructive":true`) {
		t.Errorf("list_devices does not show pump-1.on as destructive: %s", b)
	}
	wrapped.SetFault("pump-1", devicetest.Fault{Offline: true})
	callTool(t, op, &mcp.CallToolParams{Name: toolRead, Arguments: map[string]any{"device": "tank-1", "capability": "level"}})
	if w := write(); !*w.Annotations.DestructiveHint || !strings.Contains(w.Description, "pump-1.on: not online now") ||
		!strings.Contains(w.Description, "valve-1.open") {
		t.Errorf("request_write with pump-1 away and valve-1 reversible online = %+v %q, want destructive", w.Annotations, w.Description)
	}
}

// TestMCPAgentTokenOnlyOnMCP: a token named in mcp.tokens is an agent's,
// and works nowhere but /mcp: on the API it would act as api:<name>,
// beyond the agent's modes, rules and rate.
func TestMCPAgentTokenOnlyOnMCP(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{})
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/devices", ""},
		{http.MethodPost, "/api/v1/commands", `{"device":"valve-1","capability":"open","value":true,"reason":"r"}`},
		{http.MethodPost, "/api/v1/mode", `{"mode":"observe","reason":"agent"}`},
		{http.MethodPost, "/api/v1/alarms/alm-1/ack", `{}`},
		{http.MethodPost, "/api/v1/runs/run-1/cancel", `{}`},
		{http.MethodPost, "/api/v1/plans/flush/start", `{}`},
		{http.MethodGet, "/metrics", ""},
	} {
		for _, tok := range []string{"operator", "viewer"} {
			code, body := s.call(tc.method, tc.path, tok, tc.body)
			if code != http.StatusForbidden || !strings.Contains(body, "is an agent's (named in mcp.tokens): it works only on /mcp") {
				t.Errorf("%s %s with the agent's token %s = %d %.200s, want 403 saying it works only on /mcp", tc.method, tc.path, tok, code, body)
			}
		}
	}
	// A token not named in mcp.tokens is the API's, as before.
	s.expect(http.MethodGet, "/api/v1/devices", "approver", "", http.StatusOK, "valve-1")
	// And the agent's token still works where it belongs.
	op := mustAgent(t, s, "operator", nil)
	if _, text, isErr := callTool(t, op, &mcp.CallToolParams{Name: toolListDevices, Arguments: map[string]any{}}); isErr {
		t.Errorf("list_devices with the agent's token = %q", text)
	}
}

// countEvents counts the journal's events of kind whose body holds every
// one of parts.
func countEvents(t *testing.T, s *site, kind runtime.Kind, parts ...string) int {
	t.Helper()
	s.waitSeq(t)
	evs, err := s.eng.Events(t.Context(), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(string(ev.Body), p) }) {
			n++
		}
	}
	return n
}

// TestMCPSessions: the journal records one login per session, not one
// per request, and a token holds at most maxSessions sessions at once.
func TestMCPSessions(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{PerMinute: 600, Burst: 100})
	op := mustAgent(t, s, "operator", nil)
	for range 3 {
		callTool(t, op, &mcp.CallToolParams{Name: toolListDevices, Arguments: map[string]any{}})
		if err := op.Ping(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := countEvents(t, s, runtime.KindLogin, `"surface":"mcp"`, `"user":"operator"`); n != 1 {
		t.Errorf("one session, three calls and three pings journaled %d logins, want 1", n)
	}
	var sessions []*mcp.ClientSession
	for range maxSessions {
		sessions = append(sessions, mustAgent(t, s, "viewer", nil))
	}
	if _, err := s.agent(t, "viewer", nil); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("session %d of one token: %v, want refused (429)", maxSessions+1, err)
	}
	code, body := s.call(http.MethodPost, MCPPath, "viewer", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "token viewer has 8 MCP sessions open, the most a token may") {
		t.Errorf("opening one more session = %d %s", code, body)
	}
	// Another token has its own; an ended session makes room.
	mustAgent(t, s, "operator", nil)
	if err := sessions[0].Close(); err != nil {
		t.Fatal(err)
	}
	// The server learns of the end when the client's DELETE has been
	// served, which Close does not wait for.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.agent(t, "viewer", nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(err.Error(), "Too Many Requests") {
			t.Fatalf("a session after one of %d ended: %v", maxSessions, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := countEvents(t, s, runtime.KindLogin, `"surface":"mcp"`, `"user":"viewer"`); n != maxSessions+1 {
		t.Errorf("%d sessions of viewer journaled %d logins", maxSessions+1, n)
	}
}

// TestMCPRequestBudget: every request counts, the pings and listings a
// tool call's rate does not bound included.
func TestMCPRequestBudget(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{PerMinute: 1, Burst: 1})
	view := mustAgent(t, s, "viewer", nil)
	var err error
	for i := 0; i < 20 && err == nil; i++ {
		err = view.Ping(t.Context(), nil)
	}
	if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Errorf("20 pings within a burst of 12 requests: %v, want refused (429)", err)
	}
	// Each token has its own.
	mustAgent(t, s, "operator", nil)
}

// soakRun starts the plan soak (one wait of an hour) as an agent and
// returns its run's id.
func soakRun(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	out, text, isErr := callTool(t, cs, &mcp.CallToolParams{Name: toolRunPlan, Arguments: map[string]any{"plan": "soak", "reason": "test"}})
	run, _ := out["run"].(map[string]any)
	if isErr || run == nil {
		t.Fatalf("run_plan soak = %s", text)
	}
	return run["id"].(string)
}

// maintenance puts the site in maintenance, as a person does: asked by
// one, approved by another.
func maintenance(t *testing.T, s *site) {
	t.Helper()
	_, ap, err := s.eng.SetMode(t.Context(), "console:adam", governance.ModeMaintenance, "service")
	if err != nil || ap == nil {
		t.Fatalf("SetMode(maintenance) = %v, %v; want an approval", ap, err)
	}
	s.expect(http.MethodPost, "/api/v1/approvals/"+ap.ID, "admin", `{"decision":"approve","mode":"maintenance"}`, http.StatusOK, `"status":"approved"`)
}

// TestMCPModeChangeCancelsAgentRuns: a run an agent started does not go
// on acting as mcp:<token> in a mode that admits no agent; a person's
// run does.
func TestMCPModeChangeCancelsAgentRuns(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{})
	op := mustAgent(t, s, "operator", nil)
	agentRun := soakRun(t, op)
	// A person's run of a plan like soak.
	i := slices.IndexFunc(s.eng.Modes(), func(m governance.Mode) bool { return m.Name == "two-person" })
	pol, _ := s.eng.Policy("valve-1", "open")
	steep := runtime.Plan{Name: "steep", Steps: []runtime.PlanStep{{Op: runtime.OpWait, Wait: time.Hour}}}
	if err := s.eng.Reconfigure(t.Context(), runtime.Config{Policies: map[string]runtime.CapPolicy{"valve-1.open": pol},
		Modes: []governance.Mode{s.eng.Modes()[i]}, Plans: append(s.eng.Plans(), steep)}); err != nil {
		t.Fatal(err)
	}
	person, err := s.eng.StartPlan(t.Context(), runtime.StartPlan{Plan: "steep", Principal: "console:olga", Origin: "console", Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	maintenance(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rec, err := s.eng.Wait(ctx, agentRun)
	if err != nil || rec.End != runtime.EndCancelled || !strings.Contains(rec.Why, "mode maintenance admits no AI agent") {
		t.Fatalf("the agent's run after the change to maintenance = %+v, %v; want cancelled, saying why", rec, err)
	}
	for _, r := range s.eng.Runs() {
		if r.ID == person.ID && r.Status == runtime.RunEnded {
			t.Errorf("a person's run ended at the mode change: %+v", r)
		}
	}
}

// TestMCPAdmissionFollowsReload: with mcp.modes unset, whether a mode
// admits agents is decided at each call from its base as it is then.
func TestMCPAdmissionFollowsReload(t *testing.T) {
	s := mcpSite(t, siteOptions{mode: "two-person"}, MCPOptions{})
	op := mustAgent(t, s, "operator", nil)
	list := &mcp.CallToolParams{Name: toolListDevices, Arguments: map[string]any{}}
	if _, text, isErr := callTool(t, op, list); isErr {
		t.Fatalf("list_devices in two-person = %q", text)
	}
	agentRun := soakRun(t, op)
	rebased := governance.ShippedModes()[governance.ModeMaintenance]
	rebased.Name, rebased.Base = "two-person", governance.ModeMaintenance
	pol, _ := s.eng.Policy("valve-1", "open")
	if err := s.eng.Reload(t.Context(), runtime.Config{Policies: map[string]runtime.CapPolicy{"valve-1.open": pol},
		Modes: []governance.Mode{rebased}, Plans: s.eng.Plans()}, runtime.ConfigChangedBody{File: "test.yaml", Digest: "00", By: "reload"}); err != nil {
		t.Fatal(err)
	}
	if _, text, isErr := callTool(t, op, list); !isErr || !strings.Contains(text, "mode two-person admits no AI agent") {
		t.Errorf("list_devices in two-person based on maintenance = %q, want refused", text)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if rec, err := s.eng.Wait(ctx, agentRun); err != nil || rec.End != runtime.EndCancelled {
		t.Errorf("the agent's run after the reload = %+v, %v; want cancelled", rec, err)
	}
}

// TestMCPModeTurnsAgentsAwayMidWait: a get_approval wait ends with a
// refusal when the mode stops admitting agents, and the listings are
// refused in such a mode: an agent learns nothing of the devices.
func TestMCPModeTurnsAgentsAwayMidWait(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{Modes: []string{governance.ModeSupervised}})
	progress := make(chan string, 16)
	op := mustAgent(t, s, "operator", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		progress <- r.Params.Message
	}})
	out, text, _ := callTool(t, op, &mcp.CallToolParams{Name: toolRequestWrite, Arguments: map[string]any{
		"device": "valve-1", "capability": "open", "value": true, "reason": "dry"}})
	apID, _ := out["approval_id"].(string)
	if apID == "" {
		t.Fatalf("request_write = %s, want pending_approval", text)
	}
	p := &mcp.CallToolParams{Name: toolGetApproval, Arguments: map[string]any{"approval_id": apID, "wait_seconds": 30}}
	p.SetProgressToken("w")
	done := make(chan *mcp.CallToolResult, 1)
	go func() { // owned by the test, which receives from done
		res, err := op.CallTool(t.Context(), p)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-progress // the wait is under way
	if _, _, err := s.eng.SetMode(t.Context(), "console:adam", governance.ModeObserve, "no agents now"); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "mode observe admits no AI agent") {
		t.Errorf("a wait across a change to observe = %+v, want refused", res)
	}
	for _, err := range op.Tools(t.Context(), nil) {
		if err == nil || !strings.Contains(err.Error(), "mode observe admits no AI agent") {
			t.Errorf("tools/list in observe: %v, want refused", err)
		}
		break
	}
	if _, err := op.ListResources(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "mode observe admits no AI agent") {
		t.Errorf("resources/list in observe: %v, want refused", err)
	}
}

// TestMCPConcurrentListingsLeaveFreshHints: refreshes that overlap (every
// listing refreshes the tools) never leave the write tool's hints as an
// older one worked them out.
func TestMCPConcurrentListingsLeaveFreshHints(t *testing.T) {
	if testing.Short() {
		t.Skip("many rounds of concurrent listings")
	}
	var wrapped *devicetest.Driver
	s := mcpSite(t, siteOptions{driver: func(d devices.Driver) devices.Driver {
		wrapped = devicetest.Wrap(d, devicetest.Options{})
		return wrapped
	}}, MCPOptions{PerMinute: 1 << 20, Burst: 1 << 20})
	var agents []*mcp.ClientSession
	for range 4 {
		agents = append(agents, mustAgent(t, s, "viewer", nil))
	}
	step := func() {
		if _, err := s.eng.Do(t.Context(), runtime.Command{Principal: "console:olga", Device: "tank-1", Capability: "level"}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Go(func() {
				for ctx.Err() == nil {
					for _, err := range a.Tools(ctx, nil) {
						if err != nil {
							break
						}
					}
				}
			})
		}
		for range 10 {
			wrapped.SetFault("valve-1", devicetest.Fault{Offline: true})
			step()
			wrapped.SetFault("valve-1", devicetest.Fault{})
			step()
		}
		online := round%2 == 0
		wrapped.SetFault("valve-1", devicetest.Fault{Offline: !online})
		step()
		cancel()
		wg.Wait()
		if got := slices.ContainsFunc(s.eng.Devices(), func(d devices.Device) bool { return d.ID == "valve-1" }); got != online {
			t.Fatalf("round %d: valve-1 online = %v, want %v", round, got, online)
		}
		for tool, err := range agents[0].Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name == toolRequestWrite && (strings.Contains(tool.Description, "- valve-1.open (") != online ||
				strings.Contains(tool.Description, "- valve-1.open: not online now") == online) {
				t.Fatalf("round %d: valve-1 online = %v, but request_write's description is stale:\n%s", round, online, tool.Description)
			}
		}
	}
}

// TestMCPAdmissionChangeRelists: when the mode stops or starts admitting
// agents, connected agents are told to list the tools again, and a
// listing answers as the mode says.
func TestMCPAdmissionChangeRelists(t *testing.T) {
	s := mcpSite(t, siteOptions{}, MCPOptions{Modes: []string{governance.ModeSupervised}})
	changed := make(chan struct{}, 8)
	op := mustAgent(t, s, "operator", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	if _, _, err := s.eng.SetMode(t.Context(), "console:adam", governance.ModeObserve, "no agents now"); err != nil {
		t.Fatal(err)
	}
	<-changed
	if _, err := op.ListTools(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "mode observe admits no AI agent") {
		t.Fatalf("tools/list in observe: %v, want refused", err)
	}
	_, ap, err := s.eng.SetMode(t.Context(), "console:adam", governance.ModeSupervised, "agents again")
	if err != nil || ap == nil {
		t.Fatalf("SetMode(supervised) = %v, %v; want an approval", ap, err)
	}
	s.expect(http.MethodPost, "/api/v1/approvals/"+ap.ID, "admin", `{"decision":"approve","mode":"supervised"}`, http.StatusOK, `"status":"approved"`)
	<-changed
	if res, err := op.ListTools(t.Context(), nil); err != nil || len(res.Tools) == 0 {
		t.Errorf("tools/list in supervised again = %v, %v", res, err)
	}
}

// TestMCPReadRefusedIsWithheldEverywhere: a rule that refuses agents the
// read of a capability keeps its value from them in every tool and
// resource that shows what the gateway holds, not only in read.
func TestMCPReadRefusedIsWithheldEverywhere(t *testing.T) {
	s := mcpSite(t, siteOptions{rules: []governance.Rule{{ID: "no-agent-tank", Principal: "mcp:*", Device: "tank-1",
		Capability: "level", Decision: governance.DecideDeny, Reason: "private to the site"}}}, MCPOptions{})
	if obs, err := s.eng.Read(t.Context(), "test", "tank-1", "level"); err != nil || obs.Reading == nil {
		t.Fatalf("the gateway's own read = %+v, %v", obs, err)
	}
	// People still see it: the rule names agents only.
	s.expect("GET", "/api/v1/devices", "approver", "", 200, `"reading":{"value":`)
	view := mustAgent(t, s, "viewer", nil)
	_, text, isErr := callTool(t, view, &mcp.CallToolParams{Name: toolRead, Arguments: map[string]any{"device": "tank-1", "capability": "level"}})
	if !isErr || !strings.Contains(text, "no-agent-tank") {
		t.Fatalf("read of tank-1.level = %q, want refused by the rule", text)
	}
	out, _, isErr := callTool(t, view, &mcp.CallToolParams{Name: toolListDevices, Arguments: map[string]any{}})
	if isErr {
		t.Fatalf("list_devices: %v", out)
	}
	level := func(devs any) map[string]any {
		for _, d := range devs.([]any) {
			d := d.(map[string]any)
			if d["id"] != "tank-1" {
				continue
			}
			for _, c := range d["capabilities"].([]any) {
				if c := c.(map[string]any); c["name"] == "level" {
					return c
				}
			}
		}
		t.Fatalf("no tank-1.level in %v", devs)
		return nil
	}
	if c := level(out["devices"]); c["reading"] != nil || !strings.Contains(fmt.Sprint(c["withheld"]), "no-agent-tank") {
		t.Errorf("list_devices shows tank-1.level as %v, want its reading withheld saying why", c)
	}
	// valve-1.open is not refused: its reading is there.
	res, err := view.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "shadowgate://devices/tank-1"})
	if err != nil {
		t.Fatal(err)
	}
	var dv map[string]any
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &dv); err != nil {
		t.Fatal(err)
	}
	if c := level([]any{dv}); c["reading"] != nil || c["withheld"] == nil {
		t.Errorf("the resource shows tank-1.level as %v, want it withheld", c)
	}
	// The reading's event is committed without waiting (a sensor's).
	var b []byte
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, _, isErr = callTool(t, view, &mcp.CallToolParams{Name: toolJournalTail, Arguments: map[string]any{"device": "tank-1", "kinds": "observed"}})
		if isErr {
			t.Fatalf("journal_tail: %v", out)
		}
		b, _ = json.Marshal(out)
		if strings.Contains(string(b), `"kind":"observed"`) || time.Now().After(deadline) {
			break
		}
	}
	if strings.Contains(string(b), `"value"`) || !strings.Contains(string(b), "which you may not read") {
		t.Errorf("journal_tail of tank-1 shows values or does not say what it withheld: %s", b)
	}
	// An operator token's agent is refused the same: the rule names mcp:*.
	op := mustAgent(t, s, "operator", nil)
	out, _, _ = callTool(t, op, &mcp.CallToolParams{Name: toolListDevices, Arguments: map[string]any{}})
	if c := level(out["devices"]); c["reading"] != nil {
		t.Errorf("an operator agent sees tank-1.level: %v", c)
	}
}
