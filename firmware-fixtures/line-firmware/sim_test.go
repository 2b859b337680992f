package linefirmware

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.bug.st/serial"
)

// host is the other end of the line, opened as the serial driver would
// (raw mode), speaking the protocol by hand.
type host struct {
	t    *testing.T
	port serial.Port
	buf  []byte // read and not yet taken
}

func open(t *testing.T, b *Board) *host {
	t.Helper()
	p, err := serial.Open(b.Path(), &serial.Mode{BaudRate: 115200})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetReadTimeout(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &host{t: t, port: p}
}

func (h *host) send(body string) {
	h.t.Helper()
	if _, err := fmt.Fprintf(h.port, "%s *%02X\n", body, crc8(body)); err != nil {
		h.t.Fatal(err)
	}
}

// next returns the next line's body, checked, or "" if none came within
// about a second. A read that times out returns no bytes and no error.
func (h *host) next() string {
	h.t.Helper()
	deadline := time.Now().Add(time.Second)
	chunk := make([]byte, 256)
	for {
		if i := bytes.IndexByte(h.buf, '\n'); i >= 0 {
			s := string(h.buf[:i])
			h.buf = h.buf[i+1:]
			body, ok := checked(s)
			if !ok {
				return "NOISE " + s
			}
			return body
		}
		if time.Now().After(deadline) {
			return ""
		}
		n, err := h.port.Read(chunk)
		if err != nil {
			h.t.Fatal(err)
		}
		h.buf = append(h.buf, chunk[:n]...)
	}
}

func TestBoardSpeaksTheProtocol(t *testing.T) {
	b, err := Start(State{Temperature: 21.46})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h := open(t, b)
	for _, c := range []struct{ req, want string }{
		{"1 PING", "OK 1"},
		{"2 INFO", "OK 2 line-firmware " + Version + " relay:bool:actuator button:bool:sensor temperature:number:sensor:C"},
		{"3 GET temperature", "OK 3 21.5"},
		{"4 SET relay true", "OK 4"},
		{"5 GET relay", "OK 5 true"},
		{"6 SET relay maybe", "ERR 6 E_VALUE relay takes true or false"},
		{"7 SET button true", "ERR 7 E_READONLY button is a sensor"},
		{"8 GET pump", "ERR 8 E_UNKNOWN no capability pump"},
		{"9 DANCE", "ERR 9 E_SYNTAX cannot read the request"},
	} {
		h.send(c.req)
		if got := h.next(); got != c.want {
			t.Fatalf("%s: got %q, want %q", c.req, got, c.want)
		}
	}
	if !b.State().Relay {
		t.Fatal("the relay did not close")
	}
	// A line with a bad CRC is not answered.
	if _, err := fmt.Fprintf(h.port, "10 PING *00\n"); err != nil {
		t.Fatal(err)
	}
	h.send("11 PING")
	if got := h.next(); got != "OK 11" {
		t.Fatalf("after a noisy request: %q, want OK 11 only", got)
	}
	b.Press(true)
	if got := h.next(); got != "EVT button true" {
		t.Fatalf("a press: %q", got)
	}
	// An id not written as a host writes it is not answered, as the sketch
	// does; a reply naming something too long is cut to fit a line.
	for _, req := range []string{"007 PING", "+5 PING", "0 PING", "65536 PING", "12"} {
		h.send(req)
	}
	long := strings.Repeat("x", 240)
	h.send("13 GET " + long)
	want := ("ERR 13 E_UNKNOWN no capability " + long)[:250]
	if got := h.next(); got != want {
		t.Fatalf("after requests without a plain id and a long one: %q, want %q", got, want)
	}
}

func TestBoardFaults(t *testing.T) {
	b, err := Start(State{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h := open(t, b)

	b.SetFaults(Faults{Drop: 1})
	h.send("1 SET relay true")
	if got := h.next(); got != "" {
		t.Fatalf("a dropped reply came: %q", got)
	}
	if !b.State().Relay {
		t.Fatal("a dropped reply's request was not carried out")
	}

	b.SetFaults(Faults{Stuck: true})
	h.send("2 SET relay false")
	h.send("3 GET relay")
	if a, c := h.next(), h.next(); a != "OK 2" || c != "OK 3 true" {
		t.Fatalf("a stuck relay: %q, %q; want OK, and still true", a, c)
	}

	b.SetFaults(Faults{Reorder: true})
	h.send("4 PING")
	h.send("5 PING")
	if a, c := h.next(), h.next(); a != "OK 5" || c != "OK 4" {
		t.Fatalf("reordered: %q, %q; want OK 5 then OK 4", a, c)
	}

	b.SetFaults(Faults{Garbage: true})
	h.send("6 PING")
	if a, c := h.next(), h.next(); !strings.HasPrefix(a, "NOISE ") || c != "OK 6" {
		t.Fatalf("with garbage: %q, %q", a, c)
	}

	b.SetFaults(Faults{BadCRC: true})
	h.send("7 PING")
	if got := h.next(); !strings.HasPrefix(got, "NOISE OK 7") {
		t.Fatalf("with a bad CRC: %q", got)
	}

	b.SetFaults(Faults{})
	b.Reset()
	if got := h.next(); got != "EVT boot "+Version || b.State().Relay {
		t.Fatalf("a reset: %q, relay %v", got, b.State().Relay)
	}
}

// The board's CRC is the protocol's: CRC-8/SMBUS, check value F4.
func TestCRC(t *testing.T) {
	if got := crc8("123456789"); got != 0xF4 {
		t.Fatalf("crc8 = %02X, want F4", got)
	}
}
