package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/shadowgate/shadowgate/drivers/sim"
)

// TestDeviceCardsInWordsWithControls uses the Devices page as an operator
// at the pump would, at desk and at phone size: each capability in words
// with its age, a sparkline of the sensor's hour, a Read now and an
// ON/OFF control whose outcome is shown where it was tapped, going
// through governance (a request that waits, then its act confirmed), and
// the device's own page with its chart and its journal in sentences.
func TestDeviceCardsInWordsWithControls(t *testing.T) {
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			s := newSite(t, siteOptions{})
			for _, level := range []float64{31, 12.5, 47} {
				s.g.Adjust(func(st *sim.State) { st.Level = level })
				s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
			}
			b := newBrowser(t, s.srv.URL)
			b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
			b.login("olga", "/devices")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			tank, valve := `document.getElementById("device-tank-1")`, `document.getElementById("device-valve-1")`
			text := eval[string](b, tank+`.textContent`)
			for _, want := range []string{"level", "47", "read", "3 readings since ", ": min 12.5, max 47"} {
				if !strings.Contains(text, want) {
					t.Errorf("the tank's card does not say %q:\n%s", want, text)
				}
			}
			// Read within a moment, the three share a column: its lowest
			// and highest are drawn.
			if n := eval[int](b, tank+`.querySelector(".spark svg polyline").getAttribute("points").split(" ").length`); n < 2 {
				t.Errorf("the sparkline has %d points, want the readings' low and high", n)
			}

			// Read now: the value, where the button is.
			s.g.Adjust(func(st *sim.State) { st.Level = 61 })
			b.do("reading now", chromedp.Click(chromedp.CSS(`#device-tank-1 form.control button`)))
			b.poll("the reading in place", tank+`.querySelector("p.outcome") !== null && `+tank+`.querySelector("p.outcome").textContent.includes("tank-1.level reads 61")`)

			// ON: the valve asks in supervised; the card says a request waits.
			b.do("switching the valve on", chromedp.Click(chromedp.CSS(`#device-valve-1 .switch button[value="true"]`)))
			b.poll("the request in place", valve+`.querySelector("p.outcome") !== null && `+valve+`.querySelector("p.outcome").textContent.includes("valve-1.open → ON: waiting for approval")`)
			b.poll("the request marker", valve+`.textContent.includes("1 request waiting")`)
			b.poll("the count in the navigation", `document.getElementById("pending-count").textContent.startsWith("1")`)
			id := approvalID.FindStringSubmatch(s.expect("GET", "/api/v1/approvals", "viewer", "", 200, "valve-1"))[1]
			s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"approve","device":"valve-1","capability":"open","value":true}`, 200, "approved")
			b.poll("the valve on, confirmed", valve+`.textContent.includes("✓ confirmed") && `+valve+`.querySelector('.switch button[value="true"]').getAttribute("aria-pressed") === "true"`)
			if strings.Contains(eval[string](b, valve+`.textContent`), "request waiting") {
				t.Error("the valve's card still says a request waits after it was answered")
			}
			b.shot("devices-controls-" + vp.name)

			// The device's own page: the longer chart and its journal.
			b.do("the tank's page", chromedp.Navigate(s.srv.URL+"/devices/tank-1?hours=1"))
			b.poll("the chart", `document.querySelector("#device-tank-1 .spark svg polyline") !== null`)
			if h := eval[float64](b, `document.querySelector("#device-tank-1 .spark svg").getBoundingClientRect().height`); h < 120 {
				t.Errorf("the device page's chart is %v px high", h)
			}
			if text := eval[string](b, `document.getElementById("main").textContent`); !strings.Contains(text, "readings since ") || !strings.Contains(text, ": min 12.5, max 61") {
				t.Errorf("the tank's page does not chart its readings from 12.5 to 61:\n%s", text)
			}
			// It follows the journal like every page.
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			s.g.Adjust(func(st *sim.State) { st.Level = 33.5 })
			s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
			b.poll("the new level, live", `document.querySelector("#device-tank-1 .cap-value").textContent.includes("33.5")`)
			b.shot("device-page-" + vp.name)
		})
	}
}

// TestViewerHasNoControls: a viewer sees the state and no control.
func TestViewerHasNoControls(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser()
	b.login("vera", "password-1")
	_, page, _ := b.page("/devices")
	if strings.Contains(page, `class="control"`) || !strings.Contains(page, `id="device-valve-1"`) {
		t.Errorf("a viewer's Devices page has controls, or no valve:\n%s", page)
	}
	b = s.browser()
	b.login("olga", "password-1")
	_, page, _ = b.page("/devices")
	if n := strings.Count(page, `class="control"`); n != 2 {
		t.Errorf("an operator's Devices page has %d controls, want the tank's Read now and the valve's switch", n)
	}
}

// TestDevicePageBadInput: an unknown device and a window not offered are
// clear errors that name what was wrong.
func TestDevicePageBadInput(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser()
	b.login("vera", "password-1")
	for path, want := range map[string]string{
		"/devices/pump-9":         "no device pump-9 is known and online",
		"/devices/tank-1?hours=":  "",
		"/devices/tank-1?hours=7": `query &#34;hours&#34;: want 1, 6 or 24, not &#34;7&#34;`,
		"/devices/tank-1?hours=x": `query &#34;hours&#34;: want 1, 6 or 24`,
	} {
		code, page, _ := b.page(path)
		if want == "" {
			if code != 200 {
				t.Errorf("%s = %d", path, code)
			}
			continue
		}
		if code < 400 || !strings.Contains(page, want) {
			t.Errorf("%s = %d, want an error saying %q:\n%s", path, code, want, page)
		}
	}
}

// TestTimesInTheBrowsersZone: a person in Tokyo reads the gateway's
// times in Tokyo's zone, the date given when it is not today, and the
// page says which zone it uses.
func TestTimesInTheBrowsersZone(t *testing.T) {
	s := newSite(t, siteOptions{})
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
	b := newBrowser(t, s.srv.URL)
	if _, err := chromedp.Call(b.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"}); err != nil {
		t.Fatal(err)
	}
	b.login("vera", "/runs")
	first := `document.querySelector("time[datetime]")`
	b.poll("a time", first+` !== null`)
	at, err := time.Parse(time.RFC3339, eval[string](b, first+`.getAttribute("datetime")`))
	if err != nil {
		t.Fatal(err)
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no zone database:", err)
	}
	shown := eval[string](b, first+`.textContent`)
	if want := at.In(tokyo).Format("15:04:05"); !strings.Contains(shown, want) {
		t.Errorf("a time at %s is shown as %q, want Tokyo's %s", at, shown, want)
	}
	if strings.Contains(shown, "UTC") {
		t.Errorf("a time is shown in the gateway's zone: %q", shown)
	}
	if zone := eval[string](b, `document.getElementById("zone").textContent`); !strings.Contains(zone, "Asia/Tokyo") {
		t.Errorf("the page says %q of its zone", zone)
	}
}

// TestDevicePageTellsMoreThanReadings: a device read often still shows
// what else the journal says of it, a request that waits among them.
func TestDevicePageTellsMoreThanReadings(t *testing.T) {
	s := newSite(t, siteOptions{})
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval")
	for range 40 {
		s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open"}`, 200, "")
	}
	b := s.browser()
	b.login("vera", "password-1")
	_, page, _ := b.page("/devices/valve-1")
	if strings.Contains(page, "Nothing yet but readings") || !strings.Contains(page, "asked valve-1.open → true") {
		t.Errorf("the valve's page hides its request behind its readings:\n%s", page)
	}
}

// TestErrorOfAFormThatWentAway: a person approves a request another
// answered a moment before; the card goes with the update, and the
// refusal is said at the top of the page, not lost with it.
func TestErrorOfAFormThatWentAway(t *testing.T) {
	s := newSite(t, siteOptions{})
	id := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/commands", "operator",
		`{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval"))[1]
	b := newBrowser(t, s.srv.URL)
	b.login("ann", "/approvals")
	b.poll("the card", `!!document.querySelector("#approval-`+id+` button.approve")`)
	// The page stops hearing the journal, as a page in a pocket would.
	eval[bool](b, `window.dispatchEvent(new Event("pagehide")); true`)
	s.expect("POST", "/api/v1/approvals/"+id, "approver2", `{"decision":"deny","reason":"tank cleaning","device":"valve-1","capability":"open","value":true}`, 200, "denied")
	b.do("approving too late", chromedp.Click(chromedp.CSS("#approval-"+id+" button.approve")))
	b.poll("the refusal at the top", `(document.querySelector("main > p.note.error") || {textContent: ""}).textContent.includes("can no longer be answered")`)
	if eval[bool](b, `!!document.getElementById("approval-`+id+`")`) {
		t.Error("the answered card is still shown as pending")
	}
}

// TestCommandFormErrorNextToItsField: the Devices page's command form,
// outside the live part, keeps what was typed and shows its error next to
// the value.
func TestCommandFormErrorNextToItsField(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := newBrowser(t, s.srv.URL)
	b.login("olga", "/devices")
	b.do("typing a command", chromedp.SendKeys(chromedp.ID("cmd-device"), "valve-1"), chromedp.SendKeys(chromedp.ID("cmd-cap"), "open"),
		chromedp.SendKeys(chromedp.ID("cmd-value"), "maybe"), chromedp.Click(chromedp.CSS("form.command button[type=submit]")))
	b.poll("the error by the value", `document.getElementById("cmd-value").getAttribute("aria-invalid") === "true"`)
	for what, js := range map[string]string{
		"the device typed":  `document.getElementById("cmd-device").value === "valve-1"`,
		"the error's words": `document.getElementById(document.getElementById("cmd-value").getAttribute("aria-describedby")).textContent.includes("want a bool")`,
	} {
		if !eval[bool](b, js) {
			t.Errorf("after a refused command, %s is lost (%s)", what, js)
		}
	}
}
