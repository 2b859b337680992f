// Package examples holds the example configurations. The demo
// configuration is embedded in the binary for `shadowgate serve --demo`.
package examples

import _ "embed"

// Demo is examples/demo.yaml: the simulated greenhouse.
//
//go:embed demo.yaml
var Demo []byte
