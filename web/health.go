package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/gateway/command"
)

// Driver health, for /readyz and the Devices page.
//
// /readyz answers anyone, and a probe may talk to the hardware, so the
// drivers are asked at most once per healthTTL, whatever the number of
// requests, and for at most healthTimeout.
const (
	healthTTL     = time.Second
	healthTimeout = 2 * time.Second
)

// Link states of a driver.
const (
	linkUp      = "up"
	linkDown    = "down"
	linkUnknown = "unknown" // the driver cannot tell
)

// driverHealth is one driver's link state as people and probes see it.
type driverHealth struct {
	Name string `json:"name"`
	// Link is "up", "down", or "unknown" for a driver that cannot tell.
	Link string `json:"link"`
	// Why says why a link is down, in the driver's words, cut short.
	Why string `json:"why,omitempty"`
}

// healthCache keeps the drivers' last answers for healthTTL.
type healthCache struct {
	// mu guards at and last. It is held while the drivers are asked, so
	// that concurrent requests share one round of questions instead of
	// each asking the hardware; a round lasts at most healthTimeout.
	mu   sync.Mutex
	at   time.Time
	last []driverHealth
}

// driverHealth returns every driver's link state, asking the drivers
// only when the last answers are older than healthTTL. The caller must
// not modify the returned slice.
func (s *Server) driverHealth(ctx context.Context) []driverHealth {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	now := s.opts.Now()
	if h.last != nil && now.Sub(h.at) >= 0 && now.Sub(h.at) < healthTTL {
		return h.last
	}
	// The answers are shared, so a request that ends early must not cut
	// the round short for the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healthTimeout)
	defer cancel()
	reports := s.eng.DriverHealth(ctx)
	out := make([]driverHealth, 0, len(reports))
	for _, r := range reports {
		out = append(out, healthOf(r))
	}
	h.at, h.last = now, out
	return out
}

// healthOf says what a driver's report means.
func healthOf(r devices.DriverHealth) driverHealth {
	switch {
	case !r.Reports:
		return driverHealth{Name: r.Name, Link: linkUnknown}
	case r.Err == nil:
		return driverHealth{Name: r.Name, Link: linkUp}
	case errors.Is(r.Err, context.DeadlineExceeded):
		return driverHealth{Name: r.Name, Link: linkDown, Why: "it did not answer within " + healthTimeout.String()}
	}
	// The driver's own words are meant for operators (HealthReporter says
	// why a link is down); they are cut short, like any detail.
	return driverHealth{Name: r.Name, Link: linkDown, Why: clipDetail(r.Err.Error())}
}

// healthNote puts the engine's health in public words. Its detail (a
// journal error) goes to the log once per change, with an error id that
// every answer repeats until the health changes, so that a polled /readyz
// does not flood the log and never shows the detail.
type healthNote struct {
	// mu guards detail and pe.
	mu     sync.Mutex
	detail string
	pe     *command.PublicError
}

// of returns the public form of err, the engine's Healthy(), or nil.
func (h *healthNote) of(log *slog.Logger, err error) *command.PublicError {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.detail, h.pe = "", nil
		return nil
	}
	if h.pe == nil || h.detail != err.Error() {
		h.detail = err.Error()
		msg := "the journal cannot witness: every actuation is refused"
		var pr interface{ PublicReason() string }
		if errors.As(err, &pr) {
			msg += " (" + pr.PublicReason() + ")"
		}
		h.pe = command.Internal(log, msg, err)
	}
	return h.pe
}

// readiness is the body of /readyz.
type readiness struct {
	// Status is "ready" or "not ready".
	Status string `json:"status"`
	// Error, Detail and ErrorID are as in every error body: why the
	// gateway is not ready.
	Error   string         `json:"error,omitempty"`
	Detail  string         `json:"detail,omitempty"`
	ErrorID string         `json:"error_id,omitempty"`
	Drivers []driverHealth `json:"drivers"`
}

// readyz says whether the gateway can do its work: the journal can
// witness, a device is online, and no driver that can tell says its link
// is down. A driver that cannot tell does not make the gateway unready.
func (s *Server) readyz(c echo.Context) error {
	// /readyz answers anyone: it names each driver and its link, but not
	// the driver's own words (an address, a port), which the Devices page
	// shows to people who logged in.
	all := s.driverHealth(c.Request().Context())
	r := readiness{Status: "ready", Drivers: make([]driverHealth, len(all))}
	for i, d := range all {
		r.Drivers[i] = driverHealth{Name: d.Name, Link: d.Link}
	}
	notReady := func(detail string) error {
		r.Status, r.Error, r.Detail = "not ready", "not ready", clipDetail(detail)
		return c.JSON(http.StatusServiceUnavailable, r)
	}
	if pe := s.witness.of(s.log, s.eng.Healthy()); pe != nil {
		r.ErrorID = pe.ID
		return notReady(pe.Message)
	}
	for _, d := range r.Drivers {
		if d.Link == linkDown {
			return notReady("driver " + d.Name + ": its link is down (the Devices page says why)")
		}
	}
	if len(s.eng.Devices()) == 0 {
		return notReady("no device is online")
	}
	return c.JSON(http.StatusOK, r)
}
