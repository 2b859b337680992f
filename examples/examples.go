// Package examples holds the example configurations. The demo
// configuration is embedded in the binary for `shadowgate serve --demo`.
package examples

import _ "embed"

// Demo is examples/demo.yaml: the simulated greenhouse.
//
//go:embed demo.yaml
var Demo []byte

// Fixtures is examples/fixtures.yaml: the greenhouse over the real serial
// and GPIO drivers, on the firmware simulators that `shadowgate serve
// --demo=fixtures` starts; it fills in ${LINE_PORT} and ${MODBUS_PORT}.
//
//go:embed fixtures.yaml
var Fixtures []byte
