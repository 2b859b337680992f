package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/gateway/command"
)

// fuzzBodyPaths are the endpoints FuzzAPIBodies posts to; the corpus
// picks one by its index.
var fuzzBodyPaths = []string{"/api/v1/commands", "/api/v1/approvals/apr-x", "/api/v1/mode", "/api/v1/attempts/act-x/resolve", "/api/v1/plans/flush/start",
	"/api/v1/alarms/" + stuckAlarm + "/ack", "/api/v1/alarms/" + stuckAlarm + "/shelve", "/api/v1/alarms/drift.nothing.here/ack"}

// FuzzAPIBodies posts arbitrary bodies to the endpoints that take one: the
// answer is never a 500 and never a panic, and every error is JSON that
// says what was wrong.
func FuzzAPIBodies(f *testing.F) {
	for _, b := range []string{`{}`, `{"device":"tank-1","capability":"level"}`, `{"device":"valve-1","capability":"open","value":true}`,
		`{"decision":"approve","device":"valve-1","capability":"open","value":true}`, `{"mode":"observe"}`, `{"note":"x"}`,
		`{"value":`, `[]`, `null`, `{"device":5}`, `{"rule_for":"-1h","decision":"approve_and_rule"}`,
		`{"device":"pump-1","capability":"on","value":false,"value":true}`, `{"mode":"observe","MODE":"manual"}`,
		`{"note":"a","found":"acted","\u006eote":"b"}`, `{"value":{"a":[{"b":1,"b":2}]}}`, "{\"id\":\"\xff\xfe\"}",
		"{\"device\":\"tank-1\",\"capability\":\"level\",\"reason\":\"\xc0\xaf\"}",
		`{"comment":"valve seen stuck"}`, `{"comment":""}`, `{"comment":5}`, `{"comment":"a","comment":"b"}`, `{"coment":"x"}`,
		`{"for":"30m","reason":"valve under repair"}`, `{"for":"0"}`, `{"for":"-1h","reason":"x"}`, `{"for":"9h","reason":"x"}`,
		`{"for":30,"reason":"x"}`, `{"for":"1e9h","reason":"x"}`, `{"for":"30m","reason":"x","until":"never"}`} {
		for path := range uint8(len(fuzzBodyPaths)) {
			f.Add(b, path)
		}
	}
	// A standing alarm, so that acknowledging and shelving it can succeed;
	// then the valve is freed and every write asks again, so that no input
	// waits for a read-back.
	s := alarmSite(f, 1)
	s.g.SetFault("valve-1", sim.Fault{})
	if _, _, err := s.eng.SetMode(f.Context(), "test", "supervised", "fuzzing"); err != nil {
		f.Fatal(err)
	}
	srv, err := New(s.eng, Options{Sessions: s.j.Sessions(), Tokens: []Token{{Name: "admin", Role: 4, Hash: HashToken("tok-admin")}}})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	paths := fuzzBodyPaths
	f.Fuzz(func(t *testing.T, body string, path uint8) {
		req := httptest.NewRequest("POST", paths[int(path)%len(paths)], strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok-admin")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q: %d %s", req.URL.Path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var e apiError
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Detail == "" {
				t.Fatalf("%s %q: %d with a body that says nothing: %s", req.URL.Path, body, rec.Code, rec.Body)
			}
			if len(e.Detail) > maxDetail+len("…") {
				t.Fatalf("%s: an error detail of %d bytes", req.URL.Path, len(e.Detail))
			}
			return
		}
		if !utf8.ValidString(body) {
			t.Fatalf("%s %q: a body of invalid UTF-8 was taken (%d)", req.URL.Path, body, rec.Code)
		}
		if err := command.RepeatedKey([]byte(body)); err != nil {
			t.Fatalf("%s %q: a body with a repeated key was taken (%d): %v", req.URL.Path, body, rec.Code, err)
		}
	})
}

// queryParamSeeds are the table cases of the query parsers: since, limit,
// tail, Last-Event-ID and next.
var queryParamSeeds = [][5]string{
	{"", "", "", "", ""},
	{"0", "200", "", "0", "/devices"},
	{"1", "10000", "5", "1", "/runs?plan=flush&status=ended"},
	{"-1", "0", "-1", "-1", "/\\evil.example"},
	{"18446744073709551615", "10001", "10001", "18446744073709551615", "//evil.example"},
	{"9223372036854775808", "2147483648", "2147483648", "9223372036854775808", "/%5Cevil.example"},
	{"9223372036854775807", "9007199254740993", "9223372036854775807", "9223372036854775807", "https://evil.example"},
	{"abc", "abc", "abc", "abc", "/\t/evil.example"},
	{"+1", " 1", "1e3", "0x10", "/\n/evil.example"},
	{"18446744073709551616", "1.5", "", "99999999999999999999999", "javascript:alert(1)"},
	{"", "", "", "", "/%2F%2Fevil.example"},
	{"", "", "", "", "/x?y=%0a//evil"},
	{"", "", "", "", "/\u0085/evil.example"},
	{"", "", "", "", "http:evil.example"},
	{"+5", "+5", "+5", "+5", ""},
	{"05", "-0", "5_0", "\u0665", ""},
}

// FuzzQueryParams feeds every query parser: since, limit and tail on
// /api/v1/events, Last-Event-ID on the event stream, and next after a
// login. Parsers accept only what is in range; the server never answers
// 5xx or panics, names the parameter in a 400, and every redirect stays on
// this site.
func FuzzQueryParams(f *testing.F) {
	for _, c := range queryParamSeeds {
		f.Add(c[0], c[1], c[2], c[3], c[4])
	}
	s := newSite(f, siteOptions{})
	for range 3 {
		if _, err := s.eng.Read(f.Context(), "test", "tank-1", "level"); err != nil {
			f.Fatal(err)
		}
	}
	srv, err := New(s.eng, Options{Sessions: s.j.Sessions(), Tokens: []Token{{Name: "viewer", Role: 1, Hash: HashToken("tok-viewer")}}})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	base, _ := url.Parse("https://gw.example/login")
	f.Fuzz(func(t *testing.T, since, limit, tail, lastID, next string) {
		newest := s.eng.LastSeq()
		if n, err := seqParam("since", since, newest); err == nil {
			if n > newest || strings.Trim(since, "0123456789") != "" {
				t.Fatalf("seqParam(%q) = %d with the newest %d", since, n, newest)
			}
		}
		for _, v := range []string{limit, tail} {
			if n, err := countParam("limit", v, 1, maxEvents); err == nil && (n < 1 || n > maxEvents || strings.Trim(v, "0123456789") != "") {
				t.Fatalf("countParam(%q) = %d", v, n)
			}
		}
		got := safeNext(next)
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") ||
			unsafeInPath(got) || safeNext(got) != got {
			t.Fatalf("safeNext(%q) = %q", next, got)
		}
		// As a browser reads it: backslashes are slashes, tabs and newlines vanish.
		br, err := url.Parse(strings.NewReplacer("\\", "/", "\t", "", "\n", "", "\r", "").Replace(got))
		if err != nil {
			t.Fatalf("safeNext(%q) = %q, which a browser cannot read", next, got)
		}
		if r := base.ResolveReference(br); r.Host != base.Host || r.Scheme != base.Scheme {
			t.Fatalf("safeNext(%q) = %q leads to %s", next, got, r)
		}

		// Through the server.
		q := url.Values{}
		for k, v := range map[string]string{"since": since, "limit": limit, "tail": tail} {
			if v != "" {
				q.Set(k, v)
			}
		}
		rec := serve(h, "/api/v1/events?"+q.Encode(), nil)
		switch {
		case rec.Code >= 500:
			t.Fatalf("events?%s: %d %s", q.Encode(), rec.Code, rec.Body)
		case rec.Code == http.StatusBadRequest:
			var e apiError
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil ||
				!(strings.Contains(e.Detail, `query "since"`) || strings.Contains(e.Detail, `query "limit"`) || strings.Contains(e.Detail, `query "tail"`)) {
				t.Fatalf("events?%s: a 400 that names no parameter: %s", q.Encode(), rec.Body)
			}
		case rec.Code != http.StatusOK:
			t.Fatalf("events?%s: %d %s", q.Encode(), rec.Code, rec.Body)
		}
		if _, err := seqParam("Last-Event-ID", lastID, s.eng.LastSeq()); err != nil && lastID != "" {
			// Refused at once; one let in would stream until it ends.
			rec := serve(h, "/api/v1/events/stream", map[string]string{"Last-Event-ID": lastID})
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `Last-Event-ID`) {
				t.Fatalf("stream from %q: %d %s", lastID, rec.Code, rec.Body)
			}
		}
		rec = serve(h, "/login?next="+url.QueryEscape(next), nil)
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != got {
			t.Fatalf("login?next=%q: %d to %q, want %q", next, rec.Code, rec.Header().Get("Location"), got)
		}
	})
}

// serve sends a GET as the viewer token straight to the handler.
func serve(h http.Handler, target string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "/", nil)
	if u, err := url.ParseRequestURI(target); err == nil {
		req.URL, req.RequestURI = u, target
	}
	req.Header.Set("Authorization", "Bearer tok-viewer")
	for k, v := range hdr {
		req.Header[http.CanonicalHeaderKey(k)] = []string{v} // as sent, even a value Set would refuse
	}
	ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
	defer cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(ctx))
	return rec
}
