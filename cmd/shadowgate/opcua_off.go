//go:build shadowgate_omit_opcua

package main

import (
	"fmt"
	"io"

	"github.com/shadowgate/shadowgate/internal/omit"
)

// opcuaCmd refuses: this build has no OPC-UA client.
func opcuaCmd(_ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "shadowgate opcua: "+omit.OPCUAPart.Refusal())
	return exitUsage
}
