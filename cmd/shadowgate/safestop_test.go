package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMDrivesToSafeBeforeExit: serve with the pump running, send
// SIGTERM, and the pump is off in the simulator's state file (the
// hardware) by the time the process has exited, the drive journaled as
// the gateway's own.
func TestSIGTERMDrivesToSafeBeforeExit(t *testing.T) {
	bin := shadowgateBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// The pump runs when the gateway starts, as hardware left on would.
	worldFile := filepath.Join(state, "world.json")
	if err := os.WriteFile(worldFile, []byte(`{"state":{"level":60,"temperature":14,"pump":true,"heater":true},"received":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(config, []byte(`gateway: {id: stop, state_dir: `+state+`}
mode: observe
mqtt: {listen: "127.0.0.1:0"}
web: {listen: "127.0.0.1:0"}
drivers:
  - {name: sim, type: sim, sim: {state_file: world.json}}
devices:
  - id: pump-1
    driver: sim
    address: pump
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true, effects: {reversible: true}, safe: false}
  - id: heater-1
    driver: sim
    address: heater
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true, effects: {reversible: true}, safe: false, on_stop: keep}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, config)
	g.await(t, "the gateway to be ready", has("gateway ready"))
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	g.await(t, "the drive to safe", has("driving to safe", "pump-1", "trigger=stop"))
	g.await(t, "the gateway to stop", has("gateway stopped"))
	for range g.lines {
	}
	done := make(chan error, 1)
	go func() { done <- g.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	b, err := os.ReadFile(worldFile)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		State struct{ Pump, Heater bool } `json:"state"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	if w.State.Pump {
		t.Fatalf("the pump still runs after the gateway stopped: %s", b)
	}
	if !w.State.Heater {
		t.Fatalf("the heater (on_stop: keep) was switched off: %s", b)
	}
}
