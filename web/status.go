package web

import (
	"bytes"
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
)

// statusView is what every page tells a person at once: how many
// requests wait, a mode that asks nobody or lets nothing act, and a
// journal that cannot witness (so nothing acts).
type statusView struct {
	// Page is the page shown; the Approvals page needs no banner saying
	// that requests wait.
	Page    string
	Pending int
	Mode    runtime.ModeRecord
	// ModeSays says what the mode means for the people at the plant,
	// when it is not the everyday supervised one.
	ModeSays string
	// ModeBy says who put the mode in force, in words (modeByWords):
	// "adam, in the console", not "console:adam".
	ModeBy string
	// Witness says why the journal cannot witness, if it cannot.
	Witness string
	// srv answers the wording methods (words.go) that need the
	// configuration: a device's label, the sensor that confirms an act.
	srv *Server
}

func (s *Server) status(ctx context.Context, page string) *statusView {
	v := &statusView{Page: page, Pending: len(s.eng.Approvals()), Mode: s.eng.Mode(ctx), srv: s}
	v.ModeBy = modeByWords(v.Mode.By)
	for _, m := range s.eng.Modes() {
		if m.Name != v.Mode.Name {
			continue
		}
		switch {
		case m.Base == governance.ModeObserve:
			v.ModeSays = "nothing is actuated: every command to an actuator is refused"
		case m.AskAbove == nil:
			v.ModeSays = "every command under its ceiling acts without asking a person"
		}
	}
	if pe := s.witness.of(s.log, s.eng.Healthy()); pe != nil {
		v.Witness = pe.Error()
	}
	return v
}

// statusPart renders the banners and the count of requests waiting, for
// the script to put in place when they change.
func (s *Server) statusPart(c echo.Context) error {
	t := s.pages.t["overview"]
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "status", s.status(c.Request().Context(), c.QueryParam("page"))); err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.HTMLBlob(http.StatusOK, buf.Bytes())
}
