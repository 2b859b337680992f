package governance_test

import (
	"fmt"
	"time"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/value"
)

func ExampleJudge() {
	pump := governance.Nothing()
	pump.Writes = governance.Scopes("greenhouse/pump-1")
	pump.Costs = true
	req := governance.Request{
		Principal: "mqtt:alice", Device: "pump-1", Capability: "on", Write: true,
		Profile: pump, Value: value.Bool(true), Mode: governance.ModeSupervised,
		Now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
	pol := &governance.Policy{Modes: governance.ShippedModes()}
	v := governance.Judge(&req, pol)
	fmt.Println(v.Outcome, v.Stage, v.Why)

	req.Mode = governance.ModeObserve
	v = governance.Judge(&req, pol)
	fmt.Println(v.Outcome, v.Stage, v.Why)
	// Output:
	// ask ask_line mode supervised asks: it writes greenhouse/pump-1
	// refuse ceiling mode observe does not permit it: it writes greenhouse/pump-1
}
