package web

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var pendingCount = regexp.MustCompile(`id="pending-count" class="count( none)?">(\d+)<`)

// TestStatusOnEveryPage: the navigation counts the requests that wait,
// and every page but Approvals has a banner that says they wait; a mode
// that asks nobody is a banner with its end.
func TestStatusOnEveryPage(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser()
	if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	count := func(page string) string {
		t.Helper()
		m := pendingCount.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no count of requests waiting in:\n%s", page)
		}
		return m[1] + m[2]
	}
	_, page, _ := b.page("/devices")
	if got := count(page); got != " none0" {
		t.Errorf("count with nothing waiting = %q, want hidden 0", got)
	}
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval")
	for _, p := range []string{"/", "/devices", "/devices/tank-1", "/runs", "/journal", "/policy", "/alarms", "/approvals"} {
		_, page, _ := b.page(p)
		if got := count(page); got != "1" {
			t.Errorf("%s: count = %q, want 1", p, got)
		}
		if waits := strings.Contains(page, "1 request waits for a person"); waits == (p == "/approvals") {
			t.Errorf("%s: the banner that a request waits is shown = %v", p, waits)
		}
	}
	_, part, _ := b.page("/status?page=devices")
	if got := count(part); got != "1" || !strings.Contains(part, `<div id="banners">`) {
		t.Errorf("the status part = %q:\n%s", got, part)
	}
	if strings.Contains(part, "<html") {
		t.Errorf("the status part is a whole page:\n%s", part)
	}
	if strings.Contains(page, "Mode supervised:") {
		t.Error("the everyday mode has a banner")
	}

	m := newSite(t, siteOptions{mode: "maintenance"})
	mb := m.browser()
	if code := mb.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, _ = mb.page("/runs")
	if !strings.Contains(page, "Mode maintenance:</strong> every command under its ceiling acts without asking a person") {
		t.Errorf("maintenance has no banner that says what it means:\n%s", page)
	}
}

// TestModeBannerNamesWhoSetIt: the banner of a mode that asks nobody
// names who set it as a person reads it ("admin, through the API"), not
// by its principal ("api:admin").
func TestModeBannerNamesWhoSetIt(t *testing.T) {
	for _, tc := range []struct {
		name, from, mode, want string
		set                    func(t *testing.T, s *site)
	}{
		{"configuration", "maintenance", "maintenance", "; set by the configuration, at start. ", func(*testing.T, *site) {}},
		{"api", "supervised", "maintenance", "; set by admin, through the API. ", func(_ *testing.T, s *site) {
			b := s.expect("POST", "/api/v1/mode", "operator", `{"mode":"maintenance","reason":"pump swap"}`, 202, "")
			s.expect("POST", "/api/v1/approvals/"+approvalID.FindStringSubmatch(b)[1], "admin", `{"decision":"approve","mode":"maintenance"}`, 200, `"status":"approved"`)
		}},
		{"console", "maintenance", "observe", "; set by adam, in the console. ", func(t *testing.T, s *site) {
			adam := s.browser()
			adam.login("adam", "password-1")
			_, _, tok := adam.page("/policy")
			resp, err := adam.c.PostForm(s.srv.URL+"/mode", url.Values{"_csrf": {tok}, "mode": {"observe"}, "reason": {"a fitter on site"}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t, siteOptions{mode: tc.from})
			tc.set(t, s)
			b := s.browser()
			if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
				t.Fatalf("login = %d", code)
			}
			for _, p := range []string{"/devices", "/status?page=devices"} {
				_, page, _ := b.page(p)
				if !strings.Contains(page, "Mode "+tc.mode+":</strong>") || !strings.Contains(page, tc.want) {
					t.Errorf("%s: the mode's banner does not say %q:\n%s", p, tc.want, page)
				}
				if strings.Contains(page, "set by api:") || strings.Contains(page, "set by console:") {
					t.Errorf("%s: the mode's banner names who set it by their principal:\n%s", p, page)
				}
			}
		})
	}
}

// TestOverviewRefusalsInSentences: the Overview's recent refusals say
// what was refused and why, not the journal's JSON.
func TestOverviewRefusalsInSentences(t *testing.T) {
	s := newSite(t, siteOptions{mode: "observe"})
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 200, "refused")
	b := s.browser()
	if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, _ := b.page("/")
	section := page[strings.Index(page, "Recent refusals"):]
	if !strings.Contains(section, "refused valve-1.open → true: mode observe does not permit it") || strings.Contains(section, `{&#34;`) {
		t.Errorf("the recent refusals are not in sentences:\n%s", section)
	}
}

// TestNotesCannotBeForged: a link cannot put words in the gateway's mouth;
// the note a form's redirect carries is shown, and only unchanged.
func TestNotesCannotBeForged(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser()
	if code := b.login("olga", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	for _, link := range []string{"/approvals?note=All+requests+approved.", "/devices?error=1&note=Gateway+compromised.+Call+us",
		"/devices?note=All+requests+approved.&sig=00112233445566778899aabbccddeeff"} {
		_, page, _ := b.page(link)
		if strings.Contains(page, "All requests approved") || strings.Contains(page, "Gateway compromised") {
			t.Errorf("%s shows the link's words as the gateway's:\n%s", link, page)
		}
	}
	_, _, tok := b.page("/devices")
	resp, err := b.c.PostForm(s.srv.URL+"/commands", url.Values{"_csrf": {tok}, "device": {"tank-1"}, "capability": {"level"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	_, page, _ := b.page(loc)
	if !strings.Contains(page, "tank-1.level reads 60.") {
		t.Fatalf("the redirect %s does not show its note:\n%s", loc, page)
	}
	u, _ := url.Parse(loc)
	q := u.Query()
	q.Set("note", "tank-1.level reads 99.")
	if _, page, _ := b.page(u.Path + "?" + q.Encode()); strings.Contains(page, "reads 99") {
		t.Errorf("a note changed after it was signed is shown:\n%s", page)
	}
}
