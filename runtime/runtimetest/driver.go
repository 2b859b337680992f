package runtimetest

import (
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/devices/devicetest"
	"github.com/shadowgate/shadowgate/drivers/sim"
)

// Driver returns an opened driver that reaches devs (the greenhouse's, or
// some of them), behind a devicetest wrapper that counts every call and
// takes faults. It is closed when the test ends. Tests of the surfaces
// drive devices through it and the device contract only; today the
// devices are simulated.
func Driver(t testing.TB, devs []devices.Device) *devicetest.Driver {
	t.Helper()
	g, err := sim.New(sim.Options{Devices: devs})
	if err != nil {
		t.Fatal(err)
	}
	d := devicetest.Wrap(g, devicetest.Options{})
	if err := d.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}
