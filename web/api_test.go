package web

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

// site is a server on an engine over a bbolt journal and the sim, with
// users and a token for each role.
type site struct {
	t   testing.TB
	srv *httptest.Server
	web *Server
	eng *runtime.Engine
	j   *journal.DB
	g   *sim.Greenhouse
}

type siteOptions struct {
	mode            string
	approvalTimeout time.Duration
	prepare         func(j *journal.DB) // before the engine starts
	now             func() time.Time    // the server's clock; nil means time.Now
	// journal, driver and options, if set, change what the engine and
	// the server are given.
	journal func(*journal.DB) runtime.Journal
	driver  func(devices.Driver) devices.Driver
	options func(*Options)
	// rules are the configuration's standing rules.
	rules []governance.Rule
	// devices, if set, are the greenhouse's devices in place of tank-1
	// and valve-1; policies are added to valve-1.open's.
	devices  []string
	policies map[string]runtime.CapPolicy
	// labels name devices by id; extra are devices added to the
	// greenhouse's.
	labels map[string]string
	extra  []devices.Device
	// flush is the journal's flush interval; default 20ms.
	flush time.Duration
}

// tokens by role; each is also the token's name.
var tokens = []string{"viewer", "operator", "approver", "approver2", "admin"}

// closed is the valve's safe value.
var closed = value.Bool(false)

func newSite(t testing.TB, o siteOptions) *site {
	t.Helper()
	// Readings are written within a short interval here, so that a test
	// sees them at once; the default interval is the card's.
	j, err := journal.Open(filepath.Join(t.TempDir(), journal.FileName), journal.Options{FlushInterval: cmp.Or(o.flush, 20*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if o.prepare != nil {
		o.prepare(j)
	}
	ids := o.devices
	if ids == nil {
		ids = []string{"tank-1", "valve-1"}
	}
	devs := append(runtimetest.Greenhouse("gh", ids...), o.extra...)
	for i := range devs {
		devs[i].Label = o.labels[devs[i].ID]
	}
	g, err := sim.New(sim.Options{Devices: devs})
	if err != nil {
		t.Fatal(err)
	}
	reg := devices.NewRegistry()
	var drv devices.Driver = g
	if o.driver != nil {
		drv = o.driver(g)
	}
	_ = reg.Add("sim", drv)
	var ej runtime.Journal = j
	if o.journal != nil {
		ej = o.journal(j)
	}
	policies := map[string]runtime.CapPolicy{"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true},
		Interlocks: []governance.Condition{{Sensor: "tank-1.level", Op: governance.OpGT, Value: value.Number(10), MaxAge: time.Minute}},
		Confirm:    &runtime.Confirm{ReadBack: true, Within: time.Second}, Safe: &closed, TTL: time.Hour}}
	maps.Copy(policies, o.policies)
	twoPerson := governance.ShippedModes()[governance.ModeSupervised]
	twoPerson.Name, twoPerson.Base, twoPerson.ApprovalsRequired = "two-person", governance.ModeSupervised, 2
	eng, err := runtime.New(context.Background(), runtime.Options{Registry: reg, Journal: ej, Mode: o.mode,
		ApprovalTimeout: o.approvalTimeout, Rules: o.rules,
		Modes:    []governance.Mode{twoPerson},
		Policies: policies,
		Plans: []runtime.Plan{{Name: "flush", Steps: []runtime.PlanStep{{Op: runtime.OpRead, Device: "tank-1", Capability: "level"}}},
			{Name: "soak", Steps: []runtime.PlanStep{{Op: runtime.OpWait, Wait: time.Hour}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	h, _ := bcrypt.GenerateFromPassword([]byte("password-1"), bcrypt.MinCost)
	users, _ := access.NewUsers([]access.User{{Name: "ann", Role: access.Approver, Hash: h}, {Name: "olga", Role: access.Operator, Hash: h},
		{Name: "vera", Role: access.Viewer, Hash: h}, {Name: "adam", Role: access.Admin, Hash: h}})
	var toks []Token
	for _, name := range tokens {
		r, _ := access.ParseRole(strings.TrimSuffix(name, "2"))
		toks = append(toks, Token{Name: name, Role: r, Hash: HashToken("tok-" + name)})
	}
	wo := Options{Users: users, Tokens: toks, Sessions: j.Sessions(), Verify: j.Verify, Now: o.now}
	if o.options != nil {
		o.options(&wo)
	}
	s, err := New(eng, wo)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		s.closeStreams()
		cancel()
		<-done
		_ = j.Close()
	})
	st := &site{t: t, srv: srv, web: s, eng: eng, j: j, g: g}
	st.waitOnline(len(ids) + len(o.extra))
	return st
}

func (s *site) waitOnline(n int) {
	deadline := time.Now().Add(5 * time.Second)
	for len(s.eng.Devices()) < n {
		if time.Now().After(deadline) {
			s.t.Fatal("devices never came online")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// call sends a request with a bearer token ("" for none) and returns the
// status and the body.
func (s *site) call(method, path, token, body string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer tok-"+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *site) expect(method, path, token, body string, status int, contains string) string {
	s.t.Helper()
	got, b := s.call(method, path, token, body)
	plain := strings.NewReplacer(`\"`, `"`, `\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(b)
	if got != status || !strings.Contains(plain, contains) {
		s.t.Fatalf("%s %s as %q: %d %s; want %d containing %q", method, path, token, got, b, status, contains)
	}
	return b
}

func TestAuthAndRoles(t *testing.T) {
	s := newSite(t, siteOptions{})
	s.expect("GET", "/healthz", "", "", 200, "ok")
	s.expect("GET", "/readyz", "", "", 200, "ready")
	b := s.expect("GET", "/api/v1/devices", "", "", 401, `"error":"Unauthorized"`)
	if !strings.Contains(b, `"detail"`) {
		t.Fatalf("an error without detail: %s", b)
	}
	s.expect("GET", "/api/v1/devices", "nobody", "", 401, "unknown bearer token")
	s.expect("POST", "/api/v1/commands", "", `{"device":"tank-1","capability":"level"}`, 401, "log in")
	s.expect("GET", "/api/v1/devices", "viewer", "", 200, `"id":"valve-1"`)
	s.expect("POST", "/api/v1/commands", "viewer", `{"device":"tank-1","capability":"level"}`, 403, "needs the operator role")
	s.expect("POST", "/api/v1/approvals/x", "operator", `{}`, 403, "needs the approver role")
	s.expect("DELETE", "/api/v1/rules/x", "approver", "", 403, "needs the admin role")
	s.expect("GET", "/metrics", "", "", 401, "")
	s.expect("GET", "/metrics", "viewer", "", 200, "shadowgate_pending_approvals")
	// Pages send people to the login.
	req, _ := http.NewRequest("GET", s.srv.URL+"/approvals", nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("a page without a login = %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestBadRequestsNameTheProblem(t *testing.T) {
	s := newSite(t, siteOptions{})
	s.expect("POST", "/api/v1/commands", "operator", `{"device": 5}`, 400, `field "device": want a string`)
	s.expect("POST", "/api/v1/commands", "operator", `[]`, 400, `the body: want a JSON object, got a JSON array`)
	s.expect("POST", "/api/v1/mode", "operator", `{"mode": ["observe"]}`, 400, `field "mode": want a string, got a JSON array`)
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":"yes"}`, 400, `field "value": want a bool`)
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","valu":1}`, 400, `unknown field "valu"`)
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"boiler","capability":"on","value":true}`, 404, "boiler is not online")
	s.expect("POST", "/api/v1/commands", "operator", `{`, 400, "malformed JSON")
	s.expect("POST", "/api/v1/commands", "operator", `{"capability":"open"}`, 400, `"device" and "capability" are required`)
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"x","pad":"`+strings.Repeat("x", 70<<10)+`"}`, 413, "")
	s.expect("GET", "/api/v1/events?since=abc", "viewer", "", 400, `query "since"`)
	s.expect("POST", "/api/v1/plans/nope/start", "operator", `{}`, 404, "unknown plan")
	s.expect("POST", "/api/v1/plans/flush/start", "operator", `{"id":"p-1"}`, 202, `"plan":"flush"`)
	s.expect("GET", "/api/v1/runs", "viewer", "", 200, `"plan":"flush"`)
	// One run of a plan at a time: a second start is refused, naming the
	// running one.
	soak := s.expect("POST", "/api/v1/plans/soak/start", "operator", `{"id":"s-1"}`, 202, `"plan":"soak"`)
	run := regexp.MustCompile(`run-[0-9a-f]+`).FindString(soak)
	s.expect("POST", "/api/v1/plans/soak/start", "operator", `{"id":"s-2"}`, 409, "plan soak is already running as "+run)
	// Which a person can cancel, with a reason the run's end keeps.
	s.expect("POST", "/api/v1/runs/"+run+"/cancel", "viewer", `{}`, 403, "")
	s.expect("POST", "/api/v1/runs/run-nope/cancel", "operator", `{}`, 404, "run not found")
	s.expect("POST", "/api/v1/runs/"+run+"/cancel", "operator", `{"reason":"tank being cleaned","x":1}`, 400, `unknown field "x"`)
	s.expect("POST", "/api/v1/runs/"+run+"/cancel", "operator", `{"reason":"\u0000"}`, 400, "a cancel's reason needs words a person can read")
	s.expect("POST", "/api/v1/runs/"+run+"/cancel", "operator", `{"reason":"tank being cleaned"}`, 202, `"status":"cancelling"`)
	if rec, err := s.eng.Wait(t.Context(), run); err != nil || rec.End != runtime.EndCancelled || !strings.Contains(rec.Why, "cancelled by api:operator: tank being cleaned") {
		t.Fatalf("the cancelled run = %+v, %v", rec, err)
	}
	s.expect("POST", "/api/v1/runs/"+run+"/cancel", "operator", `{}`, 409, "the run has ended")
	s.expect("POST", "/api/v1/plans/soak/start", "operator", `{"id":"s-3"}`, 202, `"plan":"soak"`)
	s.expect("GET", "/api/v1/runs?plan=flush&origin=api", "viewer", "", 200, `"plan":"flush"`)
	if _, body := s.call("GET", "/api/v1/runs?plan=other", "viewer", ""); body != "[]\n" && body != "[]" {
		t.Fatalf("runs of another plan = %s", body)
	}
	s.expect("POST", "/api/v1/mode", "operator", `{"mode":"turbo"}`, 400, `unknown mode`)
	s.expect("GET", "/api/v1/rules/none", "viewer", "", 404, "not in force")
	s.expect("POST", "/api/v1/attempts/act-x/resolve", "admin", `{"found":"acted","note":"x"}`, 404, "not locked")
	s.expect("GET", "/api/v1/journal/verify", "viewer", "", 200, `"ok":true`)
}

var approvalID = regexp.MustCompile(`"id":"(apr-[0-9a-f]+)"`)

func TestCommandApprovalAndRules(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"id":"c1","reason":"flush"}`,
		202, `"outcome":"pending_approval"`)
	id := approvalID.FindStringSubmatch(b)[1]
	list := s.expect("GET", "/api/v1/approvals", "viewer", "", 200, id)
	if !strings.Contains(list, `"condition":"tank-1.level \u003e 10`) && !strings.Contains(list, `"condition":"tank-1.level > 10`) {
		t.Fatalf("the approval does not show its interlock: %s", list)
	}
	// An answer must name the act it was shown.
	s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"approve","device":"valve-1","capability":"open","value":false}`,
		409, "the answer must name that act")
	s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"deny","device":"valve-1","capability":"open","value":true}`,
		400, `a denial says why`)
	s.expect("POST", "/api/v1/approvals/apr-none", "approver", `{"decision":"approve"}`, 404, "does not exist")
	s.expect("POST", "/api/v1/approvals/"+id, "approver",
		`{"decision":"approve_and_rule","device":"valve-1","capability":"open","value":true,"rule_for":"30m","reason":"night shift"}`,
		200, `"status":"approved"`)
	s.expect("POST", "/api/v1/approvals/"+id, "admin", `{"decision":"approve","device":"valve-1","capability":"open","value":true}`,
		409, "approved; it can no longer be answered")
	// The valve moves before the receipt is journaled: wait for the run's
	// end, not for the world.
	run := regexp.MustCompile(`"run":"(run-[0-9a-f]+)"`).FindStringSubmatch(b)[1]
	deadline := time.Now().Add(5 * time.Second)
	for !s.g.State().Valve || !strings.Contains(s.expect("GET", "/api/v1/runs?status=ended", "viewer", "", 200, ""), run) {
		if time.Now().After(deadline) {
			t.Fatal("the approved command never acted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The same id gets the first outcome back, acted, and acts nothing more.
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"id":"c1"}`, 200, `"replayed":true`)
	rules := s.expect("GET", "/api/v1/rules", "viewer", "", 200, `"principal":"api:operator"`)
	rid := regexp.MustCompile(`"id":"(rule-[0-9a-f]+)"`).FindStringSubmatch(rules)[1]
	s.expect("GET", "/api/v1/rules/"+rid, "viewer", "", 200, rid)
	// Within the rule the next command runs without asking.
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"id":"c2"}`, 200, `"outcome":"acted"`)
	s.expect("DELETE", "/api/v1/rules/"+rid, "admin", "", 204, "")
	s.expect("DELETE", "/api/v1/rules/"+rid, "admin", "", 404, "")
	s.expect("GET", "/api/v1/events?kind=approval_answered&device=valve-1", "viewer", "", 200, `"decision":"approve_and_rule"`)
	s.expect("GET", "/api/v1/devices", "viewer", "", 200, `"confirmation":"confirmed"`)
}

func TestFourEyes(t *testing.T) {
	s := newSite(t, siteOptions{mode: "two-person"})
	b := s.expect("POST", "/api/v1/commands", "approver", `{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval")
	id := approvalID.FindStringSubmatch(b)[1]
	act := `"device":"valve-1","capability":"open","value":true`
	s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"approve",`+act+`}`, 403, "two people other than the requester")
	s.expect("POST", "/api/v1/approvals/"+id, "approver2", `{"decision":"approve",`+act+`}`, 200, `"status":"pending"`)
	s.expect("POST", "/api/v1/approvals/"+id, "approver2", `{"decision":"approve",`+act+`}`, 403, "a second person must")
	s.expect("POST", "/api/v1/approvals/"+id, "admin", `{"decision":"approve",`+act+`}`, 200, `"status":"approved"`)
}

func TestExpiredApprovalIsAConflict(t *testing.T) {
	s := newSite(t, siteOptions{approvalTimeout: 100 * time.Millisecond})
	b := s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval")
	id := approvalID.FindStringSubmatch(b)[1]
	time.Sleep(300 * time.Millisecond)
	s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"approve","device":"valve-1","capability":"open","value":true}`,
		409, "is expired")
}

func TestModeChanges(t *testing.T) {
	s := newSite(t, siteOptions{})
	s.expect("GET", "/api/v1/mode", "viewer", "", 200, `"name":"supervised"`)
	b := s.expect("POST", "/api/v1/mode", "operator", `{"mode":"maintenance","reason":"pump swap"}`, 202, "an admin must approve")
	id := approvalID.FindStringSubmatch(b)[1]
	s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"approve","mode":"maintenance"}`, 403, "needs an admin")
	s.expect("POST", "/api/v1/approvals/"+id, "admin", `{"decision":"approve","mode":"maintenance"}`, 200, `"status":"approved"`)
	s.expect("GET", "/api/v1/mode", "viewer", "", 200, `"name":"maintenance"`)
	s.expect("POST", "/api/v1/mode", "operator", `{"mode":"observe"}`, 200, `"name":"observe"`)
}

func TestResolveALockedActuator(t *testing.T) {
	var attempt string
	s := newSite(t, siteOptions{prepare: func(j *journal.DB) {
		a := runtime.Attempt{Key: "mqtt:x/1", ID: "act-locked", Device: "valve-1", Capability: "open", Value: value.Bool(true), Updated: time.Now()}
		for _, st := range []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting} {
			a.State = st
			rec := a
			if _, err := j.Commit(context.Background(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindInvoked}, Durability: runtime.Sync, Attempt: &rec}); err != nil {
				t.Fatal(err)
			}
		}
		attempt = a.ID
	}})
	s.expect("GET", "/api/v1/locks", "viewer", "", 200, attempt)
	s.expect("POST", "/api/v1/attempts/"+attempt+"/resolve", "approver", `{"note":"seen shut"}`, 403, "needs the admin role")
	s.expect("POST", "/api/v1/attempts/"+attempt+"/resolve", "admin", `{"found":"not_acted"}`, 400, "needs a note")
	s.expect("POST", "/api/v1/attempts/"+attempt+"/resolve", "admin", `{"found":"not_acted","note":"valve seen shut on site"}`, 200, `"state":"reconciled"`)
	s.expect("POST", "/api/v1/attempts/"+attempt+"/resolve", "admin", `{"found":"not_acted","note":"again"}`, 404, "not locked")
}

// browser is a plain HTTP client with a cookie jar: it does not send
// Sec-Fetch-Site, so the CSRF token is what protects it.
type browser struct {
	t testing.TB
	c *http.Client
	s *site
}

func (s *site) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: s.t, s: s, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf" content="([^"]*)">`)

// page gets a page and returns its status, body and CSRF token.
func (b *browser) page(path string) (int, string, string) {
	resp, err := b.c.Get(b.s.srv.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	tok := ""
	if m := csrfMeta.FindStringSubmatch(string(body)); m != nil {
		tok = m[1]
	}
	return resp.StatusCode, string(body), tok
}

func (b *browser) login(user, password string) int {
	_, _, tok := b.page("/login")
	resp, err := b.c.PostForm(b.s.srv.URL+"/login", url.Values{"_csrf": {tok}, "user": {user}, "password": {password}})
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestCSRFAndLogins(t *testing.T) {
	clk := newClock()
	s := newSite(t, siteOptions{now: clk.now})
	b := s.browser()
	// A login form without its token is refused.
	resp, _ := b.c.PostForm(s.srv.URL+"/login", url.Values{"user": {"olga"}, "password": {"password-1"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a login without a CSRF token = %d", resp.StatusCode)
	}
	resp.Body.Close()
	if code := b.login("olga", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, _, tok := b.page("/devices")
	post := func(csrf string) int {
		req, _ := http.NewRequest("POST", s.srv.URL+"/api/v1/commands", strings.NewReader(`{"device":"tank-1","capability":"level"}`))
		req.Header.Set("Content-Type", "application/json")
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusForbidden {
		t.Fatalf("a cookie POST without a CSRF token = %d, want 403", code)
	}
	if code := post("forged"); code != http.StatusForbidden {
		t.Fatalf("a cookie POST with a wrong CSRF token = %d, want 403", code)
	}
	if code := post(tok); code != http.StatusOK {
		t.Fatalf("a cookie POST with its CSRF token = %d, want 200", code)
	}
	// Logins are rate-limited per client address, and journaled.
	bad := s.browser()
	for range 5 {
		if code := bad.login("ann", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("a wrong password = %d", code)
		}
	}
	if code := bad.login("ann", "password-1"); code != http.StatusTooManyRequests {
		t.Fatalf("the sixth login from a guessing address = %d, want 429", code)
	}
	// The failures are journaled as one summary when the window ends.
	clk.add(2 * time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := s.call("GET", "/api/v1/events?kind=login", "viewer", "")
		if strings.Contains(body, `"action":"login_failed"`) && strings.Contains(body, `"failures":5`) &&
			strings.Contains(body, `"refused":1`) && strings.Contains(body, `"action":"login"`) {
			if strings.Contains(body, "password-1") || strings.Contains(body, "guess") {
				t.Fatal("a password reached the journal")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logins not journaled: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Logout ends the session.
	_, _, tok = b.page("/")
	resp, _ = b.c.PostForm(s.srv.URL+"/logout", url.Values{"_csrf": {tok}})
	resp.Body.Close()
	if code, _, _ := b.page("/devices"); code != http.StatusSeeOther {
		t.Fatalf("a page after logout = %d", code)
	}
}

// sse reads server-sent events until n have arrived.
func sse(t *testing.T, s *site, lastID string, n int) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer tok-viewer")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var ids []uint64
	sc := bufio.NewScanner(resp.Body)
	for len(ids) < n && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			id, _ := strconv.ParseUint(v, 10, 64)
			ids = append(ids, id)
		}
	}
	if len(ids) < n {
		t.Fatalf("got %d of %d events", len(ids), n)
	}
	return ids
}

func TestEventStreamResumes(t *testing.T) {
	s := newSite(t, siteOptions{})
	read := func() {
		if _, err := s.eng.Read(context.Background(), "test", "tank-1", "level"); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		read()
	}
	first := sse(t, s, "0", 8)
	for range 10 {
		read()
	}
	rest := sse(t, s, fmt.Sprint(first[len(first)-1]), 10)
	all := append(first, rest...)
	for i := 1; i < len(all); i++ {
		if all[i] != all[i-1]+1 {
			t.Fatalf("the stream resumed with a gap or a repeat: %v", all)
		}
	}
	var evs []runtime.Event
	_, body := s.call("GET", "/api/v1/events?since=0&limit=18", "viewer", "")
	_ = json.Unmarshal([]byte(body), &evs)
	if len(evs) != 18 || evs[0].Seq != all[0] || evs[17].Seq != all[17] {
		t.Fatalf("the stream and /events disagree: %v and %d events", all, len(evs))
	}
}

// TestCookieRequestWithoutCSRFSaysHow: a script that logged in with the
// console's form and then calls the API is told which header to send.
func TestCookieRequestWithoutCSRFSaysHow(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser()
	if code := b.login("ann", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/api/v1/mode", strings.NewReader(`{"mode":"observe"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "X-CSRF-Token header") {
		t.Fatalf("a cookie request without its CSRF token = %d %s, want 403 naming the header", resp.StatusCode, body)
	}
}

// TestAnswerAnEnumRequest: an approval of an enum actuator's request is
// answered through the API naming the value asked for; it was refused as
// not naming the act (409), since the value was read without its enum.
func TestAnswerAnEnumRequest(t *testing.T) {
	vent := devices.Device{ID: "vent-1", Area: "gh", Driver: "sim", Address: "vent", Capabilities: []devices.Capability{{Name: "position",
		Kind: devices.KindActuator, Type: value.TypeEnum, Enum: []string{"closed", "half", "open"}, ReadBack: true}}}
	s := newSite(t, siteOptions{extra: []devices.Device{vent}, policies: map[string]runtime.CapPolicy{
		"vent-1.position": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Confirm: &runtime.Confirm{ReadBack: true, Within: time.Second}}}})
	b := s.expect("POST", "/api/v1/commands", "operator", `{"device":"vent-1","capability":"position","value":"half","reason":"cool down"}`, 202, "pending_approval")
	var r struct {
		Approval struct{ ID string } `json:"approval"`
	}
	if err := json.Unmarshal([]byte(b), &r); err != nil || r.Approval.ID == "" {
		t.Fatalf("no approval in %s (%v)", b, err)
	}
	s.expect("POST", "/api/v1/approvals/"+r.Approval.ID, "approver", `{"decision":"approve","device":"vent-1","capability":"position","value":"open"}`,
		409, "the answer must name that act")
	s.expect("POST", "/api/v1/approvals/"+r.Approval.ID, "approver", `{"decision":"approve","device":"vent-1","capability":"position","value":"half"}`,
		200, `"status":"approved"`)
}

// TestEventStreamSendsAReadingAsItIsTaken: with readings written only
// every hour, the stream sends a reading at once as a "reading" event
// without an id (a client's Last-Event-ID stays where it was), and the
// same event again, with its id and kind, once a durable point writes it.
func TestEventStreamSendsAReadingAsItIsTaken(t *testing.T) {
	s := newSite(t, siteOptions{flush: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, lines := openStream(ctx, t, s.srv.URL+"/api/v1/events/stream", func(r *http.Request) { r.Header.Set("Authorization", "Bearer tok-viewer") })
	// next returns the next event of the stream: its id ("" if none),
	// its name and its data.
	next := func(what string) (id, name, data string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %s", what)
				}
				switch {
				case strings.HasPrefix(l, "id: "):
					id = l[4:]
				case strings.HasPrefix(l, "event: "):
					name = l[7:]
				case strings.HasPrefix(l, "data: "):
					data = l[6:]
				case l == "" && name != "":
					return id, name, data
				}
			case <-ctx.Done():
				t.Fatalf("no event: %s", what)
			}
		}
	}
	obs, err := s.eng.Read(t.Context(), "test", "tank-1", "level")
	if err != nil || obs.Reading == nil {
		t.Fatalf("reading: %+v, %v", obs, err)
	}
	var pending runtime.Event
	for pending.Kind != runtime.KindObserved {
		id, name, data := next("the reading, before it is written")
		if name != "reading" {
			continue // the start's own events
		}
		if id != "" {
			t.Fatalf("a reading not yet written has the id %s", id)
		}
		if err := json.Unmarshal([]byte(data), &pending); err != nil {
			t.Fatal(err)
		}
	}
	if evs, _ := s.eng.Events(t.Context(), pending.Seq-1, 1); len(evs) != 0 {
		t.Fatalf("the reading sent as pending is already written: %+v", evs)
	}
	// A client may resume from any sequence the gateway has given out,
	// one not yet written included.
	func() {
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		resp, _ := openStream(rctx, t, fmt.Sprintf("%s/api/v1/events/stream?since=%d", s.srv.URL, pending.Seq),
			func(r *http.Request) { r.Header.Set("Authorization", "Bearer tok-viewer") })
		if resp.StatusCode != 200 {
			t.Fatalf("a stream from the pending reading's sequence: %s", resp.Status)
		}
	}()
	// A note is written within moments, and the reading with it.
	if _, err := s.eng.Note(t.Context(), runtime.KindLink, "", map[string]string{"state": "up"}); err != nil {
		t.Fatal(err)
	}
	for {
		id, name, data := next("the reading, once written")
		if name == "reading" {
			t.Fatalf("a reading sent twice as pending: %s", data)
		}
		if id == fmt.Sprint(pending.Seq) {
			if name != string(runtime.KindObserved) || !strings.Contains(data, pending.Hash) {
				t.Fatalf("event %s is %s %s, want the reading %s", id, name, data, pending.Hash)
			}
			return
		}
	}
}

// openStream opens an event stream at url, the request as auth sets it,
// and returns the response and its lines, read until the stream ends
// (ctx, or the end of the test, ends it).
func openStream(ctx context.Context, t *testing.T, url string, auth func(*http.Request)) (*http.Response, <-chan string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	lines := make(chan string, 64)
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
	return resp, lines
}
