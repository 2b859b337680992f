package web

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/runtime"
)

// runsShown bounds the runs a Runs page lists, newest first, so that the
// page stays light on a phone: the engine keeps up to a thousand ended
// runs, and the filters narrow them; Older runs pages on.
const runsShown = 10

// approvalsAnswered is how many answered approvals the Approvals page
// shows (approvalsPage): a run links only to the cards found there.
const approvalsAnswered = 10

// runsData is the Runs page: the plans a person may start, the filters
// as given, and the runs that pass them.
type runsData struct {
	Plans                []runtime.Plan
	Plan, Status, Origin string
	// The filters' choices, with the one given selected (added if it is
	// none of them, so the form says what the list is filtered by).
	PlanChoices, StatusChoices, OriginChoices []filterOption
	// Total is how many runs pass the filters; Runs holds runsShown of
	// them from Skip on, newest first.
	Total    int
	Skip     int
	From, To int
	Runs     []runView
	// Newer and Older are the addresses of the pages around this one, or
	// "" when there is none.
	Newer, Older string
}

// filterOption is one option of a filter.
type filterOption struct {
	Value, Text string
	Selected    bool
}

// filterOptions returns the options of a filter given as "value", "text", ...
// pairs after "any", the one whose value is given selected.
func filterOptions(given, any string, pairs ...string) []filterOption {
	out := []filterOption{{Value: "", Text: any, Selected: given == ""}}
	found := given == ""
	for i := 0; i+1 < len(pairs); i += 2 {
		c := filterOption{Value: pairs[i], Text: pairs[i+1], Selected: pairs[i] == given}
		found = found || c.Selected
		out = append(out, c)
	}
	if !found {
		out = append(out, filterOption{Value: given, Text: given, Selected: true})
	}
	return out
}

// runView is a run as a person reads it: every code word put in words.
type runView struct {
	runtime.RunRecord
	// What names the run: "Plan flush", or "A single command".
	What string
	// State is the status, or how it ended, in words ("Waiting for an
	// approval", "Refused"); Tone colours it: "good", "bad", "warn" or "".
	State, Tone string
	// Ended is true once the run ended: it can no longer be cancelled.
	Ended bool
	// By is who started the run, or "" when Via says it all (the
	// schedule); Via says where it came from: "the console", "MQTT".
	By, Via string
	// Took is how long it ran, or runs: "took 2 s", "running for 3 min".
	Took string
	// StepsText counts its steps and acts: "2 of 3 steps, 1 act".
	StepsText string
	// ActsNote says that an act of the run was contradicted or is not
	// confirmed, if one was or is.
	ActsNote string
	// Approvals are the approvals the run asked for that the engine still
	// holds, newest first.
	Approvals []runApproval
}

// runApproval is an approval of a run and where a person finds it.
type runApproval struct {
	ID string
	// Status says where it stands, in words.
	Status string
	// Href is where a person finds it, always: its card on the Approvals
	// page while it waits, and once answered the journal of its run (its
	// request, its answer and what came of the act), which stays when
	// the Approvals page's "Recently answered" has moved on.
	Href string
}

func (s *Server) runsPage(c echo.Context) error {
	d := runsData{Plans: s.eng.Plans(), Plan: c.QueryParam("plan"), Status: c.QueryParam("status"), Origin: c.QueryParam("origin")}
	var plans []string
	for _, p := range d.Plans {
		plans = append(plans, p.Name, p.Name)
	}
	d.PlanChoices = filterOptions(d.Plan, "Any plan or command", append(plans, "command", "Single commands")...)
	d.StatusChoices = filterOptions(d.Status, "Any", "running", "Running", "parked", "Waiting for an approval",
		"ended", "Ended, any way", "completed", "Completed", "refused", "Refused", "failed", "Failed",
		"lease_exhausted", "Stopped: its lease ran out", "cancelled", "Cancelled")
	d.OriginChoices = filterOptions(d.Origin, "Any", "console", "The console", "api", "The API", "mqtt", "MQTT",
		"schedule", "The schedule", "uplink", "The uplink", "mcp", "AI agents (MCP)")
	runs := s.runs(c)
	d.Total = len(runs)
	v, err := numParam(c, "skip")
	if err != nil {
		return err
	}
	if v != "" {
		if d.Skip, err = countParam(`query "skip"`, v, 0, max(d.Total-1, 0)); err != nil {
			return err
		}
	}
	runs = runs[d.Skip:]
	if len(runs) > runsShown {
		runs = runs[:runsShown]
	}
	d.Runs = s.runViews(c.Request().Context(), runs, d.Plans)
	d.From, d.To = d.Skip+1, d.Skip+len(runs)
	page := func(skip int) string {
		q := url.Values{}
		for _, k := range []string{"plan", "status", "origin"} {
			if v := c.QueryParam(k); v != "" {
				q.Set(k, v)
			}
		}
		if skip > 0 {
			q.Set("skip", strconv.Itoa(skip))
		}
		if len(q) == 0 {
			return "/runs"
		}
		return "/runs?" + q.Encode()
	}
	if d.Skip > 0 {
		d.Newer = page(max(d.Skip-runsShown, 0))
	}
	if d.Skip+runsShown < d.Total {
		d.Older = page(d.Skip + runsShown)
	}
	return s.page(c, "runs", "Runs", d)
}

func (s *Server) startForm(c echo.Context) error {
	rec, err := s.startPlan(c, runtime.StartPlan{Plan: c.Param("name"), Principal: userOf(c).Principal,
		Origin: "console", Reason: c.FormValue("reason")})
	if err != nil {
		return formError(c, "/runs", err)
	}
	return back(c, "/runs", "Started "+rec.Plan+" as "+rec.ID+".")
}

func (s *Server) cancelForm(c echo.Context) error {
	if err := s.cancelRun(c, c.Param("id"), c.FormValue("reason")); err != nil {
		return formError(c, "/runs", err)
	}
	return back(c, "/runs", "Cancelled "+c.Param("id")+".")
}

// runViews puts runs in words, with their approvals.
func (s *Server) runViews(ctx context.Context, runs []runtime.RunRecord, plans []runtime.Plan) []runView {
	if len(runs) == 0 {
		return nil
	}
	// What came of the runs' acts: a run completes when its steps are
	// done, and an act among them may have been contradicted.
	shown := map[string]bool{}
	for _, r := range runs {
		shown[r.ID] = true
	}
	worst := map[string]runtime.Confirmation{}
	for _, ev := range s.recentWhere(ctx, 1000, func(ev *runtime.Event) bool { return ev.Kind == runtime.KindActed && shown[ev.Run] }) {
		var rc runtime.Receipt
		if json.Unmarshal(ev.Body, &rc) != nil || rc.Confirmation == runtime.Confirmed {
			continue
		}
		if _, seen := worst[ev.Run]; !seen || rc.Confirmation.Discrepant() {
			worst[ev.Run] = rc.Confirmation
		}
	}
	now := s.opts.Now()
	steps := map[string][]runtime.PlanStep{}
	for _, p := range plans {
		steps[p.Name] = p.Steps
	}
	byRun := map[string][]runtime.Approval{}
	for _, a := range s.eng.Approvals() {
		byRun[a.Run] = append(byRun[a.Run], a)
	}
	for _, a := range s.eng.RecentApprovals(1000) {
		byRun[a.Run] = append(byRun[a.Run], a)
	}
	out := make([]runView, 0, len(runs))
	for _, r := range runs {
		v := runView{RunRecord: r, By: personText(r.Principal), Via: originWords(r.Origin), Took: tookWords(r, now)}
		if name, _ := personParts(r.Principal); strings.HasPrefix(r.Principal, r.Origin+":") {
			v.By = name // "by olga from the console"
		}
		if r.Origin == "schedule" && strings.HasPrefix(r.Principal, "schedule:") {
			v.By = ""
		}
		v.State, v.Tone, v.Ended = runState(r)
		if cf, ok := worst[r.ID]; ok {
			if cf.Discrepant() {
				v.ActsNote, v.Tone = "an act was contradicted ("+string(cf)+")", "bad"
			} else {
				v.ActsNote = "an act is not confirmed (" + string(cf) + ")"
				if v.Tone == "good" {
					v.Tone = "warn"
				}
			}
			v.State += ": " + v.ActsNote
		}
		if r.Plan == "command" {
			v.What, v.StepsText = "A single command", stepsWords(r, 1)
		} else {
			v.What, v.StepsText = "Plan "+r.Plan, stepsWords(r, len(steps[r.Plan]))
		}
		for _, a := range byRun[r.ID] {
			if a.Run == "" {
				continue
			}
			ra := runApproval{ID: a.ID, Status: approvalWords(a.Status)}
			if a.Status == runtime.ApprovalPending {
				ra.Href = "/approvals#approval-" + a.ID
			} else {
				ra.Href = "/journal?" + url.Values{"run": {a.Run}}.Encode()
			}
			v.Approvals = append(v.Approvals, ra)
		}
		out = append(out, v)
	}
	return out
}

// runState says where a run stands, or how it ended, in words, with its
// tone and whether it ended.
func runState(r runtime.RunRecord) (state, tone string, ended bool) {
	switch r.Status {
	case runtime.RunRunning:
		return "Running", "", false
	case runtime.RunParked:
		return "Waiting for an approval", "warn", false
	case runtime.RunEnded:
	default:
		return string(r.Status), "", false
	}
	switch r.End {
	case runtime.EndCompleted:
		return "Completed", "good", true
	case runtime.EndRefused:
		return "Refused", "bad", true
	case runtime.EndFailed:
		return "Failed", "bad", true
	case runtime.EndLeaseExhausted:
		return "Stopped: its lease ran out", "bad", true
	case runtime.EndCancelled:
		return "Cancelled", "warn", true
	}
	return "Ended", "", true
}

// originWords names where a run came from.
func originWords(o string) string {
	switch o {
	case "console":
		return "the console"
	case "api":
		return "the API"
	case "mqtt":
		return "MQTT"
	case "schedule":
		return "the schedule"
	case "uplink":
		return "the uplink"
	case "mcp":
		return "an AI agent (MCP)"
	case "safety":
		return "the gateway's safety watch"
	case "":
		return "an unknown origin"
	}
	return o
}

// approvalWords says where an approval stands.
func approvalWords(st runtime.ApprovalStatus) string {
	switch st {
	case runtime.ApprovalPending:
		return "waiting for an answer"
	case runtime.ApprovalApproved:
		return "approved"
	case runtime.ApprovalDenied:
		return "denied"
	case runtime.ApprovalExpired:
		return "expired unanswered"
	case runtime.ApprovalSuperseded:
		return "closed by the gateway"
	}
	return string(st)
}

// tookWords says how long a run took, or has been going, at now.
func tookWords(r runtime.RunRecord, now time.Time) string {
	switch {
	case r.Status == runtime.RunEnded && !r.EndedAt.IsZero():
		return "took " + spanWords(r.EndedAt.Sub(r.StartedAt))
	case r.Status == runtime.RunParked:
		return "open for " + spanWords(now.Sub(r.StartedAt)) + ", parked now"
	case r.Status == runtime.RunRunning:
		return "running for " + spanWords(now.Sub(r.StartedAt))
	}
	return "not known"
}

// spanWords says a span of time the way a person says it: "under a
// second", "40 s", "3 min", "3 min 20 s", "2 h 5 min", "3 days 4 h".
func spanWords(d time.Duration) string {
	switch {
	case d < time.Second:
		return "under a second"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s"
	case d < 10*time.Minute:
		m, sec := int(d/time.Minute), int(d%time.Minute/time.Second)
		if sec == 0 {
			return strconv.Itoa(m) + " min"
		}
		return strconv.Itoa(m) + " min " + strconv.Itoa(sec) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return strconv.Itoa(h) + " h"
		}
		return strconv.Itoa(h) + " h " + strconv.Itoa(m) + " min"
	}
	days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	return strconv.Itoa(days) + " days " + strconv.Itoa(h) + " h"
}

// stepsWords counts a run's steps and acts: "2 of 3 steps, 1 act". total
// is how many steps its plan has, zero when that is not known.
func stepsWords(r runtime.RunRecord, total int) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(r.Steps))
	if total > 0 {
		b.WriteString(" of " + strconv.Itoa(total))
		b.WriteString(countNoun(total, " step", " steps"))
	} else {
		b.WriteString(countNoun(r.Steps, " step", " steps"))
	}
	b.WriteString(", " + strconv.Itoa(r.Actuations) + countNoun(r.Actuations, " act", " acts"))
	return b.String()
}

// countNoun returns the noun for n things: one when n is 1, else many.
func countNoun(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
