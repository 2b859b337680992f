package web

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shadowgate/shadowgate/drivers/sim"
)

// needChromium returns Chromium's path, skipping without it unless
// SHADOWGATE_E2E=1 demands it.
func needChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("SHADOWGATE_E2E") == "1" {
		t.Fatal("chromium is not installed, and SHADOWGATE_E2E=1 needs this test to run (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium); skipping")
	return ""
}

// axeScript returns axe-core's script (npm's axe-core package, never
// shipped): $SHADOWGATE_AXE names the file, or it is looked for where
// `npm install -g axe-core` puts it. Without it, it says so and returns
// "", and fails the test under SHADOWGATE_E2E=1.
func axeScript(t *testing.T) string {
	t.Helper()
	paths := []string{"/usr/lib/node_modules/axe-core/axe.min.js", "/usr/local/lib/node_modules/axe-core/axe.min.js"}
	if p := os.Getenv("SHADOWGATE_AXE"); p != "" {
		paths = []string{p}
	}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			return string(b)
		}
	}
	const why = "axe-core is not installed (npm install -g axe-core, or SHADOWGATE_AXE=axe.min.js)"
	if os.Getenv("SHADOWGATE_E2E") == "1" {
		t.Fatal(why + ", and SHADOWGATE_E2E=1 needs the accessibility audit to run")
	}
	t.Log(why + ": the accessibility audit is skipped")
	return ""
}

// browserSession is a headless Chromium on a console.
type browserSession struct {
	t    *testing.T
	ctx  context.Context
	base string
	dir  string // where screenshots go
}

func newBrowser(t *testing.T, base string, extra ...chromedp.ExecAllocatorOption) *browserSession {
	t.Helper()
	chromium := needChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900))
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancel(); cancelAlloc() })
	// Kept after the test, for a person to look at.
	dir, err := os.MkdirTemp("", "shadowgate-alarms-")
	if err != nil {
		t.Fatal(err)
	}
	return &browserSession{t: t, ctx: ctx, base: base, dir: dir}
}

// shot saves a screenshot and logs where, for a person to look at.
func (b *browserSession) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o600); err == nil {
		b.t.Logf("screenshot: %s", path)
	}
}

func (b *browserSession) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	defer func(start time.Time) { b.t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond)) }(time.Now())
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.shot("failed")
		b.t.Fatalf("%s: %v", what, err)
	}
}

// poll waits until js is true; the page may redraw its live part at any
// moment, so the page is read with single scripts, never a held node.
func (b *browserSession) poll(what, js string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func eval[T any](b *browserSession, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// TestAlarmsInABrowser drives the console in Chromium: the header's count
// follows an alarm raised elsewhere without a reload, the device card
// shows it, an operator acknowledges it on the Alarms page with a comment,
// and the count drops, in place. At phone width the page fits; every
// control has a label; and axe-core, where it is installed, finds no
// serious or critical violation on the pages.
func TestAlarmsInABrowser(t *testing.T) {
	s := newSite(t, siteOptions{mode: "interlocked"})
	b := newBrowser(t, s.srv.URL)
	b.do("logging in", chromedp.Navigate(b.base+"/login?next=/devices"), chromedp.WaitVisible(chromedp.ID("user")),
		chromedp.SendKeys(chromedp.ID("user"), "olga"), chromedp.SendKeys(chromedp.ID("password"), "password-1"),
		chromedp.Submit(chromedp.ID("password")), chromedp.WaitVisible(chromedp.ID("live")))
	b.poll("the live link", `document.getElementById("link").textContent === "live"`)
	b.poll("a quiet header", `document.getElementById("alarms-unacked").textContent === "0" &&
		document.getElementById("alarms-badge").classList.contains("quiet")`)

	// Raised through the API while the person looks at the devices.
	s.g.SetFault("valve-1", sim.Fault{Stuck: true})
	s.raise(1)
	b.poll("the header to count the alarm", `document.getElementById("alarms-unacked").textContent === "1" &&
		document.getElementById("alarms-active").textContent === "1" && document.getElementById("alarms-badge").classList.contains("loud")`)
	b.poll("the valve's card to show its alarm", `Array.from(document.querySelectorAll(".device-alarms a")).some(
		a => a.getAttribute("href") === "/alarms#alarm-`+stuckAlarm+`" && a.textContent.includes("active, unacknowledged"))`)
	b.shot("devices-with-alarm")

	b.do("the alarms page", chromedp.Navigate(b.base+"/alarms"), chromedp.WaitVisible(chromedp.CSS("article.alarm")))
	text := eval[string](b, `document.querySelector("article.alarm").textContent`)
	for _, want := range []string{"high", "valve-1.open", "active, unacknowledged", "Comment (required", "Acknowledge"} {
		if !strings.Contains(text, want) {
			b.shot("alarm")
			t.Fatalf("the alarm does not show %q:\n%s", want, text)
		}
	}
	b.shot("alarms")
	if axe := axeScript(t); axe != "" {
		for _, v := range b.axe(axe) { // with the acknowledgement form
			if v.Impact == "serious" || v.Impact == "critical" {
				t.Errorf("/alarms: axe-core %s (%s): %s, on %q", v.ID, v.Impact, v.Help, v.Nodes)
			}
		}
	}
	before := eval[string](b, `location.href`)
	b.do("acknowledging", chromedp.SendKeys(chromedp.CSS(`article.alarm input[name="comment"]`), "valve seen stuck, fitter called"),
		chromedp.Click(chromedp.CSS("article.alarm button.ack-button")))
	b.poll("the count to drop", `document.getElementById("alarms-unacked").textContent === "0" &&
		document.getElementById("alarms-badge").classList.contains("warn")`)
	b.poll("the acknowledged alarm", `(document.querySelector("article.alarm") || {textContent: ""}).textContent.includes("active, acknowledged") &&
		document.querySelector("article.alarm").textContent.includes("valve seen stuck, fitter called")`)
	if after := eval[string](b, `location.href`); after != before {
		t.Fatalf("acknowledging left the page: %s, then %s", before, after)
	}
	if a, _ := s.eng.Alarm(stuckAlarm); a.AckedBy != "console:olga" || a.Comment != "valve seen stuck, fitter called" {
		t.Fatalf("the alarm after the acknowledgement = %+v", a)
	}
	b.shot("acknowledged")

	// At phone width nothing overflows, and every control has a name a
	// screen reader reads.
	b.do("phone width", chromedp.EmulateViewport(390, 844), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("article.alarm")))
	if w := eval[float64](b, `document.documentElement.scrollWidth`); w > 391 {
		b.shot("overflow")
		t.Fatalf("the alarms page is %v px wide at a 390 px viewport", w)
	}
	b.shot("alarms-phone")
	for _, page := range []string{"/alarms", "/devices", "/"} {
		b.do(page, chromedp.Navigate(b.base+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if n := eval[int](b, `Array.from(document.querySelectorAll("input:not([type=hidden]), select")).filter(
			e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label")).length`); n != 0 {
			t.Errorf("%s: %d controls without a label", page, n)
		}
		if w := eval[float64](b, `document.documentElement.scrollWidth`); w > 391 {
			b.shot("overflow" + strings.ReplaceAll(page, "/", "-"))
			t.Errorf("%s is %v px wide at a 390 px viewport", page, w)
		}
	}
	axe := axeScript(t)
	if axe == "" {
		return
	}
	b.do("desk width", chromedp.EmulateViewport(1280, 900))
	for _, page := range []string{"/alarms", "/devices", "/", "/approvals", "/policy", "/runs", "/journal"} {
		b.do(page, chromedp.Navigate(b.base+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		violations := b.axe(axe)
		t.Logf("%s: axe-core found %d violations", page, len(violations))
		for _, v := range violations {
			if v.Impact == "serious" || v.Impact == "critical" {
				t.Errorf("%s: axe-core %s (%s): %s, on %q", page, v.ID, v.Impact, v.Help, v.Nodes)
			} else {
				t.Logf("%s: axe-core %s (%s): %s, on %q", page, v.ID, v.Impact, v.Help, v.Nodes)
			}
		}
	}
	// An admin's page, with the shelving form open.
	b.do("logging in as an admin", chromedp.Click(chromedp.CSS("form.logout button")), chromedp.WaitVisible(chromedp.ID("user")),
		chromedp.Navigate(b.base+"/login?next=/alarms"), chromedp.WaitVisible(chromedp.ID("user")),
		chromedp.SendKeys(chromedp.ID("user"), "adam"), chromedp.SendKeys(chromedp.ID("password"), "password-1"),
		chromedp.Submit(chromedp.ID("password")), chromedp.WaitVisible(chromedp.CSS("article.alarm details.shelve")))
	eval[bool](b, `document.querySelectorAll("details").forEach(d => d.open = true), true`)
	b.shot("alarms-admin")
	for _, v := range b.axe(axe) {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("/alarms as an admin: axe-core %s (%s): %s, on %q", v.ID, v.Impact, v.Help, v.Nodes)
		}
	}
	// The audit can fail: a field without a label, planted, is found.
	eval[bool](b, `document.querySelector("main").insertAdjacentHTML("beforeend", '<input id="planted">'), true`)
	found := false
	for _, v := range b.axe(axe) {
		found = found || v.ID == "label" && strings.Contains(strings.Join(v.Nodes, " "), "planted")
	}
	if !found {
		t.Fatal("axe-core did not find a planted field without a label: the audit is not running")
	}
}

// axeViolation is one rule a page breaks, as axe-core reports it.
type axeViolation struct {
	ID, Impact, Help string
	Nodes            []string
}

// axe runs axe-core (its script is script) on the page shown.
func (b *browserSession) axe(script string) []axeViolation {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](script+";true")); err != nil {
		b.t.Fatalf("loading axe-core: %v", err)
	}
	out, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
		r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.html.slice(0, 160))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("running axe-core: %v", err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		b.t.Fatal(err)
	}
	return vs
}

// look is a window size and a colour scheme a console test runs in.
type look struct {
	name   string
	w, h   int64
	scheme string
}

// looks are the sizes and schemes the console's defect tests run in: a
// desk and a phone, each in the light and the dark colour scheme.
var looks = []look{
	{"desk", 1366, 900, "light"}, {"phone", 390, 844, "light"},
	{"desk-dark", 1366, 900, "dark"}, {"phone-dark", 390, 844, "dark"},
}

// sharedBrowser starts one Chromium for the cases of a test, which open
// their tabs in it (tab) and may run at once: a Chromium started once,
// not once a case.
func sharedBrowser(t *testing.T) *browserSession {
	t.Helper()
	b := newBrowser(t, "")
	b.do("starting Chromium", chromedp.Navigate("about:blank"))
	return b
}

// tab opens, for t, a tab of b's browser on base in a browser context of
// its own (its own cookies, so that cases on different sites of the same
// host can run at once), in lk's window size and colour scheme.
func (b *browserSession) tab(t *testing.T, base string, lk look) *browserSession {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tb := &browserSession{t: t, ctx: ctx, base: base, dir: b.dir}
	tb.do("the look "+lk.name, chromedp.EmulateViewport(lk.w, lk.h))
	tb.setScheme(lk.scheme)
	return tb
}
