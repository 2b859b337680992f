package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

// The soak's knobs, read from the environment only by TestSoak: make soak
// sets them.
const (
	// soakEnv is the soak's length ("30m", "2h"); without it the soak is
	// skipped, so make test and CI do not run it.
	soakEnv = "SHADOWGATE_SOAK"
	// soakEveryEnv is how often it samples. Default 1m.
	soakEveryEnv = "SHADOWGATE_SOAK_EVERY"
	// soakCSVEnv is where the samples go. Default docs/soak.csv.
	soakCSVEnv = "SHADOWGATE_SOAK_CSV"
)

// soakConfig is a sim greenhouse in the interlocked mode, as the demo's
// devices are: sensors polled every second or two, so that telemetry
// flows; two valves whose writes (reversible, contained) run, one for the
// API and one for the site broker; a heater whose writes (not contained)
// ask. The journal keeps few events and ended records for a few minutes,
// so that retention prunes within the soak and the file must stop growing.
// The tokens are those of testdata/foureyes.yaml: appr-ci asks, carol-ci
// approves and reads the metrics.
func soakConfig(dir, site string) string {
	return `gateway:
  id: soak
  state_dir: ` + filepath.Join(dir, "state") + `
mode: interlocked
approvals: {timeout: 5m, operate_within: 15s}
users:
  - {name: appr, role: approver, password_hash: "$2a$04$6R65H3gQGrIAb3Mwptc9JuTNMdfGoqFaZE5tpY15q854t7qyQrPoa"}
  - {name: carol, role: approver, password_hash: "$2a$04$0gCHboXg9EGEHIRY0Y/Tm.Hzb04510N1zeXzWmjPloezHWHkj4YyC"}
mqtt: {listen: "127.0.0.1:0"}
web:
  listen: "127.0.0.1:0"
  tokens:
    - {name: appr-ci, role: approver, user: appr, token_hash: 851053361a8bdfef82a330b5975be6665b3da46550ba22f911340372698d06d0}
    - {name: carol-ci, role: approver, user: carol, token_hash: 31490ebeddd3fce409c0f2931220f0e13f7ad7bf31a4e3bec886d5298060a1b4}
uplink: {url: "tcp://` + site + `", client_id: soak-site, user: appr, reconnect_max: 2s, max_command_age: 1m}
journal: {max_events: 3000, max_bytes: 2MiB, keep_records: 3m}
drivers:
  - name: sim
    type: sim
    sim:
      state_file: world.json
  - name: sim2
    type: sim
    sim:
      state_file: world2.json
devices:
  - id: tank-1
    area: greenhouse/zone-a
    driver: sim
    address: tank
    capabilities:
      - {name: level, kind: sensor, type: number, unit: "%", poll: 1s}
  - id: air-1
    area: greenhouse/zone-a
    driver: sim
    address: air
    capabilities:
      - {name: temperature, kind: sensor, type: number, unit: °C, poll: 2s}
  - id: valve-1
    area: greenhouse/zone-a
    driver: sim
    address: valve
    capabilities:
      - name: open
        kind: actuator
        type: bool
        read_back: true
        poll: 10s
        effects: {reversible: true, contained: true}
        confirm: {read_back: true, within: 2s}
  - id: valve-2
    area: greenhouse/zone-b
    driver: sim2
    address: valve
    capabilities:
      - name: open
        kind: actuator
        type: bool
        read_back: true
        effects: {reversible: true, contained: true}
        confirm: {read_back: true, within: 2s}
  - id: heater-1
    area: greenhouse/zone-a
    driver: sim
    address: heater
    capabilities:
      - name: "on"
        kind: actuator
        type: bool
        read_back: true
        effects: {reversible: true, contained: false, costs: true}
        confirm: {read_back: true, within: 2s}
`
}

// soakCounts are what the load did, counted by the goroutines that did
// it.
type soakCounts struct {
	sent, acted, replayed, other, unanswered atomic.Int64
	asked, approved                          atomic.Int64
	upSent, upReplies                        atomic.Int64
	restarts                                 atomic.Int64
}

// soakSample is one row of the CSV.
type soakSample struct {
	at                   time.Time
	rss, heap, journal   float64 // bytes
	rssAnon, rssFile     float64 // bytes
	goroutines, fds      float64
	backlog, uplinkUp    float64
	sent, acted, asked   int64
	approved, replayed   int64
	upSent, upReplies    int64
	restarts, unanswered int64
}

var soakHeader = []string{"time", "minutes", "rss_mib", "heap_mib", "goroutines", "fds", "journal_mib",
	"uplink_backlog", "uplink_connected", "rss_anon_mib", "rss_file_mib", "sent", "acted", "replayed", "asked", "approved",
	"upstream_sent", "upstream_replies", "mosquitto_restarts", "unanswered"}

func (s soakSample) row(start time.Time) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{s.at.UTC().Format(time.RFC3339), f(s.at.Sub(start).Minutes()), f(s.rss / (1 << 20)), f(s.heap / (1 << 20)),
		f(s.goroutines), f(s.fds), f(s.journal / (1 << 20)), f(s.backlog), f(s.uplinkUp),
		f(s.rssAnon / (1 << 20)), f(s.rssFile / (1 << 20)),
		i(s.sent), i(s.acted), i(s.replayed), i(s.asked), i(s.approved), i(s.upSent), i(s.upReplies), i(s.restarts), i(s.unanswered)}
}

// soakLimit is the failure rule for one series: the mean of the last
// third of the samples may exceed the mean of the middle third by at most
// pct percent plus floor (in the series' unit). The first third is
// warm-up: the heap grows to its working size there, and the journal to
// the size retention holds it at.
type soakLimit struct {
	name  string
	pct   float64
	floor float64
	get   func(soakSample) float64
}

var soakLimits = []soakLimit{
	{"rss_mib", 10, 4, func(s soakSample) float64 { return s.rss / (1 << 20) }},
	{"heap_mib", 10, 4, func(s soakSample) float64 { return s.heap / (1 << 20) }},
	{"goroutines", 10, 5, func(s soakSample) float64 { return s.goroutines }},
	{"fds", 10, 5, func(s soakSample) float64 { return s.fds }},
	{"journal_mib", 10, 1, func(s soakSample) float64 { return s.journal / (1 << 20) }},
}

// soakGrowth applies the rule to a series. It returns the two means and
// whether the series grew beyond the limit; with fewer than six samples
// there is nothing to judge.
func soakGrowth(series []float64, pct, floor float64) (middle, last float64, grew bool) {
	n := len(series) / 3
	if n < 2 {
		return 0, 0, false
	}
	mean := func(xs []float64) float64 {
		sum := 0.0
		for _, x := range xs {
			sum += x
		}
		return sum / float64(len(xs))
	}
	middle, last = mean(series[n:2*n]), mean(series[len(series)-n:])
	return middle, last, last > middle*(1+pct/100)+floor
}

func TestSoakGrowth(t *testing.T) {
	cases := []struct {
		name   string
		series []float64
		want   bool
	}{
		{"flat", []float64{10, 10, 10, 10, 10, 10, 10, 10, 10}, false},
		{"levels off", []float64{1, 5, 9, 20, 21, 20, 21, 20, 21}, false},
		{"noise within the floor", []float64{20, 20, 20, 20, 21, 20, 23, 24, 23}, false},
		{"grows to the end", []float64{10, 20, 30, 40, 50, 60, 70, 80, 90}, true},
		{"steps up late", []float64{20, 20, 20, 20, 20, 20, 30, 30, 30}, true},
		{"too few samples", []float64{1, 100, 1000, 10000, 100000}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mid, last, grew := soakGrowth(tc.series, 10, 2)
			if grew != tc.want {
				t.Errorf("soakGrowth(%v, 10%%, 2) = %.1f, %.1f, %v; want grew %v", tc.series, mid, last, grew, tc.want)
			}
		})
	}
}

func TestSoakWarnings(t *testing.T) {
	lines := []string{
		`time=2026-12-01T20:00:00Z level=INFO msg="uplink connected"`,
		`time=2026-12-01T20:00:01Z level=WARN msg="uplink lost its broker" error="EOF"`,
		`time=2026-12-01T20:00:02Z level=WARN msg="uplink lost its broker" error="EOF"`,
		`time=2026-12-01T20:00:03Z level=ERROR msg=stalled`,
	}
	want := "\n     1 ERROR stalled\n     2 WARN \"uplink lost its broker\""
	if got := soakWarnings(lines); got != want {
		t.Errorf("soakWarnings = %q, want %q", got, want)
	}
	if got := soakWarnings(lines[:1]); got != " none" {
		t.Errorf("soakWarnings(no warnings) = %q, want \" none\"", got)
	}
}

// TestSoak runs the gateway binary for SHADOWGATE_SOAK (make soak) under a
// steady load: API commands to a valve that run, some sent again with the
// same id; heater commands that park for approval, which a second person
// approves every so often; commands from the site broker, a real
// mosquitto that is stopped and started every tenth of the run. It samples
// the gateway's RSS, heap, goroutines, open files and journal size every
// SHADOWGATE_SOAK_EVERY (1m) to SHADOWGATE_SOAK_CSV (docs/soak.csv) and
// fails on growth that does not level off (soakLimits).
func TestSoak(t *testing.T) {
	spec := os.Getenv(soakEnv)
	if spec == "" {
		t.Skipf("the soak runs only with %s=<duration> set (make soak DURATION=2h)", soakEnv)
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur <= 0 {
		t.Fatalf("%s=%q is not a positive duration", soakEnv, spec)
	}
	every := time.Minute
	if s := os.Getenv(soakEveryEnv); s != "" {
		if every, err = time.ParseDuration(s); err != nil || every <= 0 {
			t.Fatalf("%s=%q is not a positive duration", soakEveryEnv, s)
		}
	}
	csvPath := os.Getenv(soakCSVEnv)
	if csvPath == "" {
		csvPath = filepath.Join("..", "..", "docs", "soak.csv")
	}
	mosqBin := needTool(t, "mosquitto")
	bin := shadowgateBinary(t)
	// The soak bounds itself: make soak runs go test with -timeout 0.
	ctx, cancel := context.WithTimeout(t.Context(), dur+5*time.Minute)
	defer cancel()

	dir := t.TempDir()
	siteDir := filepath.Join(dir, "site")
	if err := os.Mkdir(siteDir, 0o700); err != nil {
		t.Fatal(err)
	}
	site := &mosquitto{t: t, bin: mosqBin, dir: siteDir, port: freePort(t)}
	site.start()
	t.Cleanup(site.stop)
	siteAddr := fmt.Sprintf("127.0.0.1:%d", site.port)
	config := filepath.Join(dir, "soak.yaml")
	if err := os.WriteFile(config, []byte(soakConfig(dir, siteAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(ctx, t, bin, config)
	c := &matrixCell{t: t, bin: bin, dir: dir, p: p}
	c.base = p.consoleBase(ctx, t)
	if !p.awaitLine(ctx, `msg="uplink connected"`) {
		t.Fatalf("the uplink did not connect; the log:\n%s", strings.Join(p.lines(), "\n"))
	}
	c.awaitCommand(ctx, "appr-ci", "valve-1", "open", "false", "soak-warm")

	var n soakCounts
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { soakCommands(loadCtx, t, c, &n) })
	wg.Go(func() { soakAsk(loadCtx, c, &n) })
	wg.Go(func() { soakApprove(loadCtx, t, c, &n) })
	wg.Go(func() { soakUpstream(loadCtx, t, siteAddr, &n) })
	// On every way out, the load ends before the test does.
	defer func() {
		stopLoad()
		wg.Wait()
	}()

	out, err := os.Create(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w := csv.NewWriter(out)
	start := time.Now()
	var samples []soakSample
	sample := func() {
		s := soakTake(ctx, t, c, &n)
		samples = append(samples, s)
		if err := w.Write(s.row(start)); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		t.Logf("soak %5.1fm: rss %.1f MiB (anon %.1f, file %.1f), heap %.1f MiB, %v goroutines, %v fds, journal %.2f MiB; sent %d, acted %d, asked %d, approved %d, upstream %d/%d, restarts %d",
			s.at.Sub(start).Minutes(), s.rss/(1<<20), s.rssAnon/(1<<20), s.rssFile/(1<<20), s.heap/(1<<20), s.goroutines, s.fds, s.journal/(1<<20),
			s.sent, s.acted, s.asked, s.approved, s.upReplies, s.upSent, s.restarts)
	}
	if err := w.Write(soakHeader); err != nil {
		t.Fatal(err)
	}
	sample()

	// The site broker is stopped every tenth of the run (3m in 30m), and
	// started again a sixth of that later.
	restartEvery := max(dur/10, 10*time.Second)
	down := restartEvery / 6
	samplesTick := time.NewTicker(every)
	defer samplesTick.Stop()
	restartTick := time.NewTicker(restartEvery)
	defer restartTick.Stop()
	end := time.NewTimer(dur)
	defer end.Stop()
	var upAgain <-chan time.Time
	for running := true; running; {
		select {
		case <-samplesTick.C:
			sample()
		case <-restartTick.C:
			if upAgain == nil {
				site.stop()
				n.restarts.Add(1)
				upAgain = time.After(down)
			}
		case <-upAgain:
			site.start()
			upAgain = nil
		case <-p.done:
			t.Fatalf("the gateway exited %d during the soak; the end of its log:\n%s", p.code, soakTail(p.lines(), 60))
		case <-end.C:
			running = false
		case <-ctx.Done():
			t.Fatalf("the soak ran out of time: %v", ctx.Err())
		}
	}
	sample()
	stopLoad()
	wg.Wait()
	if upAgain != nil {
		site.start()
	}
	if err := w.Error(); err != nil {
		t.Fatalf("writing %s: %v", csvPath, err)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(ctx); code != 0 {
		t.Errorf("the gateway exited %d after the soak; the end of its log:\n%s", code, soakTail(p.lines(), 60))
	}
	c.verify(ctx)
	soakPruned(ctx, t, filepath.Join(dir, "state"))
	t.Logf("the gateway's warnings and errors, by message:%s", soakWarnings(p.lines()))

	first, last := samples[0], samples[len(samples)-1]
	t.Logf("soak of %v, %d samples to %s: rss %.1f → %.1f MiB, heap %.1f → %.1f MiB, goroutines %v → %v, fds %v → %v, journal %.2f → %.2f MiB",
		dur, len(samples), csvPath, first.rss/(1<<20), last.rss/(1<<20), first.heap/(1<<20), last.heap/(1<<20),
		first.goroutines, last.goroutines, first.fds, last.fds, first.journal/(1<<20), last.journal/(1<<20))
	t.Logf("load: %d commands sent, %d acted, %d replayed, %d other outcomes, %d unanswered; %d asked, %d approved; upstream %d sent, %d replies; mosquitto restarted %d times",
		n.sent.Load(), n.acted.Load(), n.replayed.Load(), n.other.Load(), n.unanswered.Load(), n.asked.Load(), n.approved.Load(),
		n.upSent.Load(), n.upReplies.Load(), n.restarts.Load())
	if n.acted.Load() == 0 || n.approved.Load() == 0 || n.upReplies.Load() == 0 {
		t.Errorf("the load did not reach the gateway: %d acted, %d approved, %d upstream replies", n.acted.Load(), n.approved.Load(), n.upReplies.Load())
	}
	for _, l := range soakLimits {
		series := make([]float64, len(samples))
		for i, s := range samples {
			series[i] = l.get(s)
		}
		if mid, end, grew := soakGrowth(series, l.pct, l.floor); grew {
			t.Errorf("%s grew and did not level off: the last third's mean is %.2f, the middle third's %.2f (allowed: +%v%% +%v)",
				l.name, end, mid, l.pct, l.floor)
		}
	}
}

// soakCommands sends valve-1 commands that run, four a second, each
// opening or closing it; every tenth sends the one before again with its
// id, which must come back replayed, never act twice.
func soakCommands(ctx context.Context, t *testing.T, c *matrixCell, n *soakCounts) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	prevID, prevValue := "", ""
	for i := 0; ; i++ {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		id, value := fmt.Sprintf("soak-%d", i), strconv.FormatBool(i%2 == 0)
		again := i%10 == 9 && prevID != ""
		if again {
			id, value = prevID, prevValue
		}
		r, err := c.command(ctx, "appr-ci", "valve-1", "open", value, id)
		if ctx.Err() != nil {
			return
		}
		n.sent.Add(1)
		switch {
		case err != nil:
			if n.unanswered.Add(1) <= 20 {
				t.Logf("command %s: %v", id, err)
			}
		case again && r.Outcome == "acted" && !r.Replayed:
			t.Errorf("command %s sent again acted again: %+v", id, r)
		case again:
			n.replayed.Add(1)
		case r.acted() != "":
			n.acted.Add(1)
		default:
			if n.other.Add(1) <= 20 {
				t.Logf("command %s = %s: %s", id, r.Outcome, r.Why)
			}
		}
		prevID, prevValue = id, value
	}
}

// soakAsk asks for heater-1 every five seconds: each asks for approval,
// or is refused while one waits (one per actuator).
func soakAsk(ctx context.Context, c *matrixCell, n *soakCounts) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		r, err := c.command(ctx, "appr-ci", "heater-1", "on", strconv.FormatBool(i%2 == 0), fmt.Sprintf("heat-%d", i))
		if err == nil && r.Outcome == "pending_approval" {
			n.asked.Add(1)
		}
	}
}

// soakApprove approves, as carol, every pending heater request every 20s.
func soakApprove(ctx context.Context, t *testing.T, c *matrixCell, n *soakCounts) {
	tick := time.NewTicker(20 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		aps, err := c.approvals(ctx)
		if err != nil {
			continue
		}
		for _, a := range aps {
			if a.Status != runtime.ApprovalPending || a.Kind != "actuation" {
				continue
			}
			v, err := json.Marshal(a.Value)
			if err != nil {
				t.Errorf("approval %s's value: %v", a.ID, err)
				continue
			}
			status, body, err := c.post(ctx, "carol-ci", "/api/v1/approvals/"+a.ID,
				fmt.Sprintf(`{"decision":"approve","device":%q,"capability":%q,"value":%s,"reason":"soak"}`, a.Device, a.Capability, v))
			switch {
			case err != nil:
			case status == http.StatusOK:
				n.approved.Add(1)
			default:
				t.Logf("approving %s = %d %s", a.ID, status, body)
			}
		}
	}
}

// soakUpstream sends valve-2 commands through the site broker every ten
// seconds, with a client that reconnects by itself across the broker's
// restarts, and counts the replies.
func soakUpstream(ctx context.Context, t *testing.T, siteAddr string, n *soakCounts) {
	const prefix = "shadowgate/soak/"
	replies := func(_ paho.Client, _ paho.Message) { n.upReplies.Add(1) }
	o := paho.NewClientOptions().AddBroker("tcp://" + siteAddr).SetClientID("soak-upstream").
		SetProtocolVersion(4).SetAutoReconnect(true).SetConnectRetry(true).
		SetConnectRetryInterval(time.Second).SetMaxReconnectInterval(2 * time.Second)
	o.SetOnConnectHandler(func(mc paho.Client) { mc.Subscribe(prefix+"reply/#", 1, replies) })
	mc := paho.NewClient(o)
	mc.Connect() // retries by itself; publishes wait for it
	defer mc.Disconnect(100)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		if !mc.IsConnectionOpen() {
			continue
		}
		payload := fmt.Sprintf(`{"value":%v,"id":"up-%d","reason":"soak","expires":%q}`, i%2 == 0, i,
			time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano))
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := waitToken(pctx, mc.Publish(prefix+"cmd/valve-2/open", 1, false, payload))
		cancel()
		if err == nil {
			n.upSent.Add(1)
		} else if ctx.Err() == nil {
			t.Logf("publishing up-%d upstream: %v", i, err)
		}
	}
}

// soakTake samples the gateway: RSS and open files from /proc, heap and
// goroutines from /metrics, the journal's file size.
func soakTake(ctx context.Context, t *testing.T, c *matrixCell, n *soakCounts) soakSample {
	t.Helper()
	s := soakSample{at: time.Now(), sent: n.sent.Load(), acted: n.acted.Load(), asked: n.asked.Load(),
		approved: n.approved.Load(), replayed: n.replayed.Load(), upSent: n.upSent.Load(), upReplies: n.upReplies.Load(),
		restarts: n.restarts.Load(), unanswered: n.unanswered.Load()}
	pid := c.p.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the gateway's status: %v", err)
	}
	// VmRSS is what the rule judges; its anonymous and file parts tell
	// the process's own memory from the journal's pages that bbolt maps.
	fields := map[string]*float64{"VmRSS:": &s.rss, "RssAnon:": &s.rssAnon, "RssFile:": &s.rssFile}
	sc := bufio.NewScanner(strings.NewReader(string(status)))
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), "\t")
		if dst, ok := fields[name]; ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				t.Fatalf("%s %q: %v", name, rest, err)
			}
			*dst = kb * 1024
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("reading the gateway's open files: %v", err)
	}
	s.fds = float64(len(fds))
	fi, err := os.Stat(journal.Path(filepath.Join(c.dir, "state")))
	if err != nil {
		t.Fatal(err)
	}
	s.journal = float64(fi.Size())
	code, body, err := c.do(ctx, http.MethodGet, "carol-ci", "/metrics", "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, %v: %s", code, err, body)
	}
	m := promValues(string(body))
	s.heap, s.goroutines = m["go_memstats_heap_inuse_bytes"], m["go_goroutines"]
	s.backlog, s.uplinkUp = m["shadowgate_uplink_backlog_messages"], m["shadowgate_uplink_connected"]
	for _, k := range []string{"go_memstats_heap_inuse_bytes", "go_goroutines"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("/metrics has no %s", k)
		}
	}
	return s
}

// soakPruned checks that retention pruned the journal's oldest events
// within the soak: the journal's size is judged as bounded by retention,
// which says nothing unless retention ran.
func soakPruned(ctx context.Context, t *testing.T, state string) {
	t.Helper()
	j, err := journal.Open(journal.Path(state), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	evs, err := j.Events(ctx, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || evs[0].Seq == 1 {
		t.Errorf("retention pruned no event in the soak (%d events kept): its journal limits are too wide for its load", len(evs))
		return
	}
	t.Logf("retention kept %d events, %d to %d: it pruned %d", len(evs), evs[0].Seq, evs[len(evs)-1].Seq, evs[0].Seq-1)
}

// promValues reads the unlabelled samples of Prometheus's text format.
func promValues(text string) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil && !math.IsNaN(v) {
			out[f[0]] = v
		}
	}
	return out
}

// soakWarnings counts the log's WARN and ERROR lines by level and
// message, for the soak's report: a message that recurs is worth a look.
func soakWarnings(lines []string) string {
	msg := regexp.MustCompile(`level=(WARN|ERROR) msg=("(?:[^"\\]|\\.)*"|\S+)`)
	counts := map[string]int{}
	for _, l := range lines {
		if m := msg.FindStringSubmatch(l); m != nil {
			counts[m[1]+" "+m[2]]++
		}
	}
	if len(counts) == 0 {
		return " none"
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "\n%6d %s", counts[k], k)
	}
	return b.String()
}

// soakTail returns the last n lines, joined.
func soakTail(lines []string, n int) string {
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
