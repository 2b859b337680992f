package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
)

// The Journal page shows the journal as sentences a person reads, newest
// first, a page at a time. A page reads the journal in windows backwards
// from its bound (or forwards from it, for the newer page), never the whole
// journal: it stops when the page is full or after journalScan events, and
// says which sequences it searched, so that a filter that matches little
// on a large journal costs a bounded read per page, and Older goes on
// from where it stopped.
const (
	// journalPageSize is how many events a page shows.
	journalPageSize = 50
	// journalScan bounds the events one page reads.
	journalScan = 5000
	// journalWindow is how many events one read of the journal takes.
	journalWindow = 500
)

// readingKinds are the kinds of readings: many a minute, hidden unless
// asked for (the readings box, or a kind filter that names them).
var readingKinds = []string{string(runtime.KindObserved)}

// kindGroups are the filter's choices: each a set of kinds a person looks
// for together.
var kindGroups = []struct{ Kinds, Label string }{
	{"", "Everything"},
	{"refused,failed", "Refusals and failures"},
	{"approval_requested,approval_answered,approval_expired", "Approvals"},
	{"invoked,acted,failed,safe_drive,drift,recovered,reconciled", "Acts"},
	{"alarm", "Alarms"},
	{"mode_changed,rule_added,rule_revoked,config_changed", "Mode, rules and configuration"},
	{"device_online,device_offline,link", "Devices and links"},
	{"started,ended,schedule_skipped,schedule_missed", "Runs and schedules"},
	{"login,session", "Logins and sessions"},
	{"observed", "Readings"},
}

type kindOption struct {
	Value, Label string
	Selected     bool
}

// journalRow is one event as the page shows it.
type journalRow struct {
	runtime.Event
	Sentence string
	// JSON is the event, indented.
	JSON string
}

type journalData struct {
	Rows   []journalRow
	Kind   string
	Kinds  []kindOption
	Device string
	// Run, if set, keeps the events of one run; AllRuns is the page
	// without it.
	Run, AllRuns string
	Readings     bool
	// Range says which sequences the page searched and what it shows.
	Range string
	// Older and Newer are the links to the next pages, "" when none.
	Older, Newer string
	Export       string
	Verify       *store.Report
	// Errors are what could not be done, each with its error id.
	Errors []string
}

// journalQuery is what a page of the journal asks for.
type journalQuery struct {
	kinds    []string
	device   string
	run      string
	readings bool
	// before, if set, bounds the page from above (exclusive); after, if
	// set, from below (exclusive). At most one is set; neither is the
	// newest page.
	before, after       uint64
	hasBefore, hasAfter bool
}

func (q *journalQuery) keep(ev *runtime.Event) bool {
	if q.device != "" && ev.Device != q.device || q.run != "" && ev.Run != q.run {
		return false
	}
	if len(q.kinds) > 0 {
		return slices.Contains(q.kinds, string(ev.Kind))
	}
	// A run's readings are its steps: few, and part of what it did.
	return q.readings || q.run != "" || !slices.Contains(readingKinds, string(ev.Kind))
}

// link returns the page's address with the bound given ("before" or
// "after", or "" for the newest page).
func (q *journalQuery) link(bound string, seq uint64) string {
	v := url.Values{}
	if len(q.kinds) > 0 {
		v.Set("kind", strings.Join(q.kinds, ","))
	}
	if q.device != "" {
		v.Set("device", q.device)
	}
	if q.run != "" {
		v.Set("run", q.run)
	}
	if q.readings {
		v.Set("readings", "1")
	}
	if bound != "" {
		v.Set(bound, strconv.FormatUint(seq, 10))
	}
	if len(v) == 0 {
		return "/journal"
	}
	return "/journal?" + v.Encode()
}

// journalParams reads and checks the page's query.
func journalParams(c echo.Context, newest uint64) (journalQuery, error) {
	q := journalQuery{kinds: splitList(c.QueryParam("kind")), device: c.QueryParam("device"), run: c.QueryParam("run"),
		readings: c.QueryParam("readings") == "1"}
	for _, name := range []string{"before", "after"} {
		v, err := numParam(c, name)
		if err != nil || v == "" {
			if err != nil {
				return q, err
			}
			continue
		}
		n, err := seqParam(`query "`+name+`"`, v, newest)
		if err != nil {
			return q, err
		}
		if name == "before" {
			q.before, q.hasBefore = n, true
		} else {
			q.after, q.hasAfter = n, true
		}
	}
	if q.hasBefore && q.hasAfter {
		return q, problem(http.StatusBadRequest, `query "before" and query "after": give one of them, not both`)
	}
	return q, nil
}

func (s *Server) journalPage(c echo.Context) error {
	ctx := c.Request().Context()
	last := s.eng.LastSeq()
	q, err := journalParams(c, last)
	if err != nil {
		return err
	}
	d := journalData{Kind: strings.Join(q.kinds, ","), Device: q.device, Run: q.run, Readings: q.readings}
	d.Kinds = kindOptions(d.Kind)
	ex := url.Values{}
	for k, v := range map[string]string{"kind": d.Kind, "device": d.Device, "run": d.Run} {
		if v != "" {
			ex.Set(k, v)
		}
	}
	d.Export = "/journal/export"
	if len(ex) > 0 {
		d.Export += "?" + ex.Encode()
	}
	if q.run != "" {
		all := q
		all.run = ""
		d.AllRuns = all.link("", 0)
	}
	if c.QueryParam("verify") == "1" && s.opts.Verify != nil {
		rep, err := s.opts.Verify(ctx)
		if err != nil {
			d.Errors = append(d.Errors, command.Internal(s.log, "the journal cannot be checked", err, "path", c.Path()).Error())
		} else {
			d.Verify = &rep
		}
	}
	pg, err := s.journalRead(ctx, &q, last)
	if err != nil {
		d.Errors = append(d.Errors, command.Internal(s.log, "the journal cannot be read", err, "path", c.Path()).Error())
	}
	for i := range pg.events {
		d.Rows = append(d.Rows, journalRow{Event: pg.events[i], Sentence: eventSentence(pg.events[i]), JSON: indentEvent(&pg.events[i])})
	}
	d.Range = pg.describe(&q)
	switch {
	case pg.older > last: // after the newest: the newest page
		d.Older = q.link("", 0)
	case pg.older > 0:
		d.Older = q.link("before", pg.older)
	}
	if pg.newer {
		d.Newer = q.link("after", pg.newerFrom)
	}
	return s.page(c, "journal", "Journal", d)
}

// journalPageRead is what a page read of the journal: its events, newest
// first, and the sequences it searched.
type journalPageRead struct {
	events []runtime.Event
	// lo and hi are the lowest and highest sequence searched; empty when
	// lo > hi.
	lo, hi uint64
	// first and last are the journal's oldest and newest sequences (0 when
	// it is empty).
	first, last uint64
	// older is the bound of the Older page (0: none); newer says there is
	// a Newer page, of the events after newerFrom.
	older     uint64
	newer     bool
	newerFrom uint64
	// none says why nothing was searched, if so.
	none string
}

// journalRead reads one page.
func (s *Server) journalRead(ctx context.Context, q *journalQuery, last uint64) (journalPageRead, error) {
	pg := journalPageRead{last: last}
	head, err := s.eng.Events(ctx, 0, 1)
	if err != nil {
		return pg, err
	}
	if len(head) == 0 {
		return pg, nil
	}
	pg.first = head[0].Seq
	if q.hasAfter {
		return s.journalForward(ctx, q, pg)
	}
	before := last + 1
	if q.hasBefore {
		before = q.before
	}
	if q.hasBefore {
		pg.newer, pg.newerFrom = true, max(before, 1)-1
	}
	if before <= pg.first {
		pg.none = "No events before " + seqText(before) + "."
		return pg, nil
	}
	evs, lo, more, err := scanBack(ctx, s.eng.Events, before, pg.first, q.keep)
	if err != nil {
		return pg, err
	}
	pg.events, pg.lo, pg.hi = evs, lo, before-1
	if more {
		pg.older = lo
	}
	return pg, nil
}

// journalForward reads the page of the events after q.after, oldest of
// them first, and returns them newest first.
func (s *Server) journalForward(ctx context.Context, q *journalQuery, pg journalPageRead) (journalPageRead, error) {
	since, read := max(q.after, pg.first-1), 0
	pg.lo = since + 1
	// One more than a page is looked for, so that Newer is offered only
	// when there is more to see; the page ends before it.
	var out []runtime.Event
	end := since
scan:
	for read < journalScan && since < pg.last {
		evs, err := s.eng.Events(ctx, since, journalWindow)
		if err != nil {
			return pg, err
		}
		if len(evs) == 0 {
			break
		}
		for i := range evs {
			if evs[i].Seq > pg.last {
				break scan // written after the page began: the next page shows it
			}
			since, read = evs[i].Seq, read+1
			if !q.keep(&evs[i]) {
				continue
			}
			if len(out) == journalPageSize {
				pg.newer = true
				break scan
			}
			out = append(out, evs[i])
			end = since
		}
	}
	if !pg.newer {
		end = since
		pg.newer = since < pg.last // stopped by journalScan
	}
	pg.hi, pg.newerFrom = end, end
	if pg.lo > pg.hi {
		pg.none = "No events after " + seqText(q.after) + "."
	}
	slices.Reverse(out)
	pg.events = out
	if pg.lo > pg.first {
		pg.older = pg.lo
	}
	return pg, nil
}

// scanBack returns up to journalPageSize events with sequences below
// before that keep passes, newest first, reading the journal in windows
// backwards from before down to first, and at most about journalScan
// events. It returns the lowest sequence the page covers, and whether
// older events are left to search: one more than a page is looked for,
// so that Older is offered only when there is more to see.
func scanBack(ctx context.Context, events func(context.Context, uint64, int) ([]runtime.Event, error), before, first uint64,
	keep func(*runtime.Event) bool) (out []runtime.Event, lo uint64, more bool, err error) {
	lo, read := before, 0
	for lo > first && read < journalScan {
		from := first
		if lo-first > journalWindow {
			from = lo - journalWindow
		}
		evs, err := events(ctx, from-1, int(lo-from))
		if err != nil {
			return nil, 0, false, err
		}
		// Events returns the sequences from `from` on; a journal pruned
		// meanwhile starts later, and then nothing older is left.
		for i := len(evs) - 1; i >= 0; i-- {
			ev := &evs[i]
			if ev.Seq >= lo {
				continue
			}
			if keep(ev) {
				if len(out) == journalPageSize {
					return out, lo, true, nil
				}
				out = append(out, *ev)
			}
			lo, read = ev.Seq, read+1
		}
		if len(evs) == 0 || evs[0].Seq > from {
			return out, first, false, nil
		}
		lo = from
	}
	return out, lo, lo > first, nil
}

// describe says which sequences the page searched and what it shows.
func (pg *journalPageRead) describe(q *journalQuery) string {
	if pg.first == 0 {
		return "The journal is empty."
	}
	held := " The journal holds events " + seqText(pg.first) + " to " + seqText(pg.last) + "."
	if pg.none != "" {
		return pg.none + held
	}
	what := "events"
	if len(q.kinds) > 0 || q.device != "" || q.run != "" {
		what = "matching events"
	} else if !q.readings {
		what = "events (readings hidden)"
	}
	n := strconv.Itoa(len(pg.events))
	if len(pg.events) == 1 {
		what = strings.Replace(what, "events", "event", 1)
	}
	if len(pg.events) == 0 {
		n = "No"
	}
	return n + " " + what + " in " + seqText(pg.lo) + " to " + seqText(pg.hi) + ", newest first." + held
}

func seqText(n uint64) string { return strconv.FormatUint(n, 10) }

// kindOptions returns the filter's choices with kind chosen; a kind list
// of no group is a choice of its own.
func kindOptions(kind string) []kindOption {
	out := make([]kindOption, 0, len(kindGroups)+1)
	found := false
	for _, g := range kindGroups {
		sel := g.Kinds == kind
		found = found || sel
		out = append(out, kindOption{Value: g.Kinds, Label: g.Label, Selected: sel})
	}
	if !found {
		out = append(out, kindOption{Value: kind, Label: "Kinds: " + clip(kind), Selected: true})
	}
	return out
}

// indentEvent returns the event as indented JSON, as the export writes
// it but for people.
func indentEvent(ev *runtime.Event) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ev); err != nil {
		return string(ev.Body)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// exportJournal writes the events that pass the filter (kind, device,
// run) as JSON Lines.
func (s *Server) exportJournal(c echo.Context) error {
	kinds, device, run := splitList(c.QueryParam("kind")), c.QueryParam("device"), c.QueryParam("run")
	since := uint64(0)
	v, err := numParam(c, "since")
	if err != nil {
		return err
	}
	if v != "" {
		n, err := seqParam(`query "since"`, v, s.eng.LastSeq())
		if err != nil {
			return err
		}
		since = n
	}
	ctx := c.Request().Context()
	// The first page is read before the status is sent, so that a journal
	// that cannot be read is an error, not an empty export.
	evs, err := s.eng.Events(ctx, since, 1000)
	if err != nil {
		return s.internal(c, http.StatusServiceUnavailable, "the journal cannot be read", err)
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.Header().Set(echo.HeaderContentDisposition, `attachment; filename="shadowgate-journal.jsonl"`)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for ; len(evs) > 0; evs, err = s.eng.Events(ctx, since, 1000) {
		for i := range evs {
			since = evs[i].Seq
			if (len(kinds) == 0 || slices.Contains(kinds, string(evs[i].Kind))) && (device == "" || evs[i].Device == device) &&
				(run == "" || evs[i].Run == run) {
				if err := enc.Encode(&evs[i]); err != nil {
					return nil // the client left
				}
			}
		}
	}
	if err != nil && ctx.Err() == nil {
		// Too late for a status: the export ends short, and the log says
		// why. A client checks an export with journal verify.
		command.Internal(s.log, "the journal export ended early", err, "path", c.Path(), "since", since)
	}
	return nil
}
