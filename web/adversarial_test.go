package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// caller is one identity of the adversarial suite: a bearer token or a
// logged-in console user with the CSRF token of their session.
type caller struct {
	name  string
	token string   // a token name, or "" for a session
	b     *browser // the session's browser
	csrf  string
}

func (s *site) callers(t *testing.T) []caller {
	t.Helper()
	var out []caller
	for _, tok := range []string{"viewer", "operator", "approver", "admin"} {
		out = append(out, caller{name: "token " + tok, token: tok})
	}
	for _, u := range []string{"vera", "olga", "ann", "adam"} {
		b := s.browser()
		if code := b.login(u, "password-1"); code != http.StatusSeeOther {
			t.Fatalf("login %s = %d", u, code)
		}
		_, _, tok := b.page("/")
		if tok == "" {
			t.Fatalf("no CSRF token for %s", u)
		}
		out = append(out, caller{name: "console " + u, b: b, csrf: tok})
	}
	return out
}

// send makes one request as c, bounded by ctx; a stream is read until ctx
// ends. It returns the status, or 0 when the request could not be made.
func (c caller) send(ctx context.Context, s *site, method, path, body string, hdr map[string]string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	client := http.DefaultClient
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer tok-"+c.token)
	} else {
		client = c.b.c
		if method != http.MethodGet {
			req.Header.Set("X-CSRF-Token", c.csrf)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for sb.Len() < 1<<20 {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, sb.String(), nil
}

// probe is one way a client can send a number: x is put where the number
// goes.
type probe struct {
	name   string
	method string
	path   func(x string) string
	body   func(x string) string
	header func(x string) map[string]string
}

// TestAdversarialHTTPNumbers sends, for every numeric parameter on every
// endpoint, the extremes (0, -1, 2^31, 2^53+1, 2^63-1, 2^63, 2^64-1 and a
// non-number), as every role, through tokens and console sessions. No
// request may fail with a 5xx or outlive its deadline; afterwards the
// server still answers /healthz, /readyz and a normal command, the pending
// approval is still pending, and nothing was written to a device.
func TestAdversarialHTTPNumbers(t *testing.T) {
	s := newSite(t, siteOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	b := s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"id":"adv-pending"}`,
		202, "pending_approval")
	apr := approvalID.FindStringSubmatch(b)[1]
	q := url.QueryEscape
	none := func(string) string { return "" }
	get := func(name string, path func(string) string) probe {
		return probe{name: name, method: "GET", path: path, body: none}
	}
	post := func(name, path string, body func(string) string) probe {
		return probe{name: name, method: "POST", path: func(string) string { return path }, body: body}
	}
	probes := []probe{
		get("events since", func(x string) string { return "/api/v1/events?since=" + q(x) }),
		get("events limit", func(x string) string { return "/api/v1/events?limit=" + q(x) }),
		get("events tail", func(x string) string { return "/api/v1/events?tail=" + q(x) }),
		get("events all", func(x string) string { return "/api/v1/events?since=" + q(x) + "&limit=" + q(x) + "&tail=" + q(x) }),
		{name: "stream Last-Event-ID", method: "GET", path: func(string) string { return "/api/v1/events/stream" }, body: none,
			header: func(x string) map[string]string { return map[string]string{"Last-Event-ID": x} }},
		get("stream since", func(x string) string { return "/api/v1/events/stream?since=" + q(x) }),
		get("journal export", func(x string) string { return "/journal/export?since=" + q(x) + "&kind=acted" }),
		get("journal page", func(x string) string { return "/journal?verify=" + q(x) + "&kind=" + q(x) + "&fragment=" + q(x) }),
		get("runs", func(x string) string { return "/api/v1/runs?plan=" + q(x) + "&status=" + q(x) + "&origin=" + q(x) }),
		get("runs page", func(x string) string { return "/runs?plan=" + q(x) + "&fragment=1" }),
		get("rule", func(x string) string { return "/api/v1/rules/" + q(x) }),
		get("overview note", func(x string) string { return "/?note=" + q(x) + "&fragment=" + q(x) }),
		post("sensor value", "/api/v1/commands", func(x string) string {
			return `{"device":"tank-1","capability":"level","value":` + x + `}`
		}),
		post("sensor value string", "/api/v1/commands", func(x string) string {
			return `{"device":"tank-1","capability":"level","value":"` + x + `"}`
		}),
		post("actuator value", "/api/v1/commands", func(x string) string {
			return `{"device":"valve-1","capability":"open","value":` + x + `}`
		}),
		post("command id", "/api/v1/commands", func(x string) string {
			return `{"device":"valve-1","capability":"open","value":true,"id":` + x + `}`
		}),
		post("rule_for", "/api/v1/approvals/"+apr, func(x string) string {
			return `{"decision":"approve_and_rule","device":"valve-1","capability":"open","value":true,"rule_for":"` + x + `s"}`
		}),
		post("rule_for number", "/api/v1/approvals/"+apr, func(x string) string {
			return `{"decision":"approve_and_rule","device":"valve-1","capability":"open","value":true,"rule_for":` + x + `}`
		}),
		post("answer value", "/api/v1/approvals/"+apr, func(x string) string {
			return `{"decision":"approve","device":"valve-1","capability":"open","value":` + x + `}`
		}),
		post("answer unknown approval", "/api/v1/approvals/apr-0", func(x string) string { return `{"decision":` + x + `}` }),
		{name: "resolve", method: "POST", path: func(x string) string { return "/api/v1/attempts/" + q(x) + "/resolve" },
			body: func(x string) string { return `{"found":"` + x + `","note":"` + x + `"}` }},
		post("resolve found number", "/api/v1/attempts/act-0/resolve", func(x string) string { return `{"found":` + x + `,"note":"n"}` }),
		post("mode", "/api/v1/mode", func(x string) string { return `{"mode":"` + x + `"}` }),
		post("mode number", "/api/v1/mode", func(x string) string { return `{"mode":` + x + `}` }),
		post("plan id", "/api/v1/plans/flush/start", func(x string) string { return `{"id":` + x + `}` }),
		{name: "revoke", method: "DELETE", path: func(x string) string { return "/api/v1/rules/" + q(x) }, body: none},
	}
	callers := s.callers(t)
	values := append(append([]string{}, extremes...), "1e999", "-0", "NaN", "18446744073709551616")
	var mu sync.Mutex
	var failures []string
	fail := func(f string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(f, args...))
		mu.Unlock()
	}
	for _, c := range callers {
		for _, p := range probes {
			for _, x := range values {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				if strings.Contains(p.name, "stream") && x == "0" {
					rctx, rcancel = context.WithTimeout(ctx, 300*time.Millisecond) // a stream let in lasts until then
				}
				var hdr map[string]string
				if p.header != nil {
					hdr = p.header(x)
				}
				code, body, err := c.send(rctx, s, p.method, p.path(x), p.body(x), hdr)
				timedOut := rctx.Err() != nil
				rcancel()
				switch {
				case err != nil && !(timedOut && strings.Contains(p.name, "stream")):
					fail("%s %s x=%s: %v", c.name, p.name, x, err)
				case code >= 500:
					fail("%s %s x=%s: %d %s", c.name, p.name, x, code, body)
				case code == http.StatusOK && strings.Contains(p.name, "stream") && x != "0":
					fail("%s %s x=%s: a stream was let in", c.name, p.name, x)
				}
			}
		}
	}
	for _, f := range failures {
		t.Error(f)
	}
	// The server still answers, and still works.
	s.expect("GET", "/healthz", "", "", 200, "ok")
	s.expect("GET", "/readyz", "", "", 200, "ready")
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level","id":"adv-after"}`, 200, `"outcome":"completed"`)
	s.expect("GET", "/api/v1/approvals", "viewer", "", 200, apr)
	if n := s.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("%d writes to valve-1: an adversarial request acted", n)
	}
}

// TestAdversarialHTTPLoginFlood floods the login form and the API with
// wrong passwords and tokens from many goroutines while an operator
// commands: the journal gets one summary, commands are still journaled,
// and nothing acts but what the operator asked.
func TestAdversarialHTTPLoginFlood(t *testing.T) {
	clk := newClock()
	s := newSite(t, siteOptions{now: clk.now})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		b := s.browser()
		_, _, csrf := b.page("/login")
		wg.Go(func() {
			for i := range 50 {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				var code int
				if g%2 == 0 {
					code, _ = s.do(rctx, "GET", "/api/v1/events?since=0", fmt.Sprint("guess-", g, "-", i), "", nil)
				} else {
					form := url.Values{"_csrf": {csrf}, "user": {"ann"}, "password": {fmt.Sprint("guess-", i)}}
					req, _ := http.NewRequestWithContext(rctx, "POST", s.srv.URL+"/login", strings.NewReader(form.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					if resp, err := b.c.Do(req); err == nil {
						code = resp.StatusCode
						resp.Body.Close()
					}
				}
				rcancel()
				if code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
					t.Errorf("flood request = %d, want 401 or 429", code)
				}
			}
		})
	}
	wg.Wait()
	clk.add(2 * time.Minute)
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level","id":"after-flood"}`, 200, `"outcome":"completed"`)
	deadline := time.Now().Add(5 * time.Second)
	var evs []map[string]any
	for len(evs) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		evs = s.loginEvents(t)
	}
	if len(evs) != 1 {
		t.Fatalf("%d login events for 400 wrong tries in one window, want 1: %v", len(evs), evs)
	}
	if evs[0]["failures"] != 5.0 || evs[0]["refused"] != 395.0 {
		t.Fatalf("the summary = %v, want 5 failures and 395 refused", evs[0])
	}
	if n := s.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("%d writes", n)
	}
}
