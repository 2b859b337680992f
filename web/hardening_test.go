package web

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// do sends a request bounded by ctx with a bearer token ("" for none) and
// extra headers, and returns the status and the body (or what arrived of
// it before ctx ended, for a stream).
func (s *site) do(ctx context.Context, method, path, token, body string, hdr map[string]string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer tok-"+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The extremes the rules name for every numeric parameter a client sends.
var extremes = []string{"0", "-1", "2147483648", "9007199254740993", "9223372036854775807", "9223372036854775808",
	"18446744073709551615", "abc"}

// Every sequence number, count and duration a client sends is checked
// where it enters: out of range or not a number is a 400 that names the
// parameter and the range, never a panic, a hang or a journal read.
func TestRangeChecks(t *testing.T) {
	s := newSite(t, siteOptions{})
	for range 3 {
		if _, err := s.eng.Read(t.Context(), "test", "tank-1", "level"); err != nil {
			t.Fatal(err)
		}
	}
	// The readings are journaled in the background: a synced commit after
	// them is written only once they are, so the newest sequence is stable.
	synced, err := s.j.Commit(t.Context(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindLink}, Durability: runtime.Sync})
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.WaitFor(t, "the engine to learn of the synced event", func() bool { return s.eng.LastSeq() >= synced.Seq })
	newest := s.eng.LastSeq()
	beyond := fmt.Sprint(newest + 1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	type want struct {
		name, rng string
	}
	seqs := []string{"-1", "+1", " 1", "0x10", "1e3", "abc", "", beyond, "9223372036854775807", "9223372036854775808",
		"18446744073709551615", "18446744073709551616", strings.Repeat("9", 400)}
	counts := []string{"0", "-1", "10001", "2147483648", "9223372036854775808", "18446744073709551615", "abc", "1.5", ""}
	var cases []struct {
		path string
		hdr  map[string]string
		want want
	}
	add := func(path string, hdr map[string]string, w want) {
		cases = append(cases, struct {
			path string
			hdr  map[string]string
			want want
		}{path, hdr, w})
	}
	seqRange := fmt.Sprintf("from 0 to %d", newest)
	for _, v := range seqs {
		if v == "" {
			continue // no since at all is allowed
		}
		q := url.QueryEscape(v)
		add("/api/v1/events?since="+q, nil, want{`query "since"`, seqRange})
		add("/journal/export?since="+q, nil, want{`query "since"`, seqRange})
		add("/api/v1/events/stream?since="+q, nil, want{`query "since"`, seqRange})
		if !strings.ContainsAny(v, " ") {
			add("/api/v1/events/stream", map[string]string{"Last-Event-ID": v}, want{`header "Last-Event-ID"`, seqRange})
		}
	}
	for _, v := range counts {
		if v == "" {
			continue
		}
		q := url.QueryEscape(v)
		add("/api/v1/events?limit="+q, nil, want{`query "limit"`, "from 1 to 10000"})
		add("/api/v1/events?tail="+q, nil, want{`query "tail"`, "from 1 to 10000"})
	}
	for _, c := range cases {
		t.Run(c.path+fmt.Sprint(c.hdr), func(t *testing.T) {
			code, body := s.do(ctx, "GET", c.path, "viewer", "", c.hdr)
			body = strings.ReplaceAll(html.UnescapeString(body), `\"`, `"`) // a page or JSON
			if code != http.StatusBadRequest || !strings.Contains(body, c.want.name) || !strings.Contains(body, c.want.rng) {
				t.Fatalf("GET %s %v = %d %s; want 400 naming %s and %q", c.path, c.hdr, code, body, c.want.name, c.want.rng)
			}
		})
	}
	// In range is answered: since the newest is nothing more.
	s.expect("GET", fmt.Sprintf("/api/v1/events?since=%d", newest), "viewer", "", 200, "[]")
	s.expect("GET", "/api/v1/events?since=0&limit=10000", "viewer", "", 200, `"seq":1,`)
	s.expect("GET", "/api/v1/events?tail=10000", "viewer", "", 200, `"seq":1,`)
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer scancel()
	if code, body := s.do(sctx, "GET", "/api/v1/events/stream", "viewer", "", map[string]string{"Last-Event-ID": fmt.Sprint(newest - 1)}); code != 200 ||
		!strings.Contains(body, fmt.Sprintf("id: %d\n", newest)) {
		t.Fatalf("a stream from the newest but one = %d %q", code, body)
	}
}

// rule_for is a duration from one second to the longest rule the gateway
// allows; anything else is refused, and the approval stays pending.
func TestRuleForIsRangeChecked(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval")
	id := approvalID.FindStringSubmatch(b)[1]
	for _, v := range []string{"0s", "-1h", "0.5s", "24h0m1s", "25h", "2562047h", "9223372036854775807ns", "1e9h", "abc", "30"} {
		s.expect("POST", "/api/v1/approvals/"+id, "approver",
			`{"decision":"approve_and_rule","device":"valve-1","capability":"open","value":true,"rule_for":"`+v+`"}`,
			400, `field "rule_for": "`+v+`" is not a duration from 1s to 24h0m0s`)
	}
	for _, v := range extremes[:len(extremes)-1] { // as JSON numbers; the strings are above
		s.expect("POST", "/api/v1/approvals/"+id, "approver",
			`{"decision":"approve_and_rule","device":"valve-1","capability":"open","value":true,"rule_for":`+v+`}`, 400, `field "rule_for"`)
	}
	s.expect("GET", "/api/v1/approvals", "viewer", "", 200, `"status":"pending"`)
	if n := s.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("%d writes after refused answers", n)
	}
	s.expect("POST", "/api/v1/approvals/"+id, "approver",
		`{"decision":"approve_and_rule","device":"valve-1","capability":"open","value":true,"rule_for":"24h"}`, 200, `"status":"approved"`)
}

// After a login, next may only lead to a path of this site: every way of
// spelling another origin, or a path a browser reads as one, lands on "/".
func TestLoginNextStaysOnSite(t *testing.T) {
	s := newSite(t, siteOptions{})
	evil := []string{"/\\evil.example", "//evil.example", "///evil.example", "/%5Cevil.example", "/%5cevil.example",
		"/\t/evil.example", "/\n/evil.example", "/\r\n/evil.example", "/%09/evil.example", "/%2F%2Fevil.example",
		"/%2f/evil.example", "https://evil.example", "http:evil.example", "javascript:alert(1)", "evil.example",
		"\\\\evil.example", "/\\/evil.example", " //evil.example", "//evil.example/%2e%2e", "https:/\\evil.example",
		"//user@evil.example", "/x?y=%0a//evil", "\x00//evil.example", "/\x7f/evil.example", "/devices#//evil.example",
		"/\u0085/evil.example"}
	for _, next := range evil {
		b := s.browser()
		_, _, tok := b.page("/login")
		resp, err := b.c.PostForm(s.srv.URL+"/login", url.Values{"_csrf": {tok}, "user": {"olga"}, "password": {"password-1"},
			"next": {next}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !onSite(s.srv.URL, loc) || loc != "/" {
			t.Errorf("login with next=%q = %d, Location %q; want 303 to /", next, resp.StatusCode, loc)
		}
		// Already logged in, the login page sends them on the same way.
		r2, err := b.c.Get(s.srv.URL + "/login?next=" + url.QueryEscape(next))
		if err != nil {
			t.Fatal(err)
		}
		r2.Body.Close()
		if loc := r2.Header.Get("Location"); loc != "/" {
			t.Errorf("GET /login?next=%q when logged in: Location %q; want /", next, loc)
		}
	}
	// A path of this site is kept, with its query.
	for next, want := range map[string]string{"/devices": "/devices", "/runs?plan=flush&status=ended": "/runs?plan=flush&status=ended",
		"/journal?kind=acted%2Crefused": "/journal?kind=acted%2Crefused"} {
		b := s.browser()
		_, _, tok := b.page("/login")
		resp, err := b.c.PostForm(s.srv.URL+"/login", url.Values{"_csrf": {tok}, "user": {"olga"}, "password": {"password-1"}, "next": {next}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); loc != want {
			t.Errorf("login with next=%q: Location %q, want %q", next, loc, want)
		}
	}
	// A page asked for without a login comes back after it.
	resp, err := s.browser().c.Get(s.srv.URL + "/runs?plan=flush")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != "/login?next=%2Fruns%3Fplan%3Dflush" {
		t.Errorf("a page without a login: Location %q", loc)
	}
}

// onSite reports whether a browser following loc from base stays on
// base's origin, reading backslashes as slashes and dropping tabs and
// newlines as browsers do.
func onSite(base, loc string) bool {
	b, _ := url.Parse(base + "/login")
	loc = strings.NewReplacer("\\", "/", "\t", "", "\n", "", "\r", "").Replace(loc)
	u, err := url.Parse(loc)
	if err != nil {
		return false
	}
	r := b.ResolveReference(u)
	return r.Scheme == b.Scheme && r.Host == b.Host
}

// loginEvents returns the login events of the journal.
func (s *site) loginEvents(t *testing.T) []map[string]any {
	t.Helper()
	evs, err := s.eng.Events(t.Context(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range evs {
		if ev.Kind == runtime.KindLogin {
			var m map[string]any
			if err := json.Unmarshal(ev.Body, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}

// A flood of wrong passwords and wrong tokens from one address costs the
// journal one summary for the window, with the counts; nothing while the
// window lasts, and never a password or a token.
func TestFailedLoginsAreSummarised(t *testing.T) {
	clk := newClock()
	s := newSite(t, siteOptions{now: clk.now})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b := s.browser()
	for i := range 40 {
		_, _, tok := b.page("/login")
		resp, err := b.c.PostForm(s.srv.URL+"/login", url.Values{"_csrf": {tok}, "user": {fmt.Sprint("ann", i%3)}, "password": {"guess-" + fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusUnauthorized
		if i >= 5 {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("login %d = %d, want %d", i, resp.StatusCode, want)
		}
	}
	for range 20 {
		if code, _ := s.do(ctx, "GET", "/api/v1/devices", "wrong-token-xyz", "", nil); code != http.StatusTooManyRequests {
			t.Fatalf("a wrong token from a locked-out address = %d, want 429", code)
		}
	}
	if evs := s.loginEvents(t); len(evs) != 0 {
		t.Fatalf("%d login events while the window lasts, want none yet: %v", len(evs), evs)
	}
	clk.add(2 * time.Minute)
	s.expect("GET", "/healthz", "", "", 200, "ok") // no limiter call: nothing flushed yet
	s.expect("GET", "/api/v1/devices", "viewer", "", 200, "valve-1")
	deadline := time.Now().Add(5 * time.Second)
	var evs []map[string]any
	for len(evs) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		evs = s.loginEvents(t)
	}
	if len(evs) != 1 {
		t.Fatalf("%d login events for one window, want 1: %v", len(evs), evs)
	}
	e := evs[0]
	if e["action"] != "login_failed" || e["failures"] != 5.0 || e["refused"] != 55.0 || e["locked_out"] != true ||
		e["surface"] != "api,console" || e["remote"] != "127.0.0.1" {
		t.Fatalf("the summary = %v; want 5 failures, 55 refused, locked out, from 127.0.0.1 over api and console", e)
	}
	raw, _ := json.Marshal(e)
	if strings.Contains(string(raw), "guess-") || strings.Contains(string(raw), "wrong-token") {
		t.Fatalf("a password or a token reached the journal: %s", raw)
	}
}

// A wrong bearer token counts as a failed login of its address: five lock
// the address out with a 429, even for a right token, until the window
// has passed.
func TestWrongTokensAreLimited(t *testing.T) {
	clk := newClock()
	s := newSite(t, siteOptions{now: clk.now})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range 5 {
		if code, body := s.do(ctx, "GET", "/api/v1/devices", fmt.Sprint("guess", i), "", nil); code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d = %d %s", i, code, body)
		}
	}
	if code, _ := s.do(ctx, "GET", "/api/v1/devices", "", "", map[string]string{"Authorization": "Basic YTpi"}); code != http.StatusTooManyRequests {
		t.Fatalf("a sixth try (not even Bearer) = %d, want 429", code)
	}
	s.expect("GET", "/api/v1/devices", "viewer", "", 429, "too many failed logins")
	s.expect("POST", "/api/v1/commands", "admin", `{"device":"valve-1","capability":"open","value":true}`, 429, "")
	clk.add(61 * time.Second)
	s.expect("GET", "/api/v1/devices", "viewer", "", 200, "valve-1")
	if n := s.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("%d writes", n)
	}
}

// A list is [] when empty, never null: a client iterating it must not
// need to know.
func TestEmptyListsAreArrays(t *testing.T) {
	s := newSite(t, siteOptions{})
	for _, path := range []string{"/api/v1/rules", "/api/v1/locks", "/api/v1/approvals", "/api/v1/runs?plan=none",
		"/api/v1/events?kind=none", "/api/v1/events?since=0&device=none", "/api/v1/events?tail=5&kind=none"} {
		if _, body := s.call("GET", path, "viewer", ""); strings.TrimSpace(body) != "[]" {
			t.Errorf("GET %s = %s, want []", path, body)
		}
	}
	s.expect("GET", "/api/v1/mode", "viewer", "", 200, `"modes":["`)
	s.expect("GET", "/api/v1/devices", "viewer", "", 200, `"capabilities":[{`)
}

// Resolving an unknown attempt says what the person found: acted takes
// the commanded value as the state, not_acted leaves it; anything else
// is a 400 naming the field, and the actuator stays locked.
func TestResolveSaysWhatWasFound(t *testing.T) {
	locked := func(id string) func(j *journal.DB) {
		return func(j *journal.DB) {
			a := runtime.Attempt{Key: "mqtt:x/" + id, ID: id, Device: "valve-1", Capability: "open", Value: value.Bool(true), Updated: time.Now()}
			for _, st := range []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting} {
				a.State = st
				rec := a
				if _, err := j.Commit(context.Background(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindInvoked}, Durability: runtime.Sync, Attempt: &rec}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, found := range []string{"acted", "not_acted"} {
		t.Run(found, func(t *testing.T) {
			s := newSite(t, siteOptions{prepare: locked("act-" + found)})
			path := "/api/v1/attempts/act-" + found + "/resolve"
			for _, bad := range []string{`{"note":"seen"}`, `{"found":"","note":"seen"}`, `{"found":"reconciled","note":"seen"}`,
				`{"found":"ACTED","note":"seen"}`, `{"found":1,"note":"seen"}`, `{"found":null,"note":"seen"}`} {
				s.expect("POST", path, "admin", bad, 400, `field "found"`)
			}
			s.expect("GET", "/api/v1/locks", "viewer", "", 200, "act-"+found)
			s.expect("POST", path, "admin", `{"found":"`+found+`","note":"checked on site"}`, 200, `"state":"reconciled"`)
			s.expect("GET", "/api/v1/events?kind=reconciled", "viewer", "", 200, `"found":"`+found+`"`)
			devs := s.expect("GET", "/api/v1/devices", "viewer", "", 200, "valve-1")
			hasState := strings.Contains(devs, `"receipt":{"key":"mqtt:x/act-acted"`) && strings.Contains(devs, `"confirmation":"confirmed"`)
			if hasState != (found == "acted") {
				t.Fatalf("after %s the valve's state = %s", found, devs)
			}
			if n := s.g.Count("write", "valve-1", "open"); n != 0 {
				t.Fatalf("%d writes: resolving must not act", n)
			}
		})
	}
}

// An act the read-back contradicts is reported as contradicted, never as
// acted, the first time and when the same id is sent again.
func TestContradictedActIsNotActed(t *testing.T) {
	s := newSite(t, siteOptions{mode: "interlocked"})
	s.g.SetFault("valve-1", sim.Fault{Stuck: true})
	if _, err := s.eng.Read(t.Context(), "test", "tank-1", "level"); err != nil {
		t.Fatal(err)
	}
	cmd := `{"device":"valve-1","capability":"open","value":true,"id":"c-stuck"}`
	s.expect("POST", "/api/v1/commands", "operator", cmd, 200, `"outcome":"contradicted"`)
	b := s.expect("POST", "/api/v1/commands", "operator", cmd, 200, `"outcome":"contradicted"`)
	if !strings.Contains(b, `"replayed":true`) || !strings.Contains(b, `"confirmation":"wrong_final"`) {
		t.Fatalf("the repeat = %s", b)
	}
	if n := s.g.Count("write", "valve-1", "open"); n != 1 {
		t.Fatalf("%d writes, want 1", n)
	}
}

// The console's resolve form offers the choice and requires it: without
// it the admin is sent back with a note naming the field, and the
// actuator stays locked.
func TestResolveFormAsksWhatWasFound(t *testing.T) {
	s := newSite(t, siteOptions{prepare: func(j *journal.DB) {
		a := runtime.Attempt{Key: "mqtt:x/1", ID: "act-form", Device: "valve-1", Capability: "open", Value: value.Bool(true), Updated: time.Now()}
		for _, st := range []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting} {
			a.State = st
			rec := a
			if _, err := j.Commit(context.Background(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindInvoked}, Durability: runtime.Sync, Attempt: &rec}); err != nil {
				t.Fatal(err)
			}
		}
	}})
	b := s.browser()
	if code := b.login("adam", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, tok := b.page("/policy")
	for _, want := range []string{`name="found" value="acted" required`, `name="found" value="not_acted"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the policy page has no %s:\n%s", want, page)
		}
	}
	post := func(form url.Values) string {
		form.Set("_csrf", tok)
		resp, err := b.c.PostForm(s.srv.URL+"/attempts/act-form/resolve", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Path != "/policy" {
			t.Fatalf("resolve form = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		return loc.Query().Get("note")
	}
	if note := post(url.Values{"note": {"seen open"}}); !strings.Contains(note, `field "found"`) {
		t.Fatalf("a resolution without found: note %q", note)
	}
	s.expect("GET", "/api/v1/locks", "viewer", "", 200, "act-form")
	if note := post(url.Values{"found": {"acted"}, "note": {"seen open"}}); !strings.Contains(note, "reconciled: it acted") {
		t.Fatalf("a resolution: note %q", note)
	}
	s.expect("GET", "/api/v1/events?kind=reconciled", "viewer", "", 200, `"found":"acted"`)
	s.expect("GET", "/api/v1/locks", "viewer", "", 200, "[]")
}

// clock is a settable time for a server under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
