package mqtt

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
)

// The broker stops while its clients drop their lines. mochi's own Close
// lists a listener's clients holding their read lock and asks for it again
// inside; a client being deleted in between queues for the write lock, and
// both wait forever, so the gateway never stopped. The window is narrow:
// this test is a stress that fails if a stop hangs, not a sure
// reproduction; the evidence is a goroutine dump from a hang of this
// package's tests (Clients.GetByListener waiting in Clients.Len behind
// Clients.Delete from attachClient).
func TestStopWhileClientsGoAway(t *testing.T) {
	viewer := access.Viewer
	for round := range 30 {
		gw := startGW(t, gwOptions{anonymous: &viewer})
		var conns []net.Conn
		for i := range 8 {
			// Connect and take the CONNACK: the broker has attached the client.
			c, err := net.DialTimeout("tcp", gw.addr, 5*time.Second)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			conns = append(conns, c)
			id := fmt.Sprintf("leaving-%02d", i)
			pk := append([]byte{0x10, byte(12 + len(id)), 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x04, 0x02, 0x00, 0x3c, 0x00, byte(len(id))}, id...)
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(pk); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			ack := make([]byte, 4)
			if _, err := io.ReadFull(c, ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
				t.Fatalf("round %d: CONNACK %x, %v", round, ack, err)
			}
		}
		// The clients drop their lines while the broker stops: it deletes
		// them as it lists them.
		var leaving sync.WaitGroup
		for _, c := range conns {
			leaving.Go(func() { _ = c.Close() })
		}
		runtimetest.Within(t, "the broker's stop", 30*time.Second, gw.stop)
		leaving.Wait()
	}
}

// A connection that never sends CONNECT is not a client mochi knows, and
// its own Close waited for it for ever: the broker's stop closes it.
func TestStopWithASilentConnection(t *testing.T) {
	gw := startGW(t, gwOptions{})
	c, err := net.DialTimeout("tcp", gw.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Give the broker the connection before it stops.
	runtimetest.WaitFor(t, "the broker to take the connection", func() bool {
		gw.b.mu.Lock()
		defer gw.b.mu.Unlock()
		for _, tl := range gw.b.lns {
			tl.mu.Lock()
			n := len(tl.conns)
			tl.mu.Unlock()
			if n > 0 {
				return true
			}
		}
		return false
	})
	runtimetest.Within(t, "the broker's stop", 30*time.Second, gw.stop)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the silent connection is still open after the stop")
	}
}
