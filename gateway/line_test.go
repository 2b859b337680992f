package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	linefirmware "github.com/shadowgate/shadowgate/firmware-fixtures/line-firmware"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// lineBoard starts the line firmware on a pseudo-terminal behind a link
// that stays at one path when the board is plugged in again.
func lineBoard(t testing.TB, link string) *linefirmware.Board {
	t.Helper()
	b, err := linefirmware.Start(linefirmware.State{Temperature: 18.2})
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	_ = os.Remove(link)
	if err := os.Symlink(b.Path(), link); err != nil {
		t.Fatal(err)
	}
	return b
}

const lineHardware = `drivers:
  - name: arduino
    type: line
    line: {port: PORT, timeout: 300ms, discover: true}
devices:
  - id: relay-1
    driver: arduino
    address: relay
    capabilities:
      - name: "on"
        kind: actuator
        type: bool
        read_back: true
        effects: {reversible: true, contained: true}
        confirm: {read_back: true, within: 2s}
  - id: temp-1
    driver: arduino
    address: temperature
    capabilities:
      - {name: celsius, kind: sensor, type: number, unit: C}
  - id: button-1
    driver: arduino
    address: button
    capabilities:
      - {name: pressed, kind: sensor, type: bool}
`

// TestLineBoardThroughTheGovernedPath drives the line firmware from MQTT:
// a read, a confirmed write, a stuck relay, a lost reply, an event, and
// the board unplugged and back.
func TestLineBoardThroughTheGovernedPath(t *testing.T) {
	link := filepath.Join(t.TempDir(), "ttyACM0")
	b := lineBoard(t, link)
	r := startHardware(t, strings.Replace(lineHardware, "PORT", link, 1))
	waitOnline(t, r, "relay-1")

	if rep := r.Command("temp-1", "celsius", ""); rep.Outcome != "completed" || rep.Reading == nil || rep.Reading.Value != value.Number(18.2) {
		t.Fatalf("read = %+v", rep)
	}
	rep := r.Command("relay-1", "on", "true")
	if rep.Outcome != "acted" || rep.Receipt == nil || rep.Receipt.Confirmation != runtime.Confirmed || !b.State().Relay {
		t.Fatalf("write = %+v (board relay %v)", rep, b.State().Relay)
	}

	b.SetFaults(linefirmware.Faults{Stuck: true})
	if rep := r.Command("relay-1", "on", "false"); rep.Outcome != "contradicted" {
		t.Fatalf("write to a stuck relay = %+v, want contradicted", rep)
	}

	// The button's event arrives by itself, and is journaled as a reading.
	at := r.Engine.LastSeq()
	b.Press(true)
	ev := r.WaitEvent(at, runtime.KindObserved, "button-1")
	var ob runtime.ObservedBody
	if err := json.Unmarshal(ev.Body, &ob); err != nil || ob.Value != value.Bool(true) || ob.Principal != "gateway:watch" {
		t.Fatalf("the button's event journaled as %s", ev.Body)
	}

	// A reply lost after the board acted: the outcome is unknown and the
	// relay is read back at once; it shows the act took effect.
	b.SetFaults(linefirmware.Faults{Drop: 1})
	rep = r.Command("relay-1", "on", "false")
	if rep.Outcome != "acted" || rep.Receipt == nil || !strings.Contains(rep.Receipt.Detail, "the read-back shows the act took effect") || b.State().Relay {
		t.Fatalf("a write whose reply was lost = %+v, want acted by its read-back", rep)
	}
	// Lost again, and this time the relay did not move: the relay locks,
	// and the next command to it is refused until an admin resolves it.
	b.SetFaults(linefirmware.Faults{Drop: 1, Stuck: true})
	if rep := r.Command("relay-1", "on", "true"); rep.Outcome != "failed" || !strings.Contains(rep.Why, "is locked until an admin resolves") {
		t.Fatalf("a lost reply with the relay unmoved = %+v, want failed and locked", rep)
	}
	b.SetFaults(linefirmware.Faults{})
	if rep := r.Command("relay-1", "on", "true"); rep.Outcome != "refused" || !strings.Contains(rep.Why, "locked") {
		t.Fatalf("a command to the locked relay = %+v, want refused as locked", rep)
	}
}

// TestLineBoardLostAndFound unplugs the board: its devices go offline with
// the reason, a command fails naming it, and the board plugged in again
// under the same path brings them back.
func TestLineBoardLostAndFound(t *testing.T) {
	link := filepath.Join(t.TempDir(), "ttyACM0")
	b := lineBoard(t, link)
	r := startHardware(t, strings.Replace(lineHardware, "PORT", link, 1))
	waitOnline(t, r, "relay-1")

	at := r.Engine.LastSeq()
	_ = b.Close()
	ev := r.WaitEvent(at, runtime.KindDeviceOffline, "relay-1")
	var body runtime.DeviceBody
	if err := json.Unmarshal(ev.Body, &body); err != nil || !strings.Contains(body.Reason, link) {
		t.Fatalf("device_offline body %s: want the reason naming the port", ev.Body)
	}
	if rep := r.Command("relay-1", "on", "true"); rep.Outcome != "failed" || !strings.Contains(rep.Why, "relay-1") {
		t.Fatalf("a command to the lost board = %+v, want failed naming the device", rep)
	}
	at = r.Engine.LastSeq()
	lineBoard(t, link)
	r.WaitEvent(at, runtime.KindDeviceOnline, "relay-1")
	if rep := r.Command("temp-1", "celsius", ""); rep.Outcome != "completed" {
		t.Fatalf("a read after the board came back = %+v", rep)
	}
}

// TestLineRefusalCarriesItsCode: a device configured as an actuator that the
// firmware has as a sensor (without discover, so the firmware says so
// itself) is refused by the board, and the failure names the board's code.
func TestLineRefusalCarriesItsCode(t *testing.T) {
	link := filepath.Join(t.TempDir(), "ttyACM0")
	lineBoard(t, link)
	r := startHardware(t, `drivers:
  - name: arduino
    type: line
    line: {port: `+link+`}
devices:
  - id: button-1
    driver: arduino
    address: button
    capabilities:
      - {name: pressed, kind: actuator, type: bool, effects: {reversible: true, contained: true}}
`)
	waitOnline(t, r, "button-1")
	rep := r.Command("button-1", "pressed", "true")
	if rep.Outcome != "failed" || !strings.Contains(rep.Why, "E_READONLY") {
		t.Fatalf("a SET the board refuses = %+v, want failed with E_READONLY", rep)
	}
}

// waitOnline waits until the engine lists device.
func waitOnline(t *testing.T, r *hwRig, device string) {
	t.Helper()
	r.WaitEvent(0, runtime.KindDeviceOnline, device)
}

// TestLineMalformedAnswersThroughTheGovernedPath: garbage before a reply is
// skipped; a reply with a bad CRC is never taken, so the read fails naming
// the device; a reply for another request is discarded.
func TestLineMalformedAnswersThroughTheGovernedPath(t *testing.T) {
	link := filepath.Join(t.TempDir(), "ttyACM0")
	b := lineBoard(t, link)
	r := startHardware(t, strings.Replace(lineHardware, "PORT", link, 1))
	waitOnline(t, r, "temp-1")
	b.SetFaults(linefirmware.Faults{Garbage: true})
	if rep := r.Command("temp-1", "celsius", ""); rep.Outcome != "completed" || rep.Reading.Value != value.Number(18.2) {
		t.Fatalf("a read through garbage = %+v", rep)
	}
	b.SetFaults(linefirmware.Faults{BadCRC: true})
	if rep := r.Command("temp-1", "celsius", ""); rep.Outcome != "failed" || !strings.Contains(rep.Why, "temp-1") {
		t.Fatalf("a read whose reply had a bad CRC = %+v, want failed naming temp-1", rep)
	}
	// Every other reply is held back and sent after the next: a request
	// gets either its own reply or none, never another's.
	b.SetFaults(linefirmware.Faults{Reorder: true})
	completed := 0
	for range 4 {
		rep := r.Command("temp-1", "celsius", "")
		switch {
		case rep.Outcome == "completed" && rep.Reading.Value == value.Number(18.2):
			completed++
		case rep.Outcome != "failed":
			t.Fatalf("a read with replies out of order = %+v", rep)
		}
	}
	if completed == 0 {
		t.Fatal("no read had its own reply")
	}
}
