package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notifySocket is the socket systemd would listen on for a service's
// notifications, named in NOTIFY_SOCKET for the processes the test starts.
type notifySocket struct {
	conn  *net.UnixConn
	start time.Time
	msgs  chan notifyMsg
}

// notifyMsg is one datagram and when it came.
type notifyMsg struct {
	text string
	at   time.Time
}

func listenNotify(t testing.TB) *notifySocket {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", name)
	s := &notifySocket{conn: conn, start: time.Now(), msgs: make(chan notifyMsg, 4096)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			s.msgs <- notifyMsg{text: string(buf[:n]), at: time.Now()}
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return s
}

// next returns the next datagram, failing after within.
func (s *notifySocket) next(t testing.TB, within time.Duration) notifyMsg {
	t.Helper()
	select {
	case m := <-s.msgs:
		return m
	case <-time.After(within):
		t.Fatalf("no notification within %s", within)
		return notifyMsg{}
	}
}

// await returns the first datagram that has the assignment want (such as
// "READY=1"), skipping watchdog pings and status refreshes.
func (s *notifySocket) await(t testing.TB, want string, within time.Duration) notifyMsg {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		m := s.next(t, time.Until(deadline))
		if assigns(m.text, want) {
			return m
		}
	}
}

// assigns reports whether the datagram text holds the line want.
func assigns(text, want string) bool {
	for l := range strings.SplitSeq(text, "\n") {
		if l == want {
			return true
		}
	}
	return false
}

// field returns the value of the assignment key in text.
func field(text, key string) (string, bool) {
	for l := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

var logAddr = regexp.MustCompile(`\b(console|mqtt)=(\S+)`)

func TestNotifyReadyWatchdogReloadStopping(t *testing.T) {
	bin := shadowgateBinary(t)
	sock := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "400000")
	dir := t.TempDir()
	config := filepath.Join(dir, "shadowgate.yaml")
	if err := os.WriteFile(config, []byte(crashConfig(dir, "", "1h")), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, config)

	ready := sock.next(t, 30*time.Second)
	if !assigns(ready.text, "READY=1") {
		t.Fatalf("the first notification is %q, want READY=1 before anything else", ready.text)
	}
	// Only now may the ports be used: they must take a connection at once.
	line := g.await(t, "the gateway ready line", has("gateway ready"))
	addrs := map[string]string{}
	for _, m := range logAddr.FindAllStringSubmatch(line, -1) {
		addrs[m[1]] = m[2]
	}
	for _, which := range []string{"console", "mqtt"} {
		a, ok := addrs[which]
		if !ok {
			t.Fatalf("no %s address in %q", which, line)
		}
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			t.Fatalf("READY came, but the %s on %s refuses: %v", which, a, err)
		}
		c.Close()
	}
	status, ok := field(ready.text, "STATUS")
	if !ok {
		t.Fatalf("READY without STATUS: %q", ready.text)
	}
	for _, want := range []string{"mode supervised", "0 pending approvals", "0 of 3 devices offline", "0 actuators locked"} {
		if !strings.Contains(status, want) {
			t.Errorf("STATUS=%q, want %q in it", status, want)
		}
	}
	t.Logf("READY=1 %.0fms after the start; STATUS=%s", ready.at.Sub(sock.start).Seconds()*1000, status)

	// Pings every 200ms, half of WATCHDOG_USEC.
	var pings []time.Time
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		m := sock.next(t, 2*time.Second)
		if assigns(m.text, "WATCHDOG=1") {
			pings = append(pings, m.at)
		}
	}
	if len(pings) < 5 {
		t.Fatalf("%d watchdog pings in 1.5s, want one every 200ms", len(pings))
	}
	for i := 1; i < len(pings); i++ {
		if gap := pings[i].Sub(pings[i-1]); gap > 350*time.Millisecond {
			t.Errorf("%s between two pings, with WATCHDOG_USEC 400ms", gap)
		}
	}

	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	rel := sock.await(t, "RELOADING=1", 10*time.Second)
	if v, ok := field(rel.text, "MONOTONIC_USEC"); !ok || !regexp.MustCompile(`^[0-9]+$`).MatchString(v) {
		t.Errorf("RELOADING=1 without MONOTONIC_USEC: %q", rel.text)
	}
	again := sock.await(t, "READY=1", 10*time.Second)
	if s, _ := field(again.text, "STATUS"); !strings.Contains(s, "mode supervised") {
		t.Errorf("READY after the reload: %q, want its STATUS", again.text)
	}
	g.await(t, "the reload", has("configuration reloaded"))

	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sock.await(t, "STOPPING=1", 10*time.Second)
	if err := g.cmd.Wait(); err != nil {
		t.Fatalf("the gateway stopped with %v", err)
	}
}

func TestNotifyWatchdogStopsWhenTheJournalFails(t *testing.T) {
	bin := shadowgateBinary(t)
	sock := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "400000")
	dir := t.TempDir()
	config := filepath.Join(dir, "shadowgate.yaml")
	// The journal may not grow past 1MiB, and a plan fills it: past the
	// cap it fails closed, as on a full disk.
	fill := crashConfig(dir, "", "1h") + `  - name: fill
    every: 10ms
    steps:
` + strings.Repeat("      - {read: tank-1.level}\n", 10) + `journal: {max_file_size: 1MiB}
`
	if err := os.WriteFile(config, []byte(fill), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, config)
	sock.await(t, "READY=1", 30*time.Second)
	sock.await(t, "WATCHDOG=1", 5*time.Second)
	g.await(t, "the journal to fail", has("watchdog pings stop"))
	// A ping already sent may still be read; after that, none.
	quiet := time.Now().Add(300 * time.Millisecond)
	var unhealthy string
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		select {
		case m := <-sock.msgs:
			if assigns(m.text, "WATCHDOG=1") && m.at.After(quiet) {
				t.Fatalf("a watchdog ping after the journal failed")
			}
			if s, ok := field(m.text, "STATUS"); ok && strings.Contains(s, "unhealthy") {
				unhealthy = s
			}
		case <-time.After(100 * time.Millisecond):
		}
	}
	if unhealthy == "" {
		t.Errorf("no STATUS says the engine is unhealthy")
	}
	t.Logf("STATUS=%s", unhealthy)
}

func TestJournalHandlerFormat(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(newJournalHandler(&buf, slog.LevelDebug)).With("gateway", "gw-1")
	log.Debug("polled", "device", "tank-1")
	log.Info("gateway ready", "mqtt", "127.0.0.1:1883")
	log.WithGroup("web").Warn("slow", "took", time.Second)
	log.Error("gateway failed", "error", "two\nlines")
	want := `<7>level=DEBUG msg=polled gateway=gw-1 device=tank-1
<6>level=INFO msg="gateway ready" gateway=gw-1 mqtt=127.0.0.1:1883
<4>level=WARN msg=slow gateway=gw-1 web.took=1s
<3>level=ERROR msg="gateway failed" gateway=gw-1 error="two\nlines"
`
	if buf.String() != want {
		t.Fatalf("journal lines:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	quiet := slog.New(newJournalHandler(&buf, slog.LevelInfo))
	quiet.Debug("not shown")
	if quiet.Enabled(context.Background(), slog.LevelDebug) || buf.Len() != 0 {
		t.Fatalf("debug logged at level info: %q", buf.String())
	}
}

func TestLogHandlerFollowsJournalStream(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	for _, c := range []struct {
		stream  string
		journal bool
	}{
		{"", false},
		{"1:2", false},
		{fmt.Sprintf("%d:%d", st.Dev, st.Ino), true},
	} {
		t.Setenv("JOURNAL_STREAM", c.stream)
		_, isJournal := logHandler(f, slog.LevelInfo).(*journalHandler)
		if isJournal != c.journal {
			t.Errorf("JOURNAL_STREAM=%q: journal format %v, want %v", c.stream, isJournal, c.journal)
		}
	}
	t.Setenv("JOURNAL_STREAM", "1:2")
	if _, ok := logHandler(&bytes.Buffer{}, slog.LevelInfo).(*journalHandler); ok {
		t.Errorf("a writer that is not a file is taken for the journal")
	}
}
