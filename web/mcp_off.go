//go:build shadowgate_omit_mcp

package web

import (
	"errors"

	"github.com/shadowgate/shadowgate/internal/omit"
)

// mountMCP refuses Options.MCP: this build has no MCP endpoint.
func (s *Server) mountMCP() error {
	if s.opts.MCP != nil {
		return errors.New("mcp: " + omit.MCPPart.Refusal())
	}
	s.e.Pre(mcpNotServed("this gateway serves no MCP: " + omit.MCPPart.Refusal()))
	return nil
}
