package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
)

// statusEvery is how often the one-line status systemd shows is told
// again when nothing else tells it.
const statusEvery = 10 * time.Second

// notifier tells systemd how the service is, over the socket systemd
// names in NOTIFY_SOCKET: READY once every port is bound, a STATUS line,
// WATCHDOG pings while the engine can witness, RELOADING around a
// reload and STOPPING when the shutdown begins. Without NOTIFY_SOCKET
// each of its methods does nothing.
type notifier struct {
	log *slog.Logger
	// watchdog is WATCHDOG_USEC, or 0 when systemd watches nothing.
	watchdog time.Duration
	// shutdown is done once the shutdown begins.
	shutdown context.Context
	// ctx ends the goroutines; cancel and wg are close's.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// up is set once, by ready.
	up atomic.Pointer[upState]
	// failed keeps a failing socket from being logged on every ping.
	failed atomic.Bool
}

// upState is what the status is made of once the gateway is up.
type upState struct {
	eng *runtime.Engine
	// configured are the devices the configuration names.
	configured []devices.Device
}

// startNotify starts telling systemd of the service. The shutdown
// begins when shutdown is done; close stops the goroutines and waits for
// them.
func startNotify(shutdown context.Context, log *slog.Logger) *notifier {
	n := &notifier{log: log, shutdown: shutdown}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return n
	}
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("the watchdog systemd asks for cannot be read: no watchdog pings", "error", err)
	}
	n.watchdog = d
	n.wg.Go(func() {
		select {
		case <-shutdown.Done():
			n.send(daemon.SdNotifyStopping, "STATUS=stopping")
		case <-n.ctx.Done():
		}
	})
	return n
}

func (n *notifier) on() bool { return os.Getenv("NOTIFY_SOCKET") != "" }

// close stops the status and the watchdog pings, and waits for them.
func (n *notifier) close() {
	n.cancel()
	n.wg.Wait()
}

// ready tells systemd that the service is up, with its status, and starts
// the watchdog pings and the status refresh. It is called once, when every
// port is bound.
func (n *notifier) ready(eng *runtime.Engine, configured []devices.Device) {
	if !n.on() {
		return
	}
	n.up.Store(&upState{eng: eng, configured: configured})
	n.send(daemon.SdNotifyReady, "STATUS="+n.status())
	n.wg.Go(n.watch)
}

// reloads wraps a reload in RELOADING (with the monotonic time systemd
// wants with it) and READY with the status after it.
func (n *notifier) reloads(reload func()) func() {
	if !n.on() {
		return reload
	}
	return func() {
		n.send(daemon.SdNotifyReloading, strings.TrimSuffix(daemon.SdNotifyMonotonicUsec(), "\n"))
		reload()
		n.send(daemon.SdNotifyReady, "STATUS="+n.status())
	}
}

// watch pings the watchdog every half of its period while the engine is
// healthy, and tells the status again every statusEvery, until close.
// A journal that cannot witness stops the pings, and systemd restarts
// the service.
func (n *notifier) watch() {
	every := statusEvery
	if n.watchdog > 0 {
		every = min(every, n.watchdog/2)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	pinging := n.watchdog > 0
	lastStatus := time.Now()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		stopping := n.shutdown.Err() != nil
		err := n.up.Load().eng.Healthy()
		if n.watchdog > 0 {
			switch {
			case err == nil:
				n.send(daemon.SdNotifyWatchdog)
				if !pinging && !stopping {
					n.log.Info("the engine is healthy again: watchdog pings resume")
				}
				pinging = true
			case pinging && !stopping:
				n.log.Error("the engine is unhealthy: watchdog pings stop, and systemd will restart the service",
					"error", err, "watchdog", n.watchdog)
				n.send("STATUS=" + n.status())
				lastStatus = time.Now()
				pinging = false
			default:
				pinging = false
			}
		}
		if !stopping && time.Since(lastStatus) >= statusEvery {
			n.send("STATUS=" + n.status())
			lastStatus = time.Now()
		}
	}
}

// status is the line systemd shows: the mode, what waits for people,
// and what cannot be reached (a configured device its driver says is
// not online) or is locked.
func (n *notifier) status() string {
	up := n.up.Load()
	if up == nil {
		return "starting"
	}
	e := up.eng
	offline := 0
	for _, d := range up.configured {
		if e.DeviceWhy(d.ID) != nil {
			offline++
		}
	}
	s := fmt.Sprintf("mode %s; %d pending approvals; %d of %d devices offline; %d actuators locked",
		e.Mode(n.ctx).Name, len(e.Approvals()), offline, len(up.configured), len(e.Locks()))
	if err := e.Healthy(); err != nil {
		s = "unhealthy (" + err.Error() + "); " + s
	}
	return strings.Join(strings.Fields(s), " ")
}

// send sends assignments in one datagram. A failure is logged once
// until a send works again.
func (n *notifier) send(assignments ...string) {
	_, err := daemon.SdNotify(false, strings.Join(assignments, "\n"))
	if err == nil {
		if n.failed.Swap(false) {
			n.log.Info("systemd is told of the service again")
		}
		return
	}
	if !n.failed.Swap(true) {
		n.log.Warn("systemd cannot be told of the service", "error", err)
	}
}

// logHandler is the handler serve logs with: text on w, and, when w is
// the systemd journal's stream (JOURNAL_STREAM names its device and
// inode), without the time, which the journal keeps, and with each line
// led by the priority the journal reads.
func logHandler(w io.Writer, level slog.Leveler) slog.Handler {
	if toJournal(w) {
		return newJournalHandler(w, level)
	}
	return slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
}

// toJournal reports whether w is the stream systemd connected to the
// journal, as JOURNAL_STREAM tells its device and inode.
func toJournal(w io.Writer) bool {
	stream := os.Getenv("JOURNAL_STREAM")
	f, ok := w.(*os.File)
	if stream == "" || !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && stream == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// journalHandler writes text lines without the time, each led by its
// sd-daemon priority: <3> error, <4> warning, <6> info, <7> debug.
type journalHandler struct {
	err, warn, info, debug slog.Handler
}

func newJournalHandler(w io.Writer, level slog.Leveler) *journalHandler {
	mk := func(prefix string) slog.Handler {
		return slog.NewTextHandler(prefixWriter{prefix: prefix, w: w}, &slog.HandlerOptions{
			Level: level,
			ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				if len(groups) == 0 && a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		})
	}
	return &journalHandler{err: mk("<3>"), warn: mk("<4>"), info: mk("<6>"), debug: mk("<7>")}
}

func (h *journalHandler) pick(l slog.Level) slog.Handler {
	switch {
	case l >= slog.LevelError:
		return h.err
	case l >= slog.LevelWarn:
		return h.warn
	case l >= slog.LevelInfo:
		return h.info
	default:
		return h.debug
	}
}

func (h *journalHandler) each(f func(slog.Handler) slog.Handler) *journalHandler {
	return &journalHandler{err: f(h.err), warn: f(h.warn), info: f(h.info), debug: f(h.debug)}
}

func (h *journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.pick(l).Enabled(ctx, l)
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.pick(r.Level).Handle(ctx, r)
}

func (h *journalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.each(func(s slog.Handler) slog.Handler { return s.WithAttrs(attrs) })
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return h.each(func(s slog.Handler) slog.Handler { return s.WithGroup(name) })
}

// prefixWriter writes each line it is given, led by prefix, in one write:
// a text handler writes a whole record at a time.
type prefixWriter struct {
	prefix string
	w      io.Writer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := p.w.Write(append([]byte(p.prefix), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}
