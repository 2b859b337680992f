package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAPIBodies posts arbitrary bodies to the endpoints that take one: the
// answer is never a 500 and never a panic, and every error is JSON that
// says what was wrong.
func FuzzAPIBodies(f *testing.F) {
	for _, b := range []string{`{}`, `{"device":"tank-1","capability":"level"}`, `{"device":"valve-1","capability":"open","value":true}`,
		`{"decision":"approve","device":"valve-1","capability":"open","value":true}`, `{"mode":"observe"}`, `{"note":"x"}`,
		`{"value":`, `[]`, `null`, `{"device":5}`, `{"rule_for":"-1h","decision":"approve_and_rule"}`} {
		for path := range uint8(5) {
			f.Add(b, path)
		}
	}
	s := newSite(f, siteOptions{})
	srv, err := New(s.eng, Options{Sessions: s.j.Sessions(), Tokens: []Token{{Name: "admin", Role: 4, Hash: HashToken("tok-admin")}}})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	paths := []string{"/api/v1/commands", "/api/v1/approvals/apr-x", "/api/v1/mode", "/api/v1/attempts/act-x/resolve", "/api/v1/plans/flush/start"}
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
		}
	})
}
