package web

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/store"
)

// failingJournal is the site's journal, whose reads and health fail with
// a set error once fail is set.
type failingJournal struct {
	*journal.DB
	fail atomic.Pointer[error]
}

func (f *failingJournal) failWith(err error) { f.fail.Store(&err) }

func (f *failingJournal) Events(ctx context.Context, since uint64, limit int) ([]runtime.Event, error) {
	if p := f.fail.Load(); p != nil {
		return nil, *p
	}
	return f.DB.Events(ctx, since, limit)
}

func (f *failingJournal) Err() error {
	if p := f.fail.Load(); p != nil {
		return *p
	}
	return f.DB.Err()
}

// failingSessions is the site's session store, whose reads fail once
// fail is set.
type failingSessions struct {
	SessionStore
	fail atomic.Bool
}

func (f *failingSessions) Get(cookie string, now time.Time) (store.Session, bool, error) {
	if f.fail.Load() {
		return store.Session{}, false, errors.New("reading session bucket: " + secretDetail)
	}
	return f.SessionStore.Get(cookie, now)
}

// secretDetail stands for what an internal error may say that no client
// may read: a path, a device's insides.
const secretDetail = "open /srv/state/journal.db: input/output error"

var errorIDPattern = regexp.MustCompile(`err-[0-9a-f]{12}`)

// publicSite is a site whose log is kept, with a journal and a session
// store that fail on demand.
func publicSite(t *testing.T) (*site, *runtimetest.LogBuffer, *failingJournal, *failingSessions) {
	t.Helper()
	logs := &runtimetest.LogBuffer{}
	fj := &failingJournal{}
	var fs *failingSessions
	s := newSite(t, siteOptions{
		journal: func(db *journal.DB) runtime.Journal { fj.DB = db; return fj },
		options: func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(logs, nil))
			fs = &failingSessions{SessionStore: o.Sessions}
			o.Sessions = fs
			o.Verify = func(context.Context) (store.Report, error) {
				return store.Report{}, errors.New("checking the chain: " + secretDetail)
			}
		},
	})
	return s, logs, fj, fs
}

// expectPublic checks an internal failure's answer end to end: the body
// has the public message and an error id, never the detail; the log has
// the id with the detail.
func expectPublic(t *testing.T, logs *runtimetest.LogBuffer, what, body, public string) string {
	t.Helper()
	id := errorIDPattern.FindString(body)
	switch {
	case id == "":
		t.Fatalf("%s: no error id in %s", what, body)
	case !strings.Contains(body, public):
		t.Fatalf("%s: %s does not say %q", what, body, public)
	case strings.Contains(body, "input/output") || strings.Contains(body, "/srv/state"):
		t.Fatalf("%s: the answer carries the internal detail: %s", what, body)
	}
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, id) {
			line = l
		}
	}
	if !strings.Contains(line, "input/output error") || !strings.Contains(line, "level=ERROR") {
		t.Fatalf("%s: the log has no error line with %s and the detail:\n%s", what, id, logs.String())
	}
	return id
}

func TestInternalErrorsGiveAnIDAndKeepTheDetailInTheLog(t *testing.T) {
	s, logs, fj, fs := publicSite(t)

	// The JSON API: the journal's check fails.
	code, body := s.call("GET", "/api/v1/journal/verify", "viewer", "")
	var e apiError
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("verify = %d %s, %v", code, body, err)
	}
	if e.Detail != "the journal cannot be checked" || !errorIDPattern.MatchString(e.ErrorID) {
		t.Fatalf("verify's error = %+v, want the public message and an id", e)
	}
	expectPublic(t, logs, "verify", body, "the journal cannot be checked")

	// The console page: the same failure, shown with its id.
	b := s.browser()
	if got := b.login("vera", "password-1"); got != http.StatusSeeOther {
		t.Fatalf("login = %d", got)
	}
	code, page, _ := b.page("/journal?verify=1")
	if code != http.StatusOK {
		t.Fatalf("journal page = %d", code)
	}
	expectPublic(t, logs, "journal page", page, "the journal cannot be checked")

	// A client's own mistake stays as it is, without an id.
	_, body = s.call("GET", "/api/v1/events?limit=0", "viewer", "")
	if !strings.Contains(body, `query \"limit\"`) || strings.Contains(body, "error_id") {
		t.Fatalf("a bad limit = %s, want the problem named and no id", body)
	}

	// The journal cannot be read: the API and the export.
	fj.failWith(errors.New("reading events: " + secretDetail))
	code, body = s.call("GET", "/api/v1/events", "viewer", "")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("events on a failing journal = %d %s", code, body)
	}
	expectPublic(t, logs, "events", body, "the journal cannot be read")
	code, page, _ = b.page("/journal/export")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("export on a failing journal = %d %s", code, page)
	}
	expectPublic(t, logs, "export", page, "the journal cannot be read")

	// The overview says the journal cannot witness, with an id, and
	// /readyz repeats that id without logging it again.
	_, page, _ = b.page("/")
	id := expectPublic(t, logs, "overview", page, "the journal cannot witness")
	for range 3 {
		code, body = s.call("GET", "/readyz", "", "")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, id) {
			t.Fatalf("/readyz on a failing journal = %d %s, want 503 with %s", code, body, id)
		}
		expectPublic(t, logs, "readyz", body, "the journal cannot witness")
	}
	// Every page says so in a banner at its top.
	_, page, _ = b.page("/runs")
	if banner := page[strings.Index(page, `id="banners"`)+1:]; !strings.Contains(page, `id="banners"`) ||
		!strings.Contains(banner[:strings.Index(banner, "<h1>")], "Nothing acts:</strong> the journal cannot witness") {
		t.Errorf("the runs page of a gateway whose journal fails has no banner that says nothing acts:\n%s", page)
	}
	if n := strings.Count(logs.String(), id); n != 1 {
		t.Fatalf("the journal's health was logged %d times under %s, want once:\n%s", n, id, logs.String())
	}

	// The sessions cannot be read: the console's error page.
	fs.fail.Store(true)
	code, page, _ = b.page("/devices")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("a page without sessions = %d", code)
	}
	expectPublic(t, logs, "error page", page, "sessions cannot be read")
}

// An error no handler meant for a client is a 500 with an id.
func TestUnexpectedErrorsAreInternal(t *testing.T) {
	s, logs, _, _ := publicSite(t)
	s.web.e.GET("/api/v1/broken", func(echo.Context) error { return errors.New("encoding: " + secretDetail) })
	s.web.e.GET("/api/v1/broken-status", func(echo.Context) error {
		return echo.NewHTTPError(http.StatusBadGateway, errors.New("dialing: "+secretDetail))
	})
	code, body := s.call("GET", "/api/v1/broken", "viewer", "")
	if code != http.StatusInternalServerError {
		t.Fatalf("a plain error = %d %s", code, body)
	}
	expectPublic(t, logs, "a plain error", body, `"detail":"internal error"`)
	code, body = s.call("GET", "/api/v1/broken-status", "viewer", "")
	if code != http.StatusBadGateway {
		t.Fatalf("an HTTP error that wraps an error = %d %s", code, body)
	}
	expectPublic(t, logs, "an HTTP error that wraps an error", body, `"detail":"internal error"`)
}
