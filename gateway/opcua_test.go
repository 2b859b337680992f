package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/firmware-fixtures/opcua-plc/plc"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// startPLC runs the OPC-UA PLC simulator on a free port until the test
// ends.
func startPLC(t *testing.T, o plc.Options) *plc.PLC {
	t.Helper()
	plc.Quiet()
	p, err := plc.Start(o)
	if err != nil {
		t.Fatalf("starting the PLC simulator: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// opcuaHardware is a tank behind the PLC. URL and THUMB are filled in.
const opcuaHardware = `drivers:
  - name: plc-1
    type: opcua
    opcua:
      url: URL
      server_thumbprint: "THUMB"
      timeout: 500ms
      nodes:
        tank-1:
          level: {node: "ns=1;s=Tank.Level", sampling: 100ms}
        pump-1:
          "on": {node: "ns=1;s=Pump.Command"}
        pump-fb-1:
          running: {node: "ns=1;s=Pump.Running", sampling: 100ms}
        valve-1:
          open: {node: "ns=1;s=Valve.Open"}
        lock-1:
          "on": {node: "ns=1;s=Drain.Lock"}
        mixer-1:
          rpm: {node: "ns=1;s=Mixer.Speed"}
devices:
  - {id: tank-1, driver: plc-1, address: plc-1, capabilities: [{name: level, kind: sensor, type: number}]}
  - {id: pump-fb-1, driver: plc-1, address: plc-1, capabilities: [{name: running, kind: sensor, type: bool}]}
  - id: pump-1
    driver: plc-1
    address: plc-1
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true, effects: {reversible: true, contained: true, reaches: true},
         confirm: {feedback: pump-fb-1.running, within: 3s}}
  - id: valve-1
    driver: plc-1
    address: plc-1
    capabilities:
      - {name: open, kind: actuator, type: bool, read_back: true, effects: {reversible: true, contained: true, reaches: true},
         confirm: {read_back: true, within: 2s}}
  - id: lock-1
    driver: plc-1
    address: plc-1
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true, effects: {reversible: true, contained: true, reaches: true}}
  - id: mixer-1
    driver: plc-1
    address: plc-1
    capabilities:
      - {name: rpm, kind: actuator, type: number, read_back: true, effects: {reversible: true, contained: true, reaches: true}}
`

// opcuaHeader is hwHeader in mode maintenance: a write that reaches the
// PLC acts without asking, so the driver is tried, not the approvals.
var opcuaHeader = strings.Replace(hwHeader, "mode: interlocked", "mode: maintenance", 1)

func startOPCUA(t *testing.T, p *plc.PLC, thumb string) *hwRig {
	t.Helper()
	hw := strings.NewReplacer("URL", p.URL(), "THUMB", thumb).Replace(opcuaHardware)
	return startHardwareWith(t, hwOptions{Header: opcuaHeader}, hw)
}

// TestOPCUAThroughTheGovernedPath drives the PLC simulator from MQTT.
func TestOPCUAThroughTheGovernedPath(t *testing.T) {
	p := startPLC(t, plc.Options{FeedbackDelay: 200 * time.Millisecond})
	p.SetLevel(42)
	r := startOPCUA(t, p, p.Thumbprint())
	waitOnline(t, r, "pump-1")

	// A read.
	if rep := r.Command("tank-1", "level", ""); rep.Outcome != "completed" || rep.Reading == nil || rep.Reading.Value != value.Number(42) {
		t.Fatalf("read = %+v", rep)
	}
	// The subscription delivers a change the PLC makes, as a reading the
	// engine journals.
	at := r.Engine.LastSeq()
	p.SetLevel(17.5)
	for {
		ev := r.WaitEvent(at, runtime.KindObserved, "tank-1")
		var ob runtime.ObservedBody
		if err := json.Unmarshal(ev.Body, &ob); err != nil {
			t.Fatal(err)
		}
		if ob.Principal == "gateway:watch" && ob.Value == value.Number(17.5) {
			break
		}
		at = ev.Seq
	}
	// A write confirmed by the PLC's feedback tag, not its command tag.
	rep := r.Command("pump-1", "on", "true")
	if rep.Outcome != "acted" || rep.Receipt == nil || rep.Receipt.Confirmation != runtime.Confirmed || !p.PumpRunning() {
		t.Fatalf("pump on = %+v (running %v)", rep, p.PumpRunning())
	}
	// A stuck pump: the command is taken, the feedback does not follow.
	p.StuckPump(true)
	if rep := r.Command("pump-1", "on", "false"); rep.Outcome != "contradicted" {
		t.Fatalf("pump off while stuck = %+v, want contradicted by the feedback", rep)
	}
	p.StuckPump(false)
	// A tag the PLC does not let be written: refused with its status code.
	if err := p.SetWritable(plc.DrainLock, false); err != nil {
		t.Fatal(err)
	}
	if rep := r.Command("lock-1", "on", "true"); rep.Outcome != "failed" || !strings.Contains(rep.Why, "BadNotWritable") {
		t.Fatalf("write to a locked tag = %+v, want failed with the PLC's Bad status", rep)
	}
	// A value the node's type cannot hold: refused before anything is sent.
	before := p.Writes(plc.MixerSpeed) + p.Rejected(plc.MixerSpeed)
	if rep := r.Command("mixer-1", "rpm", "1500.5"); rep.Outcome != "failed" || !strings.Contains(rep.Why, "Int32") {
		t.Fatalf("a fractional value to an Int32 node = %+v, want failed naming the type", rep)
	}
	if after := p.Writes(plc.MixerSpeed) + p.Rejected(plc.MixerSpeed); after != before {
		t.Fatalf("the PLC saw %d writes of the mixer for a value that cannot fit", after-before)
	}
	if rep := r.Command("mixer-1", "rpm", "1500"); rep.Outcome != "acted" {
		t.Fatalf("a whole value to an Int32 node = %+v", rep)
	}
}

// TestOPCUAStalledWriteIsUnknownAndLocked: the PLC carries a write out and
// its response never comes: the outcome is unknown, the valve is read
// back; a valve that did not move (set back by hand) stays locked.
func TestOPCUAStalledWriteIsUnknownAndLocked(t *testing.T) {
	p := startPLC(t, plc.Options{})
	r := startOPCUA(t, p, p.Thumbprint())
	waitOnline(t, r, "valve-1")
	if rep := r.Command("valve-1", "open", ""); rep.Outcome != "completed" {
		t.Fatalf("read of the valve = %+v", rep)
	}
	// Lost, and the read-back shows the act took effect: reconciled.
	p.StallWrites(1, plc.NoResponse)
	rep := r.Command("valve-1", "open", "true")
	if rep.Outcome != "acted" || rep.Receipt == nil || !strings.Contains(rep.Receipt.Detail, "the read-back shows the act took effect") || !p.Valve() {
		t.Fatalf("a write whose response was lost = %+v, want acted by its read-back", rep)
	}
	// Lost, and the valve is closed again by hand before the read-back:
	// the valve locks.
	p.StallWrites(1, 2*time.Second)
	go func() {
		time.Sleep(100 * time.Millisecond)
		p.SetValve(true)
	}()
	rep = r.Command("valve-1", "open", "false")
	if rep.Outcome != "failed" || !strings.Contains(rep.Why, "is locked until an admin resolves") {
		t.Fatalf("a lost response with the valve back open = %+v, want failed and locked", rep)
	}
	if rep := r.Command("valve-1", "open", "false"); rep.Outcome != "refused" || !strings.Contains(rep.Why, "locked") {
		t.Fatalf("a command to the locked valve = %+v, want refused as locked", rep)
	}
}

// TestOPCUAPinnedThumbprint: a server whose certificate is not the pinned
// one is not connected to; the devices stay offline with both thumbprints
// in the reason.
func TestOPCUAPinnedThumbprint(t *testing.T) {
	p := startPLC(t, plc.Options{})
	wrong := strings.Repeat("ab", 32)
	r := startOPCUA(t, p, wrong)
	rep := r.Command("tank-1", "level", "")
	if rep.Outcome != "failed" || !strings.Contains(rep.Why, wrong) || !strings.Contains(rep.Why, p.Thumbprint()) {
		t.Fatalf("read through a server with another certificate = %+v, want failed naming both thumbprints", rep)
	}
}

// TestOPCUAPLCRestart: the PLC reboots; its devices go offline with the
// reason and come back, and the subscription is rebuilt.
func TestOPCUAPLCRestart(t *testing.T) {
	p := startPLC(t, plc.Options{})
	r := startOPCUA(t, p, p.Thumbprint())
	waitOnline(t, r, "tank-1")
	at := r.Engine.LastSeq()
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	ev := r.WaitEvent(at, runtime.KindDeviceOffline, "tank-1")
	var body runtime.DeviceBody
	if err := json.Unmarshal(ev.Body, &body); err != nil || body.Reason == "" {
		t.Fatalf("device_offline %s: want a reason", ev.Body)
	}
	r.WaitEvent(ev.Seq, runtime.KindDeviceOnline, "tank-1")
	// The subscription was made again: a change arrives by itself.
	at = r.Engine.LastSeq()
	p.SetLevel(66)
	for {
		ev := r.WaitEvent(at, runtime.KindObserved, "tank-1")
		var ob runtime.ObservedBody
		if err := json.Unmarshal(ev.Body, &ob); err != nil {
			t.Fatal(err)
		}
		if ob.Principal == "gateway:watch" && ob.Value == value.Number(66) && ob.Quality == "good" {
			break
		}
		at = ev.Seq
	}
}
