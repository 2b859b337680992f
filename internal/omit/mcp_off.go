//go:build shadowgate_omit_mcp

package omit

// MCP is true when the build leaves out the part of that name (tag shadowgate_omit_mcp).
const MCP = true
