package web

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
)

// Alarms after ISA-18.2, as people see and answer them: the list and the
// counts for everyone, an acknowledgement with a comment for an operator
// and up, shelving for an admin. The API and the console forms share the
// calls below, so both answer the same way: an unknown alarm is a 404, an
// alarm that waits for no acknowledgement a 409, a request the engine
// refuses (no comment, no reason, a duration out of bounds) a 400 that
// says why.

// alarmsBody is GET /api/v1/alarms: every alarm, standing first (active,
// then cleared but unacknowledged, then back to normal; by priority,
// newest first), and the counts of the page header.
type alarmsBody struct {
	Alarms []runtime.Alarm     `json:"alarms"`
	Counts runtime.AlarmCounts `json:"counts"`
}

// ackBody is an acknowledgement: the comment is required.
type ackBody struct {
	Comment string `json:"comment"`
}

// shelveBody shelves an alarm for a duration like 30m, with a reason; a
// duration of "0" unshelves it.
type shelveBody struct {
	For    string `json:"for"`
	Reason string `json:"reason"`
}

func (s *Server) apiAlarms(c echo.Context) error {
	as := s.eng.Alarms()
	return c.JSON(http.StatusOK, alarmsBody{Alarms: nonNil(as), Counts: runtime.CountAlarms(as, s.opts.Now())})
}

func (s *Server) apiAlarm(c echo.Context) error {
	a, ok := s.eng.Alarm(c.Param("id"))
	if !ok {
		return problem(http.StatusNotFound, "alarm "+clip(c.Param("id"))+" does not exist")
	}
	return c.JSON(http.StatusOK, a)
}

func (s *Server) apiAckAlarm(c echo.Context) error {
	var b ackBody
	if err := bind(c, &b); err != nil {
		return err
	}
	a, err := s.ackAlarm(c, c.Param("id"), b)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

func (s *Server) apiShelveAlarm(c echo.Context) error {
	var b shelveBody
	if err := bind(c, &b); err != nil {
		return err
	}
	a, err := s.shelveAlarm(c, c.Param("id"), b)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

// ackAlarm acknowledges an alarm for the caller, from the API or a form.
func (s *Server) ackAlarm(c echo.Context, id string, b ackBody) (runtime.Alarm, error) {
	a, err := s.eng.AckAlarm(c.Request().Context(), id, userOf(c).Principal, b.Comment)
	if err != nil {
		return a, s.alarmError(c, err, "the acknowledgement could not be recorded", id, b.Comment)
	}
	return a, nil
}

// shelveAlarm shelves or unshelves an alarm for the caller, from the API
// or a form. The duration's bounds are the engine's (MaxShelve).
func (s *Server) shelveAlarm(c echo.Context, id string, b shelveBody) (runtime.Alarm, error) {
	v := strings.TrimSpace(b.For)
	if v == "" {
		return runtime.Alarm{}, problem(http.StatusBadRequest, `field "for": required: how long to shelve the alarm (like 30m or 2h), or "0" to unshelve it`)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return runtime.Alarm{}, problem(http.StatusBadRequest, `field "for": `+command.QuoteShort(b.For)+
			` is not a duration like 30m or 2h, or "0" to unshelve`)
	}
	a, err := s.eng.ShelveAlarm(c.Request().Context(), id, userOf(c).Principal, d, b.Reason)
	if err != nil {
		return a, s.alarmError(c, err, "the shelving could not be recorded", id, b.Reason)
	}
	return a, nil
}

// alarmError is what a client is told of an error from an alarm call;
// inputs are what it sent, cut short where the error quotes them.
func (s *Server) alarmError(c echo.Context, err error, public string, inputs ...string) error {
	switch {
	case errors.Is(err, runtime.ErrAlarmNotFound):
		return problem(http.StatusNotFound, clipIn(err.Error(), inputs...))
	case errors.Is(err, runtime.ErrAlarmNotUnacknowledged), errors.Is(err, runtime.ErrAlarmNotStanding):
		return problem(http.StatusConflict, clipIn(err.Error(), inputs...))
	case errors.Is(err, runtime.ErrBadAlarmRequest):
		return problem(http.StatusBadRequest, clipIn(err.Error(), inputs...))
	}
	return s.engineError(c, err, public)
}

// alarmView is an alarm as the console shows it. In JSON (a device's
// alarms) it is the alarm's record alone.
type alarmView struct {
	runtime.Alarm
	// Subject is what it is about: device.capability, a device, or a plan.
	Subject string `json:"-"`
	Active  bool   `json:"-"`
	Unacked bool   `json:"-"`
	Shelved bool   `json:"-"`
	// StateText says the state in words.
	StateText string `json:"-"`
}

func newAlarmView(a runtime.Alarm, now time.Time) alarmView {
	v := alarmView{Alarm: a, Active: a.Active(), Unacked: a.Unacknowledged(), Shelved: a.Shelved(now)}
	switch {
	case a.Plan != "":
		v.Subject = "plan " + a.Plan
	case a.Capability != "":
		v.Subject = a.Device + "." + a.Capability
	default:
		v.Subject = a.Device
	}
	switch a.State {
	case runtime.AlarmActive:
		v.StateText = "active, unacknowledged"
	case runtime.AlarmActiveAcked:
		v.StateText = "active, acknowledged"
	case runtime.AlarmClearedUnacked:
		v.StateText = "cleared, unacknowledged"
	case runtime.AlarmNormal:
		v.StateText = "back to normal"
	default:
		v.StateText = string(a.State)
	}
	return v
}

// alarmsData is the Alarms page.
type alarmsData struct {
	Counts runtime.AlarmCounts
	// Standing are the alarms that are active or unacknowledged, shelved
	// ones after the others of their state; Normal the newest back to
	// normal, at most maxNormal.
	Standing []alarmView
	Normal   []alarmView
	// ShelveFor are the durations offered to shelve an alarm.
	ShelveFor []shelveChoice
}

type shelveChoice struct {
	Value, Text string
}

// maxNormal bounds the alarms back to normal the page lists.
const maxNormal = 20

var shelveChoices = []shelveChoice{{"15m", "15 minutes"}, {"1h", "1 hour"}, {"4h", "4 hours"}, {"8h", "8 hours"}}

func (s *Server) alarmsPage(c echo.Context) error {
	now := s.opts.Now()
	as := s.eng.Alarms()
	d := alarmsData{Counts: runtime.CountAlarms(as, now), ShelveFor: shelveChoices}
	for _, a := range as {
		v := newAlarmView(a, now)
		switch {
		case a.Standing():
			d.Standing = append(d.Standing, v)
		case len(d.Normal) < maxNormal:
			d.Normal = append(d.Normal, v)
		}
	}
	return s.page(c, "alarms", "Alarms", d)
}

func (s *Server) ackForm(c echo.Context) error {
	a, err := s.ackAlarm(c, c.Param("id"), ackBody{Comment: c.FormValue("comment")})
	if err != nil {
		return formError(c, "/alarms", err)
	}
	return back(c, "/alarms", "Alarm "+a.ID+" acknowledged: it is now "+newAlarmView(a, s.opts.Now()).StateText+".")
}

func (s *Server) shelveForm(c echo.Context) error {
	a, err := s.shelveAlarm(c, c.Param("id"), shelveBody{For: c.FormValue("for"), Reason: c.FormValue("reason")})
	if err != nil {
		return formError(c, "/alarms", err)
	}
	if a.ShelvedUntil.IsZero() {
		return back(c, "/alarms", "Alarm "+a.ID+" is not shelved.")
	}
	return back(c, "/alarms", "Alarm "+a.ID+" is shelved until "+a.ShelvedUntil.Local().Format("2006-01-02 15:04 MST")+".")
}

// standingAlarms returns the standing alarms by device, for the devices.
func (s *Server) standingAlarms() map[string][]alarmView {
	now := s.opts.Now()
	out := map[string][]alarmView{}
	for _, a := range s.eng.Alarms() {
		if a.Standing() && a.Device != "" {
			out[a.Device] = append(out[a.Device], newAlarmView(a, now))
		}
	}
	return out
}

// alarmCounts are the counts of the page header.
func (s *Server) alarmCounts() runtime.AlarmCounts {
	return runtime.CountAlarms(s.eng.Alarms(), s.opts.Now())
}
