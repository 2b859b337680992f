package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/runtime"
)

const stuckAlarm = "discrepancy.valve-1.open"

// alarmSite is a site in mode interlocked whose valve is stuck: each
// command to open it is contradicted by the read-back and raises (or
// counts again) the alarm discrepancy.valve-1.open.
func alarmSite(t testing.TB, raise int) *site {
	t.Helper()
	s := newSite(t, siteOptions{mode: "interlocked"})
	s.g.SetFault("valve-1", sim.Fault{Stuck: true})
	s.raise(raise)
	return s
}

// raise sends n commands to the stuck valve, each with its own id.
func (s *site) raise(n int) {
	s.t.Helper()
	for range n {
		if _, err := s.eng.Read(s.t.Context(), "test", "tank-1", "level"); err != nil { // the interlock's reading
			s.t.Fatal(err)
		}
		s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 200, `"outcome":"contradicted"`)
	}
}

// alarms reads GET /api/v1/alarms as the viewer.
func (s *site) alarms() alarmsBody {
	s.t.Helper()
	var b alarmsBody
	if err := json.Unmarshal([]byte(s.expect("GET", "/api/v1/alarms", "viewer", "", 200, `"counts"`)), &b); err != nil {
		s.t.Fatal(err)
	}
	return b
}

func TestAlarmsAPIRolesAndErrors(t *testing.T) {
	s := newSite(t, siteOptions{mode: "interlocked"})
	s.expect("GET", "/api/v1/alarms", "", "", 401, "log in")
	s.expect("GET", "/api/v1/alarms", "viewer", "", 200, `{"alarms":[],"counts":{"active":0,"unacknowledged":0,"shelved":0}}`)
	s.g.SetFault("valve-1", sim.Fault{Stuck: true})
	s.raise(1)
	id, path := stuckAlarm, "/api/v1/alarms/"+stuckAlarm

	b := s.alarms()
	if len(b.Alarms) != 1 || b.Alarms[0].ID != id || b.Alarms[0].State != runtime.AlarmActive || b.Alarms[0].Priority != runtime.PriorityHigh ||
		b.Counts != (runtime.AlarmCounts{Active: 1, Unacknowledged: 1}) {
		t.Fatalf("GET /api/v1/alarms = %+v", b)
	}
	s.expect("GET", path, "viewer", "", 200, `"id":"`+id+`"`)
	s.expect("GET", "/api/v1/alarms/drift.nothing.here", "viewer", "", 404, "alarm drift.nothing.here does not exist")

	// Acknowledging: an operator and up, with a comment.
	s.expect("POST", path+"/ack", "", `{"comment":"seen"}`, 401, "log in")
	s.expect("POST", path+"/ack", "viewer", `{"comment":"seen"}`, 403, "needs the operator role")
	s.expect("POST", path+"/ack", "operator", `{}`, 400, "needs a comment")
	s.expect("POST", path+"/ack", "operator", `{"comment":"   "}`, 400, "needs a comment")
	s.expect("POST", path+"/ack", "operator", `{"coment":"seen"}`, 400, `unknown field "coment"`)
	s.expect("POST", path+"/ack", "operator", `{"comment":5}`, 400, `field "comment": want a string, got a JSON number`)
	s.expect("POST", path+"/ack", "operator", `{"comment":"a","comment":"b"}`, 400, "the body:")
	s.expect("POST", "/api/v1/alarms/drift.nothing.here/ack", "operator", `{"comment":"seen"}`, 404, "alarm not found")
	if a, _ := s.eng.Alarm(id); a.State != runtime.AlarmActive {
		t.Fatalf("after refused acknowledgements the alarm is %s", a.State)
	}
	s.expect("POST", path+"/ack", "operator", `{"comment":"valve seen stuck, fitter called"}`, 200, `"state":"active_acknowledged"`)
	a, _ := s.eng.Alarm(id)
	if a.AckedBy != "api:operator" || a.Comment != "valve seen stuck, fitter called" {
		t.Fatalf("acknowledged alarm = %+v", a)
	}
	// Once acknowledged it waits for no one: a conflict, for every role
	// that may acknowledge (which shows the role check let them through).
	for _, tok := range []string{"operator", "approver", "admin"} {
		s.expect("POST", path+"/ack", tok, `{"comment":"again"}`, 409, "not waiting for an acknowledgement")
	}
	if b := s.alarms(); b.Counts != (runtime.AlarmCounts{Active: 1}) {
		t.Fatalf("counts after the acknowledgement = %+v", b.Counts)
	}

	// Shelving: an admin only, for a bounded time, with a reason.
	for _, tok := range []string{"viewer", "operator", "approver"} {
		s.expect("POST", path+"/shelve", tok, `{"for":"30m","reason":"pump under repair"}`, 403, "needs the admin role")
	}
	for _, tc := range []struct{ body, want string }{
		{`{"for":"30m"}`, "shelving needs a reason"},
		{`{"reason":"pump under repair"}`, `field "for": required`},
		{`{"for":"soon","reason":"pump under repair"}`, `field "for": "soon" is not a duration`},
		{`{"for":"-1h","reason":"pump under repair"}`, `field "for": "-1h" is not a duration`},
		{`{"for":"9h","reason":"pump under repair"}`, "at most 8h0m0s"},
		{`{"for":30,"reason":"pump under repair"}`, `field "for": want a string, got a JSON number`},
		{`{"for":"30m","reason":"x","until":"never"}`, `unknown field "until"`},
	} {
		s.expect("POST", path+"/shelve", "admin", tc.body, 400, tc.want)
	}
	s.expect("POST", "/api/v1/alarms/drift.nothing.here/shelve", "admin", `{"for":"30m","reason":"x"}`, 404, "alarm not found")
	s.expect("POST", path+"/shelve", "admin", `{"for":"30m","reason":"valve under repair"}`, 200, `"shelved_by":"api:admin"`)
	if b := s.alarms(); b.Counts != (runtime.AlarmCounts{Shelved: 1}) {
		t.Fatalf("counts while shelved = %+v", b.Counts)
	}
	// "for": "0" unshelves, with no reason needed.
	out := s.expect("POST", path+"/shelve", "admin", `{"for":"0"}`, 200, `"id":"`+id+`"`)
	if strings.Contains(out, "shelved_until") {
		t.Fatalf("unshelved alarm = %s", out)
	}
	if b := s.alarms(); b.Counts != (runtime.AlarmCounts{Active: 1}) {
		t.Fatalf("counts after unshelving = %+v", b.Counts)
	}
	// Each change is journaled, attributed to the principal.
	evs := s.expect("GET", "/api/v1/events?kind=alarm", "viewer", "", 200, `"action":"acknowledged"`)
	for _, want := range []string{`"by":"api:operator"`, `"comment":"valve seen stuck, fitter called"`, `"action":"shelved"`, `"by":"api:admin"`, `"action":"unshelved"`} {
		if !strings.Contains(evs, want) {
			t.Errorf("the alarm events do not hold %s: %s", want, evs)
		}
	}
	// The fitter frees the valve: a confirmed act clears the condition,
	// and the acknowledged alarm is back to normal, which ends its life.
	s.g.SetFault("valve-1", sim.Fault{})
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":false,"id":"mended"}`, 200, `"confirmation":"confirmed"`)
	s.expect("GET", path, "viewer", "", 200, `"state":"cleared","condition":false`)
	if b := s.alarms(); b.Counts != (runtime.AlarmCounts{}) {
		t.Fatalf("counts once it is back to normal = %+v", b.Counts)
	}
	s.expect("POST", path+"/ack", "operator", `{"comment":"again"}`, 409, "not waiting for an acknowledgement")
}

// A flood of the same alarm is one alarm with a count, shown once on the
// API, on the device and on the page.
func TestAlarmFloodIsOneAlarmWithACount(t *testing.T) {
	const n = 4
	s := alarmSite(t, n)
	b := s.alarms()
	if len(b.Alarms) != 1 || b.Alarms[0].Count != n || b.Counts != (runtime.AlarmCounts{Active: 1, Unacknowledged: 1}) {
		t.Fatalf("after %d contradicted acts: %+v; want one alarm counted %d times", n, b, n)
	}
	devs := s.expect("GET", "/api/v1/devices", "viewer", "", 200, `"alarms":[{"id":"`+stuckAlarm+`"`)
	if c := strings.Count(devs, stuckAlarm); c != 1 {
		t.Fatalf("the devices hold the alarm %d times: %s", c, devs)
	}
	br := s.browser()
	if code := br.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, _ := br.page("/alarms")
	if c := strings.Count(page, `<article class="card alarm`); c != 1 || !strings.Contains(page, fmt.Sprintf("<dt>Count</dt><dd>%d</dd>", n)) {
		t.Fatalf("the alarms page shows %d alarms, or not the count %d:\n%s", c, n, page)
	}
}

func TestAlarmMetrics(t *testing.T) {
	s := newSite(t, siteOptions{mode: "interlocked"})
	want := func(lines ...string) {
		t.Helper()
		body := s.expect("GET", "/metrics", "viewer", "", 200, "shadowgate_alarms")
		for _, l := range lines {
			if !strings.Contains(body, "\n"+l+"\n") {
				t.Errorf("/metrics has no line %q", l)
			}
		}
	}
	want(`shadowgate_alarms{state="active"} 0`, `shadowgate_alarms{state="unacknowledged"} 0`, `shadowgate_alarms{state="shelved"} 0`,
		`shadowgate_alarms_standing{priority="critical"} 0`, `shadowgate_alarms_standing{priority="high"} 0`)
	s.g.SetFault("valve-1", sim.Fault{Stuck: true})
	s.raise(1)
	want(`shadowgate_alarms{state="active"} 1`, `shadowgate_alarms{state="unacknowledged"} 1`, `shadowgate_alarms_standing{priority="high"} 1`,
		`shadowgate_alarms_standing{priority="medium"} 0`)
	s.expect("POST", "/api/v1/alarms/"+stuckAlarm+"/ack", "operator", `{"comment":"seen"}`, 200, "")
	want(`shadowgate_alarms{state="active"} 1`, `shadowgate_alarms{state="unacknowledged"} 0`)
	s.expect("POST", "/api/v1/alarms/"+stuckAlarm+"/shelve", "admin", `{"for":"1h","reason":"valve under repair"}`, 200, "")
	want(`shadowgate_alarms{state="active"} 0`, `shadowgate_alarms{state="shelved"} 1`, `shadowgate_alarms_standing{priority="high"} 0`)
}

// The console: every page's header counts the alarms; the Alarms page
// acknowledges with a required comment (operators and up) and shelves
// (admins); the device card shows its alarms.
func TestAlarmsConsole(t *testing.T) {
	s := alarmSite(t, 1)
	viewer := s.browser()
	if code := viewer.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	for _, p := range []string{"/", "/devices", "/approvals", "/runs", "/journal", "/policy", "/alarms", "/nowhere"} {
		_, page, _ := viewer.page(p)
		if !strings.Contains(page, `<a href="/alarms" id="alarms-badge" class="alarms-badge loud"`) ||
			!strings.Contains(page, `<span id="alarms-unacked">1</span> unacknowledged · <span id="alarms-active">1</span> active`) {
			t.Errorf("%s: the header does not count the alarm:\n%s", p, page)
		}
	}
	_, page, _ := viewer.page("/devices")
	if !strings.Contains(page, `<a href="/alarms#alarm-`+stuckAlarm+`"><strong>high</strong> valve-1.open: active, unacknowledged</a>`) {
		t.Errorf("the valve's card does not show its alarm:\n%s", page)
	}
	_, page, _ = viewer.page("/alarms")
	if !strings.Contains(page, `id="alarm-`+stuckAlarm+`"`) || strings.Contains(page, `action="/alarms/`) ||
		!strings.Contains(page, "An operator, an approver or an admin acknowledges it.") {
		t.Fatalf("the viewer's alarms page:\n%s", page)
	}

	op := s.browser()
	if code := op.login("olga", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, tok := op.page("/alarms")
	for _, want := range []string{`<form method="post" action="/alarms/` + stuckAlarm + `/ack"`, `name="_csrf" value="` + tok + `"`,
		`<label for="comment-` + stuckAlarm + `">`, `<input id="comment-` + stuckAlarm + `" name="comment" required`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the operator's alarms page has no %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, "/shelve") {
		t.Fatal("an operator is offered shelving")
	}
	post := func(b *browser, path string, form url.Values) (int, string) {
		t.Helper()
		resp, err := b.c.PostForm(s.srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if loc == nil {
			return resp.StatusCode, ""
		}
		return resp.StatusCode, loc.Query().Get("note")
	}
	ack := "/alarms/" + stuckAlarm + "/ack"
	if code, _ := post(op, ack, url.Values{"comment": {"no token"}}); code != http.StatusForbidden {
		t.Fatalf("an acknowledgement without its CSRF token = %d, want 403", code)
	}
	if code, note := post(op, ack, url.Values{"_csrf": {tok}, "comment": {""}}); code != http.StatusSeeOther || !strings.Contains(note, "needs a comment") {
		t.Fatalf("an acknowledgement without a comment = %d, note %q", code, note)
	}
	if code, note := post(op, ack, url.Values{"_csrf": {tok}, "comment": {"valve seen stuck"}}); code != http.StatusSeeOther ||
		!strings.Contains(note, "acknowledged: it is now active, acknowledged") {
		t.Fatalf("an acknowledgement = %d, note %q", code, note)
	}
	_, page, _ = op.page("/alarms")
	if !strings.Contains(page, `<span id="alarms-unacked">0</span> unacknowledged · <span id="alarms-active">1</span> active`) ||
		!strings.Contains(page, `class="alarms-badge warn"`) || !strings.Contains(page, "by olga, in the console") || strings.Contains(page, ack) {
		t.Fatalf("after the acknowledgement:\n%s", page)
	}

	admin := s.browser()
	if code := admin.login("adam", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, tok = admin.page("/alarms")
	if !strings.Contains(page, `<select id="for-`+stuckAlarm+`" name="for">`) || !strings.Contains(page, `<input id="reason-`+stuckAlarm+`" name="reason" required`) {
		t.Fatalf("the admin's alarms page offers no shelving:\n%s", page)
	}
	shelve := "/alarms/" + stuckAlarm + "/shelve"
	if code, _ := post(op, shelve, url.Values{"_csrf": {tok}, "for": {"1h"}, "reason": {"x"}}); code != http.StatusForbidden {
		t.Fatalf("an operator's shelving = %d, want 403", code)
	}
	if code, note := post(admin, shelve, url.Values{"_csrf": {tok}, "for": {"1h"}, "reason": {"valve under repair"}}); code != http.StatusSeeOther ||
		!strings.Contains(note, "is shelved until") {
		t.Fatalf("shelving = %d, note %q", code, note)
	}
	_, page, _ = admin.page("/alarms")
	if !strings.Contains(page, `class="alarms-badge quiet"`) || !strings.Contains(page, "valve under repair") ||
		!strings.Contains(page, `<input type="hidden" name="for" value="0">`) {
		t.Fatalf("while shelved:\n%s", page)
	}
	if code, note := post(admin, shelve, url.Values{"_csrf": {tok}, "for": {"0"}}); code != http.StatusSeeOther || !strings.Contains(note, "is not shelved") {
		t.Fatalf("unshelving = %d, note %q", code, note)
	}
}

// TestDeviceCardShowsTheDeadMan: an actuation with a TTL shows, on its
// device's card, when it goes back to safe unless renewed.
func TestDeviceCardShowsTheDeadMan(t *testing.T) {
	s := newSite(t, siteOptions{mode: "interlocked"})
	b := s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"id":"ttl-1"}`, 200, `"until":"`)
	var r struct {
		Receipt struct {
			Until time.Time `json:"until"`
		} `json:"receipt"`
	}
	if err := json.Unmarshal([]byte(b), &r); err != nil || r.Receipt.Until.IsZero() {
		t.Fatalf("reply %s (%v): want the receipt's until", b, err)
	}
	viewer := s.browser()
	if code := viewer.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, _ := viewer.page("/devices")
	if want := "dead man: back to safe at " + string(timeElement(r.Receipt.Until)) + " unless renewed"; !strings.Contains(page, want) {
		t.Fatalf("the valve's card does not say %q:\n%s", want, page)
	}
}

// TestCancelARunInTheConsole: an operator sees a Cancel button beside a run
// that has not ended, and the run ends cancelled, naming them; a viewer is
// offered none.
func TestCancelARunInTheConsole(t *testing.T) {
	s := newSite(t, siteOptions{mode: "interlocked"})
	rec, err := s.eng.StartPlan(t.Context(), runtime.StartPlan{Plan: "soak", Principal: "api:operator", Origin: "api"})
	if err != nil {
		t.Fatal(err)
	}
	viewer := s.browser()
	if code := viewer.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	if _, page, _ := viewer.page("/runs"); strings.Contains(page, "/cancel") {
		t.Fatal("a viewer is offered a cancel")
	}
	op := s.browser()
	if code := op.login("olga", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, tok := op.page("/runs")
	if !strings.Contains(page, `<form method="post" action="/runs/`+rec.ID+`/cancel"`) || !strings.Contains(page, `aria-label="Cancel run `+rec.ID+`"`) {
		t.Fatalf("the runs page offers no cancel for %s:\n%s", rec.ID, page)
	}
	resp, err := op.c.PostForm(s.srv.URL+"/runs/"+rec.ID+"/cancel", url.Values{"_csrf": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel = %d", resp.StatusCode)
	}
	if done, err := s.eng.Wait(t.Context(), rec.ID); err != nil || done.End != runtime.EndCancelled || !strings.Contains(done.Why, "cancelled by console:olga") {
		t.Fatalf("the run = %+v, %v", done, err)
	}
}
