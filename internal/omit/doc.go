// Package omit says which optional parts this build leaves out. Each part
// has a build tag, as Tailscale's ts_omit_* tags do, and a constant here
// that is true when the tag is set:
//
//	shadowgate_omit_opcua    OPCUA    the OPC-UA driver and `shadowgate opcua`
//	shadowgate_omit_mcp      MCP      the MCP endpoint and `shadowgate mcp`
//	shadowgate_omit_uplink   Uplink   the uplink to a site broker
//	shadowgate_omit_metrics  Metrics  /metrics and the Prometheus client
//
// A package that links a part tests the constant where it uses the part,
// or keeps the part in a file built without the tag, so that the linker
// leaves the part's code out. A configuration that uses an omitted part is
// refused at load with [Part.Refusal]'s sentence, never ignored.
package omit

// A Part is an optional part of the gateway.
type Part int

// The parts, in the order [Omitted] lists them.
const (
	OPCUAPart Part = iota
	MCPPart
	UplinkPart
	MetricsPart
)

var parts = [...]struct {
	name, tag string
	omitted   bool
}{
	OPCUAPart:   {"the OPC-UA driver", "shadowgate_omit_opcua", OPCUA},
	MCPPart:     {"MCP", "shadowgate_omit_mcp", MCP},
	UplinkPart:  {"the uplink", "shadowgate_omit_uplink", Uplink},
	MetricsPart: {"the metrics", "shadowgate_omit_metrics", Metrics},
}

// Omitted returns the parts this build leaves out, in order; the caller
// owns the slice.
func Omitted() []Part {
	var out []Part
	for p := range parts {
		if parts[p].omitted {
			out = append(out, Part(p))
		}
	}
	return out
}

// Name is the part as a sentence names it: "the OPC-UA driver".
func (p Part) Name() string { return parts[p].name }

// Tag is the build tag that leaves the part out.
func (p Part) Tag() string { return parts[p].tag }

// Refusal is the sentence that refuses a use of the part in a build
// without it: "this build omits the uplink (built with
// shadowgate_omit_uplink)".
func (p Part) Refusal() string {
	return "this build omits " + p.Name() + " (built with " + p.Tag() + ")"
}
