//go:build shadowgate_omit_mcp

package main

import (
	"fmt"
	"io"

	"github.com/shadowgate/shadowgate/internal/omit"
)

// mcpCmd refuses: this build has no MCP client.
func mcpCmd(_ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "shadowgate mcp: "+omit.MCPPart.Refusal())
	return exitUsage
}
