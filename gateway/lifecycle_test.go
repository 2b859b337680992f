package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/runtime/journal"
)

// Ready fires only once every port is bound and the journal is open: in
// the callback, the console's and the broker's ports accept connections,
// and the journal's file is held.
func TestReadyFiresOnceEveryListenerIsBound(t *testing.T) {
	b := demoOnFreePorts(t)
	b.StateDir = t.TempDir()
	b.Plans = nil
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	checked := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: b, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Ready: func(p Parts) {
			checked <- readyChecks(p, b.StateDir)
		}})
	}()
	select {
	case err := <-checked:
		if err != nil {
			t.Error(err)
		}
	case err := <-done:
		t.Fatalf("Run ended before Ready: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want a clean stop", err)
	}
}

// readyChecks is what must hold when Ready is called.
func readyChecks(p Parts, stateDir string) error {
	if p.Web == nil || p.MQTT == nil {
		return errors.New("Ready without the console or the broker")
	}
	for name, addr := range map[string]string{"the console": p.Web.Addr(), "the broker": p.MQTT.Addr("tcp")} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return errors.New(name + " does not accept connections when Ready is called: " + err.Error())
		}
		c.Close()
	}
	var le *journal.LockedError
	if _, err := journal.Open(journal.Path(stateDir), journal.Options{}); !errors.As(err, &le) {
		return errors.New("the journal is not held when Ready is called")
	}
	return nil
}

// A port in use stops the start with an error naming it, before Ready,
// and everything opened before it is released: a second gateway on the
// same state directory starts at once.
func TestAPortInUseIsNamedAndEverythingIsReleased(t *testing.T) {
	cases := []struct {
		name string
		take func(b *Built, addr string)
		want string
	}{
		{"console", func(b *Built, addr string) { b.Web.Listen = addr }, "console: listen tcp "},
		{"broker", func(b *Built, addr string) { b.MQTT.Listen = addr }, "listen tcp "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			b := demoOnFreePorts(t)
			b.StateDir = t.TempDir()
			b.Plans = nil
			tc.take(b, taken.Addr().String())
			err = Run(t.Context(), Options{Config: b, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
				Ready: func(Parts) { t.Error("Ready was called with a port in use") }})
			if err == nil || !strings.Contains(err.Error(), tc.want+taken.Addr().String()) {
				t.Fatalf("Run with %s's port in use = %v, want an error naming %s", tc.name, err, taken.Addr())
			}
			// The journal, the drivers and the engine were released: the
			// same state directory serves again.
			again := demoOnFreePorts(t)
			again.StateDir, again.Plans = b.StateDir, nil
			_, stop := runUntilReady(t, again)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestHeldIsReleasedInReverseOrder(t *testing.T) {
	var order []string
	var h held
	for _, what := range []string{"journal", "drivers", "engine"} {
		h.push(what, func() error {
			order = append(order, what)
			if what == "drivers" {
				return errors.New("port stuck")
			}
			return nil
		})
	}
	err := h.release()
	if got := strings.Join(order, ","); got != "engine,drivers,journal" {
		t.Errorf("released in the order %s, want engine,drivers,journal", got)
	}
	if err == nil || err.Error() != "releasing drivers: port stuck" {
		t.Errorf("release = %v, want the drivers' error named", err)
	}
	if err := h.release(); err != nil || len(order) != 3 {
		t.Errorf("a second release = %v after %d releases, want nothing released again", err, len(order))
	}
}
