package web

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/value"
)

// commandRun finds the run of a command's answer, runRecordID the id of a
// run's record.
var (
	commandRun  = regexp.MustCompile(`"run":"(run-[0-9a-f]+)"`)
	runRecordID = regexp.MustCompile(`"id":"(run-[0-9a-f]+)"`)
)

// runsSite is a site with a run of every kind: a command that acted, a
// plan that completed, one cancelled and one running, a command
// approved with a rule, and a command waiting for its approval. It
// returns the runs' ids by name, and the approvals'.
func runsSite(t *testing.T, o siteOptions) (*site, map[string]string) {
	t.Helper()
	o.mode = "interlocked"
	s := newSite(t, o)
	ids := map[string]string{}
	wait := func(name string) {
		t.Helper()
		if _, err := s.eng.Wait(t.Context(), ids[name]); err != nil {
			t.Fatalf("waiting for %s: %v", name, err)
		}
	}
	if _, err := s.eng.Read(t.Context(), "test", "tank-1", "level"); err != nil { // the interlock's reading
		t.Fatal(err)
	}
	b := s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"reason":"fill the tank"}`, 200, "")
	ids["acted"] = commandRun.FindStringSubmatch(b)[1]
	b = s.expect("POST", "/api/v1/plans/flush/start", "operator", `{"id":"p-1","reason":"weekly flush"}`, 202, `"plan":"flush"`)
	ids["flush"] = runRecordID.FindStringSubmatch(b)[1]
	wait("flush")
	rec, err := s.eng.StartPlan(t.Context(), runtime.StartPlan{Plan: "soak", Principal: "api:operator", Origin: "api", Reason: "overnight"})
	if err != nil {
		t.Fatal(err)
	}
	ids["cancelled"] = rec.ID
	if err := s.eng.CancelRun(rec.ID, "api:operator", "wrong tank"); err != nil {
		t.Fatal(err)
	}
	wait("cancelled")
	if rec, err = s.eng.StartPlan(t.Context(), runtime.StartPlan{Plan: "soak", Principal: "console:olga", Origin: "console"}); err != nil {
		t.Fatal(err)
	}
	ids["running"] = rec.ID
	s.expect("POST", "/api/v1/mode", "admin", `{"mode":"supervised","reason":"a fitter on site"}`, 200, "")
	b = s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":false,"reason":"drain"}`, 202, "pending_approval")
	ids["approved"], ids["approved approval"] = commandRun.FindStringSubmatch(b)[1], approvalID.FindStringSubmatch(b)[1]
	s.expect("POST", "/api/v1/approvals/"+ids["approved approval"], "approver",
		`{"decision":"approve_and_rule","device":"valve-1","capability":"open","value":false,"rule_for":"30m","reason":"night shift"}`, 200, `"status":"approved"`)
	wait("approved")
	b = s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"reason":"fill again"}`, 202, "pending_approval")
	ids["parked"], ids["parked approval"] = commandRun.FindStringSubmatch(b)[1], approvalID.FindStringSubmatch(b)[1]
	return s, ids
}

// runCard returns the card of run id on a Runs page.
func runCard(t *testing.T, page, id string) string {
	t.Helper()
	start := strings.Index(page, `<li class="card run`)
	for start >= 0 {
		end := strings.Index(page[start:], "</li>\n")
		if end < 0 {
			break
		}
		c := page[start : start+end]
		if strings.Contains(c, `id="run-`+id+`"`) {
			return c
		}
		next := strings.Index(page[start+end:], `<li class="card run`)
		if next < 0 {
			break
		}
		start += end + next
	}
	t.Fatalf("no card of run %s on the page:\n%s", id, page)
	return ""
}

// TestRunsPageSaysWhatEachRunDid: every run's card says, in words, what
// it is, who started it from where and why, when, how long it took or
// has run, its steps and acts, how it ended and why, and links to its
// approvals and to its events in the journal; only a run not ended
// offers a Cancel, and only to an operator.
func TestRunsPageSaysWhatEachRunDid(t *testing.T) {
	s, ids := runsSite(t, siteOptions{})
	op := s.browser()
	if code := op.login("olga", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, _ := op.page("/runs")
	recs := map[string]runtime.RunRecord{}
	for _, r := range s.eng.Runs() {
		recs[r.ID] = r
	}
	for _, tc := range []struct {
		name   string
		want   []string
		cancel bool
	}{
		{"acted", []string{`<span class="run-state good">Completed</span>`, "A single command", "by operator from the API",
			"“fill the tank”", "took ", "1 of 1 step, 1 act", "every step done",
			`href="/journal?run=` + ids["acted"] + `"`}, false},
		{"flush", []string{"Completed", "Plan flush", "“weekly flush”", "1 of 1 step, 0 acts", `href="/journal?run=` + ids["flush"] + `"`}, false},
		{"cancelled", []string{`<span class="run-state warn">Cancelled</span>`, "Plan soak", "“overnight”", "cancelled by api:operator",
			"wrong tank"}, false},
		{"running", []string{`<span class="run-state">Running</span>`, "by olga from the console", "none given", "running for ",
			`href="/journal?run=` + ids["running"] + `"`}, true},
		{"approved", []string{"Completed", "“drain”", `<a href="/journal?run=` + ids["approved"] + `">Approval ` +
			ids["approved approval"] + `</a>: approved`, "1 of 1 step, 1 act"}, false},
		{"parked", []string{`<span class="run-state warn">Waiting for an approval</span>`, "open for ", "0 of 1 step, 0 acts",
			`<a href="/approvals#approval-` + ids["parked approval"] + `">Approval ` + ids["parked approval"] + `</a>: waiting for an answer`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := runCard(t, page, ids[tc.name])
			rec := recs[ids[tc.name]]
			want := append(tc.want, "<dt>Started</dt><dd>"+string(timeElement(rec.StartedAt)))
			if rec.Status == runtime.RunEnded {
				want = append(want, "ended "+string(timeElement(rec.EndedAt)), "<dt>Why it ended</dt>")
			}
			for _, w := range want {
				if !strings.Contains(c, w) {
					t.Errorf("the card of the %s run does not say %q:\n%s", tc.name, w, c)
				}
			}
			form := `<form method="post" action="/runs/` + ids[tc.name] + `/cancel"`
			if got := strings.Contains(c, form) && strings.Contains(c, `aria-label="Cancel run `+ids[tc.name]+`"`); got != tc.cancel {
				t.Errorf("the card of the %s run offers a cancel: %v, want %v", tc.name, got, tc.cancel)
			}
			for _, code := range []string{">ended<", ">parked<", "lease_exhausted", "approve_and_rule", ">api<"} {
				if strings.Contains(c, code) {
					t.Errorf("the card of the %s run shows the code word %q", tc.name, code)
				}
			}
		})
	}
	// Where each approval is found, always: a waiting one on the
	// Approvals page, an answered one in its run's journal, which stays
	// when "Recently answered" has moved on.
	links := map[string]string{}
	for _, v := range s.web.runViews(t.Context(), s.eng.Runs(), s.eng.Plans()) {
		for _, a := range v.Approvals {
			links[a.ID] = a.Href
		}
	}
	for id, want := range map[string]string{ids["approved approval"]: "/journal?run=" + ids["approved"], ids["parked approval"]: "/approvals#approval-" + ids["parked approval"]} {
		if links[id] != want {
			t.Errorf("approval %s links to %q, want %q", id, links[id], want)
		}
	}
	if _, j, _ := op.page(links[ids["approved approval"]]); !strings.Contains(j, "approved valve-1.open") {
		t.Errorf("the journal an answered approval links to does not show its answer:\n%s", j)
	}
	// A run's journal link shows its events, and no other run's.
	_, journal, _ := op.page("/journal?run=" + ids["acted"])
	if n := strings.Count(journal, `<tr id="ev-`); n < 3 || strings.Count(journal, ids["acted"]) < n || strings.Contains(journal, ids["approved"]) {
		t.Errorf("the journal of run %s shows %d of its events (want its start, act and end), or another run's:\n%s", ids["acted"], n, journal)
	}
	if !strings.Contains(page, `<h2 id="runs-h">6 runs, newest first</h2>`) {
		t.Errorf("the list does not say how many runs it shows:\n%s", page)
	}
	viewer := s.browser()
	if code := viewer.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	if _, page, _ := viewer.page("/runs"); strings.Contains(page, "/cancel") || !strings.Contains(page, ids["parked"]) {
		t.Errorf("a viewer is offered a cancel, or sees no runs:\n%s", page)
	}
}

// TestRunsPageFilters: the filters keep their labels, say what the list
// is filtered by (a value the form does not list included), and narrow
// the list; the list shows the newest runsShown and says how many pass.
func TestRunsPageFilters(t *testing.T) {
	s, ids := runsSite(t, siteOptions{})
	b := s.browser()
	if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, _ := b.page("/runs?status=cancelled&origin=api")
	for _, want := range []string{`<label for="r-plan">Plan</label>`, `<label for="r-status">Status or end</label>`, `<label for="r-origin">Origin</label>`,
		`<option value="cancelled" selected>Cancelled</option>`, `<option value="api" selected>The API</option>`,
		`<h2 id="runs-h">1 run that passes the filter, newest first</h2>`, `<a href="/runs">Show every run</a>`, ids["cancelled"]} {
		if !strings.Contains(page, want) {
			t.Errorf("/runs?status=cancelled&origin=api has no %q:\n%s", want, page)
		}
	}
	for _, other := range []string{ids["running"], ids["acted"], ids["parked"]} {
		if strings.Contains(page, other) {
			t.Errorf("/runs?status=cancelled&origin=api shows run %s", other)
		}
	}
	_, page, _ = b.page("/runs?plan=nightly")
	for _, want := range []string{`<option value="nightly" selected>nightly</option>`, `<h2 id="runs-h">No run passes the filter</h2>`} {
		if !strings.Contains(page, want) {
			t.Errorf("/runs?plan=nightly has no %q:\n%s", want, page)
		}
	}
	for i := range runsShown {
		s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level","id":"r-`+strconv.Itoa(i)+`"}`, 200, "")
	}
	_, page, _ = b.page("/runs")
	want := `<h2 id="runs-h">Runs 1 to ` + strconv.Itoa(runsShown) + ` of ` + strconv.Itoa(6+runsShown) + ` runs, newest first</h2>`
	if n := strings.Count(page, `<li class="card run`); n != runsShown || !strings.Contains(page, want) ||
		!strings.Contains(page, `<a href="/runs?skip=10">Older runs →</a>`) || strings.Contains(page, "Newer runs") {
		t.Errorf("/runs shows %d runs, want %d, under %q, with a link to older runs only:\n%s", n, runsShown, want, page)
	}
	// The older page: the six runs left, the same filter, the way back.
	_, page, _ = b.page("/runs?origin=api&skip=10")
	if n := strings.Count(page, `<li class="card run`); n > 6 || !strings.Contains(page, `<a href="/runs?origin=api">← Newer runs</a>`) ||
		strings.Contains(page, "Older runs") {
		t.Errorf("/runs?origin=api&skip=10 shows %d runs, or not the way back only:\n%s", n, page)
	}
	for _, bad := range []string{"skip=-1", "skip=x", "skip=99", "skip=1&skip=2", "skip=%2B1"} {
		if code, page, _ := b.page("/runs?" + bad); code != 400 || !strings.Contains(page, `query &#34;skip&#34;`) {
			t.Errorf("/runs?%s = %d, want 400 naming the query:\n%s", bad, code, page)
		}
	}
}

// TestRunsPageNamesTheSchedule: a run the schedule started says so once,
// not as the principal it runs as.
func TestRunsPageNamesTheSchedule(t *testing.T) {
	s := newSite(t, siteOptions{mode: "interlocked"})
	rec, err := s.eng.StartPlan(t.Context(), runtime.StartPlan{Plan: "flush", Principal: "schedule:flush", Origin: "schedule", Reason: "every hour"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.eng.Wait(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	b := s.browser()
	if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	_, page, _ := b.page("/runs")
	c := runCard(t, page, rec.ID)
	if want := string(timeElement(rec.StartedAt)) + " by the schedule</dd>"; !strings.Contains(c, want) || strings.Contains(c, "schedule:flush") {
		t.Errorf("the card of a scheduled run does not say %q, or names schedule:flush:\n%s", want, c)
	}
}

func TestRunWords(t *testing.T) {
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name              string
		rec               runtime.RunRecord
		total             int
		now               time.Time
		state, took, step string
	}{
		{"running", runtime.RunRecord{Status: runtime.RunRunning, StartedAt: start, Steps: 2, Actuations: 1}, 3,
			start.Add(3*time.Minute + 20*time.Second), "Running", "running for 3 min 20 s", "2 of 3 steps, 1 act"},
		{"parked", runtime.RunRecord{Status: runtime.RunParked, StartedAt: start, Steps: 1}, 1,
			start.Add(2 * time.Hour), "Waiting for an approval", "open for 2 h, parked now", "1 of 1 step, 0 acts"},
		{"completed", runtime.RunRecord{Status: runtime.RunEnded, End: runtime.EndCompleted, StartedAt: start,
			EndedAt: start.Add(40 * time.Second), Steps: 3, Actuations: 2}, 3, start.Add(time.Hour), "Completed", "took 40 s", "3 of 3 steps, 2 acts"},
		{"lease", runtime.RunRecord{Status: runtime.RunEnded, End: runtime.EndLeaseExhausted, StartedAt: start,
			EndedAt: start.Add(25 * time.Minute), Steps: 1}, 0, start.Add(time.Hour), "Stopped: its lease ran out", "took 25 min", "1 step, 0 acts"},
		{"refused", runtime.RunRecord{Status: runtime.RunEnded, End: runtime.EndRefused, StartedAt: start,
			EndedAt: start.Add(300 * time.Millisecond)}, 2, start.Add(time.Hour), "Refused", "took under a second", "0 of 2 steps, 0 acts"},
		{"long", runtime.RunRecord{Status: runtime.RunRunning, StartedAt: start}, 1, start.Add(50 * time.Hour), "Running",
			"running for 2 days 2 h", "0 of 1 step, 0 acts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if state, _, _ := runState(tc.rec); state != tc.state {
				t.Errorf("runState = %q, want %q", state, tc.state)
			}
			if got := tookWords(tc.rec, tc.now); got != tc.took {
				t.Errorf("tookWords = %q, want %q", got, tc.took)
			}
			if got := stepsWords(tc.rec, tc.total); got != tc.step {
				t.Errorf("stepsWords = %q, want %q", got, tc.step)
			}
		})
	}
}

// TestRunsPolicyOverviewLook looks at the Runs, Policy and Overview pages
// with a run of every kind, a rule in force, a locked actuator, a long
// unbroken reason and every number of the Overview shown, at desk and
// phone size, light and
// dark: every tap target is at least 44×44 px, nothing reaches past its
// container or the viewport, axe-core finds nothing serious, and on a
// phone the runs are cards one above the other, each the list's width,
// with each fact's name above its value.
func TestRunsPolicyOverviewLook(t *testing.T) {
	s, _ := runsSite(t, siteOptions{prepare: func(j *journal.DB) {
		// An act on the pump cut short: its outcome is unknown.
		a := runtime.Attempt{Key: "mqtt:x/1", ID: "act-cut-short", Device: "pump-1", Capability: "on", Value: value.Bool(true), Updated: time.Now()}
		for _, st := range []runtime.AttemptState{runtime.AttemptStaged, runtime.AttemptAuthorized, runtime.AttemptExecuting} {
			a.State = st
			rec := a
			if _, err := j.Commit(context.Background(), runtime.Entry{Event: runtime.Event{Kind: runtime.KindInvoked}, Durability: runtime.Sync, Attempt: &rec}); err != nil {
				t.Fatal(err)
			}
		}
	}, options: func(o *Options) {
		o.MQTTStats = func() MQTTStats { return MQTTStats{Clients: 1, DeniedPublishes: 2, FailedLogins: 1} }
		o.UplinkStats = func() UplinkStats {
			return UplinkStats{Configured: true, Backlog: 12, BacklogBytes: 34567, Sent: 1, Dropped: 0, Broker: "mqtts://upstream.example:8883"}
		}
	}})
	if _, err := s.eng.StartPlan(t.Context(), runtime.StartPlan{Plan: "flush", Principal: "mqtt:line-7-supervisor-terminal", Origin: "mqtt",
		Reason: "flushing-tank-1-after-the-night-shift-found-sediment-in-the-outlet-filter-and-reported-it"}); err != nil {
		t.Fatal(err)
	}
	axe := axeScript(t)
	dir := t.TempDir()
	b := newBrowser(t, s.srv.URL)
	b.login("adam", "/")
	for _, vp := range viewports {
		for _, scheme := range schemes {
			b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
			b.setScheme(scheme)
			for _, page := range []string{"/runs", "/policy", "/"} {
				where := page + " (" + vp.name + ", " + scheme + ")"
				b.do(where, chromedp.Navigate(b.base+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
				b.checkScheme(where, scheme)
				if page != "/runs" && !eval[bool](b, `document.querySelector("main section.bad-border") !== null`) {
					t.Errorf("%s shows no locked actuator", where)
				}
				b.lookAt(t, where, page, axe, dir, vp.name, scheme)
			}
			b.do("the runs", chromedp.Navigate(b.base+"/runs"), chromedp.WaitVisible(chromedp.CSS("main h1")))
			var cards struct {
				N, Lefts, Narrow, Beside int
			}
			// Cards: how many, at how many left edges, how many narrower
			// than the list, and how many facts sit beside their names.
			js := `JSON.stringify((() => {
				const list = document.querySelector("ol.runs").getBoundingClientRect();
				const cards = [...document.querySelectorAll("li.run")].map(c => c.getBoundingClientRect());
				const beside = [...document.querySelectorAll("li.run dd")].filter(d => {
					const dt = d.previousElementSibling.getBoundingClientRect(), r = d.getBoundingClientRect();
					return r.top < dt.bottom - 1;
				}).length;
				return {N: cards.length, Lefts: new Set(cards.map(r => Math.round(r.left))).size,
					Narrow: cards.filter(r => r.width < list.width - 1).length, Beside: beside};
			})())`
			if err := json.Unmarshal([]byte(eval[string](b, js)), &cards); err != nil {
				t.Fatal(err)
			}
			if cards.N != 7 {
				t.Errorf("/runs (%s, %s) shows %d runs, want 7", vp.name, scheme, cards.N)
			}
			if vp.name == "phone" && (cards.Lefts != 1 || cards.Narrow != 0 || cards.Beside != 0) {
				t.Errorf("/runs on a phone (%s): %+v, want one column of cards the list's width, names above values", scheme, cards)
			}
			if vp.name == "desk" && cards.Lefts < 2 {
				t.Errorf("/runs at a desk (%s): %+v, want the cards side by side", scheme, cards)
			}
		}
	}
}

// TestRunWithAContradictedActIsNoSuccess: a single command whose act was
// contradicted completed its steps, and its card says the act was
// contradicted, in no success colour.
func TestRunWithAContradictedActIsNoSuccess(t *testing.T) {
	s := newSite(t, siteOptions{mode: "interlocked"})
	s.g.SetFault("valve-1", sim.Fault{Stuck: true})
	body := s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 200, `"outcome":"contradicted"`)
	var r struct {
		Run string `json:"run"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Run == "" {
		t.Fatalf("reply %s: %v", body, err)
	}
	b := s.browser()
	b.login("vera", "password-1")
	_, page, _ := b.page("/runs")
	i := strings.Index(page, `id="run-`+r.Run+`"`)
	if i < 0 {
		t.Fatalf("no card for %s:\n%s", r.Run, page)
	}
	card := page[strings.LastIndex(page[:i], "<li"):]
	card = card[:strings.Index(card, "</li>")]
	if !strings.Contains(card, "tone-bad") || !strings.Contains(card, "an act was contradicted (wrong_final)") || strings.Contains(card, "tone-good") {
		t.Errorf("the run of a contradicted act:\n%s", card)
	}
}

// runApprovalLink is an approval's link on a run's card.
var runApprovalLink = regexp.MustCompile(`<a href="([^"]+)">Approval (apr-[0-9a-f]+)</a>`)

// TestRunLinksToItsApprovalsThatExist: every approval on a run's card
// links to a page that shows it: a waiting one to its card on the
// Approvals page, and an answered one, once "Recently answered" there
// has moved on (its card gone, so a link to it would lead nowhere), to
// its run's journal, with its answer. A link with a fragment names an
// element of its page.
func TestRunLinksToItsApprovalsThatExist(t *testing.T) {
	s, ids := runsSite(t, siteOptions{})
	b := s.browser()
	if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	resolves := func(list, run, approval, says string) {
		t.Helper()
		_, runs, _ := b.page(list)
		var href string
		for _, m := range runApprovalLink.FindAllStringSubmatch(runCard(t, runs, ids[run]), -1) {
			if m[2] == ids[approval] {
				href = strings.ReplaceAll(m[1], "&amp;", "&")
			}
		}
		if href == "" {
			t.Errorf("the card of the %s run has no link to approval %s", run, ids[approval])
			return
		}
		path, frag, _ := strings.Cut(href, "#")
		code, target, _ := b.page(path)
		if code != http.StatusOK {
			t.Errorf("approval %s links to %s, which is %d", ids[approval], href, code)
			return
		}
		if frag != "" && !strings.Contains(target, `id="`+frag+`"`) {
			t.Errorf("approval %s links to %s, which has no element #%s", ids[approval], href, frag)
		}
		if !strings.Contains(target, ids[approval]) || !strings.Contains(target, says) {
			t.Errorf("approval %s links to %s, which does not show it (%q)", ids[approval], href, says)
		}
	}
	resolves("/runs", "parked", "parked approval", "waiting")
	// The parked request is denied, and as many after it as "Recently
	// answered" shows: the approved one has left the Approvals page.
	deny := func(id string) {
		t.Helper()
		s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"deny","device":"valve-1","capability":"open","value":true,"reason":"not now"}`, 200, `"status":"denied"`)
	}
	deny(ids["parked approval"])
	for i := range approvalsAnswered {
		b := s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true,"reason":"later `+strconv.Itoa(i)+`"}`, 202, "pending_approval")
		deny(approvalID.FindStringSubmatch(b)[1])
	}
	if _, page, _ := b.page("/approvals"); strings.Contains(page, ids["approved approval"]) {
		t.Fatalf("the Approvals page still shows approval %s, after %d answered since", ids["approved approval"], approvalsAnswered+1)
	}
	resolves("/runs?status=completed", "approved", "approved approval", "approved valve-1.open")
}
