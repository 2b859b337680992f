// Package gateway is the composition root: it loads the configuration,
// builds the drivers, the registry, the journal and the engine, and runs
// them until asked to stop.
//
// A run has four steps (lifecycle.go): build, listen, serve and stop.
// Build opens the journal first (so a second gateway on the same state
// directory stops before touching any device), then the drivers, then the
// engine, which recovers from the journal, and makes the surfaces. Listen
// binds every port, or fails naming the one it could not bind. Serve runs
// the engine and the surfaces. Stop is the reverse of the start: stop
// intake (the broker and the console), let in-flight steps finish or be
// cancelled (the engine waits for every run's goroutine), close the
// drivers, and close the journal last. Everything acquired is released in
// one place, in reverse order, whichever step failed.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/shadowgate/shadowgate/gateway/mqtt"
	"github.com/shadowgate/shadowgate/gateway/uplink"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/web"
)

// Options configure a gateway run.
type Options struct {
	// Config is the checked configuration.
	Config *Built
	// Demo keeps state in a temporary directory removed on exit.
	Demo bool
	// Logger receives logs and the readable event stream. Nil discards.
	Logger *slog.Logger
	// Ready, if set, is called once the journal is open, the drivers are
	// opened, every listener is bound, and the engine and the surfaces
	// run. It is called at most once, from Run's goroutine; Run waits for
	// it to return.
	Ready func(Parts)
	// Stopping is called once the shutdown begins, after the actuators
	// were driven to safe and before the surfaces and the engine stop
	// (systemd's STOPPING). It is not called when the gateway never
	// became ready.
	Stopping func()
	// Notice receives what a person must read once, such as a generated
	// admin password. Nil means standard error.
	Notice io.Writer
	// WebListener, if set, is the console's listener (tests).
	WebListener net.Listener
	// Version is the gateway's version, which it tells MCP clients and
	// Home Assistant; "" tells none.
	Version string
}

// Parts are the running pieces of a gateway, for tests and embedding.
type Parts struct {
	Engine *runtime.Engine
	// MQTT is the broker, or nil when it is turned off.
	MQTT *mqtt.Broker
	// Uplink is the link upstream, or nil without one.
	Uplink *uplink.Uplink
	// Web is the console, or nil when it is turned off.
	Web *web.Server
	// Journal is the journal, for its figures; nil when it could not be
	// opened (the engine then refuses every actuation, saying why).
	Journal *journal.DB
}

// Run runs the gateway until ctx is done. It returns nil on a clean stop.
//
// Its lifecycle has four steps: build opens the journal, the drivers and
// the engine and makes the surfaces; listen binds every port; serve runs
// everything until ctx is done or a surface stops; and on the way out the
// surfaces stop first, then the engine, then the drivers, and the journal
// closes last. Whatever step fails, everything acquired so far is released
// in one place, in reverse order. Ready is called once the journal is
// open, the drivers are opened, every listener is bound and everything
// runs.
func Run(ctx context.Context, opts Options) (err error) {
	g := &instance{opts: opts, cfg: opts.Config, log: opts.Logger}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	served := false
	defer func() {
		err = errors.Join(err, g.held.release())
		if served {
			g.log.Info("gateway stopped")
		}
	}()
	if err := g.build(ctx); err != nil {
		return err
	}
	if err := g.listen(); err != nil {
		return err
	}
	served = true
	return g.serve(ctx, func() {
		if opts.Ready != nil {
			opts.Ready(Parts{Engine: g.eng, MQTT: g.broker, Uplink: g.link, Web: g.console, Journal: g.db})
		}
	}, func() {
		if opts.Stopping != nil {
			opts.Stopping()
		}
	})
}

// logEvent writes one journal event as a readable log line. Readings are
// debug chatter; decisions and acts are what an operator follows.
func logEvent(log *slog.Logger, ev runtime.Event) {
	level := slog.LevelInfo
	switch ev.Kind {
	case runtime.KindObserved, runtime.KindInvoked, runtime.KindStarted, runtime.KindCheckpoint, journal.KindRecords:
		level = slog.LevelDebug // every minute, or the journal's own housekeeping
	case runtime.KindRefused, runtime.KindFailed, runtime.KindApprovalExpired, runtime.KindDeviceOffline,
		runtime.KindSafeDrive, runtime.KindDrift:
		level = slog.LevelWarn
	case runtime.KindAlarm:
		// An alarm raised is an error; its acknowledgement, clearing or
		// shelving is what people did about it.
		var b struct {
			Action string `json:"action"`
			Alarm  struct {
				Priority runtime.AlarmPriority `json:"priority"`
			} `json:"alarm"`
		}
		switch {
		case json.Unmarshal(ev.Body, &b) != nil:
			level = slog.LevelError
		case b.Action != runtime.AlarmRaised:
		case b.Alarm.Priority.Rank() <= 1: // critical, high
			level = slog.LevelError
		default:
			level = slog.LevelWarn
		}
	}
	log.Log(context.Background(), level, string(ev.Kind), "seq", ev.Seq, "run", ev.Run, "step", ev.Step,
		"device_id", ev.Device, "body", string(ev.Body))
}

// checkpointKeyFile is the journal's checkpoint signing key in the state
// directory (mode 0600), with its public half in checkpointKeyFile.pub.
const checkpointKeyFile = "journal.key"

// checkpointKeyName names the key in signed notes: no spaces or '+'.
func checkpointKeyName(gatewayID string) string {
	name := strings.Map(func(r rune) rune {
		if r <= ' ' || r == '+' || r > '~' {
			return '_'
		}
		return r
	}, gatewayID)
	return "shadowgate-" + name
}
