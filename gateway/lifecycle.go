package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/gateway/mqtt"
	"github.com/shadowgate/shadowgate/gateway/uplink"
	"github.com/shadowgate/shadowgate/internal/omit"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/web"
)

// held is what a gateway has acquired, released in reverse order of
// acquisition, whichever step of the lifecycle failed: the one place that
// lets go of anything.
type held struct {
	items []heldItem
}

type heldItem struct {
	what    string
	release func() error
}

// push records something acquired and how to release it.
func (h *held) push(what string, release func() error) {
	h.items = append(h.items, heldItem{what, release})
}

// release lets go of everything, newest first, and reports every failure.
// It is safe to call again; the second call releases nothing.
func (h *held) release() error {
	var err error
	for i := len(h.items) - 1; i >= 0; i-- {
		if e := h.items[i].release(); e != nil {
			err = errors.Join(err, fmt.Errorf("releasing %s: %w", h.items[i].what, e))
		}
	}
	h.items = nil
	return err
}

// instance is one run of a gateway: what build makes, listen binds and
// serve runs. Its fields are set by build and only read afterwards.
type instance struct {
	opts     Options
	cfg      *Built
	log      *slog.Logger
	stateDir string
	held     held

	metrics *web.Metrics
	// db is the journal's file, or nil when the journal cannot be used
	// and the gateway runs fail-closed on journal.Failed.
	db      *journal.DB
	journal runtime.Journal
	eng     *runtime.Engine
	users   *access.Users
	broker  *mqtt.Broker
	link    *uplink.Uplink
	console *web.Server
}

// build opens everything the gateway needs, in this order: the state
// directory, the journal (so that a second gateway on the same directory
// stops before touching any device), the drivers, the engine (which
// recovers from the journal), the users, and the surfaces' objects. It
// binds no port. What it opened is in g.held, even when it fails.
func (g *instance) build(ctx context.Context) error {
	if err := g.openStateDir(); err != nil {
		return err
	}
	g.log.Info("gateway starting", "gateway_id", g.cfg.GatewayID, "state_dir", g.stateDir, "config", g.cfg.File,
		"configured_mode", g.cfg.Mode)
	g.metrics = web.NewMetrics()
	if err := g.openJournal(); err != nil {
		return err
	}
	reg, closeDrivers, err := openDrivers(ctx, g.cfg, g.stateDir, g.log.With("component", "drivers"))
	g.held.push("the drivers", closeDrivers)
	if err != nil {
		return err
	}
	g.sayOffline(reg)
	cfg := g.cfg
	g.eng, err = runtime.New(ctx, runtime.Options{
		Registry: reg, Journal: g.journal, Policies: cfg.Policies, Modes: cfg.Modes, Mode: cfg.Mode, Rules: cfg.Rules,
		Plans: cfg.Plans, OperateWithin: cfg.OperateWithin, ApprovalTimeout: cfg.ApprovalTimeout,
		MaxRuleTTL: cfg.MaxRuleTTL, CommandLease: cfg.CommandLease, MaxShelve: cfg.MaxShelve, AlarmClasses: cfg.AlarmClasses, Logger: g.log.With("component", "runtime"),
		Person: cfg.Person,
		OnStep: g.metrics.ObserveStep,
	})
	if err != nil {
		return fmt.Errorf("starting the engine: %w", err)
	}
	g.held.push("the engine", g.eng.Close)
	if m := g.eng.Mode(ctx); m.Name != cfg.Mode {
		g.log.Info("mode in force", "mode", m.Name, "since", m.Since, "by", m.By, "configured_mode", cfg.Mode)
	} else {
		g.log.Info("mode in force", "mode", m.Name)
	}
	if err := g.buildUsers(); err != nil {
		return err
	}
	return g.buildSurfaces()
}

// sayOffline warns of each configured device that no driver reaches at
// the start: it is not listed and every command to it fails until its
// driver sees it, and nothing else would say so.
func (g *instance) sayOffline(reg *devices.Registry) {
	online := map[string]bool{}
	for _, d := range reg.Drivers() {
		for _, dev := range d.Devices() {
			online[dev.ID] = true
		}
	}
	for _, d := range g.cfg.Devices {
		if !online[d.ID] {
			g.log.Warn("a configured device is not online; commands to it fail until its driver reaches it",
				"device_id", d.ID, "driver", d.Driver, "address", d.Address)
		}
	}
}

// openStateDir makes the state directory, or a temporary one for the
// demo that is removed last.
func (g *instance) openStateDir() error {
	g.stateDir = g.cfg.StateDir
	if !g.opts.Demo && g.stateDir != "" {
		if err := os.MkdirAll(g.stateDir, 0o700); err != nil {
			return fmt.Errorf("making the state directory %s: %w", g.stateDir, err)
		}
		return nil
	}
	dir, err := os.MkdirTemp("", "shadowgate-demo-")
	if err != nil {
		return fmt.Errorf("making the demo state directory: %w", err)
	}
	g.stateDir = dir
	g.held.push("the demo state directory", func() error { return os.RemoveAll(dir) })
	return nil
}

// openJournal opens the journal with its checkpoint key. A corrupt journal
// is not an error: the gateway runs fail-closed, reading sensors and
// refusing every actuation with the reason.
func (g *instance) openJournal() error {
	jopts := g.cfg.Journal
	jopts.Logger = g.log.With("component", "journal")
	jopts.OnCommit = g.metrics.ObserveCommit
	// The checkpoint key lives beside the journal's file, never in it: a
	// checkpoint published off the device then proves later copies.
	keyFile := filepath.Join(g.stateDir, checkpointKeyFile)
	signer, pub, err := journal.CheckpointKey(keyFile, checkpointKeyName(g.cfg.GatewayID))
	if err != nil {
		return err
	}
	jopts.Checkpoint.Signer, jopts.Checkpoint.Origin = signer, "shadowgate/"+g.cfg.GatewayID
	g.log.Info("journal checkpoints signed", "key", keyFile, "public_key", pub)
	db, err := journal.Open(journal.Path(g.stateDir), jopts)
	var corrupt *journal.CorruptError
	switch {
	case err == nil:
		g.db, g.journal = db, db
		g.log.Info("journal opened", "path", db.Path(), "boot_id", db.BootID())
	case errors.As(err, &corrupt):
		// Fail closed but keep watching: sensors are still read and
		// reported, every actuation is refused with this reason.
		g.log.Error("the journal cannot be used; every actuation will be refused", "error", err)
		g.journal = journal.Failed(err)
	default:
		return err
	}
	g.held.push("the journal", g.journal.Close)
	return nil
}

// buildUsers makes the users: the configured ones, or a first admin whose
// password is shown once.
func (g *instance) buildUsers() error {
	accounts := g.cfg.Users
	if len(accounts) == 0 {
		admin, err := firstAdmin(g.stateDir, g.opts.Notice)
		if err != nil {
			return err
		}
		accounts = []access.User{admin}
	}
	users, err := access.NewUsers(accounts)
	if err != nil {
		return fmt.Errorf("users: %w", err)
	}
	g.users = users
	return nil
}

// buildSurfaces makes the broker, the uplink and the console that the
// configuration asks for. None of them serves yet.
func (g *instance) buildSurfaces() error {
	cfg, log := g.cfg, g.log
	var err error
	if cfg.MQTT != nil {
		mo := *cfg.MQTT
		mo.Users, mo.Logger = g.users, log.With("component", "mqtt")
		mo.HomeAssistantRecord = filepath.Join(g.stateDir, "homeassistant.json")
		if mo.HomeAssistant != nil {
			ha := *mo.HomeAssistant
			ha.Version = g.opts.Version
			mo.HomeAssistant = &ha
		}
		if g.broker, err = mqtt.New(g.eng, mo); err != nil {
			return err
		}
		g.held.push("the mqtt broker", g.broker.Close)
	}
	if cfg.Uplink != nil && g.db == nil {
		log.Error("the uplink is off: its outbox lives in the journal, which cannot be used")
	}
	// A build without the uplink refuses its configuration at load; the
	// constant lets the linker leave the client out.
	if !omit.Uplink && cfg.Uplink != nil && g.db != nil {
		uo := *cfg.Uplink
		uo.Logger = log.With("component", "uplink")
		if g.link, err = uplink.New(g.eng, g.db.Outbox(), uo); err != nil {
			return err
		}
	}
	if cfg.Web != nil {
		if g.console, err = web.New(g.eng, g.webOptions()); err != nil {
			return err
		}
	}
	return nil
}

// webOptions are the console's options, wired to the journal and the
// other surfaces.
func (g *instance) webOptions() web.Options {
	wo := *g.cfg.Web
	wo.Users, wo.Logger, wo.Metrics = g.users, g.log.With("component", "web"), g.metrics
	if wo.MCP != nil {
		mo := *wo.MCP
		mo.Version = g.opts.Version
		wo.MCP = &mo
	}
	if g.opts.WebListener != nil {
		wo.Listener = g.opts.WebListener
	}
	if g.db != nil {
		wo.Sessions = g.db.Sessions()
		wo.Verify = g.db.Verify
		wo.Backup = g.db.Backup
	} else {
		wo.Sessions = newMemSessions()
	}
	if b := g.broker; b != nil {
		wo.MQTTStats = func() web.MQTTStats {
			st := b.Stats()
			return web.MQTTStats{Clients: st.Clients, DeniedPublishes: st.DeniedPublishes, FailedLogins: st.FailedLogins}
		}
	}
	if link := g.link; link != nil {
		url := g.cfg.Uplink.URL
		wo.UplinkStats = func() web.UplinkStats {
			st := link.Stats()
			return web.UplinkStats{Configured: true, Broker: url, Connected: st.Connected, Backlog: st.Backlog,
				BacklogBytes: st.BacklogBytes, Dropped: st.Dropped, Sent: st.Sent, IgnoredRetains: st.IgnoredRetained}
		}
	}
	wo.MaxRuleTTL = g.cfg.MaxRuleTTL
	return wo
}

// listen binds every port: the console's, then the broker's. An error
// names the port ("console: listen tcp 127.0.0.1:8080: bind: address
// already in use"). A port bound here and never served is released with
// the rest: the console's and the broker's Close do that, and do nothing
// once they have served.
func (g *instance) listen() error {
	if g.console != nil {
		if err := g.console.Listen(); err != nil {
			return err
		}
		g.held.push("the console's listener", g.console.Close)
	}
	if g.broker != nil {
		if err := g.broker.Listen(); err != nil {
			return err
		}
	}
	return nil
}

// safeStopTimeout bounds the drives to safe of a shutdown.
const safeStopTimeout = 20 * time.Second

// serve runs the engine and the surfaces until ctx is done or the broker
// or the console stops, then stops them: first the engine's runs, and the
// actuators are driven to safe (the surfaces still publish what that
// does); then stopping is called, the surfaces stop (no new requests),
// then the engine. The release of what build and listen acquired is Run's.
// ready is called once everything runs.
func (g *instance) serve(ctx context.Context, ready, stopping func()) error {
	log := g.log
	// The engine outlives the surfaces: they stop taking requests first.
	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	var engine sync.WaitGroup
	engineDone := make(chan error, 1)
	engine.Go(func() { engineDone <- g.eng.Run(engCtx) })
	engine.Go(func() {
		_ = g.eng.Subscribe(engCtx, g.eng.RestoredSeq(), func(ev runtime.Event) error { logEvent(log, ev); return nil })
	})

	// The surfaces serve on through the drives to safe, which they
	// publish: they stop when stopSurfaces says, not with ctx.
	surfCtx, stopSurfaces := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSurfaces()
	var surfaces sync.WaitGroup
	var mu sync.Mutex // guards surfErr
	var surfErr error
	stopped := make(chan struct{}, 2) // the broker or the console stopped early
	// run runs a surface. When a fatal one ends, the gateway stops and
	// returns its error (the caller logs it); another one's error is
	// logged here.
	run := func(name string, fatal bool, run func(context.Context) error) {
		surfaces.Go(func() {
			err := run(surfCtx)
			if !fatal {
				if err != nil {
					log.Error("a surface stopped; the gateway runs on without it", "surface", name, "error", err)
				}
				return
			}
			mu.Lock()
			surfErr = errors.Join(surfErr, err)
			mu.Unlock()
			stopped <- struct{}{}
		})
	}
	if g.broker != nil {
		run("mqtt", true, g.broker.Run)
	}
	if g.console != nil {
		run("console", true, g.console.Run)
	}
	if g.link != nil {
		// The uplink is a convenience: without it the gateway still
		// governs, so its end does not stop the gateway.
		run("uplink", false, g.link.Run)
	}
	ready()
	select {
	case <-ctx.Done():
	case <-stopped:
	case err := <-engineDone:
		engineDone <- err // for the join below
	}
	// Driving to safe is bounded well inside systemd's TimeoutStopSec.
	safeCtx, cancelSafe := context.WithTimeout(context.WithoutCancel(ctx), safeStopTimeout)
	g.eng.SafeStop(safeCtx)
	cancelSafe()
	stopping()
	stopSurfaces()
	surfaces.Wait()
	stopEngine()
	engine.Wait()
	return errors.Join(<-engineDone, surfErr)
}
