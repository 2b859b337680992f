package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/gateway"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

// A panic inside a journal operation, reached by a client's request, must
// not freeze the gateway: the request fails, the next command completes,
// /readyz answers, and SIGTERM still stops the gateway, through the same
// signal handling serve uses.
func TestPanicInTheJournalDoesNotFreezeTheGateway(t *testing.T) {
	cfg, _, err := load("", "sim")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MQTT.Listen = "127.0.0.1:0"
	cfg.Plans = nil
	dir := t.TempDir()
	cfg.StateDir = dir
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	sigCtx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ready := make(chan gateway.Parts, 1)
	done := make(chan error, 1)
	go func() {
		done <- gateway.Run(sigCtx, gateway.Options{Config: cfg, WebListener: ln,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
			Ready:  func(p gateway.Parts) { ready <- p }})
	}()
	var parts gateway.Parts
	select {
	case parts = <-ready:
	case err := <-done:
		t.Fatalf("the gateway did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not start")
	}
	// Only the API's reads ask for pages of 1000 events; the gateway's own
	// subscribers read 512 at a time and must not be the ones to panic.
	var panics atomic.Int32
	journal.SetEventsHookForTest(t, func(since uint64, limit int) {
		if since == 1 && limit == 1000 && panics.Add(1) == 1 {
			panic("injected inside the journal's Events")
		}
	})
	// The panic: a journal export through the API, as a client would.
	var out, errOut bytes.Buffer
	code := run([]string{"journal", "export", "--since", "1", "--state-dir", dir, "--url", base, "--user", demoUser},
		strings.NewReader(demoPassword+"\n"), &out, &errOut)
	if panics.Load() == 0 {
		t.Fatalf("the injected panic was not reached (export = %d %q)", code, errOut.String())
	}
	// The next command completes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := parts.Engine.Do(ctx, runtime.Command{Principal: "test:panic", Origin: "test", RequestID: "after-panic",
		Device: "tank-1", Capability: "level"})
	if err != nil || obs.Kind != runtime.Completed {
		t.Fatalf("a read after the panic = %+v, %v", obs, err)
	}
	out.Reset()
	if code := run([]string{"journal", "tail", "-n", "2", "--state-dir", dir, "--url", base, "--user", demoUser},
		strings.NewReader(demoPassword+"\n"), &out, &errOut); code != exitOK {
		t.Fatalf("journal tail after the panic = %d %q", code, errOut.String())
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz after the panic = %v, %v", resp, err)
	}
	resp.Body.Close()
	// SIGTERM stops it.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the gateway stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("SIGTERM did not stop the gateway")
	}
}
