package web

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// maxPageWeight bounds what one console page costs uncompressed: its
// HTML with the CSS and JS it loads, without the journal's data.
const maxPageWeight = 30 * 1024

var (
	pageAssets  = regexp.MustCompile(`<(?:link rel="stylesheet" href|script src)="(/[^"]+)"`)
	journalRows = regexp.MustCompile(`(?s)<tbody>.*</tbody>`)
	// runCards are the runs of the Runs page: the journal's data too, ten
	// a page.
	runCards = regexp.MustCompile(`(?s)<ol class="runs">.*</ol>`)
)

// TestPageWeight checks that every console page, with its stylesheet and
// script, is at most 30 KB uncompressed, and logs each page's figure and
// what it costs over the wire with gzip. The journal page is weighed
// without its rows and the Runs page without its runs, which are the journal's data.
func TestPageWeight(t *testing.T) {
	s := newSite(t, siteOptions{})
	// A pending request, so the Approvals page shows a card with its forms.
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"reason":"weighed"}`, 202, "pending_approval")
	// A screenful of runs, as a day's work leaves them.
	for range 24 {
		s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level","reason":"weighed"}`, 200, "")
	}
	b := s.browser()
	// fetch returns the body and its size on the wire: asked with gzip,
	// the transport leaves the body compressed.
	fetch := func(path string, gz bool) (plain []byte, wire int) {
		t.Helper()
		req, _ := http.NewRequest("GET", s.srv.URL+path, nil)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", path, resp.StatusCode)
		}
		return body, len(body)
	}
	weigh := func(page string) {
		t.Helper()
		html, _ := fetch(page, false)
		_, htmlWire := fetch(page, true)
		switch page {
		case "/journal":
			html = journalRows.ReplaceAll(html, []byte("<tbody></tbody>"))
		case "/runs":
			if !runCards.Match(html) {
				t.Fatal("/runs has no list of runs to leave out")
			}
			html = runCards.ReplaceAll(html, []byte(`<ol class="runs"></ol>`))
		}
		total, wire := len(html), htmlWire
		parts := []string{page + " " + kb(len(html))}
		for _, m := range pageAssets.FindAllSubmatch(html, -1) {
			asset, _ := fetch(string(m[1]), false)
			_, aw := fetch(string(m[1]), true)
			total += len(asset)
			wire += aw
			parts = append(parts, string(m[1])+" "+kb(len(asset)))
		}
		if len(parts) < 3 {
			t.Errorf("%s loads %d assets, want the stylesheet and the script", page, len(parts)-1)
		}
		rows := ""
		switch page {
		case "/journal":
			rows = ", its rows included"
		case "/runs":
			rows = ", its ten runs included"
		}
		t.Logf("%-10s %s uncompressed (%s), %s with gzip%s", page, kb(total), strings.Join(parts, " + "), kb(wire), rows)
		if total > maxPageWeight {
			t.Errorf("%s weighs %s uncompressed, over %s", page, kb(total), kb(maxPageWeight))
		}
	}
	weigh("/login")
	if code := b.login("adam", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	for _, page := range []string{"/", "/approvals", "/devices", "/devices/tank-1", "/runs", "/journal", "/policy", "/alarms"} {
		weigh(page)
	}
}

// kb formats a byte count in kilobytes of 1024 bytes.
func kb(n int) string { return fmt.Sprintf("%.1f KB", float64(n)/1024) }
