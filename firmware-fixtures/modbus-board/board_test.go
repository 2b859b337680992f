package modbusboard

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.bug.st/serial"
	"go.uber.org/goleak"
)

// host is the other end of the line, opened as a driver would (raw mode),
// speaking the protocol by hand.
type host struct {
	t    *testing.T
	port serial.Port
}

func start(t *testing.T, c Config) *Board {
	t.Helper()
	b, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func open(t *testing.T, path string) *host {
	t.Helper()
	p, err := serial.Open(path, &serial.Mode{BaudRate: 115200})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetReadTimeout(20 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &host{t: t, port: p}
}

// ask sends a frame (its CRC added) and returns what came back within
// 20 ms of silence after the last byte: nil when nothing came in 200 ms.
func (h *host) ask(frame ...byte) []byte {
	h.t.Helper()
	return h.raw(withCRC(frame))
}

func (h *host) raw(frame []byte) []byte {
	h.t.Helper()
	if _, err := h.port.Write(frame); err != nil {
		h.t.Fatal(err)
	}
	var got []byte
	chunk := make([]byte, 300)
	start := time.Now()
	for {
		n, err := h.port.Read(chunk) // a timeout is no bytes and no error
		if err != nil {
			h.t.Fatal(err)
		}
		if n == 0 && (len(got) > 0 || time.Since(start) > 200*time.Millisecond) {
			break // silence after an answer, or 200 ms of nothing
		}
		got = append(got, chunk[:n]...)
	}
	return got
}

func TestCRCCheckValue(t *testing.T) {
	if got := crc16([]byte("123456789")); got != 0x4B37 {
		t.Fatalf("crc16(123456789) = %04X, want 4B37", got)
	}
	// A frame of the protocol's literature, with its published CRC.
	if !checkCRC([]byte{0x11, 0x03, 0x00, 0x6B, 0x00, 0x03, 0x76, 0x87}) {
		t.Fatal("the CRC of 11 03 00 6B 00 03 is not 76 87")
	}
}

func TestBoardAnswersEveryFunction(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b := start(t, Config{Units: []byte{1, 7}})
	h := open(t, b.Path())
	b.SetTemperature(7, -12.3)
	b.SetHumidity(7, 45.6)
	b.SetFlow(7, 1.5) // 0x3FC00000
	b.SetDiscrete(7, FloatSwitch, true)
	for _, c := range []struct {
		name string
		req  []byte
		want []byte
	}{
		{"write coil 2 on", []byte{7, 5, 0, 2, 0xFF, 0}, []byte{7, 5, 0, 2, 0xFF, 0}},
		{"read coils 0-7", []byte{7, 1, 0, 0, 0, 8}, []byte{7, 1, 1, 0x04}},
		{"write coils 4-6 on, off, on", []byte{7, 15, 0, 4, 0, 3, 1, 0x05}, []byte{7, 15, 0, 4, 0, 3}},
		{"read coils 0-7 again", []byte{7, 1, 0, 0, 0, 8}, []byte{7, 1, 1, 0x54}},
		{"read discrete inputs 0-8: feedback and the float switch", []byte{7, 2, 0, 0, 0, 9}, []byte{7, 2, 2, 0x54, 0x01}},
		{"read input registers 0-5", []byte{7, 4, 0, 0, 0, 6}, []byte{7, 4, 12, 0xFF, 0x85, 0x01, 0xC8, 0x3F, 0xC0, 0, 0, 0, 0, 0x3F, 0xC0}},
		{"write register 3", []byte{7, 6, 0, 3, 0x12, 0x34}, []byte{7, 6, 0, 3, 0x12, 0x34}},
		{"write registers 14-15", []byte{7, 16, 0, 14, 0, 2, 4, 0xAB, 0xCD, 0, 1}, []byte{7, 16, 0, 14, 0, 2}},
		{"read holding registers 3, 14, 15", []byte{7, 3, 0, 14, 0, 2}, []byte{7, 3, 4, 0xAB, 0xCD, 0, 1}},
		{"unknown function", []byte{7, 8, 0, 0, 0, 0}, []byte{7, 0x88, 1}},
		{"address past the coils", []byte{7, 1, 0, 7, 0, 2}, []byte{7, 0x81, 2}},
		{"address past the holding registers", []byte{7, 6, 0, 16, 0, 1}, []byte{7, 0x86, 2}},
		{"quantity 0", []byte{7, 3, 0, 0, 0, 0}, []byte{7, 0x83, 3}},
		{"a coil value that is neither on nor off", []byte{7, 5, 0, 1, 0x12, 0x34}, []byte{7, 0x85, 3}},
		{"byte count that disagrees", []byte{7, 16, 0, 0, 0, 2, 2, 0, 1}, []byte{7, 0x90, 3}},
		{"unit 1 has its own tables", []byte{1, 1, 0, 0, 0, 8}, []byte{1, 1, 1, 0}},
	} {
		if got := h.ask(c.req...); !bytes.Equal(got, withCRC(c.want)) {
			t.Errorf("%s: % X answered % X, want % X", c.name, c.req, got, withCRC(c.want))
		}
	}
	st, _ := b.State(7)
	if want := []bool{false, false, true, false, true, false, true, false}; !slices.Equal(st.Coils, want) {
		t.Errorf("unit 7's coils = %v, want %v", st.Coils, want)
	}
	if st.Holding[3] != 0x1234 || st.Holding[14] != 0xABCD {
		t.Errorf("unit 7's holding registers = %04X", st.Holding)
	}
	// Every write with a good CRC counts, the refused ones too.
	if n := b.Writes(7); n != 7 {
		t.Errorf("Writes(7) = %d, want 7", n)
	}
	// Silence for another unit and for a bad CRC, as on a real line.
	if got := h.ask(9, 3, 0, 0, 0, 1); got != nil {
		t.Errorf("unit 9, which the board is not, was answered % X", got)
	}
	bad := withCRC([]byte{7, 5, 0, 0, 0xFF, 0})
	bad[7] ^= 1
	if got := h.raw(bad); got != nil {
		t.Errorf("a frame with a bad CRC was answered % X", got)
	}
	if got := h.raw([]byte{0x13, 0x37, 0x00}); got != nil {
		t.Errorf("noise was answered % X", got)
	}
	if st, _ := b.State(7); st.Coils[0] {
		t.Error("the write with a bad CRC was carried out")
	}
	// The line still works after the noise.
	if got := h.ask(7, 1, 0, 2, 0, 1); !bytes.Equal(got, withCRC([]byte{7, 1, 1, 1})) {
		t.Errorf("after noise, coil 2 read % X", got)
	}
}

func TestBoardFaults(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b := start(t, Config{})
	h := open(t, b.Path())
	read := []byte{1, 3, 0, 0, 0, 1}
	good := withCRC([]byte{1, 3, 2, 0, 0})

	// A lost response: the write is carried out, its answer never comes.
	b.SetFaults(Faults{Drop: 1})
	if got := h.ask(1, 5, 0, 0, 0xFF, 0); got != nil {
		t.Errorf("a dropped reply came: % X", got)
	}
	if st, _ := b.State(1); !st.Coils[0] || b.Writes(1) != 1 {
		t.Errorf("after a lost response: coil 0 = %v, writes %d; want the write carried out", st.Coils[0], b.Writes(1))
	}
	if got := h.ask(read...); !bytes.Equal(got, good) {
		t.Errorf("the reply after the dropped one = % X, want % X", got, good)
	}

	b.SetFaults(Faults{Garbage: 1})
	if got := h.ask(read...); len(got) != len(good) || checkCRC(got) {
		t.Errorf("garbage = % X, want %d bytes without a good CRC", got, len(good))
	}
	b.SetFaults(Faults{BadCRC: 1})
	if got := h.ask(read...); len(got) != len(good) || checkCRC(got) || !bytes.Equal(got[:5], good[:5]) {
		t.Errorf("a bad CRC = % X", got)
	}
	b.SetFaults(Faults{Short: 1})
	if got := h.ask(read...); !bytes.Equal(got, good[:len(good)-3]) {
		t.Errorf("a short frame = % X, want % X", got, good[:len(good)-3])
	}
	b.SetFaults(Faults{WrongUnit: 1})
	if got := h.ask(read...); !bytes.Equal(got, withCRC([]byte{2, 3, 2, 0, 0})) {
		t.Errorf("a reply from another unit = % X", got)
	}
	// Busy: exception 06, and the write is not carried out.
	b.SetFaults(Faults{Busy: 1})
	if got := h.ask(1, 6, 0, 0, 0, 9); !bytes.Equal(got, withCRC([]byte{1, 0x86, 6})) {
		t.Errorf("busy = % X, want exception 06", got)
	}
	if st, _ := b.State(1); st.Holding[0] != 0 {
		t.Error("a write answered busy was carried out")
	}
	if f := b.Faults(); (f.Busy | f.Drop | f.Garbage | f.BadCRC | f.Short | f.WrongUnit) != 0 {
		t.Errorf("faults left after each was spent = %+v", f)
	}
	// A stuck relay answers the write and does not move.
	b.SetFaults(Faults{Stuck: []uint16{1}})
	if got := h.ask(1, 5, 0, 1, 0xFF, 0); !bytes.Equal(got, withCRC([]byte{1, 5, 0, 1, 0xFF, 0})) {
		t.Errorf("the write to a stuck relay = % X, want its echo", got)
	}
	if st, _ := b.State(1); st.Coils[1] || st.Discrete[1] {
		t.Error("the stuck relay moved")
	}
}

func TestBoardUnplugged(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	link := filepath.Join(t.TempDir(), "ttyUSB0")
	b := start(t, Config{Link: link})
	first, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	h := open(t, b.Path())
	if got := h.ask(1, 5, 0, 3, 0xFF, 0); len(got) != 8 {
		t.Fatalf("write coil 3 = % X", got)
	}
	if err := b.Unplug(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link of an unplugged board: %v, want it gone", err)
	}
	buf := make([]byte, 10)
	if _, err := h.port.Read(buf); err == nil {
		t.Error("a read from an unplugged board did not fail")
	}
	if err := b.Replug(); err != nil {
		t.Fatal(err)
	}
	if second, err := os.Readlink(link); err != nil || second == "" {
		t.Fatalf("the link after Replug: %q, %v (before: %q)", second, err, first)
	}
	h2 := open(t, b.Path())
	if got := h2.ask(1, 1, 0, 3, 0, 1); !bytes.Equal(got, withCRC([]byte{1, 1, 1, 1})) {
		t.Errorf("after a replug coil 3 = % X, want on (the board kept its state)", got)
	}
	if err := b.Replug(); err == nil {
		t.Error("Replug of a plugged board did not fail")
	}
}
