package gateway

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

const reloadConfig = `gateway: {id: reload}
mode: supervised
mqtt: {listen: "127.0.0.1:0"}
web: {enabled: false}
drivers: [{name: sim, type: sim}]
devices:
  - id: valve-1
    driver: sim
    address: valve
    capabilities:
      - {name: open, kind: actuator, type: bool, read_back: true, effects: {reversible: true, contained: true}, confirm: {read_back: true, within: 2s}}
rules: []
`

// TestReloadPutsANewRuleInForce: a reload with a new rule makes the next
// command act without asking; a file that does not load changes nothing;
// a changed listener waits for a restart and is named.
func TestReloadPutsANewRuleInForce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(strings.Replace(reloadConfig, "gateway: {id: reload}", "gateway: {id: reload, state_dir: "+filepath.Join(dir, "state")+"}", 1))
	b, err := LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e := runForReload(t, b)
	do := func(id string) runtime.Observation {
		t.Helper()
		obs, err := e.Do(ctx, runtime.Command{Principal: "test:alice", Origin: "test", RequestID: id, Device: "valve-1", Capability: "open", Value: value.Bool(id != "")})
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	obs := do("1")
	if obs.Kind != runtime.ApprovalRequest {
		t.Fatalf("before the reload = %+v, want an approval request", obs)
	}
	if _, err := e.Answer(ctx, obs.Approval.ID, runtime.Answer{By: "test:bob", Decision: runtime.Deny, Reason: "not now"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(file)
	// A file that does not load: nothing changes.
	write(string(raw) + "surprise: 1\n")
	if _, _, err := Reload(ctx, e, b); err == nil || !strings.Contains(err.Error(), "gw.yaml:") || !strings.Contains(err.Error(), `"surprise"`) {
		t.Fatalf("reload of a bad file = %v, want the file and line", err)
	}
	// A new rule, and a new broker address.
	next := strings.Replace(string(raw), "rules: []", `rules: [{id: valve-ok, principal: "test:*", device: valve-1, capability: open, decision: allow}]`, 1)
	next = strings.Replace(next, `mqtt: {listen: "127.0.0.1:0"}`, `mqtt: {listen: "127.0.0.1:1"}`, 1)
	write(next)
	nb, restart, err := Reload(ctx, e, b)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(restart, ",") != "mqtt" {
		t.Fatalf("sections waiting for a restart = %q, want mqtt", restart)
	}
	if nb.MQTT.Listen != b.MQTT.Listen {
		t.Fatal("the reload took a listener that waits for a restart")
	}
	if obs := do("2"); obs.Kind != runtime.Acted {
		t.Fatalf("after the reload = %+v, want acted under the new rule", obs)
	}
	// The same file again: the listener still waits for a restart, and the
	// gateway still runs the one it started with.
	nb2, restart, err := Reload(ctx, e, nb)
	if err != nil || strings.Join(restart, ",") != "mqtt" || nb2.MQTT.Listen != b.MQTT.Listen {
		t.Fatalf("a second reload = %q, %v (listen %s); want mqtt still waiting", restart, err, nb2.MQTT.Listen)
	}
	evs, _ := e.Events(ctx, 0, 0)
	found := false
	for _, ev := range evs {
		found = found || ev.Kind == runtime.KindConfigChanged && strings.Contains(string(ev.Body), "rule valve-ok added") &&
			strings.Contains(string(ev.Body), `"restart":["mqtt"]`)
	}
	if !found {
		t.Fatal("no config_changed event naming the rule and the section waiting for a restart")
	}
}

// TestReloadKeepsTheGovernanceOfARunningDevice: a file that drops a device
// waits for a restart to remove it, and until then the device keeps its
// envelope: it is never left without its governance.
func TestReloadKeepsTheGovernanceOfARunningDevice(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	cfg := `gateway: {id: reload, state_dir: ` + filepath.Join(dir, "state") + `}
mode: supervised
mqtt: {enabled: false}
web: {enabled: false}
drivers: [{name: sim, type: sim}]
devices:
  - id: valve-1
    driver: sim
    address: valve
    capabilities:
      - {name: open, kind: actuator, type: bool, read_back: true, effects: {reversible: true, contained: true}, envelope: {allowed: [false]}}
`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan *runtime.Engine, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: b, Logger: slog.New(slog.DiscardHandler), Notice: &strings.Builder{},
			Ready: func(p Parts) { ready <- p.Engine }})
	}()
	defer func() { cancel(); <-done }()
	e := <-ready
	if err := os.WriteFile(file, []byte(cfg[:strings.Index(cfg, "devices:")]+"devices: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, restart, err := Reload(ctx, e, b)
	if err != nil || !slices.Contains(restart, "devices") {
		t.Fatalf("reload dropping the valve = %q, %v; want devices waiting for a restart", restart, err)
	}
	obs, err := e.Do(ctx, runtime.Command{Principal: "test:alice", Origin: "test", RequestID: "1", Device: "valve-1", Capability: "open", Value: value.Bool(true)})
	if err != nil || obs.Kind != runtime.Refused || !strings.Contains(obs.Why, "allowed") {
		t.Fatalf("a write outside the envelope after the reload = %+v, %v; want refused by the envelope it keeps", obs, err)
	}
}

// TestReloadNamesWhatWaitsForARestartInTime: a plan's steps change at a
// reload, but when it starts itself is its schedule's, started with the
// engine; the alarm settings are the engine's too. Both are named as
// waiting for a restart, and again at the next reload.
func TestReloadNamesWhatWaitsForARestartInTime(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	base := strings.Replace(reloadConfig, "gateway: {id: reload}", "gateway: {id: reload, state_dir: "+filepath.Join(dir, "state")+"}", 1) +
		"plans: [{name: look, every: 1h, steps: [{read: valve-1.open}]}]\n"
	if err := os.WriteFile(file, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e := runForReload(t, b)
	next := strings.Replace(base, "every: 1h", "every: 2h", 1) + "alarms: {max_shelve: 1h}\n"
	if err := os.WriteFile(file, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	nb, restart, err := Reload(ctx, e, b)
	if err != nil || strings.Join(restart, ",") != "alarms,plans' schedules" {
		t.Fatalf("restart = %q, %v; want the alarms and the plans' schedules", restart, err)
	}
	if _, restart, err = Reload(ctx, e, nb); err != nil || strings.Join(restart, ",") != "alarms,plans' schedules" {
		t.Fatalf("a second reload: restart = %q, %v; want them named again", restart, err)
	}
}

// runForReload runs the gateway b until the test ends, and returns its
// engine once it is ready.
func runForReload(t *testing.T, b *Built) *runtime.Engine {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan *runtime.Engine, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: b, Logger: slog.New(slog.DiscardHandler), Notice: &strings.Builder{},
			Ready: func(p Parts) { ready <- p.Engine }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case e := <-ready:
		return e
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	return nil
}
