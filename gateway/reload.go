package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/shadowgate/shadowgate/internal/failpoint"
	"github.com/shadowgate/shadowgate/runtime"
)

// restartOnly are the top-level sections of the file that a running
// gateway cannot take live: its listeners, its state, its drivers, its
// people and the engine's own limits. A change to one is named in the log
// as needing a restart, and the rest is applied.
var restartOnly = []string{"gateway", "mqtt", "web", "uplink", "drivers", "users", "journal", "approvals", "leases", "mode", "alarms",
	"integrations", "mcp"}

// Reload reads the configuration file of running again and puts in force
// what can change while the gateway runs: the governance of each
// capability (effects, envelopes, interlocks, confirmations), the modes,
// the standing rules and the plans. It is checked whole first: a file that
// does not load changes nothing, and the error names its file and line.
// The change is journaled (config_changed, with the file's SHA-256 and
// what changed) before it takes effect. It returns the configuration now in
// force, for the next reload, and the sections that changed and wait for a
// restart.
func Reload(ctx context.Context, eng *runtime.Engine, running *Built) (*Built, []string, error) {
	data, err := os.ReadFile(running.File)
	if err != nil {
		return running, nil, fmt.Errorf("reading configuration: %w", err)
	}
	next, err := Load(running.File, data)
	if err != nil {
		return running, nil, err
	}
	restart, err := needsRestart(running, next, data)
	if err != nil {
		return running, nil, err
	}
	// A plan's steps change at once; when it starts itself (every, at)
	// is the schedule's, started with the engine.
	started := running.schedules
	if started == nil {
		started = schedules(running.Plans)
	}
	if !maps.Equal(started, schedules(next.Plans)) {
		restart = append(restart, "plans' schedules")
		slices.Sort(restart)
	}
	// A device that is still registered keeps its governance until the
	// restart that removes it: a file that drops a device (or renames a
	// capability) must not leave the running one without its interlocks.
	policies := maps.Clone(next.Policies)
	if policies == nil {
		policies = map[string]runtime.CapPolicy{}
	}
	for k, p := range running.Policies {
		if _, ok := policies[k]; !ok && slices.Contains(restart, "devices") {
			policies[k] = p
		}
	}
	if err := failpoint.Inject(failpoint.GatewayReload); err != nil {
		return running, nil, err
	}
	sum := sha256.Sum256(data)
	body := runtime.ConfigChangedBody{File: running.File, Digest: hex.EncodeToString(sum[:]), By: "reload", Restart: restart}
	if err := eng.Reload(ctx, runtime.Config{Policies: policies, Modes: next.Modes, Rules: next.Rules, Plans: next.Plans}, body); err != nil {
		return running, nil, err
	}
	// Everything else stays as it was started: the next reload compares
	// with what runs, so what waits for a restart is named again.
	kept := *running
	kept.Policies, kept.Modes, kept.Rules, kept.Plans = policies, next.Modes, next.Rules, next.Plans
	kept.schedules = started
	return &kept, restart, nil
}

// schedules says when each plan that starts itself starts, by name.
func schedules(ps []runtime.Plan) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		switch {
		case p.Every > 0:
			out[p.Name] = "every " + p.Every.String()
		case p.At != nil:
			out[p.Name] = p.At.String()
		}
	}
	return out
}

// needsRestart names the sections of the file that changed and cannot be
// taken live, and "devices" when a device or capability itself (not its
// governance) came, went or changed.
func needsRestart(running, next *Built, data []byte) ([]string, error) {
	var now map[string]any
	if err := yaml.Unmarshal(data, &now); err != nil {
		return nil, fmt.Errorf("%s: %w", running.File, err)
	}
	out := []string{}
	for _, k := range restartOnly {
		if !reflect.DeepEqual(running.raw[k], now[k]) {
			out = append(out, k)
		}
	}
	was, err := json.Marshal(running.Devices)
	if err != nil {
		return nil, err
	}
	is, err := json.Marshal(next.Devices)
	if err != nil {
		return nil, err
	}
	if string(was) != string(is) {
		out = append(out, "devices")
	}
	slices.Sort(out)
	return out, nil
}
