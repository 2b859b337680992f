package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// MCPPath is where the MCP endpoint is served, on the console's port.
const MCPPath = "/mcp"

// MCPOptions turn on the MCP endpoint, [MCPPath]: the Model Context
// Protocol over streamable HTTP, for AI agents. An agent calls tools that
// run through the same code as the API: every read and write is a step
// the engine judges and journals, as the principal "mcp:<token name>".
// An agent never answers an approval, changes the mode or makes a rule.
type MCPOptions struct {
	// Tokens names the tokens (Options.Tokens) that are agents'; any
	// other token is refused on [MCPPath] with 403, and these are refused
	// with 403 everywhere else, where the agent's checks would not hold.
	// A viewer token lists, reads and follows; an operator token also
	// requests writes and starts plans. An approver's or an admin's token
	// is refused (403) even if named: an agent must never approve.
	Tokens []string
	// PerMinute and Burst bound each token's tool calls. Defaults 60 and
	// 10; a call over the bound is refused, saying when to try again.
	// Every HTTP request to the endpoint (the handshake, pings, listings
	// and the calls themselves) also spends from a second budget of the
	// token's, twice that rate with a burst of twice Burst plus 10: a
	// request over it is answered 429 with Retry-After.
	PerMinute, Burst int
	// Modes are the modes in which agents may call tools. In any other
	// mode every tool call, read and listing is refused, saying so, and
	// the runs agents started are cancelled. Empty means every mode but
	// maintenance and the modes based on it, as the modes are at each
	// call: a reload that bases a mode on maintenance turns agents away
	// at once.
	Modes []string
	// ConsoleURL is the console's address as a person reaches it
	// ("https://gw.local:8080"), for the links an agent shows its user.
	// Empty means the scheme and host of the agent's own request.
	ConsoleURL string
	// Version is the gateway's version, told to clients.
	Version string
}

// mcpNotServed answers every request to [MCPPath] of a gateway that does
// not serve MCP with 404 and why, in JSON, before any login: a client
// sent there (an agent host, the stdio bridge) learns MCP is off, rather
// than being sent to the console's login page, and a token this gateway
// does not know does not count as a failed login.
func mcpNotServed(why string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Request().URL.Path != MCPPath {
				return next(c)
			}
			c.Response().Header().Set("Cache-Control", "no-store")
			return c.JSON(http.StatusNotFound, apiError{Error: http.StatusText(http.StatusNotFound), Detail: why})
		}
	}
}
