package web

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/shadowgate/shadowgate/drivers/sim"
)

// TestJournalInABrowser opens every event of the Journal page to its JSON,
// at desk and phone size, in the light and the dark scheme: the JSON
// wraps inside its row, nothing reaches past its container or the
// viewport, every summary is a 44 px tap target, and axe-core finds no
// serious or critical violation. Then it pages back and forth with the
// links, the filter kept.
func TestJournalInABrowser(t *testing.T) {
	s := newSite(t, siteOptions{mode: "interlocked"})
	s.g.SetFault("valve-1", sim.Fault{Stuck: true})
	s.raise(1) // an act contradicted, an alarm with a long message
	s.expect("POST", "/api/v1/mode", "operator", `{"mode":"observe","reason":"`+strings.Repeat("pump-overhaul-", 12)+`"}`, 200, `"name":"observe"`)
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":false}`, 200, `"outcome":"refused"`)
	s.noteLinks(t, 60)
	axe := axeScript(t)
	b := newBrowser(t, s.srv.URL)
	b.login("vera", "/journal")
	dir := screenshotDir(t)
	t.Logf("screenshots go to %s", dir)
	page := "/journal?readings=1"
	for _, vp := range viewports {
		for _, scheme := range schemes {
			where := page + " (" + vp.name + ", " + scheme + ", opened)"
			b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
			b.setScheme(scheme)
			b.do(where, chromedp.Navigate(b.base+page), chromedp.WaitVisible(chromedp.CSS("table.journal details")))
			b.checkScheme(where, scheme)
			n := eval[int](b, `(() => { const ds = document.querySelectorAll("table.journal details"); ds.forEach(d => d.open = true); return ds.length; })()`)
			if n != journalPageSize {
				t.Fatalf("%s: %d events, want %d", where, n, journalPageSize)
			}
			if w := eval[int](b, `Array.from(document.querySelectorAll("table.journal pre")).filter(p => p.scrollWidth > p.clientWidth + 1).length`); w != 0 {
				t.Errorf("%s: %d JSON blocks scroll sideways", where, w)
			}
			if h := eval[int](b, `Array.from(document.querySelectorAll("table.journal pre")).filter(p => p.getBoundingClientRect().height < 40).length`); h != 0 {
				t.Errorf("%s: %d opened events show no JSON", where, h)
			}
			b.lookAt(t, where, "/journal-opened", axe, dir, vp.name, scheme)
		}
	}
	// Older and Newer, the filter kept, the rows in order.
	b.do("the links", chromedp.Navigate(b.base+"/journal?kind=link"), chromedp.WaitVisible(chromedp.CSS(`a[rel="next"]`)))
	first := eval[string](b, `document.querySelector("table.journal tbody tr").id`)
	b.do("Older", chromedp.Click(chromedp.CSS(`a[rel="next"]`)), chromedp.WaitVisible(chromedp.CSS(`a[rel="prev"]`)))
	if u := eval[string](b, `location.search`); !strings.Contains(u, "kind=link") || !strings.Contains(u, "before=") {
		t.Errorf("Older went to %q", u)
	}
	if got := eval[string](b, `document.querySelector("caption").textContent`); !strings.Contains(got, "matching event") {
		t.Errorf("the older page's caption = %q", got)
	}
	b.do("Newer", chromedp.Click(chromedp.CSS(`a[rel="prev"]`)), chromedp.WaitVisible(chromedp.CSS("table.journal tbody tr")))
	if got := eval[string](b, `document.querySelector("table.journal tbody tr").id`); got != first {
		t.Errorf("Newer from Older shows %s first, want %s", got, first)
	}
}
