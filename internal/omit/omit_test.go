package omit

import "testing"

func TestRefusal(t *testing.T) {
	if got, want := UplinkPart.Refusal(), "this build omits the uplink (built with shadowgate_omit_uplink)"; got != want {
		t.Errorf("UplinkPart.Refusal() = %q, want %q", got, want)
	}
}

func TestOmitted(t *testing.T) {
	want := map[Part]bool{OPCUAPart: OPCUA, MCPPart: MCP, UplinkPart: Uplink, MetricsPart: Metrics}
	got := map[Part]bool{}
	for _, p := range Omitted() {
		got[p] = true
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("Omitted() has %s: %v, want %v", p.Tag(), got[p], w)
		}
	}
}
