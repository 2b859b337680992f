package gateway

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/examples"
	"github.com/shadowgate/shadowgate/runtime"
)

// TestRunServesTheDemoAndStopsCleanly runs the real demo wiring, sends a
// command through the engine, and stops it with its context.
func TestRunServesTheDemoAndStopsCleanly(t *testing.T) {
	b, err := Load("demo.yaml", examples.Demo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan *runtime.Engine, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: b, Demo: true, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
			Ready: func(e *runtime.Engine) { ready <- e }})
	}()
	var e *runtime.Engine
	select {
	case e = <-ready:
	case err := <-done:
		t.Fatalf("Run ended early: %v", err)
	}
	obs, err := e.Do(ctx, runtime.Command{Principal: "test:alice", Origin: "test", RequestID: "1",
		Device: "valve-1", Capability: "open", Value: devices.Bool(true)})
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
