package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	periphgpio "periph.io/x/conn/v3/gpio"

	gpioboard "github.com/shadowgate/shadowgate/firmware-fixtures/gpio-board"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// gpioBoard registers the fake GPIO board's pins in periph's gpioreg, which
// is global to the process, under names no machine's chip uses; the board
// is closed, and its names freed, after the gateway stops. Tests that use
// it must not run in parallel.
func gpioBoard(t *testing.T) *gpioboard.Board {
	t.Helper()
	b, err := gpioboard.New(gpioboard.Options{Relay: "SG_RELAY", Feedback: "SG_FEEDBACK", Float: "SG_FLOAT", Delay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("closing the gpio board: %v", err)
		}
	})
	return b
}

// gpioHardware is a pump relay confirmed by its contact's feedback, and a
// polled float switch, on the fake board.
const gpioHardware = `drivers:
  - name: pi
    type: gpio
    gpio:
      lines:
        pump-relay: {initial: false}
        pump-fb: {pull: down, debounce: 10ms}
        float-1: {pull: up, edge: none, poll: 20ms}
devices:
  - id: pump-relay
    driver: pi
    address: SG_RELAY
    capabilities:
      - name: coil
        kind: actuator
        type: bool
        read_back: true
        effects: {reversible: true, contained: true}
        confirm: {sensor: pump-fb.closed, op: "==", value: true, within: 2s}
  - id: pump-fb
    driver: pi
    address: SG_FEEDBACK
    capabilities:
      - {name: closed, kind: sensor, type: bool}
  - id: float-1
    driver: pi
    address: SG_FLOAT
    capabilities:
      - {name: high, kind: sensor, type: bool}
`

// TestGPIOBoardThroughTheGovernedPath drives the GPIO board from MQTT: a
// write confirmed by the feedback, a read of the float switch, and a line
// that fails a write, goes offline and comes back.
func TestGPIOBoardThroughTheGovernedPath(t *testing.T) {
	b := gpioBoard(t)
	r := startHardware(t, gpioHardware)
	waitOnline(t, r, "pump-relay")

	rep := r.Command("pump-relay", "coil", "true")
	if rep.Outcome != "acted" || rep.Receipt == nil || rep.Receipt.Confirmation != runtime.Confirmed {
		t.Fatalf("write = %+v, want acted and confirmed by the feedback", rep)
	}
	if b.Relay().Read() != periphgpio.High || b.Feedback().Read() != periphgpio.High {
		t.Fatalf("the board's relay %s and feedback %s, want both High", b.Relay().Read(), b.Feedback().Read())
	}

	// A read asks the line: it is the float's level as soon as it moves.
	b.SetFloat(periphgpio.High)
	if rep := r.Command("float-1", "high", ""); rep.Outcome != "completed" || rep.Reading == nil || rep.Reading.Value != value.Bool(true) {
		t.Fatalf("read of the float switch = %+v, want completed and true", rep)
	}

	// The line does not take the next level: the write did not happen, the
	// relay goes offline, and comes back at the level it had.
	at := r.Engine.LastSeq()
	b.Relay().FailNextOut(nil)
	if rep := r.Command("pump-relay", "coil", "false"); rep.Outcome != "failed" || !strings.Contains(rep.Why, "offline") {
		t.Fatalf("a write the line did not take = %+v, want failed as offline", rep)
	}
	ev := r.WaitEvent(at, runtime.KindDeviceOffline, "pump-relay")
	var body runtime.DeviceBody
	if err := json.Unmarshal(ev.Body, &body); err != nil || !strings.Contains(body.Reason, "SG_RELAY") || !strings.Contains(body.Reason, "did not take the level") {
		t.Fatalf("device_offline body %s: want the reason naming the pin and the cause", ev.Body)
	}
	r.WaitEvent(at, runtime.KindDeviceOnline, "pump-relay")
	if b.Relay().Read() != periphgpio.High {
		t.Fatal("the relay moved for a write that failed, or when it came back")
	}
	if rep := r.Command("pump-relay", "coil", "true"); rep.Outcome != "acted" || rep.Receipt == nil || rep.Receipt.Confirmation != runtime.Confirmed {
		t.Fatalf("a write once the relay came back = %+v, want acted and confirmed", rep)
	}
}

// TestGPIOStuckRelayIsContradicted sticks the relay: the line reads back
// what was written, but the feedback does not follow, and the act is
// contradicted.
func TestGPIOStuckRelayIsContradicted(t *testing.T) {
	b := gpioBoard(t)
	r := startHardware(t, gpioHardware)
	waitOnline(t, r, "pump-relay")
	b.Stick(true)
	rep := r.Command("pump-relay", "coil", "true")
	if rep.Outcome != "contradicted" || rep.Receipt == nil || rep.Receipt.Observed == nil || *rep.Receipt.Observed != value.Bool(false) {
		t.Fatalf("write to a stuck relay = %+v, want contradicted with the feedback false", rep)
	}
	if rep := r.Command("pump-relay", "coil", ""); rep.Outcome != "completed" || rep.Reading == nil || rep.Reading.Value != value.Bool(true) {
		t.Fatalf("the stuck relay's read-back = %+v, want completed and true: the line reads what was written", rep)
	}
}
