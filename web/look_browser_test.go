package web

import (
	"context"
	"encoding/json"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/value"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/shadowgate/shadowgate/drivers/sim"
)

// The colour schemes every page is looked at in.
var schemes = []string{"light", "dark"}

// layoutJS measures the page shown: the tap targets under 44×44 px (a
// checkbox counts with the label around it, which takes the tap too), and
// the elements that reach past their container's box or the viewport.
// Elements out of the flow (the skip link, the screen-reader-only text)
// are not measured.
const layoutJS = `(() => {
	const min = 44 - 0.5, slack = 1;
	const shown = e => {
		const r = e.getBoundingClientRect(), cs = getComputedStyle(e);
		return r.width > 0 && r.height > 0 && cs.visibility !== "hidden" && !e.closest(".visually-hidden, .skip");
	};
	const name = e => {
		let n = e.tagName.toLowerCase();
		if (e.tagName === "INPUT") n += "[type=" + e.type + "]";
		if (e.id) n += "#" + e.id;
		if (typeof e.className === "string" && e.className.trim()) n += "." + e.className.trim().split(/\s+/).join(".");
		const text = (e.textContent || e.value || e.getAttribute("aria-label") || "").trim().replace(/\s+/g, " ").slice(0, 40);
		return text ? n + " " + JSON.stringify(text) : n;
	};
	const small = [], wide = [];
	for (const e of document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea, summary")) {
		if (!shown(e)) continue;
		const target = (e.type === "checkbox" || e.type === "radio") && e.closest("label") || e;
		const r = target.getBoundingClientRect();
		if (r.width < min || r.height < min) small.push(name(e) + " " + Math.round(r.width) + "×" + Math.round(r.height));
	}
	const vw = document.documentElement.clientWidth;
	for (const e of document.body.querySelectorAll("*")) {
		const p = e.parentElement;
		if (!shown(e) || !p || ["absolute", "fixed"].includes(getComputedStyle(e).position)) continue;
		if (e.closest("svg") && e.tagName.toLowerCase() !== "svg") continue;
		const r = e.getBoundingClientRect(), pr = p.getBoundingClientRect();
		if (r.right > pr.right + slack || r.left < pr.left - slack)
			wide.push(name(e) + " " + Math.round(r.width) + " px in " + name(p) + " " + Math.round(pr.width) + " px");
		else if (r.right > vw + slack) wide.push(name(e) + " reaches " + Math.round(r.right) + " px, past the viewport's " + vw);
	}
	return JSON.stringify({small, wide, scroll: document.documentElement.scrollWidth, width: vw});
})()`

type layout struct {
	Small, Wide   []string
	Scroll, Width float64
}

// setScheme makes the page prefer the light or the dark colour scheme,
// as a system setting would; it holds across navigations.
func (b *browserSession) setScheme(scheme string) {
	b.t.Helper()
	f := []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: f}); err != nil {
		b.t.Fatalf("emulating the %s colour scheme: %v", scheme, err)
	}
}

// screenshotDir is where TestConsoleLook keeps its screenshots:
// $SHADOWGATE_SCREENSHOTS, or a new temporary directory that outlives the
// test. The test logs its name.
func screenshotDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("SHADOWGATE_SCREENSHOTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, err := os.MkdirTemp("", "shadowgate-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConsoleLook walks every console page, with an alarm standing and a
// request waiting, at desk and phone size, in the light and the dark
// colour scheme (prefers-color-scheme, emulated). On each page every tap
// target is at least 44×44 px (navigation links and checkboxes
// included), no element reaches past its container or the viewport, and
// axe-core finds no serious or critical violation, colour contrast
// included. It writes a full-page screenshot of each page at each size
// and scheme to the directory it logs (see screenshotDir), named
// page-size-scheme.png; the README's pictures are two of them,
// approvals-phone-light.png as docs/console-approvals-phone.png and
// devices-desk-light.png as docs/console-devices-desk.png.
func TestConsoleLook(t *testing.T) {
	// The tank's last hour, as a gateway that has run a while has it in
	// its journal: drawn down twice by the pump, refilling between.
	lastHour := func(j *journal.DB) {
		now := time.Now()
		for i := range 72 {
			at := now.Add(time.Duration(i-72) * 50 * time.Second)
			level := 60 - 9*math.Max(0, math.Sin(float64(i)/72*4*math.Pi))
			body, _ := json.Marshal(runtime.ObservedBody{Device: "tank-1", Capability: "level", Value: value.Number(math.Round(level*10) / 10),
				Quality: "good", At: at, Principal: "gateway:poll"})
			if _, err := j.Commit(context.Background(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Device: "tank-1", Body: body},
				Durability: runtime.Sync}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := newSite(t, siteOptions{mode: "interlocked", labels: map[string]string{"tank-1": "Tank 1", "valve-1": "Main valve"}, prepare: lastHour})
	s.g.SetFault("valve-1", sim.Fault{Stuck: true})
	s.raise(1)
	// Requests waiting: a command (its card has the any-value checkbox)
	// and a mode change.
	s.expect("POST", "/api/v1/mode", "admin", `{"mode":"supervised","reason":"a fitter on site"}`, 200, "")
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"reason":"fill the tank"}`, 202, "pending_approval")
	s.expect("POST", "/api/v1/mode", "operator", `{"mode":"maintenance","reason":"pump overhaul, fitter on site"}`, 202, `"status":"pending"`)
	axe := axeScript(t)
	dir := screenshotDir(t)
	t.Logf("screenshots go to %s", dir)

	b := newBrowser(t, s.srv.URL)
	b.login("adam", "/")
	for _, vp := range viewports {
		for _, scheme := range schemes {
			b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
			b.setScheme(scheme)
			for _, page := range append([]string{"/login"}, consolePages...) {
				where := page + " (" + vp.name + ", " + scheme + ")"
				if page == "/login" {
					// The login page as a person who is not logged in sees it.
					b.lookAtLogin(vp.w, vp.h, scheme, func() { b.lookAt(t, where, page, axe, dir, vp.name, scheme) })
					continue
				}
				b.do(where, chromedp.Navigate(b.base+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
				b.poll("the live link on "+where, `document.getElementById("link").textContent === "live"`)
				b.checkScheme(where, scheme)
				if page == "/approvals" && eval[int](b, `document.querySelectorAll("main input[type=checkbox]").length`) == 0 {
					t.Fatalf("%s: no checkbox to measure", where)
				}
				b.lookAt(t, where, page, axe, dir, vp.name, scheme)
			}
		}
	}
}

// checkScheme fails the test unless the page shown is drawn in scheme:
// the page's background is dark exactly when the scheme is.
func (b *browserSession) checkScheme(where, scheme string) {
	b.t.Helper()
	dark := eval[bool](b, `(() => {
		const [r, g, bl] = getComputedStyle(document.body).backgroundColor.match(/\d+/g).map(Number);
		return matchMedia("(prefers-color-scheme: dark)").matches && r + g + bl < 3 * 64;
	})()`)
	if dark != (scheme == "dark") {
		b.t.Fatalf("%s: the page is not drawn in the %s scheme", where, scheme)
	}
}

// lookAtLogin opens the login page in a new tab of the same browser
// without its cookies (an incognito context), at the size and scheme
// given, runs look there, and comes back.
func (b *browserSession) lookAtLogin(w, h int64, scheme string, look func()) {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	defer cancel()
	outer := b.ctx
	b.ctx = ctx
	defer func() { b.ctx = outer }()
	b.do("the login page", chromedp.EmulateViewport(w, h))
	b.setScheme(scheme)
	b.do("the login page", chromedp.Navigate(b.base+"/login"), chromedp.WaitVisible(chromedp.ID("user")))
	b.checkScheme("/login", scheme)
	look()
}

// lookAt checks the page shown and writes its screenshot.
func (b *browserSession) lookAt(t *testing.T, where, page, axe, dir, size, scheme string) {
	t.Helper()
	var l layout
	if err := json.Unmarshal([]byte(eval[string](b, layoutJS)), &l); err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Small {
		t.Errorf("%s: a tap target under 44×44 px: %s", where, e)
	}
	for _, e := range l.Wide {
		t.Errorf("%s: wider than its container: %s", where, e)
	}
	if l.Scroll > l.Width+1 {
		t.Errorf("%s: the page is %v px wide in a %v px viewport", where, l.Scroll, l.Width)
	}
	if axe != "" {
		for _, v := range b.axe(axe) {
			if v.Impact == "serious" || v.Impact == "critical" {
				t.Errorf("%s: axe-core %s (%s): %s, on %q", where, v.ID, v.Impact, v.Help, v.Nodes)
			}
		}
	}
	name := strings.Trim(strings.ReplaceAll(page, "/", "-"), "-")
	if name == "" {
		name = "overview"
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("%s: screenshot: %v", where, err)
	}
	path := filepath.Join(dir, name+"-"+size+"-"+scheme+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
