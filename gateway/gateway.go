// Package gateway is the composition root: it loads the configuration,
// builds the drivers, the registry, the journal and the engine, and runs
// them until asked to stop.
//
// Start order: the journal first (so a second gateway on the same state
// directory stops before touching any device), then the drivers, then the
// engine, which recovers from the journal. Shutdown is the reverse: stop
// intake, let in-flight steps finish or be cancelled (the engine waits for
// every run's goroutine), close the drivers, and close the journal last.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/shadowgate/shadowgate/access"
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
	// Ready, if set, is called once the gateway serves.
	Ready func(Parts)
	// Notice receives what a person must read once, such as a generated
	// admin password. Nil means standard error.
	Notice io.Writer
	// WebListener, if set, is the console's listener (tests).
	WebListener net.Listener
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
}

// Run runs the gateway until ctx is done. It returns nil on a clean stop.
func Run(ctx context.Context, opts Options) (err error) {
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stateDir := cfg.StateDir
	if opts.Demo || stateDir == "" {
		stateDir, err = os.MkdirTemp("", "shadowgate-demo-")
		if err != nil {
			return fmt.Errorf("making the demo state directory: %w", err)
		}
		defer os.RemoveAll(stateDir)
	} else if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("making the state directory %s: %w", stateDir, err)
	}
	log.Info("gateway starting", "gateway_id", cfg.GatewayID, "state_dir", stateDir, "config", cfg.File, "configured_mode", cfg.Mode)

	metrics := web.NewMetrics()
	// The journal opens first: if another gateway holds the state
	// directory, nothing else is touched.
	jopts := cfg.Journal
	jopts.Logger = log.With("component", "journal")
	jopts.OnCommit = metrics.ObserveCommit
	// The checkpoint key lives beside the journal's file, never in it: a
	// checkpoint published off the device then proves later copies.
	signer, pub, err := journal.CheckpointKey(filepath.Join(stateDir, checkpointKeyFile), checkpointKeyName(cfg.GatewayID))
	if err != nil {
		return err
	}
	jopts.Checkpoint.Signer, jopts.Checkpoint.Origin = signer, "shadowgate/"+cfg.GatewayID
	log.Info("journal checkpoints signed", "key", filepath.Join(stateDir, checkpointKeyFile), "public_key", pub)
	var j runtime.Journal
	db, err := journal.Open(journal.Path(stateDir), jopts)
	journalOK := err == nil // db is usable; otherwise the gateway runs fail-closed
	var corrupt *journal.CorruptError
	switch {
	case journalOK:
		j = db
		log.Info("journal opened", "path", db.Path(), "boot_id", db.BootID())
	case errors.As(err, &corrupt):
		// Fail closed but keep watching: sensors are still read and
		// reported, every actuation is refused with this reason.
		log.Error("the journal cannot be used; every actuation will be refused", "error", err)
		j = journal.Failed(err)
	default:
		return err
	}
	defer func() { err = errors.Join(err, j.Close()) }()

	reg, closeDrivers, err := openDrivers(ctx, cfg, stateDir)
	defer func() { err = errors.Join(err, closeDrivers()) }()
	if err != nil {
		return err
	}

	eng, err := runtime.New(ctx, runtime.Options{
		Registry: reg, Journal: j, Policies: cfg.Policies, Modes: cfg.Modes, Mode: cfg.Mode, Rules: cfg.Rules,
		Plans: cfg.Plans, OperateWithin: cfg.OperateWithin, ApprovalTimeout: cfg.ApprovalTimeout,
		MaxRuleTTL: cfg.MaxRuleTTL, CommandLease: cfg.CommandLease, Logger: log.With("component", "runtime"),
		Person: cfg.Person,
		OnStep: metrics.ObserveStep,
	})
	if err != nil {
		return fmt.Errorf("starting the engine: %w", err)
	}
	if m := eng.Mode(ctx); m.Name != cfg.Mode {
		log.Info("mode in force", "mode", m.Name, "since", m.Since, "by", m.By, "configured_mode", cfg.Mode)
	} else {
		log.Info("mode in force", "mode", m.Name)
	}
	accounts := cfg.Users
	if len(accounts) == 0 {
		admin, err := firstAdmin(stateDir, opts.Notice)
		if err != nil {
			_ = eng.Close()
			return err
		}
		accounts = []access.User{admin}
	}
	users, err := access.NewUsers(accounts)
	if err != nil {
		_ = eng.Close()
		return fmt.Errorf("users: %w", err)
	}
	var broker *mqtt.Broker
	if cfg.MQTT != nil {
		mo := *cfg.MQTT
		mo.Users, mo.Logger = users, log.With("component", "mqtt")
		if broker, err = mqtt.New(eng, mo); err != nil {
			_ = eng.Close()
			return err
		}
	}

	var link *uplink.Uplink
	if cfg.Uplink != nil && !journalOK {
		log.Error("the uplink is off: its outbox lives in the journal, which cannot be used")
	}
	if cfg.Uplink != nil && journalOK {
		uo := *cfg.Uplink
		uo.Logger = log.With("component", "uplink")
		if link, err = uplink.New(eng, db.Outbox(), uo); err != nil {
			_ = eng.Close()
			return err
		}
	}

	var console *web.Server
	if cfg.Web != nil {
		wo := *cfg.Web
		wo.Users, wo.Logger, wo.Metrics = users, log.With("component", "web"), metrics
		if opts.WebListener != nil {
			wo.Listener = opts.WebListener
		}
		if journalOK {
			wo.Sessions = db.Sessions()
			wo.Verify = db.Verify
		} else {
			wo.Sessions = newMemSessions()
		}
		if broker != nil {
			wo.MQTTStats = func() web.MQTTStats {
				st := broker.Stats()
				return web.MQTTStats{Clients: st.Clients, DeniedPublishes: st.DeniedPublishes, FailedLogins: st.FailedLogins}
			}
		}
		if link != nil {
			url := cfg.Uplink.URL
			wo.UplinkStats = func() web.UplinkStats {
				st := link.Stats()
				return web.UplinkStats{Configured: true, Broker: url, Connected: st.Connected, Backlog: st.Backlog,
					BacklogBytes: st.BacklogBytes, Dropped: st.Dropped, Sent: st.Sent, IgnoredRetains: st.IgnoredRetained}
			}
		}
		wo.MaxRuleTTL = cfg.MaxRuleTTL
		if console, err = web.New(eng, wo); err != nil {
			_ = eng.Close()
			return err
		}
	}

	// The engine outlives the surfaces: they stop taking requests first.
	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		_ = eng.Subscribe(engCtx, eng.RestoredSeq(), func(ev runtime.Event) error { logEvent(log, ev); return nil })
	}()
	engineDone := make(chan error, 1)
	go func() { engineDone <- eng.Run(engCtx) }()
	surfaces, stopSurfaces := context.WithCancel(ctx)
	defer stopSurfaces()
	var brokerErr error
	var brokerDone chan struct{} // nil, never ready, without a broker
	if broker != nil {
		brokerDone = make(chan struct{})
		go func() {
			defer close(brokerDone)
			if brokerErr = broker.Run(surfaces); brokerErr != nil {
				log.Error("the mqtt broker stopped", "error", brokerErr)
			}
		}()
	}
	var webDone chan struct{}
	var webErr error
	if console != nil {
		webDone = make(chan struct{})
		go func() {
			defer close(webDone)
			if webErr = console.Run(surfaces); webErr != nil {
				log.Error("the console stopped", "error", webErr)
			}
		}()
	}
	var linkDone chan struct{}
	if link != nil {
		linkDone = make(chan struct{})
		go func() {
			defer close(linkDone)
			_ = link.Run(surfaces)
		}()
	}
	if opts.Ready != nil {
		opts.Ready(Parts{Engine: eng, MQTT: broker, Uplink: link, Web: console})
	}
	select {
	case <-ctx.Done():
	case err := <-engineDone:
		engineDone <- err
	case <-brokerDone:
	case <-webDone:
	}
	stopSurfaces()
	if brokerDone != nil {
		<-brokerDone
	}
	if linkDone != nil {
		<-linkDone
	}
	if webDone != nil {
		<-webDone
	}
	stopEngine()
	runErr := errors.Join(<-engineDone, brokerErr, webErr)
	<-logged
	log.Info("gateway stopped")
	return runErr
}

// logEvent writes one journal event as a readable log line. Readings are
// debug chatter; decisions and acts are what an operator follows.
func logEvent(log *slog.Logger, ev runtime.Event) {
	level := slog.LevelInfo
	switch ev.Kind {
	case runtime.KindObserved, runtime.KindInvoked, runtime.KindStarted, runtime.KindCheckpoint, journal.KindRecords:
		level = slog.LevelDebug // every minute, or the journal's own housekeeping
	case runtime.KindRefused, runtime.KindFailed, runtime.KindApprovalExpired, runtime.KindDeviceOffline:
		level = slog.LevelWarn
	case runtime.KindAlarm:
		level = slog.LevelError
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
