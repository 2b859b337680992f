package gateway

import (
	"slices"
	"strings"
	"testing"
)

const mcpTokens = `web:
  tokens:
    - {name: agent, role: operator, token_hash: 86d39b40ee322b4ae2818e8d2d3a5324f488367fcc25e076bd885891a09ec02f}
    - {name: watcher, role: viewer, token_hash: ae2aa5abbc9174848ad30e5ce537836aa93004cc7d0a89f79e35adc510675cb1}
`

// TestMCPConfig: the mcp section is off unless enabled, and on it gives
// the console its endpoint with the tokens, the rate and the modes.
func TestMCPConfig(t *testing.T) {
	b, err := Load("c.yaml", []byte(minimal+mcpTokens))
	if err != nil {
		t.Fatal(err)
	}
	if b.Web.MCP != nil {
		t.Fatalf("MCP without an mcp section = %+v, want off", b.Web.MCP)
	}
	b, err = Load("c.yaml", []byte(minimal+mcpTokens+"mcp: {enabled: false, tokens: [agent]}\n"))
	if err != nil || b.Web.MCP != nil {
		t.Fatalf("MCP with enabled: false = %+v, %v, want off", b.Web.MCP, err)
	}
	b, err = Load("c.yaml", []byte(minimal+mcpTokens+"mcp: {enabled: true, tokens: [agent], rate: {per_minute: 6, burst: 2}, console_url: https://gw.local:8080}\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := b.Web.MCP
	if o == nil || !slices.Equal(o.Tokens, []string{"agent"}) || o.PerMinute != 6 || o.Burst != 2 || o.ConsoleURL != "https://gw.local:8080" {
		t.Fatalf("MCP options = %+v", o)
	}
	// By default the endpoint decides at each call, from the mode in
	// force and its base as the modes are then (a reload may rebase one
	// on maintenance): no list is fixed at load.
	if len(o.Modes) != 0 {
		t.Errorf("default modes = %v, want none named: decided at each call", o.Modes)
	}
	b, err = Load("c.yaml", []byte(minimal+mcpTokens+"mcp: {enabled: true, tokens: [agent], modes: [supervised]}\n"))
	if err != nil || !slices.Equal(b.Web.MCP.Modes, []string{"supervised"}) {
		t.Errorf("modes named = %+v, %v; want [supervised]", b.Web.MCP, err)
	}
	// An agent is the token's holder, as on the API.
	b, err = Load("c.yaml", []byte(minimal+`users: [{name: ann, role: operator, password_hash: "$2a$10$dfbQdJdRHw8TjUGBosHV8.72wmFeFja48Fyh9.M5VtkDHCxMBaF9O"}]
web:
  tokens:
    - {name: agent, role: operator, user: ann, token_hash: 86d39b40ee322b4ae2818e8d2d3a5324f488367fcc25e076bd885891a09ec02f}
mcp: {enabled: true, tokens: [agent]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Person("mcp:agent"); got != "ann" {
		t.Errorf("Person(mcp:agent) = %q, want the token's holder ann", got)
	}
}

func TestMCPConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown token", mcpTokens + "mcp: {enabled: true, tokens: [agent, nobody]}\n", `mcp.tokens[1]: no token "nobody" in web.tokens`},
		{"approver", mcpTokens + "    - {name: ann, role: approver, token_hash: c652b710377aa643a72221018b2c6e8f6399bd940ccbb8dbe80009ce0aaea5fe}\n" +
			"mcp: {enabled: true, tokens: [agent, ann]}\n", `mcp.tokens[1]: token "ann" is an approver; an agent's token is a viewer or an operator`},
		{"twice", mcpTokens + "mcp: {enabled: true, tokens: [agent, agent]}\n", `mcp.tokens[1]: token "agent" is named twice`},
		{"no tokens", mcpTokens + "mcp: {enabled: true}\n", `mcp.tokens: name at least one of web.tokens`},
		{"unknown mode", mcpTokens + "mcp: {enabled: true, tokens: [agent], modes: [supervised, turbo]}\n", `mcp.modes[1]: unknown mode "turbo"`},
		{"rate", mcpTokens + "mcp: {enabled: true, tokens: [agent], rate: {per_minute: -1}}\n", `mcp.rate.per_minute: -1 is negative`},
		{"url", mcpTokens + "mcp: {enabled: true, tokens: [agent], console_url: gw.local}\n", `mcp.console_url: want an http:// or https:// address`},
		{"unknown key", mcpTokens + "mcp: {enabled: true, tokens: [agent], token: x}\n", `mcp.token: unknown key "token"`},
		{"console off", "web: {enabled: false}\nmcp: {enabled: true, tokens: [agent]}\n", `mcp.enabled: MCP is served on the console's port, and the console is off`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("c.yaml", []byte(minimal+tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error =\n  %v\nwant it to contain\n  %s", err, tc.want)
			}
		})
	}
}

// TestMCPConfigWaitsForARestart: the endpoint is the console's, built at
// start, so a reload names a changed mcp section as waiting for a restart.
func TestMCPConfigWaitsForARestart(t *testing.T) {
	was := minimal + mcpTokens + "mcp: {enabled: true, tokens: [agent]}\n"
	running, err := Load("c.yaml", []byte(was))
	if err != nil {
		t.Fatal(err)
	}
	is := minimal + mcpTokens + "mcp: {enabled: true, tokens: [agent, watcher]}\n"
	next, err := Load("c.yaml", []byte(is))
	if err != nil {
		t.Fatal(err)
	}
	restart, err := needsRestart(running, next, []byte(is))
	if err != nil || !slices.Contains(restart, "mcp") {
		t.Fatalf("needsRestart = %v, %v; want mcp named", restart, err)
	}
	if restart, _ := needsRestart(running, running, []byte(was)); slices.Contains(restart, "mcp") {
		t.Errorf("the same file: needsRestart = %v, want mcp not named", restart)
	}
}
