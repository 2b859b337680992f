package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/examples"
	"github.com/shadowgate/shadowgate/gateway/uplink"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// TestRunServesTheDemoAndStopsCleanly runs the real demo wiring, sends a
// command through the engine, and stops it with its context.
func TestRunServesTheDemoAndStopsCleanly(t *testing.T) {
	b := demoOnFreePorts(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan *runtime.Engine, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: b, Demo: true, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
			Ready: func(p Parts) { ready <- p.Engine }})
	}()
	var e *runtime.Engine
	select {
	case e = <-ready:
	case err := <-done:
		t.Fatalf("Run ended early: %v", err)
	}
	obs, err := e.Do(ctx, runtime.Command{Principal: "test:alice", Origin: "test", RequestID: "1",
		Device: "valve-1", Capability: "open", Value: value.Bool(true)})
	if err != nil || obs.Kind != runtime.ApprovalRequest {
		t.Fatalf("Do = %+v, %v; want an approval request in supervised mode", obs, err)
	}
	if _, err := e.Answer(ctx, obs.Approval.ID, runtime.Answer{By: "test:bob", Decision: runtime.Approve}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if rec, err := e.Wait(wctx, obs.Run); err != nil || rec.End != runtime.EndCompleted || rec.Actuations != 1 {
		t.Fatalf("run = %+v, %v; want completed with one actuation", rec, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want a clean stop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop within 10s of cancel")
	}
}

// demoOnFreePorts is the demo configuration listening on free ports.
func demoOnFreePorts(t *testing.T) *Built {
	t.Helper()
	b, err := Load("demo.yaml", examples.Demo)
	if err != nil {
		t.Fatal(err)
	}
	if b.MQTT != nil {
		b.MQTT.Listen = "127.0.0.1:0"
	}
	if b.Web != nil {
		b.Web.Listen = "127.0.0.1:0"
	}
	b.Journal.FlushInterval = testFlush
	return b
}

// runUntilReady starts Run on b and returns its engine; stop ends it and
// returns Run's error.
func runUntilReady(t *testing.T, b *Built) (*runtime.Engine, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan *runtime.Engine, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: b, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
			Ready: func(p Parts) { ready <- p.Engine }})
	}()
	select {
	case e := <-ready:
		return e, func() error { cancel(); return <-done }
	case err := <-done:
		cancel()
		t.Fatalf("Run ended early: %v", err)
	}
	return nil, nil
}

func TestStateDirectoryIsGuardedByItsJournal(t *testing.T) {
	b := demoOnFreePorts(t)
	b.StateDir = t.TempDir()
	b.Plans = nil
	_, stop := runUntilReady(t, b)
	// A second gateway on the same state directory stops before any device
	// is touched, naming the holder.
	err := Run(t.Context(), Options{Config: b})
	var le *journal.LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Fatalf("second Run = %v, want the journal locked by pid %d", err, os.Getpid())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A corrupt journal: the gateway runs, reads sensors, refuses writes;
	// the uplink, whose outbox is in that file, stays off.
	b.Uplink = &uplink.Options{URL: "tcp://127.0.0.1:1", ClientID: "t", Prefix: "p/"}
	if err := os.WriteFile(journal.Path(b.StateDir), bytes.Repeat([]byte("garbage!"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	e, stop := runUntilReady(t, b)
	if err := e.Healthy(); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("Healthy on a corrupt journal = %v", err)
	}
	if obs, _ := e.Read(t.Context(), "test:alice", "tank-1", "level"); obs.Kind != runtime.Completed {
		t.Fatalf("a read on a corrupt journal = %+v", obs)
	}
	obs, err := e.Do(t.Context(), runtime.Command{Principal: "test:alice", Origin: "test", RequestID: "1",
		Device: "valve-1", Capability: "open", Value: value.Bool(true)})
	if err != nil || obs.Kind != runtime.Refused || !strings.Contains(obs.Why, "corrupt") {
		t.Fatalf("a write on a corrupt journal = %+v, %v", obs, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// The startup log names the mode in force, from the journal, not only the
// configured one.
func TestStartupLogShowsTheModeInForce(t *testing.T) {
	b := demoOnFreePorts(t)
	b.StateDir = t.TempDir()
	b.Plans = nil
	e, stop := runUntilReady(t, b)
	if _, ap, err := e.SetMode(t.Context(), "console:root", "observe", "leaving for the night"); err != nil || ap != nil {
		t.Fatalf("SetMode(observe) = %v, %v; want it at once", ap, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if out := startLog(t, b); !strings.Contains(out, `msg="mode in force" mode=observe`) || !strings.Contains(out, "configured_mode=supervised") {
		t.Fatalf("the startup log does not name the mode in force:\n%s", out)
	}
}

// A configured device that no driver reaches at the start is named in the
// log: otherwise it is simply missing, and commands to it fail.
func TestStartupLogNamesADeviceNotOnline(t *testing.T) {
	y := strings.Replace(string(examples.Demo), "    type: sim\n", "    type: sim\n    sim: {faults: {valve-1: {offline: true}}}\n", 1)
	b, err := Load("demo.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	b.MQTT.Listen, b.Web.Listen, b.StateDir, b.Plans = "127.0.0.1:0", "127.0.0.1:0", t.TempDir(), nil
	out := startLog(t, b)
	if !strings.Contains(out, "a configured device is not online") || !strings.Contains(out, "device_id=valve-1") {
		t.Fatalf("the startup log does not name valve-1, which is offline:\n%s", out)
	}
	if strings.Contains(out, "device_id=tank-1 driver") {
		t.Fatalf("the startup log names an online device as offline:\n%s", out)
	}
}

// startLog runs the gateway on b until it is ready, stops it, and returns
// what it logged.
func startLog(t *testing.T, b *Built) string {
	t.Helper()
	var logs runtimetest.LogBuffer
	ctx, cancel := context.WithCancel(t.Context())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: b, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Ready: func(Parts) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run ended early: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return logs.String()
}

// testFlush is the journal's flush interval in these tests: they follow
// readings as they are written, and the default (30s, set for the card)
// would keep each waiting.
const testFlush = 100 * time.Millisecond
