package gateway

import (
	"net/url"
	"slices"
	"strings"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/internal/omit"
	"github.com/shadowgate/shadowgate/web"
)

// MCPConfig turns on the MCP endpoint for AI agents: /mcp on the
// console's port. An agent uses one of web.tokens, acts as the principal
// "mcp:<token name>", and is judged like anyone: it can never act beyond
// what the mode, the rules and the people allow. A token named here is an
// agent's and works only on /mcp: the API refuses it (403), since there
// the agent's checks would not hold. Off unless enabled.
type MCPConfig struct {
	// Enabled must be true to serve /mcp.
	Enabled bool `yaml:"enabled"`
	// Tokens names the tokens of web.tokens that are agents'; any other
	// token is refused on /mcp, and these are refused everywhere else. A
	// viewer token lists, reads and follows approvals; an operator token
	// also requests writes and starts plans. An approver's or an admin's
	// token is refused: an agent must never hold a token that approves.
	Tokens []string `yaml:"tokens"`
	// Rate bounds each token's tool calls. Default 60 a minute, a burst
	// of 10.
	Rate RateConfig `yaml:"rate"`
	// Modes are the modes in which agents may call tools; in any other
	// mode every call is refused, saying so, and the runs agents started
	// are cancelled. Default: every mode except maintenance and the modes
	// based on it, in which writes run without asking anyone, as the
	// modes are at each call (a reload may change a mode's base).
	Modes []string `yaml:"modes"`
	// ConsoleURL is the console's address as people reach it, http:// or
	// https://, for the approval links agents show their users. Default:
	// the address the agent itself used.
	ConsoleURL string `yaml:"console_url"`
}

// mcp checks the mcp section against the console, its tokens and the
// modes, and returns the endpoint's options; nil when it is off.
func (c *checker) mcp(p path, mc *MCPConfig, cfg *Config, b *Built) *web.MCPOptions {
	if mc == nil || !mc.Enabled {
		return nil
	}
	if omit.MCP {
		c.errf(p, "%s", omit.MCPPart.Refusal())
		return nil
	}
	if b.Web == nil {
		c.errf(p.with("enabled"), "MCP is served on the console's port, and the console is off (web.enabled: false)")
		return nil
	}
	o := &web.MCPOptions{PerMinute: mc.Rate.PerMinute, Burst: mc.Rate.Burst, ConsoleURL: mc.ConsoleURL}
	if mc.Rate.PerMinute < 0 {
		c.errf(p.with("rate", "per_minute"), "%d is negative (0 means the default, 60)", mc.Rate.PerMinute)
	}
	if mc.Rate.Burst < 0 {
		c.errf(p.with("rate", "burst"), "%d is negative (0 means the default, 10)", mc.Rate.Burst)
	}
	if len(mc.Tokens) == 0 {
		c.errf(p.with("tokens"), "name at least one of web.tokens for agents to use")
	}
	for i, name := range mc.Tokens {
		j := slices.IndexFunc(cfg.Web.Tokens, func(t TokenConfig) bool { return t.Name == name })
		switch {
		case j < 0:
			c.errf(p.with("tokens", i), "no token %q in web.tokens", name)
		case slices.Contains(mc.Tokens[:i], name):
			c.errf(p.with("tokens", i), "token %q is named twice", name)
		case cfg.Web.Tokens[j].Role != "viewer" && cfg.Web.Tokens[j].Role != "operator":
			// An agent must never hold a token that answers approvals,
			// though the API refuses an agent's token.
			c.errf(p.with("tokens", i), "token %q is %s %s; an agent's token is a viewer or an operator, so that it can never answer an approval (a token is an agent's or an API client's, never both: give the API client its own)",
				name, article(cfg.Web.Tokens[j].Role), cfg.Web.Tokens[j].Role)
		}
	}
	o.Tokens = slices.Clone(mc.Tokens)
	modes := governance.ShippedModes()
	for _, m := range b.Modes {
		modes[m.Name] = m
	}
	for i, name := range mc.Modes {
		if _, ok := modes[name]; !ok {
			names := make([]string, 0, len(modes))
			for n := range modes {
				names = append(names, n)
			}
			slices.Sort(names)
			c.errf(p.with("modes", i), "unknown mode %q (want one of %s)", name, strings.Join(names, ", "))
		}
	}
	// Without modes named, the endpoint decides at each call from the
	// mode in force and its base, as the modes are then.
	o.Modes = slices.Clone(mc.Modes)
	if mc.ConsoleURL != "" {
		u, err := url.Parse(mc.ConsoleURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.errf(p.with("console_url"), "want an http:// or https:// address, such as https://gateway.local:8080")
		}
	}
	return o
}

// article is "a" or "an" before word.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
