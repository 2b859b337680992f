package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shadowgate/shadowgate/devices"
)

// linkDriver is a driver that reports its link state: the wrapped driver,
// with a link that the test breaks and mends.
type linkDriver struct {
	devices.Driver
	down   atomic.Pointer[error]
	probes atomic.Int32
}

var _ devices.HealthReporter = (*linkDriver)(nil)

func (d *linkDriver) Health(ctx context.Context) error {
	d.probes.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	if p := d.down.Load(); p != nil {
		return *p
	}
	return nil
}

func (d *linkDriver) breakLink(err error) { d.down.Store(&err) }
func (d *linkDriver) mend()               { d.down.Store(nil) }

// readyz gets /readyz and decodes it.
func (s *site) readyz(t *testing.T) (int, readiness) {
	t.Helper()
	code, body := s.call("GET", "/readyz", "", "")
	var r readiness
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/readyz = %d %s: %v", code, body, err)
	}
	return code, r
}

func TestReadyzReportsEachDriversLink(t *testing.T) {
	clk := newClock()
	var link *linkDriver
	s := newSite(t, siteOptions{now: clk.now, driver: func(d devices.Driver) devices.Driver {
		link = &linkDriver{Driver: d}
		return link
	}})

	code, r := s.readyz(t)
	want := readiness{Status: "ready", Drivers: []driverHealth{{Name: "sim", Link: "up"}}}
	if code != http.StatusOK || !reflect.DeepEqual(want, r) {
		t.Fatalf("/readyz with the link up = %d %+v, want %+v", code, r, want)
	}

	// The drivers are asked at most once a second, however often /readyz
	// is: a flood of probes never reaches the hardware.
	link.breakLink(errors.New("serial port /dev/ttyUSB0: no answer to 3 pings"))
	probes := link.probes.Load()
	if code, _ := s.readyz(t); code != http.StatusOK || link.probes.Load() != probes {
		t.Fatalf("/readyz within a second asked the driver again (%d, %d probes, was %d)", code, link.probes.Load(), probes)
	}

	clk.add(healthTTL)
	code, r = s.readyz(t)
	// Anyone may ask /readyz: it names the driver, not its words (a
	// device path, an address).
	want = readiness{Status: "not ready", Error: "not ready",
		Detail:  "driver sim: its link is down (the Devices page says why)",
		Drivers: []driverHealth{{Name: "sim", Link: "down"}}}
	if code != http.StatusServiceUnavailable || !reflect.DeepEqual(want, r) {
		t.Fatalf("/readyz with the link down = %d %+v, want %+v", code, r, want)
	}

	// The Devices page shows the link and why.
	b := s.browser()
	b.login("vera", "password-1")
	_, page, _ := b.page("/devices")
	if !strings.Contains(page, "✗ down") || !strings.Contains(page, "no answer to 3 pings") {
		t.Fatalf("the Devices page does not show the driver's link down:\n%s", page)
	}

	link.mend()
	clk.add(healthTTL)
	if code, r := s.readyz(t); code != http.StatusOK || r.Drivers[0].Link != "up" {
		t.Fatalf("/readyz with the link mended = %d %+v", code, r)
	}
	if _, page, _ := b.page("/devices"); !strings.Contains(page, "✓ up") {
		t.Fatalf("the Devices page does not show the driver's link up:\n%s", page)
	}
}

// A driver that cannot tell its link state does not make the gateway
// unready; it is listed as unknown.
func TestReadyzWithADriverThatCannotTell(t *testing.T) {
	s := newSite(t, siteOptions{})
	code, r := s.readyz(t)
	want := readiness{Status: "ready", Drivers: []driverHealth{{Name: "sim", Link: "unknown"}}}
	if code != http.StatusOK || !reflect.DeepEqual(want, r) {
		t.Fatalf("/readyz = %d %+v, want %+v", code, r, want)
	}
}

// A driver that does not answer its health check in time is down, and
// /readyz still answers.
func TestHealthOfADriverThatDoesNotAnswer(t *testing.T) {
	got := healthOf(devices.DriverHealth{Name: "plc", Reports: true, Err: context.DeadlineExceeded})
	want := driverHealth{Name: "plc", Link: "down", Why: "it did not answer within " + healthTimeout.String()}
	if got != want {
		t.Errorf("healthOf(deadline) = %+v, want %+v", got, want)
	}
	long := strings.Repeat("x", 2*maxDetail)
	if got := healthOf(devices.DriverHealth{Name: "plc", Reports: true, Err: errors.New(long)}); len(got.Why) > maxDetail+len("…") {
		t.Errorf("healthOf kept a why of %d bytes", len(got.Why))
	}
}
