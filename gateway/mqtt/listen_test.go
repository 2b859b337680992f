package mqtt

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/runtime"
)

// newBroker builds a broker on a fresh engine without serving it.
func newBroker(t *testing.T, opts Options) (*Broker, *runtime.Engine) {
	t.Helper()
	eng, _, j, users := testEngine(t, "")
	t.Cleanup(func() { _ = j.Close() })
	opts.Prefix, opts.Users = prefix, users
	b, err := New(eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b, eng
}

func TestListenNamesAPortThatIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		name string
		opts Options
		kind string
	}{
		{"tcp", Options{Listen: addr}, "tcp"},
		{"ws", Options{Listen: "127.0.0.1:0", WebsocketListen: addr}, "ws"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newBroker(t, tc.opts)
			err := b.Listen()
			if err == nil || !strings.Contains(err.Error(), "mqtt "+tc.kind+" listener") || !strings.Contains(err.Error(), ":"+port) {
				t.Fatalf("Listen() on a taken port = %v; want an error naming the %s listener and port %s", err, tc.kind, port)
			}
			if err2 := b.Run(t.Context()); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("Run after a failed Listen = %v, want %v", err2, err)
			}
			// The listener that was bound was released: its port is free again.
			if a := b.Addr("tcp"); a != "" {
				t.Errorf("Addr(tcp) = %q after a failed Listen, want empty", a)
			}
		})
	}
}

func TestListenAcceptsConnectionsBeforeRun(t *testing.T) {
	b, _ := newBroker(t, Options{Listen: "127.0.0.1:0", WebsocketListen: "127.0.0.1:0"})
	if a := b.Addr("tcp"); a != "" {
		t.Fatalf("Addr(tcp) = %q before Listen; New must not bind", a)
	}
	if err := b.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	for _, kind := range []string{"tcp", "ws"} {
		addr := b.Addr(kind)
		if strings.HasSuffix(addr, ":0") || addr == "" {
			t.Fatalf("Addr(%s) = %q, want the bound address", kind, addr)
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s listener %s after Listen, before Run: %v", kind, addr, err)
		}
		c.Close()
	}
	if err := b.Listen(); err != nil {
		t.Errorf("a second Listen = %v, want nil", err)
	}
}

func TestCloseReleasesTheListenersOfABrokerThatNeverRan(t *testing.T) {
	b, _ := newBroker(t, Options{Listen: "127.0.0.1:0"})
	if err := b.Listen(); err != nil {
		t.Fatal(err)
	}
	addr := b.Addr("tcp")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port of a closed broker is still held: %v", err)
	}
	ln.Close()
	if err := b.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
}
