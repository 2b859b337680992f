package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client with an account of its own cannot reset its address's count of
// failed logins by logging in between guesses at another's password: the
// fifth wrong guess locks the address out, and its own good password is
// refused too until the window has passed.
func TestAdversarialHTTPOwnLoginDoesNotResetTheLimiter(t *testing.T) {
	clk := newClock()
	s := newSite(t, siteOptions{now: clk.now})
	b := s.browser()
	wrong := 0
	for round := range 5 {
		for range 4 {
			if code := b.login("adam", "guess"); code != http.StatusUnauthorized {
				if code == http.StatusTooManyRequests && wrong >= 5 {
					goto locked
				}
				t.Fatalf("wrong guess %d = %d", wrong, code)
			}
			wrong++
		}
		switch code := s.browser().login("vera", "password-1"); code {
		case http.StatusSeeOther:
		case http.StatusTooManyRequests:
			goto locked
		default:
			t.Fatalf("round %d: vera's own login = %d", round, code)
		}
	}
	t.Fatalf("%d wrong guesses at adam's password, each four followed by a good login as vera, and never locked out", wrong)
locked:
	if wrong != 5 {
		t.Fatalf("locked out after %d wrong guesses, want 5", wrong)
	}
	if code := s.browser().login("vera", "password-1"); code != http.StatusTooManyRequests {
		t.Fatalf("a good login from a locked-out address = %d, want 429", code)
	}
	clk.add(61 * time.Second)
	if code := s.browser().login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("a good login a window after the last failure = %d, want 303", code)
	}
}

// Every API body that names a key twice, at any depth and in any letter
// case, is refused with a 400 naming the key: encoding/json would take the
// last value silently. A body that is not valid UTF-8 is refused as a
// whole: decoded, different ids would read the same. Nothing acts.
func TestAdversarialHTTPBodiesAreTakenOneWayOnly(t *testing.T) {
	s := newSite(t, siteOptions{})
	for _, tc := range []struct{ token, path, body, want string }{
		{"operator", "/api/v1/commands", `{"device":"valve-1","capability":"open","value":false,"value":true}`, `key "value" appears twice`},
		{"operator", "/api/v1/commands", `{"device":"valve-1","capability":"open","value":false,"Value":true}`, `key "Value" appears twice`},
		{"operator", "/api/v1/commands", `{"device":"tank-1","capability":"level","id":"a","\u0069d":"b"}`, `key "id" appears twice`},
		{"operator", "/api/v1/commands", `{"device":"valve-1","capability":"open","value":{"a":1,"a":2}}`, `key "a" appears twice`},
		{"approver", "/api/v1/approvals/apr-x", `{"decision":"deny","decision":"approve"}`, `key "decision" appears twice`},
		{"operator", "/api/v1/mode", `{"mode":"observe","mode":"manual"}`, `key "mode" appears twice`},
		{"admin", "/api/v1/attempts/act-x/resolve", `{"found":"acted","found":"not_acted"}`, `key "found" appears twice`},
		{"operator", "/api/v1/plans/flush/start", `{"id":"p1","id":"p2"}`, `key "id" appears twice`},
		{"operator", "/api/v1/commands", "{\"device\":\"tank-1\",\"capability\":\"level\",\"id\":\"\xff\xfe\"}", "not valid UTF-8"},
		{"operator", "/api/v1/commands", "{\"device\":\"tank-1\",\"capability\":\"level\",\"reason\":\"\xc0\xaf\"}", "not valid UTF-8"},
		{"approver", "/api/v1/approvals/apr-x", "{\"decision\":\"deny\",\"reason\":\"\xff\"}", "not valid UTF-8"},
		{"operator", "/api/v1/mode", "{\"mode\":\"observe\",\"reason\":\"\xff\"}", "not valid UTF-8"},
		{"admin", "/api/v1/attempts/act-x/resolve", "{\"found\":\"acted\",\"note\":\"\xff\"}", "not valid UTF-8"},
		{"operator", "/api/v1/plans/flush/start", "{\"id\":\"\xed\xa0\x80\"}", "not valid UTF-8"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		code, body := s.do(ctx, "POST", tc.path, tc.token, tc.body, nil)
		cancel()
		var e apiError
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Detail, tc.want) {
			t.Errorf("POST %s %q = %d %s; want 400 saying %s", tc.path, tc.body, code, body, tc.want)
		}
	}
	if n := s.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("%d writes to valve-1", n)
	}
	if runs := s.eng.Runs(); len(runs) != 0 {
		t.Fatalf("%d runs started by refused bodies: %+v", len(runs), runs)
	}
}

// Every count and sequence in a query is plain decimal digits, given
// once: a sign, a space or a second value is a 400 naming the parameter.
func TestAdversarialHTTPQueryNumbersAreTakenOneWayOnly(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser()
	if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	for _, tc := range []struct{ path, name string }{
		{"/api/v1/events?since=%2B5", "since"}, {"/api/v1/events?limit=%2B5", "limit"}, {"/api/v1/events?tail=%2B5", "tail"},
		{"/api/v1/events?limit=-0", "limit"}, {"/api/v1/events?tail=%205", "tail"}, {"/api/v1/events?limit=5_0", "limit"},
		{"/api/v1/events?since=1&since=18446744073709551615", "since"}, {"/api/v1/events?limit=1&limit=2", "limit"},
		{"/api/v1/events?tail=1&tail=1", "tail"}, {"/api/v1/events?since=0&since=", "since"},
		{"/api/v1/events/stream?since=0&since=1", "since"}, {"/api/v1/events/stream?since=%2B0", "since"},
		{"/journal/export?since=0&since=1", "since"}, {"/journal/export?since=%2B0", "since"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL+tc.path, nil)
		req.Header.Set("Accept", "application/json")
		var code int
		var body string
		if strings.HasPrefix(tc.path, "/journal") {
			resp, err := b.c.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", tc.path, err)
			}
			buf := make([]byte, 4096)
			n, _ := resp.Body.Read(buf)
			resp.Body.Close()
			code, body = resp.StatusCode, string(buf[:n])
		} else {
			code, body = s.do(ctx, "GET", tc.path, "viewer", "", nil)
		}
		cancel()
		if code != http.StatusBadRequest || !strings.Contains(body, `query \"`+tc.name+`\"`) && !strings.Contains(body, `query &#34;`+tc.name) {
			t.Errorf("GET %s = %d %.300s; want 400 naming %s", tc.path, code, body, tc.name)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer tok-viewer")
	req.Header.Add("Last-Event-ID", "0")
	req.Header.Add("Last-Event-ID", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("two Last-Event-ID headers = %d, want 400", resp.StatusCode)
	}
	// Plain digits still pass.
	if code, body := s.do(ctx, "GET", "/api/v1/events?since=0&limit=5&tail=2", "viewer", "", nil); code != http.StatusOK {
		t.Fatalf("plain digits = %d %s", code, body)
	}
}

// An error quotes what a client sent cut to 80 characters, with an
// ellipsis: a 100 KB id, name or field comes back as a few hundred bytes
// at most.
func TestAdversarialHTTPErrorsQuoteLittle(t *testing.T) {
	s := newSite(t, siteOptions{})
	long := strings.Repeat("x", 100_000)
	for _, tc := range []struct{ method, path, token, body string }{
		{"GET", "/api/v1/rules/" + long, "viewer", ""},
		{"DELETE", "/api/v1/rules/" + long, "admin", ""},
		{"POST", "/api/v1/approvals/" + long, "approver", `{"decision":"approve"}`},
		{"POST", "/api/v1/attempts/" + long + "/resolve", "admin", `{"found":"acted"}`},
		{"POST", "/api/v1/attempts/act-x/resolve", "admin", `{"found":"` + long + `"}`},
		{"POST", "/api/v1/plans/" + long + "/start", "operator", `{}`},
		{"POST", "/api/v1/commands", "operator", `{"device":"` + long + `","capability":"` + long + `"}`},
		{"POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":"` + long + `"}`},
		{"POST", "/api/v1/commands", "operator", `{"` + long + `":1}`},
		{"POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level","reason":"` + long + `","reason":"x"}`},
		{"POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level","` + long + `":1,"` + long + `":2}`},
		{"POST", "/api/v1/mode", "operator", `{"mode":"` + long + `"}`},
		{"POST", "/api/v1/mode", "operator", `{"mode":"observe","reason":"` + long + `"}`},
		{"GET", "/api/v1/events?since=" + long, "viewer", ""},
		{"GET", "/api/v1/events?limit=" + long, "viewer", ""},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		code, body := s.do(ctx, tc.method, tc.path, tc.token, tc.body, nil)
		cancel()
		if code < 400 || len(body) > 600 || strings.Contains(body, strings.Repeat("x", maxQuoted+1)) {
			t.Errorf("%s %.60s… = %d with a body of %d bytes: %.300s", tc.method, tc.path, code, len(body), body)
		}
	}
	if n := s.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("%d writes to valve-1", n)
	}
}

// Messages read as English: "an operator", "1 approval".
func TestMessagesReadAsEnglish(t *testing.T) {
	s := newSite(t, siteOptions{mode: "two-person"})
	for _, tc := range []struct{ method, path, token, body, want string }{
		{"POST", "/api/v1/approvals/x", "operator", `{}`, "operator is an operator"},
		{"DELETE", "/api/v1/rules/x", "approver", "", "approver is an approver"},
		{"POST", "/api/v1/commands", "viewer", `{"device":"tank-1","capability":"level"}`, "viewer is a viewer"},
	} {
		s.expect(tc.method, tc.path, tc.token, tc.body, http.StatusForbidden, tc.want)
	}
	body := s.expect("POST", "/api/v1/mode", "operator", `{"mode":"supervised","reason":"fewer approvals"}`, http.StatusAccepted,
		"it requires 1 approval, two-person requires 2")
	if strings.Contains(body, "1 approvals") {
		t.Fatalf("a mode change says %q", body)
	}
}
