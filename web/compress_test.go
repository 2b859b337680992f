package web

import (
	"bufio"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestResponsesCompressed checks that pages and assets are gzip-compressed
// for a client that accepts it, and plain for one that does not; an answer
// under a kilobyte is sent plain, where gzip would only add bytes.
func TestResponsesCompressed(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser()
	if code := b.login("olga", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	// b.c sends the session cookie; an explicit Accept-Encoding keeps the
	// transport from decompressing by itself, so the test sees the wire.
	get := func(path, accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", s.srv.URL+path, nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
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
		return resp, body
	}
	for _, path := range []string{"/", "/approvals", "/devices", "/runs", "/journal", "/policy", "/alarms",
		"/static/style.css", "/static/app.js", "/metrics"} {
		resp, wire := get(path, "gzip")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Content-Encoding"); got != "gzip" {
			t.Errorf("GET %s with Accept-Encoding: gzip: Content-Encoding %q, want gzip", path, got)
			continue
		}
		if !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
			t.Errorf("GET %s: Vary %q does not name Accept-Encoding", path, resp.Header.Get("Vary"))
		}
		zr, err := gzip.NewReader(strings.NewReader(string(wire)))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if path == "/metrics" && !strings.HasPrefix(string(plain), "# HELP") {
			t.Errorf("GET /metrics: the body is not the text format once unzipped (compressed twice?): %.40q", plain)
		}
		_, raw := get(path, "identity")
		if strings.HasPrefix(path, "/static/") && string(plain) != string(raw) {
			t.Errorf("GET %s: the gzip body differs from the plain one", path)
		}
		t.Logf("%s: %d B plain, %d B gzip", path, len(plain), len(wire))
		if resp, _ := get(path, "identity"); resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("GET %s without gzip: Content-Encoding %q", path, resp.Header.Get("Content-Encoding"))
		}
	}
	if resp, _ := get("/healthz", "gzip"); resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("GET /healthz (3 bytes): Content-Encoding %q, want none", resp.Header.Get("Content-Encoding"))
	}
}

// TestEventStreamNotCompressed checks that the event stream is sent plain
// to a client that accepts gzip, and that each event arrives as it
// happens, not when a buffer fills.
func TestEventStreamNotCompressed(t *testing.T) {
	s := newSite(t, siteOptions{})
	s.waitOnline(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer tok-viewer")
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("Content-Encoding"); got != "" {
		t.Fatalf("the event stream's Content-Encoding = %q, want none", got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	// next waits for a line that starts with prefix.
	next := func(what, prefix string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %s", what)
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-ctx.Done():
				t.Fatalf("no %s within the deadline: the stream is held back", what)
			}
		}
	}
	next("the retry line", "retry: ")
	// Each new event arrives alone, a few bytes, while the stream stays open.
	for i := range 2 {
		s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
		start := time.Now()
		id := next("an event", "id: ")
		t.Logf("event %d (%s) arrived %s after the command", i, id, time.Since(start).Round(time.Millisecond))
	}
}
