package port

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/shadowgate/shadowgate/devices/devicetest"
)

func TestCheckFillsDefaultsAndNamesEachBadField(t *testing.T) {
	in := &devicetest.Config{Driver: "rs485"}
	c := Config{Port: "/dev/ttyUSB0"}
	s, ok := c.Check(in.Options(), 9600)
	if !ok || s != (Settings{Path: "/dev/ttyUSB0", Baud: 9600, DataBits: 8, Parity: NoParity, StopBits: 1}) {
		t.Fatalf("Check = %+v, %v; problems %q", s, ok, in.Problems())
	}
	if got := s.String(); got != "/dev/ttyUSB0 9600 8N1" {
		t.Errorf("String = %q", got)
	}
	bad := Config{Baud: 7, DataBits: 9, Parity: "mark", StopBits: 3}
	if _, ok := bad.Check(in.Options(), 9600); ok {
		t.Fatal("a bad configuration passed")
	}
	want := []string{"options.port: a port is required", "options.baud: baud 7", "options.data_bits: data_bits 9",
		"options.parity: parity \"mark\"", "options.stop_bits: stop_bits 3"}
	got := in.Problems()
	if len(got) != len(want) {
		t.Fatalf("problems = %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want it to start %q", i, got[i], want[i])
		}
	}
}

func TestCharTime(t *testing.T) {
	for _, c := range []struct {
		s    Settings
		want time.Duration
	}{
		{Settings{Baud: 9600, DataBits: 8, StopBits: 1}, 10 * time.Second / 9600},
		{Settings{Baud: 9600, DataBits: 8, Parity: EvenParity, StopBits: 1}, 11 * time.Second / 9600},
		{Settings{Baud: 115200, DataBits: 7, Parity: OddParity, StopBits: 2}, 11 * time.Second / 115200},
	} {
		if got := c.s.CharTime(); got != c.want {
			t.Errorf("%v: CharTime = %v, want %v", c.s, got, c.want)
		}
	}
}

func TestMissingPortListsThePortsThereAre(t *testing.T) {
	old := listPorts
	t.Cleanup(func() { listPorts = old })
	listPorts = func() ([]string, error) { return []string{"/dev/ttyUSB1", "/dev/ttyAMA0"}, nil }
	_, err := Open(Settings{Path: "/dev/ttyUSB9-not-here", Baud: 9600, DataBits: 8, StopBits: 1})
	if err == nil {
		t.Fatal("a missing port opened")
	}
	for _, want := range []string{"/dev/ttyUSB9-not-here is not there", "/dev/ttyAMA0, /dev/ttyUSB1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	listPorts = func() ([]string, error) { return nil, nil }
	if _, err := Open(Settings{Path: "/dev/ttyUSB9-not-here", Baud: 9600, DataBits: 8, StopBits: 1}); err == nil ||
		!strings.Contains(err.Error(), "no serial ports") {
		t.Errorf("error %v does not say there are none", err)
	}
}

func TestOpenAPseudoTerminalAndTalk(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer master.Close()
	p, err := Open(Settings{Path: slave.Name(), Baud: 115200, DataBits: 8, Parity: EvenParity, StopBits: 1})
	slave.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := master.Write([]byte("1 PING\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.SetReadTimeout(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := p.Read(buf)
	if err != nil || string(buf[:n]) != "1 PING\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

func TestBackoffDoublesToItsMaximumAndResets(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 5 * time.Second}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Next = %v, want %v", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Errorf("after Reset, Next = %v", d)
	}
	var zero Backoff
	if d := zero.Next(); d != 100*time.Millisecond {
		t.Errorf("zero Backoff starts at %v", d)
	}
}

func TestOnePortOneDriver(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	link := filepath.Join(t.TempDir(), "ttyUSB0")
	if err := os.Symlink(slave.Name(), link); err != nil {
		t.Fatal(err)
	}
	a, b := NewOwner("arduino"), NewOwner("rs485")
	defer a.Release()
	defer b.Release()
	s := Settings{Path: slave.Name(), Baud: 9600, DataBits: 8, StopBits: 1}
	p, err := OpenAs(s, a)
	if err != nil {
		t.Fatal(err)
	}
	other := s
	other.Path = link
	refused := func(when string) {
		t.Helper()
		q, err := OpenAs(other, b)
		if err == nil {
			q.Close()
		}
		if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "is driver arduino's") {
			t.Fatalf("%s, a second driver's open of the port through a link = %v", when, err)
		}
	}
	refused("while the first has it open")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed (an adapter unplugged), the port is still the first driver's:
	// the second cannot take it before the first reopens it.
	refused("while the first has it closed")
	p, err = OpenAs(s, a)
	if err != nil {
		t.Fatalf("the first driver could not open its port again: %v", err)
	}
	p.Close()
	a.Release()
	q, err := OpenAs(other, b)
	if err != nil {
		t.Fatalf("the port was not given back when its driver released it: %v", err)
	}
	q.Close()
}
