//go:build !shadowgate_omit_mcp

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/gateway"
	"github.com/shadowgate/shadowgate/runtime"
)

// The published demo tokens of examples/mcp.yaml.
const (
	agentToken    = "sg-demo-agent-token"
	watcherToken  = "sg-demo-watcher-token"
	approverToken = "sg-demo-approver-token"
)

// mcpGateway runs `shadowgate serve` on examples/mcp.yaml, with its state
// in a temporary directory and its ports picked by the system, and
// returns the binary and the console's address.
func mcpGateway(t *testing.T) (g *gatewayProc, bin, base string) {
	t.Helper()
	bin = shadowgateBinary(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "mcp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The agents of the subtests share one token; its rate (tested in
	// web) would refuse some of their calls.
	cfg := strings.NewReplacer("127.0.0.1:1883", "127.0.0.1:0", "127.0.0.1:8080", "127.0.0.1:0",
		"state_dir: /var/lib/shadowgate", "state_dir: "+filepath.Join(dir, "state"),
		"rate: {per_minute: 60, burst: 10}", "rate: {per_minute: 6000, burst: 1000}").Replace(string(b))
	if !strings.Contains(cfg, "burst: 1000") {
		t.Fatal("examples/mcp.yaml has no rate of 60 a minute, burst 10, to raise")
	}
	file := filepath.Join(dir, "mcp.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g = startGateway(t, bin, file)
	line := g.await(t, "the console", has("console serving"))
	addr := regexp.MustCompile(`address=(\S+)`).FindStringSubmatch(line)
	if addr == nil {
		t.Fatalf("no address in %q", line)
	}
	g.awaitEver(t, "the devices", has("tank-1"))
	return g, bin, "http://" + addr[1]
}

// wantAnnotations are the tools' hints from the example's effect
// profiles, worked out here from the configuration, not the server.
func wantAnnotations(t *testing.T) map[string]map[string]bool {
	t.Helper()
	built, err := gateway.LoadFile(filepath.Join("..", "..", "examples", "mcp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	destructive, reaches, readReaches := false, false, false
	for _, d := range built.Devices {
		for _, c := range d.Capabilities {
			if c.Readable() {
				readReaches = readReaches || runtime.ReadProfile(&d, &c).Reaches
			}
			if c.Kind != devices.KindActuator {
				continue
			}
			pol := built.Policies[d.ID+"."+c.Name]
			p := runtime.Profile(&d, &c, &pol)
			destructive = destructive || !p.Reversible
			reaches = reaches || p.Reaches
		}
	}
	view := map[string]bool{"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false}
	return map[string]map[string]bool{
		"list_devices": view, "get_approval": view, "journal_tail": view,
		"read":          {"readOnlyHint": true, "destructiveHint": false, "openWorldHint": readReaches},
		"request_write": {"readOnlyHint": false, "destructiveHint": destructive, "openWorldHint": reaches},
		// The example's one plan only reads.
		"run_plan": {"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false},
	}
}

// checkAnnotations compares tools' annotations, as JSON, with want.
func checkAnnotations(t *testing.T, who string, got map[string]map[string]any) {
	t.Helper()
	want := wantAnnotations(t)
	for name, hints := range want {
		a, ok := got[name]
		if !ok {
			t.Errorf("%s: tool %s is not listed", who, name)
			continue
		}
		for k, v := range hints {
			// A false readOnlyHint may be left out: false is its default.
			if g, ok := a[k].(bool); g != v || (!ok && !(k == "readOnlyHint" && !v)) {
				t.Errorf("%s: %s.%s = %v, want %v from the effect profiles", who, name, k, a[k], v)
			}
		}
	}
}

// nodeSDK finds the TypeScript MCP SDK that .ci/run installs
// ($SHADOWGATE_MCP_SDK names its node_modules), and node. Without them
// the test is skipped, or fails under SHADOWGATE_E2E=1.
func nodeSDK(t *testing.T) (node, modules string) {
	t.Helper()
	modules = os.Getenv("SHADOWGATE_MCP_SDK")
	if modules == "" {
		modules, _ = filepath.Abs(filepath.Join("..", "..", ".ci", "npm", "node_modules"))
	}
	node, err := exec.LookPath("node")
	_, serr := os.Stat(filepath.Join(modules, "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil || serr != nil {
		const why = "node or the npm package @modelcontextprotocol/sdk is not installed (.ci/run installs it; SHADOWGATE_MCP_SDK=node_modules)"
		if os.Getenv("SHADOWGATE_E2E") == "1" {
			t.Fatal(why + ", and SHADOWGATE_E2E=1 needs the independent MCP client to run")
		}
		t.Skip(why)
	}
	return node, modules
}

// runAgent runs testdata/mcp/agent.mjs with node and returns its steps.
func runAgent(t *testing.T, node, modules string, args ...string) map[string]map[string]any {
	t.Helper()
	// ESM resolves packages from the script's folder up, never from
	// NODE_PATH: the script runs beside a link to the SDK's node_modules.
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "mcp", "agent.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.mjs"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "agent.mjs")}, args...)...)
	cmd.Env = append(os.Environ(), "AGENT_TOKEN="+agentToken, "WATCHER_TOKEN="+watcherToken, "APPROVER_TOKEN="+approverToken)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node agent.mjs %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out, stderr.String())
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("agent.mjs printed %q: %v", sc.Text(), err)
		}
		steps[m["step"].(string)] = m
	}
	t.Logf("agent.mjs %s: %d steps; its stderr:\n%s", args[0], len(steps), stderr.String())
	return steps
}

// judgeAgent checks what the TypeScript agent saw, over either transport.
func judgeAgent(t *testing.T, who string, steps map[string]map[string]any) {
	t.Helper()
	step := func(name string) map[string]any {
		s, ok := steps[name]
		if !ok {
			t.Fatalf("%s: the agent printed no %s step (got %v)", who, name, steps)
		}
		return s
	}
	structured := func(s map[string]any) map[string]any { m, _ := s["structured"].(map[string]any); return m }

	tools := map[string]map[string]any{}
	for _, tl := range step("tools")["tools"].([]any) {
		m := tl.(map[string]any)
		tools[m["name"].(string)], _ = m["annotations"].(map[string]any)
	}
	checkAnnotations(t, who, tools)

	if r := step("read"); r["isError"] != false || structured(r)["outcome"] != "completed" || structured(r)["reading"] == nil {
		t.Errorf("%s: read tank-1.level = %v, want completed with a reading", who, r)
	}
	w := structured(step("request_write"))
	if w["outcome"] != "pending_approval" || w["approval_id"] == nil || !strings.Contains(w["console_url"].(string), "/approvals#approval-") {
		t.Fatalf("%s: request_write = %v, want pending_approval with an id and a console link", who, step("request_write"))
	}
	if s := step("approve"); s["status"] != float64(http.StatusOK) {
		t.Fatalf("%s: the person's approval through the API = %v, want 200", who, s)
	}
	g := step("get_approval")
	ga := structured(g)
	act, _ := ga["act"].(map[string]any)
	outcome, _ := ga["outcome"].(map[string]any)
	if g["isError"] != false || ga["status"] != "approved" || ga["done"] != true || act == nil || act["result"] != "confirmed" ||
		outcome == nil || outcome["receipt"] == nil || !strings.Contains(ga["summary"].(string), "approved by api:approver") {
		t.Errorf("%s: get_approval = %v, want approved by api:approver, done, confirmed, with the receipt", who, g)
	}
	if r := step("refused"); r["isError"] != true || !strings.Contains(r["text"].(string), "deny rule no-agent-heat (agents never run the heater)") {
		t.Errorf("%s: a write the rules deny = %v, want a tool error with the judge's reason", who, r)
	}
	if r := step("unknown_tool"); r["thrown"] != true || r["code"] != float64(-32602) {
		t.Errorf("%s: an unknown tool = %v, want a protocol error -32602", who, r)
	}
	if names := fmt.Sprint(step("watcher_tools")["names"]); strings.Contains(names, "request_write") || strings.Contains(names, "run_plan") ||
		!strings.Contains(names, "read") {
		t.Errorf("%s: a viewer token is offered %s, want no request_write or run_plan", who, names)
	}
	if r := step("watcher_write"); !(r["isError"] == true && strings.Contains(fmt.Sprint(r["text"]), "needs a token with the operator role")) &&
		!(r["thrown"] == true && strings.Contains(fmt.Sprint(r["message"]), `unknown tool "request_write"`)) {
		t.Errorf("%s: a viewer token's write = %v, want refused for its role, or no such tool", who, r)
	}
	if r := step("not_admitted"); r["connected"] != false {
		t.Errorf("%s: a token not named in mcp.tokens = %v, want refused", who, r)
	}
}

// TestMCPEndToEnd runs `shadowgate serve` on examples/mcp.yaml and drives
// it as AI agents do: the TypeScript SDK over HTTP against serve's /mcp
// and over stdio against the `shadowgate mcp` process, and the Go SDK's
// client over both. A person approves through the API in between.
func TestMCPEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	g, bin, base := mcpGateway(t)
	endpoint := base + "/mcp"

	t.Run("go-http", func(t *testing.T) {
		cs := goAgent(t, &mcp.StreamableClientTransport{Endpoint: endpoint,
			HTTPClient: gatewayClient(endpoint, agentToken), MaxRetries: -1})
		goChecks(t, "Go SDK over HTTP", cs)
	})
	t.Run("go-http-console-approval", func(t *testing.T) {
		cs := goAgent(t, &mcp.StreamableClientTransport{Endpoint: endpoint,
			HTTPClient: gatewayClient(endpoint, agentToken), MaxRetries: -1})
		consoleApproval(t, base, cs)
	})
	t.Run("go-stdio", func(t *testing.T) {
		cmd := exec.Command(bin, "mcp", "--url", endpoint)
		cmd.Env = append(os.Environ(), envMCPToken+"="+agentToken)
		cmd.Stderr = t.Output()
		cs := goAgent(t, &mcp.CommandTransport{Command: cmd})
		goChecks(t, "Go SDK over stdio", cs)
	})
	t.Run("go-stdio-refused-token", func(t *testing.T) {
		cmd := exec.Command(bin, "mcp", "--url", endpoint)
		cmd.Env = append(os.Environ(), envMCPToken+"="+approverToken)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitRefused || !strings.Contains(stderr.String(), "refused the token") {
			t.Errorf("shadowgate mcp with a token not in mcp.tokens: %v, %q; want exit %d saying so", err, stderr.String(), exitRefused)
		}
	})

	// The gateway stops cleanly with an agent connected: its session's
	// event stream does not hold up the console's shutdown.
	defer func() {
		if t.Failed() {
			return
		}
		cs := goAgent(t, &mcp.StreamableClientTransport{Endpoint: endpoint,
			HTTPClient: gatewayClient(endpoint, agentToken), MaxRetries: -1})
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		g.await(t, "the gateway's stop", has("gateway stopped"))
		for _, l := range g.all {
			if strings.Contains(l, "deadline exceeded") || strings.Contains(l, "level=ERROR") {
				t.Errorf("the gateway's stop with an agent connected logged %q", l)
			}
		}
		if err := g.cmd.Wait(); err != nil {
			t.Errorf("serve stopped with %v, want exit 0", err)
		}
	}()

	node, modules := nodeSDK(t)
	t.Run("typescript-http", func(t *testing.T) {
		judgeAgent(t, "TypeScript SDK over HTTP", runAgent(t, node, modules, "http", endpoint, base, "true"))
	})
	t.Run("typescript-stdio", func(t *testing.T) {
		judgeAgent(t, "TypeScript SDK over stdio", runAgent(t, node, modules, "stdio", bin, endpoint, base, "false"))
	})
}

func goAgent(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "shadowgate-e2e-go", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	// The gateway tells its version (the test's binary is not stamped).
	if si := cs.InitializeResult().ServerInfo; si.Name != "shadowgate" || si.Version != "dev" {
		t.Errorf("server info = %+v, want shadowgate, version dev", si)
	}
	return cs
}

// goChecks lists the tools and reads a sensor with the Go SDK's client.
func goChecks(t *testing.T, who string, cs *mcp.ClientSession) {
	t.Helper()
	got := map[string]map[string]any{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(tool.Annotations)
		var a map[string]any
		_ = json.Unmarshal(b, &a)
		got[tool.Name] = a
	}
	checkAnnotations(t, who, got)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"device": "air-1", "capability": "temperature"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out["outcome"] != "completed" || out["reading"] == nil {
		t.Errorf("%s: read air-1.temperature = %v", who, res.Content)
	}
	// Resources: a device's state.
	rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "shadowgate://devices/tank-1"})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, `"id": "tank-1"`) {
		t.Errorf("%s: the resource of tank-1 = %v, %v", who, rr, err)
	}
}

// consoleApproval: the agent asks to start the pump; a person logs in to
// the console as a browser does and approves on the Approvals page's
// form; get_approval reports who approved and the receipt.
func consoleApproval(t *testing.T, base string, cs *mcp.ClientSession) {
	t.Helper()
	ctx := t.Context()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_write", Arguments: map[string]any{
		"device": "pump-1", "capability": "on", "value": true, "reason": "fill the trays"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	id, _ := out["approval_id"].(string)
	if res.IsError || out["outcome"] != "pending_approval" || id == "" {
		t.Fatalf("request_write pump-1.on = %v", res.Content)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &feHTTP{t: t, name: "console:demo", base: base,
		c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if status, _ := h.page(ctx, "/login"); status != http.StatusOK || h.csrf == "" {
		t.Fatalf("GET /login = %d, CSRF token %q", status, h.csrf)
	}
	if status, body := h.form(ctx, "/login", url.Values{"user": {demoUser}, "password": {demoPassword}}); status != http.StatusSeeOther {
		t.Fatalf("logging in as demo = %d %s", status, body)
	}
	status, page := h.page(ctx, "/approvals")
	if status != http.StatusOK || !strings.Contains(string(page), "approval-"+id) || !strings.Contains(string(page), "mcp:agent") {
		t.Fatalf("the Approvals page = %d, want the agent's request %s on it", status, id)
	}
	if status, body := h.form(ctx, "/approvals/"+id, url.Values{"decision": {"approve"}, "device": {"pump-1"}, "capability": {"on"},
		"value": {"true"}}); status != http.StatusSeeOther {
		t.Fatalf("approving in the console = %d %s, want 303", status, body)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_approval", Arguments: map[string]any{"approval_id": id, "wait_seconds": 30}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ = res.StructuredContent.(map[string]any)
	act, _ := out["act"].(map[string]any)
	outcome, _ := out["outcome"].(map[string]any)
	if res.IsError || out["done"] != true || act == nil || act["result"] != "confirmed" || outcome == nil || outcome["receipt"] == nil ||
		!strings.Contains(out["summary"].(string), "approved by console:demo") {
		t.Errorf("get_approval after the console's approval = %v", res.Content)
	}
}
