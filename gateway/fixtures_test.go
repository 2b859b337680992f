package gateway

import (
	"bytes"
	"testing"

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
	for _, v := range []string{"true", "false"} {
		rep := r.Command("valve-1", "open", v)
		if rep.Outcome != "acted" || rep.Receipt.Confirmation != runtime.Confirmed {
			t.Fatalf("valve %s = %+v; want acted, confirmed by the feedback", v, rep)
		}
	}
	fx.GPIO.Stick(true)
	if rep := r.Command("valve-1", "open", "true"); rep.Outcome != "contradicted" {
		t.Fatalf("valve with a stuck relay = %+v; want contradicted by the feedback", rep)
	}
}
