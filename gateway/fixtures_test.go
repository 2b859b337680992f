package gateway

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/examples"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// TestFixturesDemo runs the fixtures demo's hardware (examples/fixtures.yaml)
// over the real drivers: a Modbus sensor, the line firmware's sensor, and
// the GPIO valve confirmed by its feedback contact both ways, then
// contradicted when its relay sticks.
func TestFixturesDemo(t *testing.T) {
	fx, err := StartFixtures()
	if err != nil {
		t.Skipf("the firmware simulators cannot run here: %v", err)
	}
	t.Cleanup(func() {
		if err := fx.Close(); err != nil {
			t.Error(err)
		}
	})
	cfg := fx.Configure(examples.Fixtures)
	hardware := cfg[bytes.Index(cfg, []byte("\ndrivers:"))+1:]
	r := startHardware(t, string(hardware))
	for _, d := range []string{"th-1", "air-1", "valve-1", "valve-fb-1"} {
		r.WaitEvent(0, runtime.KindDeviceOnline, d)
	}
	if rep := r.Command("th-1", "temperature", ""); rep.Outcome != "completed" || rep.Reading.Value != value.Number(21.5) {
		t.Fatalf("Modbus read = %+v", rep)
	}
	if rep := r.Command("air-1", "celsius", ""); rep.Outcome != "completed" || rep.Reading.Value != value.Number(19.4) {
		t.Fatalf("line read = %+v", rep)
	}
	for _, v := range []bool{true, false} {
		rep := r.Command("valve-1", "open", strconv.FormatBool(v))
		if rep.Outcome != "acted" || rep.Receipt.Confirmation != runtime.Confirmed {
			t.Fatalf("valve %v = %+v; want acted, confirmed by the feedback", v, rep)
		}
		// Confirmed by its feedback, the valve is still read back: where it
		// stands is known beside the receipt.
		var got *devices.Reading
		for _, rd := range r.Engine.Readings() {
			if rd.Device == "valve-1" && rd.Capability == "open" {
				got = &rd.Reading
			}
		}
		if got == nil || got.Value != value.Bool(v) || got.At.Before(rep.Receipt.At.Add(-time.Second)) {
			t.Fatalf("valve-1.open's reading after the act = %+v, want %v, read at the act", got, v)
		}
	}
	fx.GPIO.Stick(true)
	if rep := r.Command("valve-1", "open", "true"); rep.Outcome != "contradicted" {
		t.Fatalf("valve with a stuck relay = %+v; want contradicted by the feedback", rep)
	}
}
