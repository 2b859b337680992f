package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/shadowgate/shadowgate/gateway"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
)

// TestAdversarialFourEyesAcrossSurfaces runs a gateway whose mode needs two
// people (testdata/foureyes.yaml) and tries to get around four-eyes through
// its real surfaces: a paho MQTT client asks, on the gateway's broker and
// through a site broker the uplink listens to, and people answer over HTTP,
// logged in through the console (cookie and CSRF token) or with a bearer
// token held by the same person. A person is one approver whatever
// surface they come through; the requester never approves; a rule and a
// mode change need as many people as the act they stand for. The driver's
// own count of writes (the sim's state file) shows what really acted.
func TestAdversarialFourEyesAcrossSurfaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	gw := startFourEyes(ctx, t)
	c := &feCast{t: t, gw: gw, appr: gw.mqttAs(ctx, "appr"), site: gw.siteClient(ctx),
		apprConsole: gw.console(ctx, "appr"), apprToken: gw.token("appr-ci"),
		carolConsole: gw.console(ctx, "carol"), carolToken: gw.token("carol-ci"),
		annConsole: gw.console(ctx, "ann"), annToken: gw.token("ann-ci"),
		bobConsole: gw.console(ctx, "bob"), olgaConsole: gw.console(ctx, "olga")}
	ask := c.requesterCannotApprove(ctx)
	c.onePersonIsOneApproval(ctx, ask)
	c.rulesNeedTwoPeople(ctx)
	c.uplinkIsItsUser(ctx)
	c.modeChangeNeedsTwoAdmins(ctx)
	// Nothing else acted along the way.
	gw.wantWrites(ctx, c.annToken, "valve-1", "open", 3)
	gw.wantWrites(ctx, c.annToken, "heater-1", "on", 1)
}

// feCast are the people of testdata/foureyes.yaml on their surfaces: appr
// (approver) asks over MQTT and through the site broker (the uplink is
// appr); carol (approver), ann and bob (admins) answer; olga (operator)
// asks for a mode.
type feCast struct {
	t                                     *testing.T
	gw                                    *feGateway
	appr, site                            *feMQTT
	apprConsole, carolConsole, annConsole *feHTTP
	bobConsole, olgaConsole               *feHTTP
	apprToken, carolToken, annToken       *feHTTP
}

// requesterCannotApprove: appr asks over MQTT and approves his own request
// as himself on every other surface; each is refused, nothing is answered,
// nothing acts. It returns the request, still pending.
func (c *feCast) requesterCannotApprove(ctx context.Context) command.Reply {
	t, gw := c.t, c.gw
	t.Helper()
	ask := c.appr.command(ctx, "valve-1", "open", "true", "fe-valve-open")
	for _, try := range []struct {
		who      *feHTTP
		decision string
	}{{c.apprConsole, "approve"}, {c.apprToken, "approve"}, {c.apprConsole, "approve_and_rule"}, {c.apprToken, "approve_and_rule"}} {
		status, body := try.who.answer(ctx, ask.Approval.ID, try.decision, "valve-1", "open", "true")
		if status != http.StatusForbidden && status != http.StatusConflict {
			t.Errorf("the requester appr answering %s as %s = %d %s, want 403 or 409", try.decision, try.who.name, status, body)
		}
	}
	// The console's own form, as a browser posts it.
	c.apprConsole.form(ctx, "/approvals/"+ask.Approval.ID, url.Values{"decision": {"approve"}, "device": {"valve-1"},
		"capability": {"open"}, "value": {"true"}})
	if ap := gw.approval(ctx, c.annToken, ask.Approval.ID); ap.Status != runtime.ApprovalPending || len(ap.Answers) != 0 || ap.Required != 2 {
		t.Fatalf("after the requester's own approvals, the approval = %s with %d answers (%+v), want pending, none, 2 required",
			ap.Status, len(ap.Answers), ap.Answers)
	}
	gw.wantWrites(ctx, c.annToken, "valve-1", "open", 0)
	gw.wantRules(ctx, c.annToken, 0)
	return ask
}

// onePersonIsOneApproval: carol approves with her token and tries again
// in the console; nothing acts until a second person approves, then the
// act happens once and the requester gets its receipt.
func (c *feCast) onePersonIsOneApproval(ctx context.Context, ask command.Reply) {
	t, gw := c.t, c.gw
	t.Helper()
	if status, body := c.carolToken.answer(ctx, ask.Approval.ID, "approve", "valve-1", "open", "true"); status != http.StatusOK ||
		decode[runtime.Approval](t, body).Status != runtime.ApprovalPending {
		t.Fatalf("carol's first approval = %d %s, want 200 and still pending", status, body)
	}
	for _, who := range []*feHTTP{c.carolConsole, c.carolToken} {
		if status, body := who.answer(ctx, ask.Approval.ID, "approve", "valve-1", "open", "true"); status != http.StatusForbidden && status != http.StatusConflict {
			t.Errorf("carol approving again as %s = %d %s, want 403 or 409", who.name, status, body)
		}
	}
	if ap := gw.approval(ctx, c.annToken, ask.Approval.ID); ap.Status != runtime.ApprovalPending || len(ap.Answers) != 1 {
		t.Fatalf("after carol's approvals, the approval = %s with answers %+v, want pending with one", ap.Status, ap.Answers)
	}
	gw.wantWrites(ctx, c.annToken, "valve-1", "open", 0)
	if status, body := c.annConsole.answer(ctx, ask.Approval.ID, "approve", "valve-1", "open", "true"); status != http.StatusOK ||
		decode[runtime.Approval](t, body).Status != runtime.ApprovalApproved {
		t.Fatalf("ann's approval, the second person's = %d %s, want 200 and approved", status, body)
	}
	c.appr.wantActed(ctx, "fe-valve-open", "valve-1", "open")
	gw.wantWrites(ctx, c.annToken, "valve-1", "open", 1)
	// An answered approval takes no more answers, from anyone, anywhere.
	for _, who := range []*feHTTP{c.annToken, c.bobConsole, c.carolToken} {
		if status, body := who.answer(ctx, ask.Approval.ID, "approve", "valve-1", "open", "true"); status != http.StatusConflict {
			t.Errorf("%s approving an approved request = %d %s, want 409", who.name, status, body)
		}
	}
	if obs, err := gw.parts.Engine.Read(ctx, "test:four-eyes", "valve-1", "open"); err != nil || obs.Reading == nil || !obs.Reading.Value.Bool {
		t.Errorf("the valve read back through the engine = %+v, %v; want open", obs, err)
	}
	gw.wantWrites(ctx, c.annToken, "valve-1", "open", 1)
}

// rulesNeedTwoPeople: a rule stands for future acts, so it needs as many
// people asking for it as the act needed approvals. One person's
// approve_and_rule makes none; a second person who only approves makes
// none either; two who ask make one.
func (c *feCast) rulesNeedTwoPeople(ctx context.Context) {
	t, gw := c.t, c.gw
	t.Helper()
	closeValve := c.appr.command(ctx, "valve-1", "open", "false", "fe-valve-close")
	if status, body := c.carolToken.answerRule(ctx, closeValve.Approval.ID, "valve-1", "open", "false"); status != http.StatusOK {
		t.Fatalf("carol's approve_and_rule = %d %s", status, body)
	}
	gw.wantRules(ctx, c.annToken, 0)
	if status, body := c.annConsole.answer(ctx, closeValve.Approval.ID, "approve", "valve-1", "open", "false"); status != http.StatusOK {
		t.Fatalf("ann's plain approval after carol's approve_and_rule = %d %s", status, body)
	}
	c.appr.wantActed(ctx, "fe-valve-close", "valve-1", "open")
	gw.wantWrites(ctx, c.annToken, "valve-1", "open", 2)
	gw.wantRules(ctx, c.annToken, 0)

	heat := c.appr.command(ctx, "heater-1", "on", "true", "fe-heat")
	if status, body := c.carolConsole.answerRule(ctx, heat.Approval.ID, "heater-1", "on", "true"); status != http.StatusOK ||
		decode[runtime.Approval](t, body).Status != runtime.ApprovalPending {
		t.Fatalf("carol's approve_and_rule = %d %s, want 200 and still pending", status, body)
	}
	// The same person asking again through the other surface changes nothing.
	if status, body := c.carolToken.answerRule(ctx, heat.Approval.ID, "heater-1", "on", "true"); status != http.StatusForbidden && status != http.StatusConflict {
		t.Errorf("carol's second approve_and_rule as %s = %d %s, want 403 or 409", c.carolToken.name, status, body)
	}
	gw.wantRules(ctx, c.annToken, 0)
	gw.wantWrites(ctx, c.annToken, "heater-1", "on", 0)
	if status, body := c.bobConsole.answerRule(ctx, heat.Approval.ID, "heater-1", "on", "true"); status != http.StatusOK ||
		decode[runtime.Approval](t, body).Status != runtime.ApprovalApproved {
		t.Fatalf("bob's approve_and_rule, the second person's = %d %s, want 200 and approved", status, body)
	}
	c.appr.wantActed(ctx, "fe-heat", "heater-1", "on")
	gw.wantWrites(ctx, c.annToken, "heater-1", "on", 1)
	rules := gw.wantRules(ctx, c.annToken, 1)
	if r := rules[0].Rule; r.Device != "heater-1" || r.Capability != "on" || r.Approvals != 2 || r.Principal != "mqtt:appr" ||
		!strings.Contains(r.MadeBy, "carol") || !strings.Contains(r.MadeBy, "bob") {
		t.Errorf("the rule two people made = %+v, want heater-1.on for mqtt:appr, made by carol and bob, 2 approvals", r)
	}
}

// uplinkIsItsUser: appr asks through the site broker and the uplink
// carries the command; the uplink is appr, so appr still cannot approve it.
func (c *feCast) uplinkIsItsUser(ctx context.Context) {
	t, gw := c.t, c.gw
	t.Helper()
	up := c.site.command(ctx, "valve-1", "open", "true", "fe-uplink-open")
	for _, who := range []*feHTTP{c.apprToken, c.apprConsole} {
		if status, body := who.answer(ctx, up.Approval.ID, "approve", "valve-1", "open", "true"); status != http.StatusForbidden && status != http.StatusConflict {
			t.Errorf("appr approving his uplink request as %s = %d %s, want 403 or 409", who.name, status, body)
		}
	}
	if ap := gw.approval(ctx, c.annToken, up.Approval.ID); ap.Principal != "uplink:fe-site" || len(ap.Answers) != 0 {
		t.Fatalf("the uplink's request after appr's answers = %+v, want uplink:fe-site's, unanswered", ap)
	}
	gw.wantWrites(ctx, c.annToken, "valve-1", "open", 2)
	for _, who := range []*feHTTP{c.carolToken, c.annToken} {
		if status, body := who.answer(ctx, up.Approval.ID, "approve", "valve-1", "open", "true"); status != http.StatusOK {
			t.Fatalf("%s approving the uplink's request = %d %s", who.name, status, body)
		}
	}
	c.site.wantActed(ctx, "fe-uplink-open", "valve-1", "open")
	gw.wantWrites(ctx, c.annToken, "valve-1", "open", 3)
}

// modeChangeNeedsTwoAdmins: leaving the two-person mode for a wider one is
// itself an act that needs two different admins, neither the one who asked.
func (c *feCast) modeChangeNeedsTwoAdmins(ctx context.Context) {
	t, gw := c.t, c.gw
	t.Helper()
	status, body := c.olgaConsole.post(ctx, "/api/v1/mode", `{"mode":"supervised","reason":"fewer approvals for the night shift"}`)
	var change struct {
		Approval runtime.Approval `json:"approval"`
	}
	if err := json.Unmarshal(body, &change); status != http.StatusAccepted || err != nil || change.Approval.ID == "" {
		t.Fatalf("olga asking for the supervised mode = %d %s (%v), want 202 with an approval", status, body, err)
	}
	if change.Approval.Required != 2 || !change.Approval.AdminOnly {
		t.Errorf("the mode change asks for %d approvals (admin only %v), want 2 from admins", change.Approval.Required, change.Approval.AdminOnly)
	}
	modeAnswer := func(who *feHTTP) (int, []byte) {
		return who.post(ctx, "/api/v1/approvals/"+change.Approval.ID, `{"decision":"approve","mode":"supervised","reason":"ok"}`)
	}
	if status, body := modeAnswer(c.annConsole); status != http.StatusOK || decode[runtime.Approval](t, body).Status != runtime.ApprovalPending {
		t.Fatalf("ann's approval of the mode change = %d %s, want 200 and still pending", status, body)
	}
	gw.wantMode(ctx, c.carolToken, "two-person")
	for _, who := range []*feHTTP{c.annToken, c.annConsole, c.carolToken, c.olgaConsole} {
		if status, body := modeAnswer(who); status != http.StatusForbidden && status != http.StatusConflict {
			t.Errorf("%s approving the mode change = %d %s, want 403 or 409", who.name, status, body)
		}
		gw.wantMode(ctx, c.carolToken, "two-person")
	}
	if status, body := modeAnswer(c.bobConsole); status != http.StatusOK || decode[runtime.Approval](t, body).Status != runtime.ApprovalApproved {
		t.Fatalf("bob's approval of the mode change, the second admin's = %d %s, want 200 and approved", status, body)
	}
	gw.wantMode(ctx, c.carolToken, "supervised")
}

// feGateway is a gateway running testdata/foureyes.yaml in this process.
type feGateway struct {
	t        *testing.T
	parts    gateway.Parts
	base     string
	stateDir string
	// site is the broker upstream of the gateway's uplink.
	site *siteBroker
}

// startFourEyes runs the gateway on free ports with its state in a
// temporary directory; a cleanup stops it and checks that it stopped.
func startFourEyes(ctx context.Context, t *testing.T) *feGateway {
	t.Helper()
	cfg, err := gateway.LoadFile(filepath.Join("testdata", "foureyes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir = t.TempDir()
	upstream := startSiteBroker(t)
	cfg.Uplink.URL = "tcp://" + upstream.addr
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan gateway.Parts, 1)
	done := make(chan error, 1)
	go func() {
		done <- gateway.Run(runCtx, gateway.Options{Config: cfg, WebListener: ln,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
			Ready:  func(p gateway.Parts) { ready <- p }})
	}()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the gateway stopped with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("the gateway did not stop within 20s")
		}
	})
	select {
	case p := <-ready:
		return &feGateway{t: t, parts: p, base: "http://" + ln.Addr().String(), stateDir: cfg.StateDir, site: upstream}
	case err := <-done:
		t.Fatalf("the gateway did not start: %v", err)
	case <-ctx.Done():
		t.Fatal("the gateway did not start in time")
	}
	return nil
}

// writes is how many writes reached device.capability in the simulated
// hardware, from its state file, which it rewrites on every write.
func (g *feGateway) writes(device, capability string) int {
	g.t.Helper()
	w, err := loadWorld(filepath.Join(g.stateDir, "world.json"))
	if errors.Is(err, os.ErrNotExist) {
		return 0 // nothing was ever written
	}
	if err != nil {
		g.t.Fatal(err)
	}
	return w.Received[device+"."+capability]
}

// wantWrites checks both the driver's count and the journal's acts, as
// any viewer of the API sees them.
func (g *feGateway) wantWrites(ctx context.Context, viewer *feHTTP, device, capability string, want int) {
	g.t.Helper()
	if n := g.writes(device, capability); n != want {
		g.t.Fatalf("%s.%s received %d writes, want %d", device, capability, n, want)
	}
	status, body := viewer.get(ctx, "/api/v1/events?kind=acted&device="+device+"&limit=100")
	if status != http.StatusOK {
		g.t.Fatalf("GET /api/v1/events = %d %s", status, body)
	}
	acts := 0
	for _, ev := range decode[[]runtime.Event](g.t, body) {
		var rc runtime.Receipt
		if json.Unmarshal(ev.Body, &rc) == nil && rc.Capability == capability {
			acts++
		}
	}
	if acts != want {
		g.t.Fatalf("the journal holds %d acts on %s.%s, want %d: %s", acts, device, capability, want, body)
	}
}

// wantRules checks GET /api/v1/rules: a JSON list, [] when empty, with n rules.
func (g *feGateway) wantRules(ctx context.Context, viewer *feHTTP, n int) []runtime.RuleRecord {
	g.t.Helper()
	status, body := viewer.get(ctx, "/api/v1/rules")
	if status != http.StatusOK {
		g.t.Fatalf("GET /api/v1/rules = %d %s", status, body)
	}
	if n == 0 && string(bytes.TrimSpace(body)) != "[]" {
		g.t.Fatalf("GET /api/v1/rules = %s, want []", body)
	}
	rules := decode[[]runtime.RuleRecord](g.t, body)
	if len(rules) != n {
		g.t.Fatalf("GET /api/v1/rules = %s, want %d rules", body, n)
	}
	return rules
}

// wantMode checks the mode in force, as GET /api/v1/mode shows it.
func (g *feGateway) wantMode(ctx context.Context, viewer *feHTTP, want string) {
	g.t.Helper()
	status, body := viewer.get(ctx, "/api/v1/mode")
	var m struct {
		Mode runtime.ModeRecord `json:"mode"`
	}
	if err := json.Unmarshal(body, &m); status != http.StatusOK || err != nil || m.Mode.Name != want {
		g.t.Fatalf("GET /api/v1/mode = %d %s (%v), want mode %s", status, body, err, want)
	}
}

// approval finds an approval in GET /api/v1/approvals, pending or recent.
func (g *feGateway) approval(ctx context.Context, viewer *feHTTP, id string) runtime.Approval {
	g.t.Helper()
	status, body := viewer.get(ctx, "/api/v1/approvals")
	if status != http.StatusOK {
		g.t.Fatalf("GET /api/v1/approvals = %d %s", status, body)
	}
	for _, ap := range decode[[]runtime.Approval](g.t, body) {
		if ap.ID == id {
			return ap
		}
	}
	g.t.Fatalf("approval %s is not in GET /api/v1/approvals: %s", id, body)
	return runtime.Approval{}
}

func decode[T any](t testing.TB, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decoding %T from %s: %v", v, body, err)
	}
	return v
}

// feHTTP is one person on one HTTP surface: a console login (cookie and
// CSRF token) or a bearer token.
type feHTTP struct {
	t      *testing.T
	name   string // "console:ann" or "token:ann-ci", for messages
	base   string
	c      *http.Client
	bearer string
	csrf   string
}

var feCSRFMeta = regexp.MustCompile(`<meta name="csrf" content="([^"]*)">`)

// console logs user in through the login form, as a browser does, and
// keeps the page's CSRF token for later requests.
func (g *feGateway) console(ctx context.Context, user string) *feHTTP {
	g.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		g.t.Fatal(err)
	}
	h := &feHTTP{t: g.t, name: "console:" + user, base: g.base,
		c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if status, _ := h.page(ctx, "/login"); status != http.StatusOK || h.csrf == "" {
		g.t.Fatalf("GET /login = %d, CSRF token %q", status, h.csrf)
	}
	if status, body := h.form(ctx, "/login", url.Values{"user": {user}, "password": {user + "-password"}}); status != http.StatusSeeOther {
		g.t.Fatalf("logging in as %s = %d %s, want 303", user, status, body)
	}
	if status, _ := h.page(ctx, "/approvals"); status != http.StatusOK || h.csrf == "" {
		g.t.Fatalf("GET /approvals as %s = %d, CSRF token %q", user, status, h.csrf)
	}
	return h
}

// token is an API client with the bearer token "<name>-test-token".
func (g *feGateway) token(name string) *feHTTP {
	return &feHTTP{t: g.t, name: "token:" + name, base: g.base, c: &http.Client{}, bearer: name + "-test-token"}
}

func (h *feHTTP) do(ctx context.Context, method, path, contentType string, body io.Reader) (int, []byte) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if h.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+h.bearer)
	} else if method != http.MethodGet && h.csrf != "" && contentType == "application/json" {
		req.Header.Set("X-CSRF-Token", h.csrf)
	}
	resp, err := h.c.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s as %s: %v", method, path, h.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		h.t.Fatalf("%s %s as %s: reading the answer: %v", method, path, h.name, err)
	}
	return resp.StatusCode, b
}

// page gets a console page and keeps its CSRF token.
func (h *feHTTP) page(ctx context.Context, path string) (int, []byte) {
	status, body := h.do(ctx, http.MethodGet, path, "", nil)
	if m := feCSRFMeta.FindSubmatch(body); m != nil {
		h.csrf = string(m[1])
	}
	return status, body
}

// form posts a console form with its CSRF token.
func (h *feHTTP) form(ctx context.Context, path string, v url.Values) (int, []byte) {
	v.Set("_csrf", h.csrf)
	return h.do(ctx, http.MethodPost, path, "application/x-www-form-urlencoded", strings.NewReader(v.Encode()))
}

func (h *feHTTP) get(ctx context.Context, path string) (int, []byte) {
	return h.do(ctx, http.MethodGet, path, "", nil)
}

func (h *feHTTP) post(ctx context.Context, path, body string) (int, []byte) {
	return h.do(ctx, http.MethodPost, path, "application/json", strings.NewReader(body))
}

// answer answers an actuation's approval, naming the act as shown.
func (h *feHTTP) answer(ctx context.Context, id, decision, device, capability, value string) (int, []byte) {
	return h.post(ctx, "/api/v1/approvals/"+id, fmt.Sprintf(`{"decision":%q,"device":%q,"capability":%q,"value":%s,"reason":"looked at it"}`,
		decision, device, capability, value))
}

// answerRule approves and asks for a rule for an hour.
func (h *feHTTP) answerRule(ctx context.Context, id, device, capability, value string) (int, []byte) {
	return h.post(ctx, "/api/v1/approvals/"+id, fmt.Sprintf(`{"decision":"approve_and_rule","device":%q,"capability":%q,"value":%s,"rule_for":"1h"}`,
		device, capability, value))
}

// feMQTT is a paho client that sends commands and collects their replies.
type feMQTT struct {
	t      *testing.T
	c      paho.Client
	prefix string
	// expiresIn, if set, gives every command an expiry this far ahead.
	expiresIn time.Duration

	// mu guards replies; arrived is signalled (without blocking) after each.
	mu      sync.Mutex
	replies []command.Reply
	arrived chan struct{}
}

// mqttAs connects to the gateway's broker as user with paho (MQTT 3.1.1)
// and subscribes to the gateway's replies.
func (g *feGateway) mqttAs(ctx context.Context, user string) *feMQTT {
	g.t.Helper()
	return dialMQTT(ctx, g.t, g.parts.MQTT.Addr("tcp"), "four-eyes-"+user, user, user+"-password", "")
}

// siteClient connects to the site broker upstream, where the uplink takes
// commands, and waits until the uplink listens there for commands.
func (g *feGateway) siteClient(ctx context.Context) *feMQTT {
	g.t.Helper()
	m := dialMQTT(ctx, g.t, g.site.addr, "four-eyes-site", "site", "", time.Minute.String())
	g.site.waitSubscribed(ctx, m.prefix+"cmd/valve-1/open")
	return m
}

// dialMQTT connects with paho (MQTT 3.1.1) and subscribes to the replies.
// Commands sent by a client with a non-empty expiresIn carry an expiry
// that far ahead, as the uplink requires.
func dialMQTT(ctx context.Context, t *testing.T, addr, clientID, user, password, expiresIn string) *feMQTT {
	t.Helper()
	m := &feMQTT{t: t, prefix: "shadowgate/fe/", arrived: make(chan struct{}, 1)}
	if expiresIn != "" {
		d, err := time.ParseDuration(expiresIn)
		if err != nil {
			t.Fatal(err)
		}
		m.expiresIn = d
	}
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).
		SetUsername(user).SetPassword(password).SetProtocolVersion(4).SetAutoReconnect(false)
	m.c = paho.NewClient(o)
	if err := waitToken(ctx, m.c.Connect()); err != nil {
		t.Fatalf("mqtt connect to %s as %s: %v", addr, user, err)
	}
	t.Cleanup(func() { m.c.Disconnect(100) })
	err := waitToken(ctx, m.c.Subscribe(m.prefix+"reply/#", 1, func(_ paho.Client, msg paho.Message) {
		var r command.Reply
		if json.Unmarshal(msg.Payload(), &r) != nil {
			return
		}
		m.mu.Lock()
		m.replies = append(m.replies, r)
		m.mu.Unlock()
		select {
		case m.arrived <- struct{}{}:
		default:
		}
	}))
	if err != nil {
		t.Fatalf("mqtt subscribe on %s as %s: %v", addr, user, err)
	}
	return m
}

// waitToken waits for a paho token, bounded by ctx.
func waitToken(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// command publishes a command and returns its first reply, which must ask
// for approval.
func (m *feMQTT) command(ctx context.Context, device, capability, value, id string) command.Reply {
	m.t.Helper()
	payload := fmt.Sprintf(`{"value":%s,"id":%q,"reason":"four-eyes test"}`, value, id)
	if m.expiresIn > 0 {
		payload = fmt.Sprintf(`{"value":%s,"id":%q,"reason":"four-eyes test","expires":%q}`, value, id,
			time.Now().Add(m.expiresIn).UTC().Format(time.RFC3339Nano))
	}
	if err := waitToken(ctx, m.c.Publish(m.prefix+"cmd/"+device+"/"+capability, 1, false, payload)); err != nil {
		m.t.Fatalf("publishing %s: %v", id, err)
	}
	r := m.reply(ctx, id, 1)
	if r.Outcome != command.OutcomePendingApproval || r.Approval == nil || r.Approval.ID == "" {
		m.t.Fatalf("the first reply to %s = %+v, want pending_approval with an approval", id, r)
	}
	return r
}

// wantActed waits for the second reply to id and checks its receipt.
func (m *feMQTT) wantActed(ctx context.Context, id, device, capability string) {
	m.t.Helper()
	r := m.reply(ctx, id, 2)
	if r.Outcome != "acted" || r.Receipt == nil || r.Receipt.Device != device || r.Receipt.Capability != capability ||
		r.Receipt.Confirmation != runtime.Confirmed {
		m.t.Fatalf("the second reply to %s = %+v (receipt %+v), want acted with a confirmed receipt for %s.%s", id, r, r.Receipt, device, capability)
	}
}

// reply returns the nth reply (from 1) with this id, waiting for it at
// most 20s.
func (m *feMQTT) reply(ctx context.Context, id string, nth int) command.Reply {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		m.mu.Lock()
		var got []command.Reply
		for _, r := range m.replies {
			if r.ID == id {
				got = append(got, r)
			}
		}
		m.mu.Unlock()
		if len(got) >= nth {
			return got[nth-1]
		}
		select {
		case <-m.arrived:
		case <-ctx.Done():
			m.t.Fatalf("reply %d to %s did not arrive (got %+v): %v", nth, id, got, ctx.Err())
		}
	}
}

// siteBroker is a site or fleet broker upstream of the gateway: mochi, in
// this process, letting everyone in.
type siteBroker struct {
	t    *testing.T
	srv  *mochi.Server
	addr string
}

func startSiteBroker(t *testing.T) *siteBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddListener(listeners.NewNet("site", ln)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return &siteBroker{t: t, srv: srv, addr: ln.Addr().String()}
}

// waitSubscribed waits until some client subscribes to a filter that
// matches topic, or ctx ends.
func (b *siteBroker) waitSubscribed(ctx context.Context, topic string) {
	b.t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(b.srv.Topics.Subscribers(topic).Subscriptions) == 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			b.t.Fatalf("nobody subscribed to %s on the site broker: %v", topic, ctx.Err())
		}
	}
}
