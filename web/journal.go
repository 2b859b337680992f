package web

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
)

type journalData struct {
	Events []runtime.Event
	Kind   string
	Device string
	Verify *store.Report
	Error  string
}

func (s *Server) journalPage(c echo.Context) error {
	d := journalData{Kind: c.QueryParam("kind"), Device: c.QueryParam("device")}
	d.Events = s.recent(c.Request().Context(), splitList(d.Kind), d.Device, 100)
	if c.QueryParam("verify") == "1" && s.opts.Verify != nil {
		rep, err := s.opts.Verify(c.Request().Context())
		if err != nil {
			d.Error = command.Internal(s.log, "the journal cannot be checked", err, "path", c.Path()).Error()
		} else {
			d.Verify = &rep
		}
	}
	return s.page(c, "journal", "Journal", d)
}

// exportJournal writes the events that pass the filter as JSON Lines.
func (s *Server) exportJournal(c echo.Context) error {
	kinds, device := splitList(c.QueryParam("kind")), c.QueryParam("device")
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
			if (len(kinds) == 0 || slices.Contains(kinds, string(evs[i].Kind))) && (device == "" || evs[i].Device == device) {
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
