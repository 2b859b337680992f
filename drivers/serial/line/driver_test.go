package line_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/serial/line"
	"github.com/shadowgate/shadowgate/drivers/serial/port"
	linefirmware "github.com/shadowgate/shadowgate/firmware-fixtures/line-firmware"
	"github.com/shadowgate/shadowgate/value"
)

// board is the line firmware on a pseudo-terminal, reached through a
// symbolic link, so that it can be unplugged and plugged in again under
// the same path, as a USB adapter is.
type board struct {
	t    *testing.T
	link string
	mu   sync.Mutex
	b    *linefirmware.Board
}

func plugBoard(t *testing.T, st linefirmware.State) *board {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // first, so it runs last
	bd := &board{t: t, link: filepath.Join(t.TempDir(), "ttyACM0")}
	bd.plug(st)
	t.Cleanup(bd.unplug)
	return bd
}

// plug starts a board and points the link at it.
func (bd *board) plug(st linefirmware.State) {
	bd.t.Helper()
	b, err := linefirmware.Start(st)
	if err != nil {
		bd.t.Skipf("no pseudo-terminal here: %v", err)
	}
	_ = os.Remove(bd.link)
	if err := os.Symlink(b.Path(), bd.link); err != nil {
		bd.t.Fatal(err)
	}
	bd.mu.Lock()
	bd.b = b
	bd.mu.Unlock()
}

// unplug closes the board: the port's reads end.
func (bd *board) unplug() {
	bd.mu.Lock()
	b := bd.b
	bd.b = nil
	bd.mu.Unlock()
	if b != nil {
		_ = b.Close()
		_ = os.Remove(bd.link)
	}
}

func (bd *board) fw() *linefirmware.Board {
	bd.mu.Lock()
	defer bd.mu.Unlock()
	return bd.b
}

func dev(id, address string, c devices.Capability) devices.Device {
	return devices.Device{ID: id, Driver: "arduino", Address: address, Capabilities: []devices.Capability{c}}
}

var (
	relay  = dev("relay-1", "relay", devices.Capability{Name: "on", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true})
	button = dev("button-1", "button", devices.Capability{Name: "pressed", Kind: devices.KindSensor, Type: value.TypeBool})
	temp   = dev("temp-1", "temperature", devices.Capability{Name: "celsius", Kind: devices.KindSensor, Type: value.TypeNumber, Unit: "C"})
)

// watched is a driver opened on a board, with the notices it gave.
type watched struct {
	*line.Driver
	mu      sync.Mutex
	notices []devices.Notice
}

func (w *watched) saw(match func(devices.Notice) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.notices, match)
}

func openDriver(t *testing.T, bd *board, discover bool, devs ...devices.Device) *watched {
	t.Helper()
	d := line.New(line.Options{
		Port:    port.Settings{Path: bd.link, Baud: 115200, DataBits: 8, StopBits: 1},
		Timeout: 200 * time.Millisecond, Discover: discover, Devices: devs, Keepalive: time.Second,
	})
	if err := d.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	w := &watched{Driver: d}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Watch(ctx, func(n devices.Notice) {
			w.mu.Lock()
			w.notices = append(w.notices, n)
			w.mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "the board online", func() bool { return d.Health(t.Context()) == nil })
	return w
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReadWriteAndReadBack(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{Temperature: 21.46})
	d := openDriver(t, bd, true, relay, button, temp)
	ctx := t.Context()
	if got := len(d.Devices()); got != 3 {
		t.Fatalf("Devices = %d, want 3", got)
	}
	rd, err := d.Read(ctx, "temp-1", "celsius")
	if err != nil || rd.Value != value.Number(21.5) || rd.Quality != devices.QualityGood {
		t.Fatalf("Read temperature = %+v, %v", rd, err)
	}
	if err := d.Write(ctx, "relay-1", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	if !bd.fw().State().Relay {
		t.Fatal("the board's relay did not move")
	}
	if rd, err := d.Read(ctx, "relay-1", "on"); err != nil || rd.Value != value.Bool(true) {
		t.Fatalf("read-back = %+v, %v", rd, err)
	}
	if err := d.Write(ctx, "relay-1", "on", value.Number(1)); !errors.Is(err, devices.ErrBadRequest) {
		t.Fatalf("a number to a bool relay = %v, want a bad request", err)
	}
	if err := d.Write(ctx, "temp-1", "celsius", value.Number(1)); !errors.Is(err, devices.ErrNotWritable) {
		t.Fatalf("a write to a sensor = %v", err)
	}
	if s := d.Stats(); s.Noise != 0 || s.Stale != 0 || s.Timeouts != 0 {
		t.Fatalf("a clean line counted %+v", s)
	}
}

func TestStuckRelayReadsBackTheTruth(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{})
	d := openDriver(t, bd, false, relay)
	bd.fw().SetFaults(linefirmware.Faults{Stuck: true})
	if err := d.Write(t.Context(), "relay-1", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	if rd, err := d.Read(t.Context(), "relay-1", "on"); err != nil || rd.Value != value.Bool(false) {
		t.Fatalf("read-back of a stuck relay = %+v, %v; want false", rd, err)
	}
}

func TestRefusalCarriesTheFirmwaresCode(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{})
	// Configured as an actuator, which the firmware's button is not.
	wrong := dev("button-1", "button", devices.Capability{Name: "pressed", Kind: devices.KindActuator, Type: value.TypeBool})
	d := openDriver(t, bd, false, wrong)
	err := d.Write(t.Context(), "button-1", "pressed", value.Bool(true))
	if code, ok := devices.RefusalCode(err); !ok || code != "E_READONLY" || devices.Classify(err) != devices.OutcomeRefused {
		t.Fatalf("SET of a sensor = %v, want refused with E_READONLY", err)
	}
}

func TestDiscoverKeepsBackWhatTheFirmwareDoesNotHave(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{})
	asNumber := dev("relay-1", "relay", devices.Capability{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber})
	fan := dev("fan-1", "fan", devices.Capability{Name: "on", Kind: devices.KindActuator, Type: value.TypeBool})
	d := openDriver(t, bd, true, asNumber, fan, temp)
	if got := d.Devices(); len(got) != 1 || got[0].ID != "temp-1" {
		t.Fatalf("Devices = %v, want temp-1 alone", got)
	}
	for id, want := range map[string]string{
		"relay-1": "has relay as a bool actuator; the configuration says number sensor",
		"fan-1":   "has no capability fan; it has relay, button, temperature",
	} {
		if err := d.Why(id); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Why(%s) = %v, want %q", id, err, want)
		}
	}
	if _, err := d.Read(t.Context(), "relay-1", "level"); devices.Classify(err) != devices.OutcomeOffline {
		t.Errorf("a read of a device that does not fit = %v, want offline", err)
	}
}

func TestGarbageIsCountedAndSkipped(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{Temperature: 20})
	d := openDriver(t, bd, false, temp)
	bd.fw().SetFaults(linefirmware.Faults{Garbage: true})
	if rd, err := d.Read(t.Context(), "temp-1", "celsius"); err != nil || rd.Value != value.Number(20) {
		t.Fatalf("a read through garbage = %+v, %v", rd, err)
	}
	if d.Stats().Noise == 0 {
		t.Fatal("garbage was not counted as noise")
	}
}

func TestBadCRCIsNeverTaken(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{Temperature: 20})
	d := openDriver(t, bd, false, relay, temp)
	bd.fw().SetFaults(linefirmware.Faults{BadCRC: true})
	if _, err := d.Read(t.Context(), "temp-1", "celsius"); err == nil {
		t.Fatal("a reply with a bad CRC was taken")
	}
	before := bd.fw().Requests()
	err := d.Write(t.Context(), "relay-1", "on", value.Bool(true))
	if devices.Classify(err) != devices.OutcomeUnknown {
		t.Fatalf("a write whose reply had a bad CRC = %v, want an unknown outcome", err)
	}
	if bd.fw().Requests() <= before || !bd.fw().State().Relay {
		t.Fatal("the write did not reach the board; the test proves nothing")
	}
	if d.Stats().Noise < 2 {
		t.Fatalf("the bad replies were not counted as noise: %+v", d.Stats())
	}
}

func TestReplyForAnotherIDIsDiscarded(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{Temperature: 20})
	d := openDriver(t, bd, false, temp)
	// The board holds each reply back and sends it after the next one:
	// every other request has its answer, followed by a stale one.
	bd.fw().SetFaults(linefirmware.Faults{Reorder: true})
	ok := false
	for range 6 {
		if rd, err := d.Read(t.Context(), "temp-1", "celsius"); err == nil {
			if rd.Value != value.Number(20) {
				t.Fatalf("read %v", rd.Value)
			}
			ok = true
			break
		}
	}
	if !ok {
		t.Fatal("no read had its own reply")
	}
	waitFor(t, "the stale reply discarded", func() bool { return d.Stats().Stale > 0 })
}

func TestLostReplyToAWriteIsAnUnknownOutcome(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{})
	d := openDriver(t, bd, false, relay)
	bd.fw().SetFaults(linefirmware.Faults{Drop: 1})
	err := d.Write(t.Context(), "relay-1", "on", value.Bool(true))
	if devices.Classify(err) != devices.OutcomeUnknown {
		t.Fatalf("Write with its reply lost = %v, want an unknown outcome", err)
	}
	if !bd.fw().State().Relay {
		t.Fatal("the board did not carry the request out")
	}
}

func TestEventsAndAResetAreTold(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{})
	d := openDriver(t, bd, false, relay, button)
	bd.fw().Press(true)
	waitFor(t, "the button's event", func() bool {
		return d.saw(func(n devices.Notice) bool {
			return n.Device == "button-1" && n.Reading != nil && n.Reading.Value == value.Bool(true)
		})
	})
	if err := d.Write(t.Context(), "relay-1", "on", value.Bool(true)); err != nil {
		t.Fatal(err)
	}
	bd.fw().Reset() // the relay drops
	waitFor(t, "the relay read again after the reset", func() bool {
		return d.Stats().Boots == 1 && d.saw(func(n devices.Notice) bool {
			return n.Device == "relay-1" && n.Reading != nil && n.Reading.Value == value.Bool(false)
		})
	})
}

func TestUnpluggedAndBackUnderTheSamePath(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{})
	d := openDriver(t, bd, false, relay)
	bd.unplug()
	waitFor(t, "the device lost", func() bool {
		return d.saw(func(n devices.Notice) bool { return n.Device == "relay-1" && n.Lost != nil })
	})
	if len(d.Devices()) != 0 {
		t.Fatal("a lost board's devices are still listed")
	}
	err := d.Write(t.Context(), "relay-1", "on", value.Bool(true))
	if devices.Classify(err) != devices.OutcomeOffline {
		t.Fatalf("a write to a lost board = %v, want offline (nothing sent)", err)
	}
	bd.plug(linefirmware.State{})
	waitFor(t, "the device found again", func() bool {
		return d.saw(func(n devices.Notice) bool { return n.Device == "relay-1" && n.Found }) && len(d.Devices()) == 1
	})
	if err := d.Write(t.Context(), "relay-1", "on", value.Bool(true)); err != nil {
		t.Fatalf("a write after the board came back = %v", err)
	}
}

func TestSilentBoardIsLost(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{})
	d := openDriver(t, bd, false, relay)
	bd.fw().SetFaults(linefirmware.Faults{Drop: 1 << 30})
	waitFor(t, "the silent board lost", func() bool { return d.Health(t.Context()) != nil })
	if err := d.Why("relay-1"); err == nil || !strings.Contains(err.Error(), "stopped answering") {
		t.Fatalf("Why = %v", err)
	}
	bd.fw().SetFaults(linefirmware.Faults{})
	waitFor(t, "the board answering again", func() bool { return len(d.Devices()) == 1 })
}

func TestMissingPortSaysSo(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	path := filepath.Join(t.TempDir(), "ttyUSB7")
	d := line.New(line.Options{Port: port.Settings{Path: path, Baud: 115200, DataBits: 8, StopBits: 1}, Devices: []devices.Device{relay}})
	if err := d.Open(t.Context()); err != nil {
		t.Fatalf("Open with the port missing = %v; it should wait for it", err)
	}
	defer d.Close()
	waitFor(t, "the reason", func() bool {
		err := d.Health(t.Context())
		return err != nil && strings.Contains(err.Error(), path+" is not there")
	})
	if len(d.Devices()) != 0 {
		t.Fatal("devices listed without a port")
	}
}

func TestClosedDriverSaysSo(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{})
	d := openDriver(t, bd, false, relay)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Health(t.Context()); !errors.Is(err, devices.ErrClosed) {
		t.Errorf("Health after Close = %v", err)
	}
	if err := d.Write(t.Context(), "relay-1", "on", value.Bool(true)); !errors.Is(err, devices.ErrClosed) {
		t.Errorf("Write after Close = %v", err)
	}
}

// TestSecondDriverOnOnePortIsRefused: a second driver that names the
// board's port under another name fails its Open, and cannot take the
// port after the board was unplugged and plugged in again.
func TestSecondDriverOnOnePortIsRefused(t *testing.T) {
	bd := plugBoard(t, linefirmware.State{})
	first := openDriver(t, bd, false, relay)
	other := filepath.Join(t.TempDir(), "by-id-board")
	if err := os.Symlink(bd.fw().Path(), other); err != nil {
		t.Fatal(err)
	}
	second := line.New(line.Options{Name: "second", Port: port.Settings{Path: other, Baud: 115200, DataBits: 8, StopBits: 1},
		Timeout: 200 * time.Millisecond, Devices: []devices.Device{relay}})
	err := second.Open(t.Context())
	if !errors.Is(err, port.ErrHeld) {
		_ = second.Close()
		t.Fatalf("a second driver on one port opened: %v", err)
	}
	// Unplugged and back: the first driver has its port again; a driver
	// that tried the port meanwhile never got it.
	bd.unplug()
	waitFor(t, "the board lost", func() bool { return first.Health(t.Context()) != nil })
	bd.plug(linefirmware.State{})
	_ = os.Remove(other)
	if err := os.Symlink(bd.fw().Path(), other); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the board back", func() bool { return first.Health(t.Context()) == nil })
	third := line.New(line.Options{Name: "third", Port: port.Settings{Path: other, Baud: 115200, DataBits: 8, StopBits: 1},
		Timeout: 200 * time.Millisecond, Devices: []devices.Device{relay}})
	if err := third.Open(t.Context()); !errors.Is(err, port.ErrHeld) {
		_ = third.Close()
		t.Fatalf("a driver on the replugged port opened: %v", err)
	}
}
