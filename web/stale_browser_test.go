package web

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
)

// TestReadingAgesTickAndTurnStale polls the tank every second and then
// stops its readings (every read fails), at desk and at phone size, in
// the light and the dark scheme. The page has stopped hearing the
// journal, as a page whose stream is cut, so nothing redraws it: its
// card's "read 0s ago" must count up by itself, and turn to "⚠ stale",
// drawn as a warning, once the reading is older than three polls. The
// page is neither reloaded nor refreshed meanwhile. The age stayed as the
// last event drew it, however old the reading grew.
func TestReadingAgesTickAndTurnStale(t *testing.T) {
	for _, vp := range viewports {
		for _, scheme := range schemes {
			t.Run(vp.name+"-"+scheme, func(t *testing.T) {
				var g *sim.Greenhouse
				s := newSite(t, siteOptions{driver: func(devices.Driver) devices.Driver {
					ds := runtimetest.Greenhouse("gh", "tank-1", "valve-1")
					ds[0].Capabilities[0].Poll = time.Second
					var err error
					if g, err = sim.New(sim.Options{Devices: ds}); err != nil {
						t.Fatal(err)
					}
					return g
				}})
				b := newBrowser(t, s.srv.URL)
				b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
				b.setScheme(scheme)
				b.login("olga", "/devices")
				b.poll("the live link", `document.getElementById("link").textContent === "live"`)
				when := `document.querySelector("#cap-tank-1\\.level .cap-when")`
				b.poll("a fresh reading", when+`.textContent.includes("read ") && !`+when+`.textContent.includes("stale")`)

				// The page hears no more, and the tank is no more read.
				eval[bool](b, `window.kept = true; window.dispatchEvent(new Event("pagehide")); true`)
				fetches := `performance.getEntriesByType("resource").filter(e => e.name.includes("fragment=1")).length`
				time.Sleep(300 * time.Millisecond) // a refresh already under way when the page left ends
				before := eval[int](b, fetches)
				g.SetFault("tank-1", sim.Fault{ReadErr: errors.New("no answer")})
				first := eval[string](b, when+`.textContent`)
				b.poll("the age to count up", when+`.textContent !== `+jsString(first))
				b.poll("the stale mark", when+`.textContent.includes("⚠ stale")`)
				b.shot("stale-" + vp.name + "-" + scheme)
				text := eval[string](b, when+`.textContent`)
				if !strings.Contains(text, "read ") || !strings.Contains(text, "s ago") {
					t.Errorf("the stale reading does not say its age: %q", text)
				}
				if !eval[bool](b, `window.kept === true`) || eval[int](b, fetches) != before {
					t.Error("the page was reloaded or refreshed: the test shows nothing of the script's timer")
				}
				// Drawn as the server draws a stale reading: the warning's colour, bold.
				if !eval[bool](b, `(() => {
					const m = `+when+`.querySelector(".stale"), cs = getComputedStyle(m);
					const p = document.createElement("span");
					p.style.color = getComputedStyle(document.documentElement).getPropertyValue("--warn").trim();
					document.body.appendChild(p);
					const warn = getComputedStyle(p).color;
					p.remove();
					return cs.color === warn && Number(cs.fontWeight) >= 700;
				})()`) {
					t.Error("the stale mark is not drawn as a warning")
				}
			})
		}
	}
}

// jsString quotes s for a script.
func jsString(s string) string {
	return "`" + strings.NewReplacer("`", "\\`", "\\", "\\\\", "${", "\\${").Replace(s) + "`"
}

// TestInterlockAgesTick: a waiting request's interlock says how old its
// reading is, and the age counts up with no event to redraw the page, at
// desk and at phone size. It stayed as the page was drawn.
func TestInterlockAgesTick(t *testing.T) {
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			s := newSite(t, siteOptions{})
			s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
			id := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/commands", "operator",
				`{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval"))[1]
			b := newBrowser(t, s.srv.URL)
			b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
			b.login("ann", "/approvals")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			eval[bool](b, `window.kept = true; window.dispatchEvent(new Event("pagehide")); true`)
			cond := `document.querySelector("#approval-` + id + ` .conditions li")`
			first := eval[string](b, cond+`.textContent`)
			if !strings.Contains(first, "s ago") {
				t.Fatalf("the interlock does not say its reading's age: %q", first)
			}
			b.poll("the interlock's age to count up", cond+`.textContent !== `+jsString(first)+` && `+cond+`.textContent.includes("s ago")`)
			if !eval[bool](b, `window.kept === true`) {
				t.Error("the page was reloaded")
			}
		})
	}
}

// TestAReadingIsDrawnBeforeItIsWritten: with readings written to the
// journal only every hour, the devices page draws a new reading of a
// polled sensor as it is taken, without a reload, and redraws no more
// than once a second.
func TestAReadingIsDrawnBeforeItIsWritten(t *testing.T) {
	var g *sim.Greenhouse
	s := newSite(t, siteOptions{flush: time.Hour, driver: func(devices.Driver) devices.Driver {
		ds := runtimetest.Greenhouse("gh", "tank-1", "valve-1")
		ds[0].Capabilities[0].Poll = 200 * time.Millisecond
		var err error
		if g, err = sim.New(sim.Options{Devices: ds}); err != nil {
			t.Fatal(err)
		}
		return g
	}})
	b := newBrowser(t, s.srv.URL)
	b.login("olga", "/devices")
	b.poll("the live link", `document.getElementById("link").textContent === "live"`)
	eval[bool](b, `window.kept = true; true`)
	fetches := `performance.getEntriesByType("resource").filter(e => e.name.includes("fragment=1")).length`
	before := eval[int](b, fetches)
	start := time.Now()
	g.Adjust(func(st *sim.State) { st.Level = 42.5 })
	value := `document.querySelector("#cap-tank-1\\.level .cap-value").textContent`
	b.poll("the new level drawn", value+`.includes("42.5")`)
	if evs, _ := s.eng.Events(t.Context(), 0, 10_000); slices.ContainsFunc(evs, func(ev runtime.Event) bool {
		return ev.Kind == runtime.KindObserved && strings.Contains(string(ev.Body), "42.5")
	}) {
		t.Fatal("the reading drawn was already written: the test shows nothing")
	}
	time.Sleep(2 * time.Second)
	n, took := eval[int](b, fetches)-before, time.Since(start)
	if !eval[bool](b, `window.kept === true`) {
		t.Fatal("the page was reloaded")
	}
	if limit := int(took/time.Second) + 2; n > limit {
		t.Fatalf("the page fetched itself %d times in %s of readings every 200 ms; at most once a second is %d", n, took.Round(time.Millisecond), limit)
	}
}
