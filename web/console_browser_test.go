package web

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/store"
)

// The two window sizes every console test runs at: a desk and a phone.
var viewports = []struct {
	name string
	w, h int64
}{{"desk", 1366, 900}, {"phone", 390, 844}}

// consolePages are the pages a person walks through, in the navigation's order.
var consolePages = []string{"/", "/approvals", "/devices", "/devices/tank-1", "/runs", "/journal", "/policy", "/alarms"}

// tlsConsole serves the site's console over TLS, with the server's own
// Run, until the test ends, and returns its base URL.
func (s *site) tlsConsole(t *testing.T) string {
	t.Helper()
	cfg, _ := runtimetest.SelfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := s.web.opts
	o.Listener, o.TLS, o.Metrics = ln, cfg, nil
	srv, err := New(s.eng, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return "https://" + ln.Addr().String()
}

// login logs the browser in as user and waits for the page's live link.
func (b *browserSession) login(user, next string) {
	b.t.Helper()
	b.do("logging in as "+user, chromedp.Navigate(b.base+"/login?next="+next), chromedp.WaitVisible(chromedp.ID("user")),
		chromedp.SendKeys(chromedp.ID("user"), user), chromedp.SendKeys(chromedp.ID("password"), "password-1"),
		chromedp.Submit(chromedp.ID("password")), chromedp.WaitVisible(chromedp.ID("link")))
}

// TestEightTabsNeverStall opens eight console tabs, half at desk size and
// half at phone size, and walks each through every page twice, all at
// once: over TLS, where the console speaks HTTP/2 and every stream shares
// one connection, and over plain HTTP/1.1, where a browser keeps six
// connections a host and the tabs share one event stream. A stream a
// tab, kept open, left the seventh tab's page waiting for a connection.
// Every load must complete, and its page be live, well before a stalled
// connection would give up.
func TestEightTabsNeverStall(t *testing.T) {
	for _, tc := range []struct {
		name, proto string
		tls         bool
	}{{"tls", "h2", true}, {"plain", "http/1.1", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t, siteOptions{mode: "interlocked"})
			base := s.srv.URL
			if tc.tls {
				base = s.tlsConsole(t)
			}
			b := newBrowser(t, base, chromedp.Flag("ignore-certificate-errors", true))
			b.login("olga", "/")
			if proto := eval[string](b, `performance.getEntriesByType("navigation")[0].nextHopProtocol`); proto != tc.proto {
				t.Errorf("the console is served as %q, want %s", proto, tc.proto)
			}
			eightTabs(t, b)
		})
	}
}

// eightTabs walks eight tabs of the browser through every page twice, at
// once, and fails on a load or a live link that does not complete.
func eightTabs(t *testing.T, b *browserSession) {
	t.Helper()
	const tabs = 8
	errs := make(chan error, tabs)
	var wg sync.WaitGroup
	for i := range tabs {
		vp := viewports[i%len(viewports)]
		ctx, cancel := chromedp.NewContext(b.ctx)
		t.Cleanup(cancel)
		wg.Go(func() {
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.w, vp.h)); err != nil {
				errs <- fmt.Errorf("tab %d: %v", i, err)
				return
			}
			for round := range 2 {
				for _, page := range consolePages {
					// A stalled load waits about a minute for a connection:
					// a bound well under that tells a stall from a slow machine.
					lctx, lcancel := context.WithTimeout(ctx, 25*time.Second)
					err := chromedp.Do(lctx, chromedp.Navigate(b.base+page))
					if err == nil {
						err = chromedp.Do(lctx, chromedp.WaitVisible(chromedp.CSS("main h1")))
					}
					if err == nil {
						_, err = chromedp.Run(lctx, chromedp.Poll[bool](`document.readyState === "complete" &&
							document.getElementById("link").textContent === "live"`))
					}
					lcancel()
					if err != nil {
						wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
						where, _ := chromedp.Run(wctx, chromedp.Evaluate[string](`location.href + " " + document.readyState + " " + (document.getElementById("link") || {}).textContent`))
						wcancel()
						errs <- fmt.Errorf("tab %d (%s), round %d, %s: the page or its stream did not complete (%s): %v", i, vp.name, round+1, page, where, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLiveUpdatesKeepWhatWasTyped answers nothing, but chooses a rule's
// duration, ticks "any value", types a reason and moves the keyboard to a
// button on a pending request's card; then the page is updated live (a
// new request comes, the tank's level changes). The card, its inputs and
// the focus stay as the person left them, the new request is added, and
// only it is announced to a screen reader, at desk and at phone size.
func TestLiveUpdatesKeepWhatWasTyped(t *testing.T) {
	br := sharedBrowser(t)
	for _, vp := range looks {
		t.Run(vp.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{})
			b := br.tab(t, s.srv.URL, vp)
			first := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/commands", "operator",
				`{"device":"valve-1","capability":"open","value":true,"reason":"first"}`, 202, "pending_approval"))[1]
			b.login("ann", "/approvals")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			b.checkScheme(vp.name, vp.scheme)
			card := `document.getElementById("approval-` + first + `")`
			if eval[bool](b, `document.getElementById("live").hasAttribute("aria-live")`) {
				t.Error("the whole live part is an aria-live region: every update is read out")
			}
			b.do("choosing and typing",
				chromedp.Click(chromedp.CSS(`#approval-`+first+` details.rule-offer summary`)),
				chromedp.SetValue(chromedp.ID("for-"+first), "8h"),
				chromedp.Click(chromedp.CSS(`#approval-`+first+` input[name="rule_any_value"]`)),
				chromedp.SendKeys(chromedp.ID("reason-"+first), "tank checked by hand"))
			eval[bool](b, card+`.kept = true; `+card+`.querySelector('button[value="approve_and_rule"]').focus(); true`)

			// Live updates: a new request, and a reading its interlock shows.
			second := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/mode", "operator",
				`{"mode":"maintenance","reason":"second"}`, 202, `"status":"pending"`))[1]
			b.poll("the new request", `!!document.getElementById("approval-`+second+`")`)
			s.g.Adjust(func(st *sim.State) { st.Level = 42.5 })
			s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
			b.poll("the interlock's new reading", card+`.querySelector(".conditions").textContent.includes("reads 42.5")`)
			b.shot("live-kept-" + vp.name)
			for what, js := range map[string]string{
				"the same card":       card + `.kept === true`,
				"the rule's duration": `document.getElementById("for-` + first + `").value === "8h"`,
				"any value":           card + `.querySelector('input[name="rule_any_value"]').checked`,
				"the reason":          `document.getElementById("reason-` + first + `").value === "tank checked by hand"`,
				"the opened rule":     card + `.querySelector("details.rule-offer").open`,
				"the focus":           `document.activeElement === ` + card + `.querySelector('button[value="approve_and_rule"]')`,
			} {
				if !eval[bool](b, js) {
					t.Errorf("after a live update, %s is lost (%s)", what, js)
				}
			}
			b.poll("the announcement", `document.getElementById("announce").textContent.includes("change the mode to maintenance")`)
			if said := eval[string](b, `document.getElementById("announce").textContent`); strings.Contains(said, "valve-1") {
				t.Errorf("the request that was there is announced again: %q", said)
			}
		})
	}
}

// TestApprovedCardTellsTheAct approves two requests on the Approvals page:
// one that acts and is confirmed, and one that the mode, changed to
// observe while it waited, refuses at the act. Each answered card says
// what came of the act, not only "approved", at desk and phone size.
func TestApprovedCardTellsTheAct(t *testing.T) {
	br := sharedBrowser(t)
	for _, vp := range looks {
		t.Run(vp.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{})
			b := br.tab(t, s.srv.URL, vp)
			b.login("ann", "/approvals")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			b.checkScheme(vp.name, vp.scheme)
			approve := func(value string) string {
				t.Helper()
				id := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/commands", "operator",
					`{"device":"valve-1","capability":"open","value":`+value+`}`, 202, "pending_approval"))[1]
				b.poll("the request", `!!document.querySelector("#approval-`+id+` button.approve")`)
				return id
			}
			answered := func(id string) string {
				return `(document.getElementById("answered-` + id + `") || {textContent: ""}).textContent`
			}

			ok := approve("true")
			b.do("approving", chromedp.Click(chromedp.CSS("#approval-"+ok+" button.approve")))
			b.poll("the confirmed act", answered(ok)+`.includes("approved, acted and confirmed")`)

			refused := approve("false")
			if text := eval[string](b, `document.getElementById("approval-`+refused+`").textContent`); !strings.Contains(text, "approved now, it would act") {
				t.Errorf("the card of a request its act would allow does not say so:\n%s", text)
			}
			s.expect("POST", "/api/v1/mode", "admin", `{"mode":"observe","reason":"looking only"}`, 200, `"name":"observe"`)
			// The pending card is judged again, before anyone approves it.
			b.poll("the foresight", `document.querySelector("#approval-`+refused+` .foresight.refuse") !== null &&
				document.querySelector("#approval-`+refused+` .foresight.refuse").textContent.includes("mode observe does not permit it")`)
			b.shot("foreseen-refused-" + vp.name)
			b.do("approving under observe", chromedp.Click(chromedp.CSS("#approval-"+refused+" button.approve")))
			b.poll("the refusal", answered(refused)+`.includes("approved, refused at the act")`)
			b.shot("refused-at-the-act-" + vp.name)
			text := eval[string](b, answered(refused))
			for _, want := range []string{"✗ The act: refused at the act", "mode observe does not permit it"} {
				if !strings.Contains(text, want) {
					t.Errorf("the card of an act refused at the act does not say %q:\n%s", want, text)
				}
			}
			if strings.Contains(text, "acted and") {
				t.Errorf("the card of an act refused at the act says it acted:\n%s", text)
			}
		})
	}
}

// TestFormErrorNextToItsField denies a request without a reason, at desk
// and at phone size: the error is drawn next to the reason field, in
// view, says it is an error in words and in its style, and the field is
// marked invalid and described by it for assistive technology.
func TestFormErrorNextToItsField(t *testing.T) {
	br := sharedBrowser(t)
	for _, vp := range looks {
		t.Run(vp.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{})
			b := br.tab(t, s.srv.URL, vp)
			s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval")
			// The lower of two cards, so that the top of the page is out of view on a phone.
			id := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/mode", "operator",
				`{"mode":"maintenance","reason":"fitter on site"}`, 202, `"status":"pending"`))[1]
			b.login("adam", "/approvals")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			b.checkScheme(vp.name, vp.scheme)
			b.do("denying without a reason", chromedp.Click(chromedp.CSS("#approval-"+id+" button.deny")))
			reason := `document.getElementById("reason-` + id + `")`
			b.poll("the error", reason+`.getAttribute("aria-invalid") === "true"`)
			b.shot("deny-without-reason-" + vp.name)
			for what, js := range map[string]string{
				"described by an alert that says why": `(() => { const e = document.getElementById(` + reason + `.getAttribute("aria-describedby"));
					return !!e && e.getAttribute("role") === "alert" && e.textContent.includes("a denial says why") && e.textContent.startsWith("Not done") })()`,
				"next to the field": `(() => { const e = document.getElementById(` + reason + `.getAttribute("aria-describedby"));
					return e.closest("article") === document.getElementById("approval-` + id + `") &&
						Math.abs(e.getBoundingClientRect().top - ` + reason + `.getBoundingClientRect().bottom) < 40 })()`,
				"in the viewport": `(() => { const r = document.getElementById(` + reason + `.getAttribute("aria-describedby")).getBoundingClientRect();
					return r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth })()`,
				// In the colour of a bad outcome, which the dark scheme lightens
				// (the Deny button's fill stays dark).
				"styled as an error": `(() => { const e = document.getElementById(` + reason + `.getAttribute("aria-describedby"));
					const bad = document.body.appendChild(document.createElement("span")); bad.className = "bad";
					const want = getComputedStyle(bad).color; bad.remove(); const st = getComputedStyle(e);
					return st.color === want && st.borderLeftColor === want && want !== getComputedStyle(document.body).color })()`,
			} {
				if !eval[bool](b, js) {
					t.Errorf("the error of a deny without a reason is not %s", what)
				}
			}
			if a, ok := s.eng.Approval(id); !ok || a.Status != "pending" {
				t.Errorf("a deny without a reason answered the request: %+v", a)
			}
			// A live update leaves the error where it is.
			s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
			b.do("typing a reason and denying", chromedp.SendKeys(chromedp.ID("reason-"+id), "not today"),
				chromedp.Click(chromedp.CSS("#approval-"+id+" button.deny")))
			b.poll("the denial", `(document.getElementById("answered-`+id+`") || {textContent: ""}).textContent.includes("denied")`)
		})
	}
}

// TestStreamEndsWithItsSession opens event streams as a logged-in person
// would: one ends when the session logs out, another when the session
// expires, each with a session_ended event, and a stream of an ended
// session is refused.
func TestStreamEndsWithItsSession(t *testing.T) {
	s := newSite(t, siteOptions{})
	now := time.Now()
	for cookie, ttl := range map[string]time.Duration{"ck-logout": time.Hour, "ck-expiry": time.Second} {
		if err := s.j.Sessions().Put(cookie, store.Session{User: "ann", Role: "approver", Created: now, Expires: now.Add(ttl)}); err != nil {
			t.Fatal(err)
		}
	}
	open := func(cookie string) (*http.Response, <-chan string) {
		t.Helper()
		return openStream(context.Background(), t, s.srv.URL+"/api/v1/events/stream",
			func(r *http.Request) { r.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie}) })
	}
	ends := func(what string, lines <-chan string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		saw := false
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					if !saw {
						t.Errorf("%s: the stream closed without a session_ended event", what)
					}
					return
				}
				saw = saw || l == "event: session_ended"
			case <-deadline:
				t.Fatalf("%s: the stream is still open (session_ended seen: %v)", what, saw)
			}
		}
	}
	resp, lines := open("ck-logout")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a stream of a live session = %d", resp.StatusCode)
	}
	_, expiring := open("ck-expiry")
	req, _ := http.NewRequest("POST", s.srv.URL+"/logout", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: "ck-logout"})
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	out, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	if out.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout = %d", out.StatusCode)
	}
	ends("after logout", lines)
	ends("after expiry", expiring)
	if resp, _ := open("ck-logout"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a stream of a session logged out = %d, want 401", resp.StatusCode)
	}
}

// TestSessionEndGoesToTheLogin lets a session expire on the Approvals
// page, and logs out in another tab of the same browser: each time the
// page says that the session ended, never draws the login inside itself,
// and goes to the login with next set, which brings the person back. At
// desk and phone size.
func TestSessionEndGoesToTheLogin(t *testing.T) {
	ended := func(b *browserSession, vp, how string) {
		t.Helper()
		b.poll("the page to say the session ended", `(document.querySelector(".session-ended") || {textContent: ""}).textContent.includes("session has ended") &&
			document.getElementById("link").textContent === "session ended" && !document.querySelector("#live #password")`)
		b.shot("session-ended-" + how + "-" + vp)
		b.do("the login", chromedp.WaitVisible(chromedp.ID("user")))
		if at := eval[string](b, `location.pathname + " " + new URLSearchParams(location.search).get("next")`); at != "/login /approvals" {
			t.Errorf("the page went to %q, want the login with next=/approvals", at)
		}
		b.do("logging in again", chromedp.SendKeys(chromedp.ID("user"), "ann"),
			chromedp.SendKeys(chromedp.ID("password"), "password-1"), chromedp.Submit(chromedp.ID("password")),
			chromedp.WaitVisible(chromedp.ID("link")))
		if path := eval[string](b, `location.pathname`); path != "/approvals" {
			t.Errorf("after logging in again: %s, want /approvals", path)
		}
	}
	br := sharedBrowser(t)
	for _, vp := range looks {
		t.Run(vp.name+"/expiry", func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{options: func(o *Options) { o.SessionTTL = 4 * time.Second }})
			s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval")
			b := br.tab(t, s.srv.URL, vp)
			// A note of a form answered before is said once, and is not
			// part of the way back.
			b.login("ann", "/approvals%3Fnote%3DApproval%2Bapproved.%26sig%3D00")
			b.poll("the live link", `document.getElementById("link").textContent === "live" && location.search === ""`)
			ended(b, vp.name, "expiry")
		})
		t.Run(vp.name+"/logout", func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{})
			b := br.tab(t, s.srv.URL, vp)
			b.login("ann", "/approvals")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			b.checkScheme(vp.name, vp.scheme)
			other, cancel := chromedp.NewContext(b.ctx)
			defer cancel()
			if err := chromedp.Do(other, chromedp.Navigate(b.base+"/devices"), chromedp.WaitVisible(chromedp.CSS("form.logout button")),
				chromedp.Click(chromedp.CSS("form.logout button")), chromedp.WaitVisible(chromedp.ID("user"))); err != nil {
				t.Fatalf("logging out in another tab: %v", err)
			}
			ended(b, vp.name, "logout")
		})
	}
}

// TestLiveUpdatesKeepAnOpenForm opens an alarm's shelving form and types
// a reason; the alarm is raised again meanwhile, and the live update
// counts it without closing the form or losing the reason.
func TestLiveUpdatesKeepAnOpenForm(t *testing.T) {
	br := sharedBrowser(t)
	for _, vp := range looks {
		t.Run(vp.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{mode: "interlocked"})
			s.g.SetFault("valve-1", sim.Fault{Stuck: true})
			s.raise(1)
			b := br.tab(t, s.srv.URL, vp)
			b.login("adam", "/alarms")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			b.checkScheme(vp.name, vp.scheme)
			card := `document.getElementById("alarm-` + stuckAlarm + `")`
			b.do("opening the shelving form", chromedp.Click(chromedp.CSS(`article.alarm details.shelve summary`)),
				chromedp.SendKeys(chromedp.CSS(`article.alarm details.shelve input[name="reason"]`), "fitter on the way"))
			s.raise(1)
			b.poll("the second count", card+`.textContent.includes("2 times")`)
			if !eval[bool](b, card+`.querySelector("details.shelve").open && `+card+`.querySelector('details.shelve input[name="reason"]').value === "fitter on the way"`) {
				b.shot("shelve-form-closed-" + vp.name)
				t.Error("a live update closed the shelving form a person had opened, or lost its reason")
			}
		})
	}
}

// TestTabsShareOneStream opens two tabs, one at desk size and one at phone
// size: the first holds the browser's event stream and the second, which
// opens none, is updated live from it; when the first tab is closed, the
// second takes the stream over and is still updated live.
func TestTabsShareOneStream(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := newBrowser(t, s.srv.URL)
	b.login("ann", "/devices")
	b.do("leaving the console in the browser's first tab", chromedp.Navigate("about:blank"))
	tab := func(w, h int64, page string) (*browserSession, context.CancelFunc) {
		ctx, cancel := chromedp.NewContext(b.ctx)
		t.Cleanup(cancel)
		tb := &browserSession{t: t, ctx: ctx, base: b.base, dir: b.dir}
		tb.do("a tab on "+page, chromedp.EmulateViewport(w, h), chromedp.Navigate(b.base+page), chromedp.WaitVisible(chromedp.ID("link")))
		tb.poll("its live link", `document.getElementById("link").textContent === "live"`)
		return tb, cancel
	}
	_, closeFirst := tab(1366, 900, "/devices")
	second, _ := tab(390, 844, "/approvals")
	// The stream of the login's page may take a moment to be seen closed.
	streams := func(when string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); s.web.openStreams() != 1; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s, %d event streams are open, want 1", when, s.web.openStreams())
			}
		}
	}
	streams("with two tabs open")
	first := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/commands", "operator",
		`{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval"))[1]
	second.poll("the request, passed on by the first tab", `!!document.getElementById("approval-`+first+`")`)

	// The first tab is closed: the second takes the stream over.
	closeFirst()
	second.poll("the second tab's live link", `document.getElementById("link").textContent === "live"`)
	streams("after the first tab closed")
	next := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/mode", "operator",
		`{"mode":"maintenance","reason":"fitter on site"}`, 202, `"status":"pending"`))[1]
	second.poll("the next request, from its own stream", `!!document.getElementById("approval-`+next+`")`)
}

// openStreams counts the event streams of people's sessions.
func (s *Server) openStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, chs := range s.ends {
		n += len(chs)
	}
	return n
}

// TestWordsInTheBrowser reads, in Chromium at desk and at phone size, the
// words a newcomer's trial found wrong: one MQTT client is "1 client", a
// rule made by approving says which value it allows, an answer given
// with a rule is said in words and by the person's name, and a read from
// the device form says the value it read.
func TestWordsInTheBrowser(t *testing.T) {
	s := newSite(t, siteOptions{options: func(o *Options) {
		o.MQTTStats = func() MQTTStats { return MQTTStats{Clients: 1, DeniedPublishes: 1, FailedLogins: 1} }
	}})
	id := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/commands", "operator",
		`{"device":"valve-1","capability":"open","value":true,"reason":"fill"}`, 202, "pending_approval"))[1]
	b := newBrowser(t, s.srv.URL)
	b.login("adam", "/approvals")
	b.poll("the request", `!!document.querySelector("#approval-`+id+` details.rule-offer")`)
	b.do("approving with a rule", chromedp.Click(chromedp.CSS(`#approval-`+id+` details.rule-offer summary`)),
		chromedp.Click(chromedp.CSS(`#approval-`+id+` button[value="approve_and_rule"]`)))
	answered := `(document.getElementById("answered-` + id + `") || {textContent: ""}).textContent`
	b.poll("the answered card", answered+`.includes("Approved with a rule by adam, in the console")`)
	for i, vp := range viewports {
		b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
		text := func(page string) string {
			b.do(page+" at "+vp.name, chromedp.Navigate(b.base+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
			return eval[string](b, `document.getElementById("main").innerText`)
		}
		checks := []struct{ page, want, not string }{
			{"/", "1 client connected", "1 clients"},
			{"/", "1 publish denied, 1 failed login", "1 publishes"},
			{"/approvals", "Approved with a rule by adam, in the console", "approve_and_rule"},
			{"/approvals", "Recently answered", "console:adam"},
			{"/policy", "to set valve-1.open to true", "console:"},
		}
		for _, c := range checks {
			got := text(c.page)
			if !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
				t.Errorf("%s at %s: want %q and not %q in:\n%s", c.page, vp.name, c.want, c.not, got)
			}
		}
		// A read from the device form says what it read, where it was sent.
		level := 40.5 + float64(i)
		s.g.Adjust(func(st *sim.State) { st.Level = level })
		b.do("reading from the device form", chromedp.Navigate(b.base+"/devices"), chromedp.WaitVisible(chromedp.ID("cmd-device")))
		b.poll("the live link", `document.getElementById("link").textContent === "live"`)
		b.do("sending a read", chromedp.SendKeys(chromedp.ID("cmd-device"), "tank-1"), chromedp.SendKeys(chromedp.ID("cmd-cap"), "level"),
			chromedp.Click(chromedp.CSS(`#cmd-reason ~ button[type="submit"]`)))
		want := fmt.Sprintf("tank-1.level reads %v", level)
		b.poll("the value read", `Array.from(document.querySelectorAll("p.outcome")).some(p => p.textContent.includes("`+want+`"))`)
		b.shot("words-" + vp.name)
	}
}

// TestWaitingCardJudgedAgain keeps a request waiting on the Approvals page
// while what its act would meet changes, at both sizes in both schemes:
// the tank's level falls under the valve's interlock, then rises again;
// and a rule that forbids it comes into force (no API adds a rule, so it
// comes as a configuration put in force again, as a reload does), then
// goes. Each time the card, judged again, says that the act would now be
// refused and why, and then that it would act.
func TestWaitingCardJudgedAgain(t *testing.T) {
	br := sharedBrowser(t)
	for _, vp := range looks {
		t.Run(vp.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, siteOptions{})
			s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
			id := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/commands", "operator",
				`{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval"))[1]
			b := br.tab(t, s.srv.URL, vp)
			b.login("ann", "/approvals")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			b.checkScheme(vp.name, vp.scheme)
			card := `document.getElementById("approval-` + id + `")`
			acts := func(what string) {
				t.Helper()
				b.poll(what, card+` !== null && !`+card+`.querySelector(".foresight.refuse") && `+card+`.textContent.includes("approved now, it would act")`)
			}
			refused := func(what, why string) {
				t.Helper()
				b.poll(what, card+` !== null && (`+card+`.querySelector(".foresight.refuse") || {textContent: ""}).textContent.includes("this would be refused at the act") &&
					`+card+`.querySelector(".foresight.refuse").textContent.includes("`+why+`")`)
			}
			acts("the card to say it would act")

			t.Run("interlock", func(t *testing.T) {
				b.t = t
				// The tank falls under the interlock, then fills again.
				for _, level := range []float64{5, 60} {
					s.g.Adjust(func(st *sim.State) { st.Level = level })
					s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
					if level < 10 {
						refused("the card to say the interlock breaks", "tank-1.level")
						b.shot("judged-again-interlock-" + vp.name)
					} else {
						acts("the card to say it would act again, the tank full")
					}
				}
				if a, _ := s.eng.Approval(id); a.Status != runtime.ApprovalPending {
					t.Errorf("the request was %s, want it still waiting", a.Status)
				}
			})

			t.Run("rule", func(t *testing.T) {
				b.t = t
				// A rule forbids it, then is gone.
				forbid := governance.Rule{ID: "valve-under-repair", Principal: "*", Device: "valve-1", Capability: "open",
					Decision: governance.DecideDeny, Reason: "valve under repair"}
				s.reload(forbid)
				if f, _ := s.eng.Foresee(id); !f.Refuse || !strings.Contains(f.Why, "valve-under-repair") {
					t.Fatalf("the foresight with a deny rule in force = %+v, want refused by it", f)
				}
				refused("the card to say the rule forbids it", "valve-under-repair")
				b.shot("judged-again-rule-" + vp.name)
				s.reload()
				acts("the card to say it would act again, the rule gone")
			})
		})
	}
}

// reload puts the site's configuration in force again, as a reload of its
// file does, with rules as its configuration's rules.
func (s *site) reload(rules ...governance.Rule) {
	s.t.Helper()
	c := runtime.Config{Rules: rules, Plans: s.eng.Plans(), Policies: map[string]runtime.CapPolicy{}}
	shipped := governance.ShippedModes()
	for _, m := range s.eng.Modes() {
		if _, ok := shipped[m.Name]; !ok {
			c.Modes = append(c.Modes, m)
		}
	}
	for _, d := range s.eng.Devices() {
		for _, cp := range d.Capabilities {
			if p, ok := s.eng.Policy(d.ID, cp.Name); ok {
				c.Policies[d.ID+"."+cp.Name] = p
			}
		}
	}
	if err := s.eng.Reload(context.Background(), c, runtime.ConfigChangedBody{File: "site.yaml", By: "api:admin", Changes: []string{"rules"}}); err != nil {
		s.t.Fatalf("reloading the configuration: %v", err)
	}
}
