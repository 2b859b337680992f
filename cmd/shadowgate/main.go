// Command shadowgate is the governed edge gateway.
//
//	shadowgate serve [--config F | --demo[=fixtures]]   run the gateway
//	shadowgate check --config F              check a configuration
//	shadowgate journal verify|export|tail|backup|restore   read, copy and restore the journal
//	shadowgate approvals list|approve|deny   answer approvals through the API
//	shadowgate opcua trust|browse URL        an OPC-UA server's certificate and nodes
//	shadowgate mcp                           serve MCP on stdio, bridged to the gateway's /mcp
//	shadowgate hash-password | hash-token    make secrets for the configuration
//	shadowgate version                       print the version and the parts the build omits
//
// Exit codes: 0 ok, 1 usage, 2 configuration, 3 refused, 4 timeout,
// 5 unavailable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	// The time zones of plans' schedules, for a board without the tzdata
	// package (minimal and Buildroot images): the system's zone files are
	// still used first when present.
	_ "time/tzdata"

	"github.com/shadowgate/shadowgate/examples"
	"github.com/shadowgate/shadowgate/gateway"
	"github.com/shadowgate/shadowgate/internal/omit"
	"github.com/shadowgate/shadowgate/runtime"
)

// Exit codes, as the README and the unit file list them.
const (
	exitOK            = 0
	exitUsage         = 1
	exitConfiguration = 2
	exitRefused       = 3
	exitTimeout       = 4
	exitUnavailable   = 5
)

// The demo's login, whose hash is in examples/demo.yaml.
const (
	demoUser     = "demo"
	demoPassword = "greenhouse-demo"
)

// version is stamped by the Makefile from git describe.
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: shadowgate <command> [flags]

commands:
  serve [--config F | --demo[=fixtures]] [--log-level L]   run the gateway
  check --config F                              check a configuration and exit
  journal verify|export|tail|backup|restore     read, copy and restore the journal (shadowgate journal help)
  approvals list|approve|deny [flags]           answer approvals through the API
  opcua trust|browse URL [NODE]                 an OPC-UA server's certificate and address space
  mcp [--url URL] [--token-file F]              serve MCP to an agent host on stdio, through the gateway's /mcp
  hash-password                                 bcrypt a password read from standard input
  hash-token                                    make an API token and the hash to configure
  version                                       print the version and the parts the build omits
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "journal":
		return journalCmd(args[1:], stdin, stdout, stderr)
	case "approvals":
		return approvalsCmd(args[1:], stdin, stdout, stderr)
	case "opcua":
		return opcuaCmd(args[1:], stdout, stderr)
	case "mcp":
		return mcpCmd(args[1:], stdin, stdout, stderr)
	case "hash-password":
		return hashPassword(stdin, stdout, stderr)
	case "hash-token":
		if len(args) > 1 {
			// It takes no flags: --help and anything else is not a
			// request for a token.
			fmt.Fprint(stderr, "usage: shadowgate hash-token\n"+
				"Makes an API token and its SHA-256, to configure as web.tokens[].token_hash; give the token to the client.\n")
			if args[1] == "-h" || args[1] == "--help" || args[1] == "help" {
				return exitOK
			}
			return exitUsage
		}
		return hashToken(stdout)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "shadowgate", version)
		for _, p := range omit.Omitted() {
			fmt.Fprintf(stdout, "omits %s (%s)\n", p.Name(), p.Tag())
		}
		return exitOK
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "shadowgate: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// demoFlag is --demo: bare, the simulated greenhouse ("sim"); with
// =fixtures, the greenhouse over the real drivers on firmware simulators.
type demoFlag string

func (d *demoFlag) String() string   { return string(*d) }
func (d *demoFlag) IsBoolFlag() bool { return true }
func (d *demoFlag) Set(s string) error {
	switch s {
	case "true", "sim":
		*d = "sim"
	case "false":
		*d = ""
	case "fixtures":
		*d = "fixtures"
	default:
		return fmt.Errorf("%q: want --demo or --demo=fixtures", s)
	}
	return nil
}

// load reads the configuration, or the demo's. For the fixtures demo it
// starts the firmware simulators first, and returns them to be closed.
func load(configPath string, demo demoFlag) (*gateway.Built, *gateway.Fixtures, error) {
	switch demo {
	case "sim":
		b, err := gateway.Load("examples/demo.yaml (embedded)", examples.Demo)
		return b, nil, err
	case "fixtures":
		fx, err := gateway.StartFixtures()
		if err != nil {
			return nil, nil, err
		}
		b, err := gateway.Load("examples/fixtures.yaml (embedded)", fx.Configure(examples.Fixtures))
		if err != nil {
			return nil, nil, errors.Join(err, fx.Close())
		}
		return b, fx, nil
	}
	b, err := gateway.LoadFile(configPath)
	return b, nil, err
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file")
	var demo demoFlag
	fs.Var(&demo, "demo", "run the embedded demo greenhouse on simulated devices; --demo=fixtures runs it over the real serial and GPIO drivers on firmware simulators")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if demo == "sim" && fs.NArg() == 1 {
		fmt.Fprintf(stderr, "shadowgate serve: --demo takes its value after '=': write --demo=fixtures (%q is not one), or --demo alone for the simulated greenhouse\n", fs.Arg(0))
		return exitUsage
	}
	if (*configPath == "") == (demo == "") || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "shadowgate serve: give exactly one of --config F or --demo")
		return exitUsage
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "shadowgate serve: --log-level %q: want debug, info, warn or error\n", *level)
		return exitUsage
	}
	log := slog.New(logHandler(stderr, lv))
	// The signals are taken before anything else: a SIGHUP from a
	// supervisor just after the start must not end the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup, stopHangups := takeHangups(log)
	defer stopHangups()
	// The shutdown, as systemd is told of it (STOPPING), begins once the
	// gateway drove its actuators to safe, or when it ends.
	shutdown, stopping := context.WithCancel(context.Background())
	defer stopping()
	sd := startNotify(shutdown, log)
	defer sd.close()
	cfg, fixtures, err := load(*configPath, demo)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitConfiguration
	}
	if fixtures != nil {
		defer func() {
			if err := fixtures.Close(); err != nil {
				log.Warn("stopping the firmware simulators", "error", err)
			}
		}()
	}
	// Ready is called once every port is bound: only then is the way in
	// told, and a supervisor or a person may use it.
	ready := func(p gateway.Parts) {
		if demo == "" {
			hup.onReady(sd.reloads(reloader(ctx, log, p.Engine, cfg)))
		} else {
			hup.onReady(sd.reloads(func() { log.Warn("the demo's configuration is embedded: nothing to reload", "signal", "SIGHUP") }))
		}
		attrs := []any{"version", version, "mode", p.Engine.Mode(ctx).Name}
		if p.Web != nil {
			attrs = append(attrs, "console", p.Web.Addr())
		}
		if p.MQTT != nil {
			attrs = append(attrs, "mqtt", p.MQTT.Addr("tcp"))
		}
		log.Info("gateway ready", attrs...)
		sd.ready(p.Engine, cfg.Devices)
		switch demo {
		case "":
			return
		case "sim":
			fmt.Fprintf(stderr, "shadowgate %s: demo greenhouse on simulated devices, mode %s; every write asks a person.\n"+
				"The plan irrigate runs every minute and its writes wait for approval; stop with Ctrl-C.\n", version, cfg.Mode)
		case "fixtures":
			fmt.Fprintf(stderr, "shadowgate %s: demo greenhouse over the real serial and GPIO drivers, mode %s; every write asks a person.\n"+
				"The line firmware is on %s, the Modbus board on %s, the GPIO board on pins %s; stop with Ctrl-C.\n",
				version, cfg.Mode, fixtures.Line.Path(), fixtures.Modbus.Path(), "DEMO_RELAY, DEMO_FEEDBACK, DEMO_FLOAT")
		}
		if w := cfg.Web; w != nil {
			fmt.Fprintf(stderr, "\nConsole on http://%s — log in as %s, password %s.\n", w.Listen, demoUser, demoPassword)
		}
		if m := cfg.MQTT; m != nil {
			host, port, _ := strings.Cut(m.Listen, ":")
			if host == "" {
				host = "127.0.0.1"
			}
			fmt.Fprintf(stderr, "\nMQTT on %s, user %s, password %s. Watch and command:\n"+
				"  mosquitto_sub -h %s -p %s -u %s -P %s -t '%s#' -v\n"+
				"  mosquitto_pub -h %s -p %s -u %s -P %s -t '%scmd/pump-1/on' -m '{\"value\": true, \"id\": \"try-1\"}'\n\n",
				m.Listen, demoUser, demoPassword, host, port, demoUser, demoPassword, m.Prefix,
				host, port, demoUser, demoPassword, m.Prefix)
		}
	}
	if err := gateway.Run(ctx, gateway.Options{Config: cfg, Demo: demo != "", Logger: log, Ready: ready, Stopping: stopping, Version: version}); err != nil {
		stopping()
		log.Error("gateway failed", "error", err)
		return exitUnavailable
	}
	stopping()
	return exitOK
}

// hangups takes SIGHUP, whose default is to end the process, from the
// start: systemd's reload and a closed terminal send it. Until the
// gateway is ready a hangup is logged and dropped; then each one runs the
// reload it was given, one at a time.
type hangups struct {
	log *slog.Logger
	mu  sync.Mutex
	// reload is what a hangup does; nil until the gateway is ready.
	reload func()
}

// takeHangups starts taking SIGHUP. The returned func stops taking it and
// waits for a reload in progress.
func takeHangups(log *slog.Logger) (*hangups, func()) {
	h := &hangups{log: log}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				h.mu.Lock()
				fn := h.reload
				h.mu.Unlock()
				if fn == nil {
					log.Warn("SIGHUP before the gateway is ready: nothing reloaded", "signal", "SIGHUP")
					continue
				}
				fn()
			}
		}
	})
	return h, func() {
		signal.Stop(hup)
		close(done)
		wg.Wait()
	}
}

// onReady sets what a hangup does.
func (h *hangups) onReady(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reload = fn
}

// reloader reads the configuration file again on each hangup and puts in
// force what can change live; a file that does not load changes nothing
// and its errors are logged with their file and line.
func reloader(ctx context.Context, log *slog.Logger, eng *runtime.Engine, running *gateway.Built) func() {
	return func() {
		log.Info("reloading the configuration", "config", running.File)
		next, restart, err := gateway.Reload(ctx, eng, running)
		if err != nil {
			log.Error("configuration not reloaded; the one in force stays", "error", err)
			return
		}
		running = next
		log.Info("configuration reloaded", "config", running.File)
		if len(restart) > 0 {
			log.Warn("changed sections wait for a restart", "sections", strings.Join(restart, ", "))
		}
	}
}
