package gateway

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	modbusboard "github.com/shadowgate/shadowgate/firmware-fixtures/modbus-board"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// modbusBoard starts the relay-and-sensor board, answering units 1 (the
// sensor) and 2 (the relays), on a
// pseudo-terminal behind a link that stays at one path when the board is
// plugged in again.
func modbusBoard(t *testing.T, link string) *modbusboard.Board {
	t.Helper()
	b, err := modbusboard.Start(modbusboard.Config{Units: []byte{1, 2}, Link: link})
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

const modbusHardware = `drivers:
  - name: rs485
    type: modbus
    modbus:
      port: PORT
      baud: 115200
      timeout: 200ms
      retries: 1
      registers:
        th-1:
          temperature: {table: input, address: 0, type: int16, scale: 0.1}
          missing: {table: input, address: 40, type: uint16}
        relays-1:
          pump: {table: coil, address: 0}
          pump_feedback: {table: discrete, address: 0}
devices:
  - id: th-1
    driver: rs485
    address: "1"
    capabilities:
      - {name: temperature, kind: sensor, type: number, unit: C}
      - {name: missing, kind: sensor, type: number}
  - id: relays-1
    driver: rs485
    address: "2"
    capabilities:
      - name: pump
        kind: actuator
        type: bool
        read_back: true
        effects: {reversible: true, contained: true}
        confirm: {read_back: true, within: 2s}
      - {name: pump_feedback, kind: sensor, type: bool}
`

// TestModbusBoardThroughTheGovernedPath drives the Modbus board from MQTT:
// a read, a confirmed write, a stuck relay, an exception, and a lost
// response that locks the relay.
func TestModbusBoardThroughTheGovernedPath(t *testing.T) {
	link := filepath.Join(t.TempDir(), "ttyUSB0")
	b := modbusBoard(t, link)
	b.SetTemperature(1, 19.4)
	r := startHardware(t, strings.Replace(modbusHardware, "PORT", link, 1))
	waitOnline(t, r, "relays-1")

	if rep := r.Command("th-1", "temperature", ""); rep.Outcome != "completed" || rep.Reading == nil || rep.Reading.Value != value.Number(19.4) {
		t.Fatalf("read = %+v", rep)
	}
	rep := r.Command("relays-1", "pump", "true")
	if st, _ := b.State(2); rep.Outcome != "acted" || rep.Receipt == nil || rep.Receipt.Confirmation != runtime.Confirmed || !st.Coils[0] {
		t.Fatalf("write = %+v (board coil %v)", rep, st.Coils[0])
	}
	if rep := r.Command("relays-1", "pump_feedback", ""); rep.Outcome != "completed" || rep.Reading == nil || rep.Reading.Value != value.Bool(true) {
		t.Fatalf("the pump's feedback = %+v", rep)
	}

	b.SetFaults(modbusboard.Faults{Stuck: []uint16{0}})
	if rep := r.Command("relays-1", "pump", "false"); rep.Outcome != "contradicted" {
		t.Fatalf("write to a stuck relay = %+v, want contradicted", rep)
	}

	// The board has no input register 40: exception 02, named in the failure.
	if rep := r.Command("th-1", "missing", ""); rep.Outcome != "failed" || !strings.Contains(rep.Why, "0x02") {
		t.Fatalf("a read the board refuses = %+v, want failed with 0x02", rep)
	}

	// A response lost, and the relay stuck: the outcome is unknown, the
	// read-back shows the relay did not move, and the relay locks.
	writes := b.Writes(2)
	b.SetFaults(modbusboard.Faults{Drop: 1, Stuck: []uint16{0}})
	if rep := r.Command("relays-1", "pump", "false"); rep.Outcome != "failed" || !strings.Contains(rep.Why, "is locked until an admin resolves") {
		t.Fatalf("a lost response with the relay unmoved = %+v, want failed and locked", rep)
	}
	if n := b.Writes(2) - writes; n != 1 {
		t.Errorf("the board received %d writes for one command, want 1 (never repeated)", n)
	}
	b.SetFaults(modbusboard.Faults{})
	if rep := r.Command("relays-1", "pump", "false"); rep.Outcome != "refused" || !strings.Contains(rep.Why, "locked") {
		t.Fatalf("a command to the locked relay = %+v, want refused as locked", rep)
	}
}

// TestModbusBoardLostAndFound unplugs the board's adapter: its devices go
// offline with the reason, and come back when it is plugged in again under
// the same path.
func TestModbusBoardLostAndFound(t *testing.T) {
	link := filepath.Join(t.TempDir(), "ttyUSB0")
	b := modbusBoard(t, link)
	r := startHardware(t, strings.Replace(modbusHardware, "PORT", link, 1))
	waitOnline(t, r, "relays-1")

	at := r.Engine.LastSeq()
	if err := b.Unplug(); err != nil {
		t.Fatal(err)
	}
	ev := r.WaitEvent(at, runtime.KindDeviceOffline, "relays-1")
	var body runtime.DeviceBody
	if err := json.Unmarshal(ev.Body, &body); err != nil || !strings.Contains(body.Reason, link) {
		t.Fatalf("device_offline body %s: want the reason naming the port", ev.Body)
	}
	at = r.Engine.LastSeq()
	if err := b.Replug(); err != nil {
		t.Fatal(err)
	}
	r.WaitEvent(at, runtime.KindDeviceOnline, "relays-1")
	if rep := r.Command("th-1", "temperature", ""); rep.Outcome != "completed" {
		t.Fatalf("a read after the board came back = %+v", rep)
	}
}

// TestModbusMalformedAnswersThroughTheGovernedPath: garbage, a bad CRC, a
// short frame and an answer from another unit are never taken. A read is
// tried again and completes; with every try spoiled it fails, naming the
// device; a write whose answer was spoiled is an unknown outcome, settled
// by its read-back.
func TestModbusMalformedAnswersThroughTheGovernedPath(t *testing.T) {
	link := filepath.Join(t.TempDir(), "ttyUSB0")
	b := modbusBoard(t, link)
	b.SetTemperature(1, 19.4)
	r := startHardware(t, strings.Replace(modbusHardware, "PORT", link, 1))
	waitOnline(t, r, "relays-1")
	for _, f := range []modbusboard.Faults{{Garbage: 1}, {BadCRC: 1}, {Short: 1}, {WrongUnit: 1}} {
		b.SetFaults(f)
		if rep := r.Command("th-1", "temperature", ""); rep.Outcome != "completed" || rep.Reading.Value != value.Number(19.4) {
			t.Fatalf("a read with one spoiled answer (%+v) = %+v, want completed on its retry", f, rep)
		}
	}
	b.SetFaults(modbusboard.Faults{BadCRC: 2})
	if rep := r.Command("th-1", "temperature", ""); rep.Outcome != "failed" || !strings.Contains(rep.Why, "th-1") {
		t.Fatalf("a read with every answer spoiled = %+v, want failed naming th-1", rep)
	}
	// The relay is read first, so that the write step needs no reading of
	// its own and the spoiled answer is the write's.
	if rep := r.Command("relays-1", "pump", ""); rep.Outcome != "completed" {
		t.Fatalf("read of the relay = %+v", rep)
	}
	b.SetFaults(modbusboard.Faults{Garbage: 1})
	// It was carried out, so its outcome is unknown, read back, and found.
	if rep := r.Command("relays-1", "pump", "true"); rep.Outcome != "acted" || rep.Receipt == nil ||
		!strings.Contains(rep.Receipt.Detail, "the read-back shows the act took effect") {
		t.Fatalf("a write whose answer was garbage = %+v, want an unknown outcome settled by its read-back", rep)
	}
}
