package web_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/gateway"
	"github.com/shadowgate/shadowgate/web"
)

// maxPageWeight bounds what one console page costs uncompressed: its
// HTML with the CSS and JS it loads, without the journal's data.
const maxPageWeight = 30 * 1024

var (
	pageAssets  = regexp.MustCompile(`<(?:link rel="stylesheet" href|script src)="(/[^"]+)"`)
	csrfMeta    = regexp.MustCompile(`<meta name="csrf" content="([^"]*)">`)
	journalRows = regexp.MustCompile(`(?s)<tbody>.*</tbody>`)
	// runCards are the runs of the Runs page: the journal's data too, ten
	// a page.
	runCards = regexp.MustCompile(`(?s)<ol class="runs">.*</ol>`)
)

// demo runs the shipped demo (examples/demo.yaml, as `make run` does)
// without its MQTT listener, with a console on a port of its own and two
// API tokens, an operator's and an approver's, to give it a day's work.
// It returns the console's base URL and a function that calls the API.
func demo(t *testing.T) (base string, api func(token, method, path, body string) string) {
	t.Helper()
	cfg, err := gateway.LoadFile("../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MQTT = nil
	for _, name := range []string{"operator", "approver"} {
		role, _ := access.ParseRole(name)
		cfg.Web.Tokens = append(cfg.Web.Tokens, web.Token{Name: name, Role: role, Hash: web.HashToken("tok-" + name)})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, gateway.Options{Config: cfg, Demo: true, WebListener: ln, Ready: func(gateway.Parts) { close(ready) }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the demo stopped with %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the demo did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not start within 30 s")
	}
	base = "http://" + ln.Addr().String()
	api = func(token, method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok-"+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return string(b)
	}
	return base, api
}

var approvalID = regexp.MustCompile(`"id":"(apr-[0-9a-f]+)"`)

// TestPageWeight checks that every console page of the shipped demo, with
// its stylesheet and script, is at most 30 KB uncompressed, with a day's
// work on it: its eight devices, six requests answered (some acted, some
// denied), two waiting and a screenful of runs. It logs each page's
// figure and what it costs over the wire with gzip. The journal page is
// weighed without its rows and the Runs page without its runs, which are
// the journal's data.
func TestPageWeight(t *testing.T) {
	base, api := demo(t)
	ask := func(cmd string) string {
		t.Helper()
		return approvalID.FindStringSubmatch(api("operator", "POST", "/api/v1/commands", cmd))[1]
	}
	answer := func(id, decision, act string) {
		t.Helper()
		api("approver", "POST", "/api/v1/approvals/"+id, `{"decision":"`+decision+`","reason":"weighed",`+act+`}`)
	}
	for _, c := range []struct{ decision, act string }{
		{"approve", `"device":"pump-1","capability":"on","value":true`},
		{"approve", `"device":"heater-1","capability":"on","value":true`},
		{"approve", `"device":"thermostat-1","capability":"setpoint","value":20`},
		{"deny", `"device":"valve-1","capability":"open","value":true`},
		{"deny", `"device":"thermostat-1","capability":"setpoint","value":24`},
		{"deny", `"device":"valve-1","capability":"open","value":false`},
	} {
		answer(ask(`{`+c.act+`,"reason":"a day's work"}`), c.decision, c.act)
	}
	ask(`{"device":"valve-1","capability":"open","value":true,"reason":"fill the tank"}`)
	ask(`{"device":"thermostat-1","capability":"setpoint","value":21.5,"reason":"night"}`)
	for range 12 {
		api("operator", "POST", "/api/v1/commands", `{"device":"tank-1","capability":"level","reason":"weighed"}`)
	}

	jar, _ := cookiejar.New(nil)
	// The pages are asked for as a browser asks, with Sec-Fetch-Site
	// (every browser of the last years sends it, and is sent no CSRF
	// token in a device card's forms: see formToken).
	c := &http.Client{Jar: jar, Transport: fetchMetadata{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// fetch returns the body and its size on the wire: asked with gzip,
	// the transport leaves the body compressed.
	fetch := func(path string, gz bool) (plain []byte, wire int) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := c.Do(req)
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
	page, _ := fetch("/login", false)
	tok := csrfMeta.FindSubmatch(page)
	if tok == nil {
		t.Fatal("the login page has no CSRF token")
	}
	resp, err := c.PostForm(base+"/login", url.Values{"_csrf": {string(tok[1])}, "user": {"demo"}, "password": {"greenhouse-demo"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logging in as the demo's user = %d", resp.StatusCode)
	}
	devices, _ := fetch("/devices", false)
	if n := strings.Count(string(devices), `class="card device`); n < 8 {
		t.Fatalf("the demo's Devices page shows %d devices, want its eight", n)
	}
	approvals, _ := fetch("/approvals", false)
	if n, m := strings.Count(string(approvals), `class="card approval`), strings.Count(string(approvals), `class="card answered"`); n < 2 || m < 6 {
		t.Fatalf("the Approvals page shows %d requests waiting and %d answered, want 2 and 6", n, m)
	}
	for _, page := range []string{"/", "/approvals", "/devices", "/devices/thermostat-1", "/runs", "/journal", "/policy", "/alarms"} {
		weigh(page)
	}
}

// fetchMetadata sends a request as a browser does, with Sec-Fetch-Site:
// same-origin, as a console page's links and forms are.
type fetchMetadata struct{}

func (fetchMetadata) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return http.DefaultTransport.RoundTrip(req)
}

// kb formats a byte count in kilobytes of 1024 bytes.
func kb(n int) string { return fmt.Sprintf("%.1f KB", float64(n)/1024) }

var (
	jsStrings  = regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"`)
	whitespace = regexp.MustCompile(`\s+`)
	jsComments = regexp.MustCompile(`(?m)^\s*//.*$`)
)

// TestTightenedScript checks that the script as it is sent differs from
// its source only in whitespace and comment lines, and that every string
// of the source is sent as it is, its spaces included. (The browser tests
// run the script as it is sent.)
func TestTightenedScript(t *testing.T) {
	base, _ := demo(t)
	resp, err := http.Get(base + "/static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	source, err := os.ReadFile("assets/static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) >= len(source) {
		t.Errorf("the script is sent as %d bytes, its source has %d", len(sent), len(source))
	}
	squeeze := func(b []byte) string { return whitespace.ReplaceAllString(string(b), "") }
	if got, want := squeeze(sent), squeeze(jsComments.ReplaceAll(source, nil)); got != want {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the script sent differs from its source in more than spaces, at %q, not %q", got[i:min(i+60, len(got))], want[i:min(i+60, len(want))])
	}
	for _, s := range jsStrings.FindAll(jsComments.ReplaceAll(source, nil), -1) {
		if !strings.Contains(string(sent), string(s)) {
			t.Errorf("the string %s of the script is not sent as it is", s)
		}
	}
}
