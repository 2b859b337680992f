package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

//go:embed assets
var assets embed.FS

// pages are the console's templates: each page is the layout around its
// content, and its "live" part can be rendered alone for updates.
type pages struct {
	t map[string]*template.Template
}

// pageSheets are the stylesheets, besides style.css, that a page loads:
// what only it (or it and pages like it) draws. Every page would
// otherwise load every page's rules.
var pageSheets = map[string][]string{"approvals": {"forms.css", "approvals.css"}, "devices": {"devices.css"}, "device": {"devices.css", "device.css"}, "overview": {"overview.css"},
	"runs": {"forms.css", "runs.css"}, "policy": {"forms.css", "runs.css"}, "journal": {"forms.css", "journal.css"}, "alarms": {"forms.css", "alarms.css"}}

var pageNames = []string{"login", "error", "overview", "approvals", "devices", "runs", "journal", "policy", "alarms", "device"}

func loadPages() (*pages, error) {
	funcs := template.FuncMap{
		"json": func(v any) string {
			b, _ := json.Marshal(v)
			return string(b)
		},
		"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"at":      timeElement,
		"atLeast": func(id *identity, role string) bool {
			r, err := access.ParseRole(role)
			return err == nil && id != nil && id.Role.AtLeast(r)
		},
		"lower":    strings.ToLower,
		"value":    valueText,
		"state":    stateText,
		"sentence": eventSentence,
		"decision": decisionText,
		"sheets":   func(page string) []string { return pageSheets[page] },
		"cardArgs": func(c deviceCard, p pageData, back string) cardArgs {
			return cardArgs{Card: c, User: p.User, CSRF: formToken(p.CSRF), Back: back}
		},
	}
	p := &pages{t: map[string]*template.Template{}}
	for _, name := range pageNames {
		t := template.New("layout.html").Funcs(funcs)
		for _, file := range []string{"layout.html", "card.html", name + ".html"} {
			b, err := fs.ReadFile(assets, "assets/"+file)
			if err != nil {
				return nil, fmt.Errorf("console page %s: %w", name, err)
			}
			tt := t
			if file != t.Name() {
				tt = t.New(file)
			}
			if _, err := tt.Parse(string(unindent(b))); err != nil {
				return nil, fmt.Errorf("console page %s: %w", name, err)
			}
		}
		p.t[name] = t
	}
	return p, nil
}

// unindent drops a template's indentation and its blank lines: they are
// there for people who read the source, and a page is sent to a phone
// every time it is drawn. A line break stays where a line broke, so text
// keeps its spaces. (No template has a <pre> or a <textarea> of its own
// text, where the spaces would count.)
func unindent(b []byte) []byte {
	var out bytes.Buffer
	for line := range bytes.Lines(b) {
		if line = bytes.TrimLeft(line, " \t"); len(bytes.TrimSpace(line)) > 0 {
			out.Write(line)
		}
	}
	return out.Bytes()
}

// pageData is what every page gets.
type pageData struct {
	Title string
	Page  string
	User  *identity
	CSRF  string
	Note  string
	// NoteIsError marks Note as a form's error, not a success;
	// NoteIsBad marks it as a bad outcome of a form that was right (a
	// command refused, or an act that failed).
	NoteIsError, NoteIsBad bool
	Error                  string
	// ErrorID names the log line with the detail of Error, when it is a
	// failure that was not the person's doing.
	ErrorID string
	Next    string
	// Kinds are the event kinds that refresh the page's live part.
	// (Those of every page are in the script: see streamKinds.)
	Kinds string
	// Alarms are the counts the header shows to a person logged in.
	Alarms runtime.AlarmCounts
	// Now is when the page was drawn: the script tells the ages of
	// readings from it, whatever the browser's clock says.
	Now time.Time
	// Status is what every page shows a person logged in: the requests
	// waiting and the banners.
	Status *statusView
	Data   any
}

func (p *pages) render(c echo.Context, status int, name string, d pageData) error {
	t, ok := p.t[name]
	if !ok {
		return fmt.Errorf("no console page %s", name)
	}
	d.Page = name
	if d.CSRF == "" {
		d.CSRF = csrfToken(c)
	}
	if d.Note == "" {
		d.Note, d.NoteIsError, d.NoteIsBad = noteOf(c)
	}
	var buf bytes.Buffer
	tmpl := "layout.html"
	if c.QueryParam("fragment") == "1" && t.Lookup("live") != nil {
		tmpl = "live"
	}
	if err := t.ExecuteTemplate(&buf, tmpl, d); err != nil {
		return fmt.Errorf("rendering %s: %w", name, err)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.HTMLBlob(status, buf.Bytes())
}

// staticFiles are the script and the stylesheets as they are sent,
// without their comments, indentation and the spaces around their
// punctuation. The sources keep them for people; a phone on a slow link
// is not sent them.
var staticFiles = sync.OnceValue(func() map[string][]byte {
	out := map[string][]byte{}
	_ = fs.WalkDir(assets, "assets/static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, p)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(p, "assets/static")] = trimAsset(path.Ext(p), b)
		return nil
	})
	return out
})

// trimAsset drops a script's comment lines, its indentation and the
// spaces next to its punctuation (tightenJS), and the line breaks after
// a ";", "{" or "," (after which a line break never ends a statement), and
// minifies a stylesheet (minifyCSS).
func trimAsset(ext string, b []byte) []byte {
	switch ext {
	case ".css":
		return minifyCSS(b)
	case ".js":
		var out []byte
		for line := range bytes.Lines(b) {
			if line = bytes.TrimLeft(line, " \t"); !bytes.HasPrefix(line, []byte("//")) && len(bytes.TrimSpace(line)) > 0 {
				out = tightenJS(out, line)
				// A line with "//" in it may end in a comment, which
				// would take in the next line: its break stays.
				if n := len(out); n >= 2 && out[n-1] == '\n' && bytes.IndexByte([]byte(";{,"), out[n-2]) >= 0 && !bytes.Contains(line, []byte("//")) {
					out = out[:n-1]
				}
			}
		}
		return out
	}
	return b
}

// tightenJS appends a line of script to out without the spaces that sit
// next to punctuation, outside strings: "if (a === b) {" becomes
// "if(a===b){". Spaces between words stay ("var x", "return x"), as do
// line breaks, on which the script may rely to end a statement. A space
// stays where dropping it would make another token ("a - -b", "a / /re/").
// Our script's regular expressions have no spaces or quotes, and its
// strings no line breaks, so they need no care of their own;
// TestTightenedScript checks that only spaces are dropped.
func tightenJS(out, line []byte) []byte {
	const punct = "{}()[];,=<>!&|?:+-*/%"
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(line) {
				out = append(out, c)
				i++
				c = line[i]
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case c == ' ' && len(out) > 0 && i+1 < len(line):
			prev, next := out[len(out)-1], line[i+1]
			joins := prev == next && strings.IndexByte("+-/", prev) >= 0 || prev == '/' && next == '*' || prev == '*' && next == '/'
			if (strings.IndexByte(punct, prev) >= 0 || strings.IndexByte(punct, next) >= 0) && !joins {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

var (
	cssComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	cssSpace   = regexp.MustCompile(`\s+`)
	// cssTight is a space next to punctuation that needs none: around
	// braces, semicolons, commas and the child combinator, and after the
	// colon of a declaration or a media feature (never before a colon,
	// where "a :hover" differs from "a:hover").
	cssTight = regexp.MustCompile(` ?([{};,>]) ?|(:) `)
)

// minifyCSS drops a stylesheet's comments and the spaces it needs no
// more. Our stylesheet has no strings or URLs in which these would count.
func minifyCSS(b []byte) []byte {
	b = cssComment.ReplaceAll(b, nil)
	b = cssSpace.ReplaceAll(b, []byte(" "))
	b = cssTight.ReplaceAll(b, []byte("$1$2"))
	return bytes.TrimSpace(bytes.ReplaceAll(b, []byte(";}"), []byte("}")))
}

func (s *Server) static(c echo.Context) error {
	name := path.Clean("/" + c.Param("*"))
	b, ok := staticFiles()[name]
	if !ok {
		return problem(http.StatusNotFound, "no such file")
	}
	ct := "application/octet-stream"
	switch path.Ext(name) {
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
	return c.Blob(http.StatusOK, ct, b)
}

func (s *Server) pageRoutes(g *echo.Group) {
	viewer, operator, approver, admin := need(access.Viewer), need(access.Operator), need(access.Approver), need(access.Admin)
	g.GET("/", s.overviewPage, viewer)
	g.GET("/approvals", s.approvalsPage, viewer)
	g.POST("/approvals/:id", s.answerForm, approver)
	g.GET("/devices", s.devicesPage, viewer)
	g.GET("/devices/:id", s.devicePage, viewer)
	g.POST("/commands", s.commandForm, operator)
	g.GET("/runs", s.runsPage, viewer)
	g.POST("/plans/:name/start", s.startForm, operator)
	g.POST("/runs/:id/cancel", s.cancelForm, operator)
	g.GET("/journal", s.journalPage, viewer)
	g.GET("/journal/export", s.exportJournal, viewer)
	g.GET("/policy", s.policyPage, viewer)
	g.POST("/mode", s.modeForm, operator)
	g.POST("/rules/:id/revoke", s.revokeForm, admin)
	g.POST("/attempts/:id/resolve", s.resolveForm, admin)
	g.GET("/alarms", s.alarmsPage, viewer)
	g.GET("/status", s.statusPart, viewer)
	g.POST("/alarms/:id/ack", s.ackForm, operator)
	g.POST("/alarms/:id/shelve", s.shelveForm, admin)
}

// pageKinds are, by page, the event kinds that refresh its live part.
var pageKinds = map[string]string{
	"overview":  "refused,approval_requested,approval_answered,approval_expired,mode_changed,alarm,reconciled,link",
	"approvals": "approval_requested,approval_answered,approval_expired,acted,refused,failed,ended,observed,alarm,mode_changed,rule_added,rule_revoked,reconciled,config_changed,device_online,device_offline",
	"devices":   "observed,acted,refused,failed,device_online,device_offline,recovered,reconciled,alarm,approval_requested,approval_answered,approval_expired",
	"device":    "observed,acted,refused,failed,device_online,device_offline,recovered,reconciled,alarm,approval_requested,approval_answered,approval_expired,safe_drive",
	"runs":      "started,ended,approval_requested,approval_answered,approval_expired,acted",
	"journal":   "",
	"policy":    "mode_changed,rule_added,rule_revoked,approval_requested,approval_answered,reconciled,recovered",
	"alarms":    "alarm",
}

// streamKinds are the kinds any page needs: the tab that holds the
// browser's one event stream passes these on to the others. They are the
// same on every page, so the script has them (its streamKinds), not each
// page; TestScriptKnowsStreamKinds keeps the two the same.
var streamKinds = func() string {
	var all []string
	for _, ks := range pageKinds {
		for k := range strings.SplitSeq(ks, ",") {
			if k != "" && !slices.Contains(all, k) {
				all = append(all, k)
			}
		}
	}
	slices.Sort(all)
	return strings.Join(all, ",")
}()

func (s *Server) page(c echo.Context, name, title string, data any) error {
	return s.pages.render(c, http.StatusOK, name, pageData{Title: title, User: userOf(c), Kinds: pageKinds[name],
		Alarms: s.alarmCounts(), Now: s.opts.Now(), Status: s.status(c.Request().Context(), name), Data: data})
}

// The tones of a note: what the page makes of it.
const (
	noteGood  = ""
	noteBad   = "bad"   // a form that was right, and came to nothing good
	noteError = "error" // a form's error: nothing was done
)

// back redirects to a page with a note for the person.
func back(c echo.Context, to, note string) error {
	return c.Redirect(http.StatusSeeOther, to+"?"+signedNote(note, noteGood, "").Encode())
}

// backOutcome redirects to a page with what came of a command: a bad
// outcome (refused, failed, contradicted) is said as one, so that it
// never looks like a success.
func backOutcome(c echo.Context, to, note string, r result) error {
	tone := noteGood
	if badOutcome(r) {
		tone = noteBad
	}
	return c.Redirect(http.StatusSeeOther, to+"?"+signedNote(note, tone, "").Encode())
}

// badOutcome reports whether a command came to nothing good: the judge
// or the device refused it, it failed, or the world contradicted it or
// could not confirm it.
func badOutcome(r result) bool {
	switch r.Outcome {
	case "refused", "failed", "contradicted":
		return true
	}
	return r.Receipt != nil && r.Receipt.Confirmation == runtime.Unconfirmed
}

// backError redirects to a page with a form's error for the person.
// field, if not "", names the form's field the error is about, so that
// the page can show the error next to it.
func backError(c echo.Context, to, field, msg string) error {
	return c.Redirect(http.StatusSeeOther, to+"?"+signedNote(msg, noteError, field).Encode())
}

// noteKey signs the notes the gateway sends a person back with, so that
// a link cannot put words of its own in the gateway's mouth ("All
// requests approved", "call this number"). A note outlives no restart.
var noteKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("web: no randomness for the note key: " + err.Error())
	}
	return k
}()

// signedNote is the query that carries a note: its text, its tone
// ("error=1" for a form's error, with the field it names; "bad=1" for a
// bad outcome), and their signature.
func signedNote(note, tone, field string) url.Values {
	q := url.Values{"note": {note}}
	switch tone {
	case noteError:
		q.Set("error", "1")
		if field != "" {
			q.Set("field", field)
		}
	case noteBad:
		q.Set("bad", "1")
	}
	q.Set("sig", noteSig(q))
	return q
}

func noteSig(q url.Values) string {
	m := hmac.New(sha256.New, noteKey)
	m.Write([]byte(q.Get("error") + "\x00" + q.Get("bad") + "\x00" + q.Get("field") + "\x00" + q.Get("note")))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// noteOf returns the note a request carries, if the gateway signed it.
func noteOf(c echo.Context) (note string, isError, isBad bool) {
	q := c.QueryParams()
	if q.Get("note") == "" || !hmac.Equal([]byte(q.Get("sig")), []byte(noteSig(q))) {
		return "", false, false
	}
	return q.Get("note"), q.Get("error") == "1", q.Get("bad") == "1"
}

// fieldOf returns the field an API error names (`field "reason": ...`),
// or "".
func fieldOf(msg string) string {
	rest, ok := strings.CutPrefix(msg, `field "`)
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, `"`)
	if !ok || strings.ContainsAny(name, " .[") {
		return ""
	}
	return name
}

// formError turns an API error into an error on the page the form came
// from: the client's mistake as it is, a failure that is not its doing
// as its public message and error id. Anything else goes to the error
// handler, which gives the error page.
func formError(c echo.Context, to string, err error) error {
	var he *echo.HTTPError
	if !errors.As(err, &he) || he.Code == http.StatusUnauthorized {
		return err
	}
	switch m := he.Message.(type) {
	case *command.PublicError:
		return backError(c, to, "", m.Error())
	case string:
		if he.Code != http.StatusInternalServerError && he.Internal == nil {
			return backError(c, to, fieldOf(m), clipDetail(m))
		}
	}
	return err
}

type overview struct {
	Mode runtime.ModeRecord
	// ModeBy says who put the mode in force, in words.
	ModeBy    string
	Alarms    runtime.AlarmCounts
	Health    string
	Ready     bool
	Pending   int
	Locks     []runtime.Attempt
	Refusals  []runtime.Event
	MQTT      *MQTTStats
	Uplink    *UplinkStats
	LastEvent uint64
}

func (s *Server) overviewPage(c echo.Context) error {
	ctx := c.Request().Context()
	o := overview{Mode: s.eng.Mode(ctx), Alarms: s.alarmCounts(), Pending: len(s.eng.Approvals()), Locks: s.eng.Locks(), Ready: true,
		Health: "journal writable, every step witnessed", LastEvent: s.eng.LastSeq()}
	o.ModeBy = modeByWords(o.Mode.By)
	if pe := s.witness.of(s.log, s.eng.Healthy()); pe != nil {
		o.Ready, o.Health = false, pe.Error()
	}
	if s.opts.MQTTStats != nil {
		st := s.opts.MQTTStats()
		o.MQTT = &st
	}
	if s.opts.UplinkStats != nil {
		st := s.opts.UplinkStats()
		o.Uplink = &st
	}
	o.Refusals = s.recent(ctx, []string{string(runtime.KindRefused)}, "", 10)
	return s.page(c, "overview", "Overview", o)
}

// recent returns the newest n events of the kinds, newest first.
func (s *Server) recent(ctx context.Context, kinds []string, device string, n int) []runtime.Event {
	return s.recentWhere(ctx, n, func(ev *runtime.Event) bool {
		return (len(kinds) == 0 || slices.Contains(kinds, string(ev.Kind))) && (device == "" || ev.Device == device)
	})
}

// recentWhere returns the newest n events that keep passes, newest
// first, from the newest 5000 of the journal.
func (s *Server) recentWhere(ctx context.Context, n int, keep func(*runtime.Event) bool) []runtime.Event {
	last := s.eng.LastSeq()
	since := uint64(0)
	if last > 5000 {
		since = last - 5000
	}
	var out []runtime.Event
	for {
		evs, err := s.eng.Events(ctx, since, 1000)
		if err != nil || len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			since = ev.Seq
			if keep(&ev) {
				out = append(out, ev)
			}
		}
	}
	slices.Reverse(out)
	if len(out) > n {
		out = out[:n]
	}
	return out
}

type approvalsData struct {
	Pending  []approvalView
	Answered []approvalView
	MaxRule  string
}

func (s *Server) approvalsPage(c echo.Context) error {
	ctx := c.Request().Context()
	d := approvalsData{}
	for _, a := range s.eng.Approvals() {
		d.Pending = append(d.Pending, s.approvalView(ctx, a))
	}
	for _, a := range s.eng.RecentApprovals(approvalsAnswered) {
		d.Answered = append(d.Answered, s.approvalView(ctx, a))
	}
	return s.page(c, "approvals", "Approvals", d)
}

func (s *Server) answerForm(c echo.Context) error {
	b := answerBody{Decision: c.FormValue("decision"), Reason: c.FormValue("reason"), Device: c.FormValue("device"),
		Capability: c.FormValue("capability"), Value: json.RawMessage(c.FormValue("value")), Mode: c.FormValue("mode"),
		RuleFor: c.FormValue("rule_for"), RuleAnyValue: c.FormValue("rule_any_value") == "on"}
	ap, err := s.answer(c, c.Param("id"), b)
	if err != nil {
		return formError(c, "/approvals", err)
	}
	return back(c, "/approvals", s.answerNote(ap))
}

// answerNote says what is known when an answer is given: the answer, not
// the act. An approved act may yet be refused at the act, or fail; its
// card says what came of it, and the note must not say otherwise.
func (s *Server) answerNote(ap runtime.Approval) string {
	what := "the mode change to " + ap.Mode
	if ap.Kind == "actuation" {
		_, capab, _ := s.eng.Capability(ap.Device, ap.Capability)
		what = ap.Device + "." + ap.Capability + " → " + stateText(ap.Value, capab.Unit)
	}
	what += " (" + ap.ID + ")"
	switch ap.Status {
	case runtime.ApprovalPending:
		return "You approved " + what + "; it waits for another approval."
	case runtime.ApprovalApproved:
		if ap.Kind == "actuation" {
			return "Approved " + what + ". What came of the act is on its card."
		}
		return "Approved " + what + "."
	case runtime.ApprovalDenied:
		return "Denied " + what + "."
	}
	return "Answered " + what + ": " + string(ap.Status) + "."
}

func (s *Server) policyPage(c echo.Context) error {
	return s.page(c, "policy", "Policy", s.policyData(c.Request().Context()))
}

func (s *Server) modeForm(c echo.Context) error {
	rec, ap, err := s.setMode(c, c.FormValue("mode"), c.FormValue("reason"))
	if err != nil {
		return formError(c, "/policy", err)
	}
	if ap != nil {
		return back(c, "/policy", "Mode "+ap.Mode+" is wider than "+rec.Name+": "+adminsMust(ap.Required)+" "+ap.ID+" on the Approvals page.")
	}
	return back(c, "/policy", "The mode is now "+rec.Name+".")
}

func (s *Server) revokeForm(c echo.Context) error {
	if err := s.revoke(c, c.Param("id")); err != nil {
		return formError(c, "/policy", err)
	}
	return back(c, "/policy", "Rule "+clip(c.Param("id"))+" revoked.")
}

func (s *Server) resolveForm(c echo.Context) error {
	a, err := s.resolve(c, c.Param("id"), resolveBody{Found: c.FormValue("found"), Note: c.FormValue("note")})
	if err != nil {
		return formError(c, "/policy", err)
	}
	what := "it acted"
	if c.FormValue("found") == string(runtime.FoundNotActed) {
		what = "it did not act"
	}
	return back(c, "/policy", a.Device+"."+a.Capability+" is unlocked; attempt "+a.ID+" is reconciled: "+what+".")
}

// timeElement shows a moment for people: with its date and zone, so
// that it says the same thing on a phone in another zone, and marked for
// the script, which shows it in the browser's zone.
func timeElement(t time.Time) template.HTML {
	if t.IsZero() {
		return "never"
	}
	return template.HTML(`<time datetime="` + t.UTC().Format(time.RFC3339) + `">` +
		template.HTMLEscapeString(t.Local().Format("2006-01-02 15:04:05 MST")) + `</time>`)
}

// valueText shows a value for people.
func valueText(v *value.Value) string {
	if v == nil || v.IsZero() {
		return "unknown"
	}
	return v.String()
}
