package web

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// outcomeJS describes the outcome a form shows, found by selector, as
// the person sees it: its words, its role, whether it is drawn as an
// error (the deny button's red, as every error is), whether it is wholly
// in the viewport (to a pixel: scrolled into view, its edge may fall on a
// fraction of one), and whether a note at the top of the page says
// anything. It returns "" when there is no such outcome.
func outcomeJS(selector string) string {
	return `(() => {
		const p = document.querySelector(` + "`" + selector + "`" + `);
		if (!p) return "";
		const r = p.getBoundingClientRect(), cs = getComputedStyle(p);
		const red = getComputedStyle(document.documentElement).getPropertyValue("--bad").trim();
		const probe = document.createElement("span");
		probe.style.color = red;
		document.body.appendChild(probe);
		const bad = getComputedStyle(probe).color;
		probe.remove();
		return JSON.stringify({text: p.textContent, role: p.getAttribute("role"), error: cs.color === bad && cs.borderLeftColor === bad,
			inView: r.top >= -1 && r.bottom <= innerHeight + 1 && r.left >= -1 && r.right <= innerWidth + 1 && r.height > 0,
			top: !!document.querySelector("main > p.note")});
	})()`
}

type shownOutcome struct {
	Text, Role string
	Error      bool
	InView     bool
	Top        bool
}

// outcome waits for the outcome found by selector to say want, and
// returns it once it is in view, or as it is after a few seconds: the
// page's update that follows a form may move it, and the script brings it
// back into view once the update is drawn.
func (b *browserSession) outcome(what, selector, want string) shownOutcome {
	b.t.Helper()
	b.poll(what, `(document.querySelector(`+"`"+selector+"`"+`) || {textContent: ""}).textContent.includes(`+"`"+want+"`"+`)`)
	settle := `JSON.parse(` + outcomeJS(selector) + `).inView`
	_, _ = chromedp.Run(b.ctx, chromedp.Poll[bool](settle, chromedp.WithPollingTimeout(5*time.Second)))
	var o shownOutcome
	if err := json.Unmarshal([]byte(eval[string](b, outcomeJS(selector))), &o); err != nil {
		b.t.Fatal(err)
	}
	return o
}

// TestFormOutcomeByTheForm sends commands with the Devices page's "Send a
// command" form, at the foot of the page, and cancels a run on the Runs
// page, at desk and at phone size. Each outcome is shown by its form, in
// view, announced; a read gives its value; a command refused by the judge
// and one that failed (a write to a sensor) are drawn and announced as
// errors, with a ✗, and the page-top note says nothing. They were all
// said in the note at the top of the page, out of view on a phone, and
// a refusal looked like a success. The refusal is looked at in the dark
// colour scheme too.
func TestFormOutcomeByTheForm(t *testing.T) {
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			s := newSite(t, siteOptions{})
			b := newBrowser(t, s.srv.URL)
			b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
			b.login("olga", "/devices")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			form := "form.command p.outcome"
			send := func(what, device, capability, value string) {
				t.Helper()
				eval[bool](b, `document.getElementById("cmd-device").value = "`+device+`"; document.getElementById("cmd-cap").value = "`+capability+`";
					document.getElementById("cmd-value").value = "`+value+`"; true`)
				b.do(what, chromedp.ScrollIntoView(chromedp.CSS("form.command button[type=submit]")), chromedp.Click(chromedp.CSS("form.command button[type=submit]")))
			}

			send("reading the tank", "tank-1", "level", "")
			o := b.outcome("the reading by the form", form, "tank-1.level reads 60")
			if o.Role != "status" || o.Error || !o.InView || o.Top {
				t.Errorf("a read's outcome = %+v, want a status by the form, in view, not an error, and no note at the top", o)
			}
			b.shot("outcome-read-" + vp.name)

			send("writing to a sensor", "tank-1", "level", "5")
			o = b.outcome("the failure by the form", form, "cannot be written")
			if o.Role != "alert" || !o.Error || !strings.Contains(o.Text, "✗") || !o.InView || o.Top {
				t.Errorf("a failed command's outcome = %+v, want an alert drawn as an error with a ✗, in view, and no note at the top", o)
			}
			b.shot("outcome-failed-" + vp.name)

			s.expect("POST", "/api/v1/mode", "admin", `{"mode":"observe","reason":"looking only"}`, 200, `"name":"observe"`)
			send("opening the valve under observe", "valve-1", "open", "true")
			o = b.outcome("the refusal by the form", form, "mode observe does not permit it")
			if o.Role != "alert" || !o.Error || !strings.Contains(o.Text, "✗ valve-1.open → ON: refused") || !o.InView || o.Top {
				t.Errorf("a refused command's outcome = %+v, want an alert drawn as an error with a ✗, in view, and no note at the top", o)
			}
			b.shot("outcome-refused-" + vp.name)
			// In the dark scheme too, a refusal is drawn as an error.
			b.setScheme("dark")
			eval[bool](b, `document.querySelector("form.command p.outcome").remove(), true`)
			send("opening the valve in the dark", "valve-1", "open", "true")
			if o = b.outcome("the refusal in the dark", form, "mode observe does not permit it"); !o.Error || !o.InView {
				t.Errorf("a refused command's outcome in the dark scheme = %+v, want it drawn as an error, in view", o)
			}
			b.shot("outcome-refused-dark-" + vp.name)
			b.setScheme("light")

			send("reading again", "tank-1", "level", "")
			if o = b.outcome("the reading again", form, "tank-1.level reads 60"); o.Error || o.Role != "status" {
				t.Errorf("a read after a refusal = %+v, still drawn as an error", o)
			}
		})
	}
}

// TestCancelOutcomeByTheRun cancels a run with its card's Cancel button,
// at desk and at phone size, with enough runs above it that the top of
// the page is out of view: the outcome is shown on the run's card, in
// view, announced, after the button has gone with the run's end.
func TestCancelOutcomeByTheRun(t *testing.T) {
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			s := newSite(t, siteOptions{})
			run := regexp.MustCompile(`run-[0-9a-f]+`).FindString(s.expect("POST", "/api/v1/plans/soak/start", "operator", `{}`, 202, `"plan":"soak"`))
			// Newer runs above it, so that it is far down the page.
			for range 6 {
				s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
			}
			b := newBrowser(t, s.srv.URL)
			b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
			b.login("olga", "/runs")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			button := "#run-" + run + " form button"
			b.do("cancelling", chromedp.ScrollIntoView(chromedp.CSS(button)), chromedp.Click(chromedp.CSS(button)))
			o := b.outcome("the cancel by the run", "#run-"+run+" p.outcome", "Cancelled "+run)
			if o.Role != "status" || o.Error || !o.InView || o.Top {
				t.Errorf("a cancel's outcome = %+v, want a status on the run's card, in view, and no note at the top", o)
			}
			b.poll("the run's end", `document.getElementById("run-`+run+`").textContent.includes("cancelled") && !document.querySelector("#run-`+run+` form")`)
			if !eval[bool](b, `!!document.querySelector("#run-`+run+` p.outcome")`) {
				t.Error("the cancel's outcome went with the Cancel button")
			}
			b.shot("outcome-cancel-" + vp.name)
		})
	}
}

// TestServedScriptRuns opens every console page with the script as the
// gateway sends it (comments, indentation and the spaces around its
// punctuation dropped) and the stylesheets as it sends them: the script
// throws nothing, and it runs (it says the browser's zone, and the page
// goes live).
func TestServedScriptRuns(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := newBrowser(t, s.srv.URL)
	var mu sync.Mutex
	var thrown []string
	b.login("adam", "/")
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if e, ok := ev.(*cdpruntime.EventExceptionThrown); ok {
			what := e.ExceptionDetails.Text
			if x := e.ExceptionDetails.Exception; x != nil {
				what += " " + x.Description
			}
			mu.Lock()
			thrown = append(thrown, what)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, page := range consolePages {
		b.do(page, chromedp.Navigate(b.base+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		b.poll("the script on "+page, `document.getElementById("zone").textContent.startsWith("Times are in your zone") &&
			document.getElementById("link").textContent === "live"`)
		if n := eval[int](b, `document.styleSheets.length`); n < 1 || eval[string](b, `getComputedStyle(document.querySelector("header")).display`) != "flex" {
			t.Errorf("%s: the stylesheet is not applied (%d sheets)", page, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range thrown {
		t.Errorf("the script threw: %s", e)
	}
}

// TestBadOutcomeWithoutScript: without the script, a command the gateway
// refused comes back flagged bad, signed, and the page draws its note as
// an error with a ✗; a read comes back as a plain note with its value.
func TestBadOutcomeWithoutScript(t *testing.T) {
	s := newSite(t, siteOptions{mode: "observe"})
	b := s.browser()
	b.login("olga", "password-1")
	_, _, tok := b.page("/devices")
	for _, tc := range []struct {
		name, value, flag, want string
	}{
		{"refused", "true", "1", `<p class="note error" role="alert">✗ valve-1.open → ON: refused — mode observe does not permit it`},
		{"read", "", "", `<p class="note" role="status">valve-1.open reads OFF.</p>`},
	} {
		resp, err := b.c.PostForm(s.srv.URL+"/commands", url.Values{"_csrf": {tok}, "device": {"valve-1"}, "capability": {"open"}, "value": {tc.value}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if got := loc.Query().Get("bad"); got != tc.flag {
			t.Errorf("%s: the redirect %s says bad=%q, want %q", tc.name, loc, got, tc.flag)
		}
		if _, page, _ := b.page(loc.RequestURI()); !strings.Contains(page, tc.want) {
			t.Errorf("%s: the page does not say %s", tc.name, tc.want)
		}
		// The flag is signed with the note: taken off, the note is not shown.
		q := loc.Query()
		q.Del("bad")
		if _, page, _ := b.page(loc.Path + "?" + q.Encode()); tc.flag != "" && strings.Contains(page, "refused — mode observe") {
			t.Errorf("%s: a bad note shown without its flag", tc.name)
		}
	}
}

var (
	valveForm = regexp.MustCompile(`(?s)<form method="post" action="(/commands\?device=valve-1&amp;capability=open)" class="control">(.*?)</form>`)
	formCSRF  = regexp.MustCompile(`<input type="hidden" name="_csrf" value="([^"]+)">`)
)

// TestCardFormWithoutScriptOrFetchMetadata: a browser that sends no
// Sec-Fetch-Site (this client) is given the session's CSRF token in every
// card's form, and the form, posted as a browser without the script
// posts it (its action, its fields, the button tapped), commands.
func TestCardFormWithoutScriptOrFetchMetadata(t *testing.T) {
	s := newSite(t, siteOptions{mode: "observe"})
	b := s.browser()
	b.login("olga", "password-1")
	_, page, tok := b.page("/devices")
	m := valveForm.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the Devices page has no form for the valve's switch:\n%s", page)
	}
	field := formCSRF.FindStringSubmatch(m[2])
	if field == nil || field[1] != tok {
		t.Fatalf("the valve's form carries the token %v, want the page's %q:\n%s", field, tok, m[2])
	}
	action := strings.ReplaceAll(m[1], "&amp;", "&")
	resp, err := b.c.PostForm(s.srv.URL+action, url.Values{"_csrf": {field[1]}, "value": {"true"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if _, page, _ := b.page(loc.RequestURI()); loc.Path != "/devices" || !strings.Contains(page, "✗ valve-1.open → ON: refused — mode observe does not permit it") {
		t.Errorf("the valve's form = %d to %s, which does not say it was refused", resp.StatusCode, loc)
	}
}

// TestCardFormWithoutScript: with the script off, Chromium (which sends
// Sec-Fetch-Site, so a card's form carries no CSRF token) commands from a
// device card, and the page it is sent back to says what came of it.
func TestCardFormWithoutScript(t *testing.T) {
	s := newSite(t, siteOptions{mode: "observe"})
	b := newBrowser(t, s.srv.URL)
	b.login("olga", "/devices")
	if _, err := chromedp.Call(b.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	b.do("the Devices page without the script", chromedp.Navigate(b.base+"/devices"), chromedp.WaitVisible(chromedp.ID("device-valve-1")))
	if n := eval[int](b, `document.querySelectorAll("#device-valve-1 form.control input[name=_csrf]").length`); n != 0 {
		t.Errorf("Chromium is sent %d CSRF tokens in the valve's form, want none", n)
	}
	b.do("switching the valve on", chromedp.Click(chromedp.CSS(`#device-valve-1 .switch button[value="true"]`)), chromedp.WaitVisible(chromedp.CSS("main > p.note")))
	// The script takes the note out of the address: here it stays.
	if q := eval[string](b, `location.search`); !strings.Contains(q, "note=") {
		t.Errorf("the page came back at ?%s: the script ran", q)
	}
	if text := eval[string](b, `document.querySelector("main > p.note").textContent`); !strings.Contains(text, "valve-1.open → ON: refused — mode observe does not permit it") {
		t.Errorf("the page sent back says %q, not that the valve was refused", text)
	}
}
