package web

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// devicesData is the Devices page: the drivers' links, the devices
// online, and those lost.
type devicesData struct {
	Drivers []driverHealth
	Devices []deviceCard
	Lost    []lostDevice
}

// lostDevice is a device that was online and is lost.
type lostDevice struct {
	ID, Why string
}

// deviceCard is a device as its card shows it.
type deviceCard struct {
	deviceView
	// Name is what people call the device: its label, or its id.
	Name string
	// Labelled is true when Name is a label, not the id.
	Labelled bool
	Caps     []capCard
	// Pending counts the requests that wait for a person.
	Pending int
}

// capCard is a capability as its card shows it: its state in words, how
// old, whether a request waits, and its control or its chart.
type capCard struct {
	capView
	// Stale is true when the reading is older than StaleAfter, three of
	// its polls (0 when it is not polled: never stale).
	Stale      bool
	StaleAfter time.Duration
	// Since is when an actuator was put in the state it reads, when the
	// last act put it there.
	Since time.Time
	// Pending is the id of the request that waits for this capability.
	Pending string
	// Control is how a person commands an actuator.
	Control *control
	// Chart is a sensor's last hour (or the device page's window).
	Chart chart
	// Readable is true when the capability can be read now.
	Readable bool
}

// cardArgs is what the card template gets: the card, who looks, and the
// page its forms come back to.
type cardArgs struct {
	Card deviceCard
	User *identity
	CSRF string
	Back string
}

// control is the direct control of an actuator. It posts a command like
// any other, which is judged and journaled before it acts.
type control struct {
	// Type is "bool", "number", "enum" or "string".
	Type string
	// On is a bool actuator's state, when read.
	On, Known bool
	// Min, Max and Step bound a number from its envelope ("" for none).
	Min, Max, Step string
	// Options are an enum's values, or the envelope's allowed values.
	Options []string
	// Current is the value read, as the control shows it.
	Current string
	// Safe is the value the gateway drives it to, if set.
	Safe string
}

func (s *Server) devicesPage(c echo.Context) error {
	ctx := c.Request().Context()
	s.hist.update(ctx, s.eng, s.opts.Now())
	d := devicesData{Drivers: s.driverHealth(ctx)}
	for _, v := range s.deviceViews() {
		d.Devices = append(d.Devices, s.deviceCard(v, func(ref string) []point { return s.hist.points(ref) }, sparkWindow, 60, 28))
	}
	for id, why := range s.eng.Lost() {
		d.Lost = append(d.Lost, lostDevice{ID: id, Why: clip(why)})
	}
	slices.SortFunc(d.Lost, func(a, b lostDevice) int { return strings.Compare(a.ID, b.ID) })
	return s.page(c, "devices", "Devices", d)
}

// deviceData is a device's own page: its card, a longer chart and what
// the journal says of it.
type deviceData struct {
	Device deviceCard
	Hours  int
	Ranges []int
	Events []eventLine
}

// eventLine is a journal event told in a sentence.
type eventLine struct {
	Seq      uint64
	At       time.Time
	Sentence string
}

// chartHours are the windows a device page offers.
var chartHours = []int{1, 6, 24}

func (s *Server) devicePage(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	hours := 6
	if h := c.QueryParam("hours"); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || !slices.Contains(chartHours, n) {
			return problem(http.StatusBadRequest, `query "hours": want 1, 6 or 24, not `+strconv.Quote(clip(h)))
		}
		hours = n
	}
	var view *deviceView
	for _, v := range s.deviceViews() {
		if v.ID == id {
			view = &v
			break
		}
	}
	if view == nil {
		why := "no device " + clip(id) + " is known and online"
		if err := s.eng.DeviceWhy(id); err != nil {
			why = "device " + clip(id) + " is offline: " + clip(err.Error())
		}
		return problem(http.StatusNotFound, why)
	}
	now := s.opts.Now()
	window := time.Duration(hours) * time.Hour
	// A window with more events than a page may read is read from its
	// newest maxScan events: the chart's right end is always now.
	series := map[string][]point{}
	start, last := seqAt(ctx, s.eng, now.Add(-window)), s.eng.LastSeq()
	if last > maxScan && start < last-maxScan {
		start = last - maxScan
	}
	readPoints(ctx, s.eng, start, id, func(ref string, p point) {
		series[ref] = append(series[ref], p)
	})
	d := deviceData{Hours: hours, Ranges: chartHours,
		Device: s.deviceCard(*view, func(ref string) []point { return series[ref] }, window, 600, 160)}
	for _, ev := range s.recentWhere(ctx, 30, func(ev *runtime.Event) bool { return ev.Device == id && ev.Kind != runtime.KindObserved }) {
		d.Events = append(d.Events, eventLine{Seq: ev.Seq, At: ev.At, Sentence: eventSentence(ev)})
	}
	title := id
	if d.Device.Labelled {
		title = d.Device.Name + " (" + id + ")"
	}
	return s.page(c, "device", title, d)
}

// deviceCard shapes a device for its card, with charts of window drawn
// w×h from the points series gives.
func (s *Server) deviceCard(v deviceView, series func(ref string) []point, window time.Duration, w, h int) deviceCard {
	now := s.opts.Now()
	pending := map[string]string{}
	for _, a := range s.eng.Approvals() {
		if a.Kind == "actuation" {
			pending[a.Device+"."+a.Capability] = a.ID
		}
	}
	dc := deviceCard{deviceView: v, Name: v.ID}
	if d, ok := s.device(v.ID); ok && d.Label != "" {
		dc.Name, dc.Labelled = d.Label, true
	}
	for _, cv := range v.Capabilities {
		ref := v.ID + "." + cv.Name
		cc := capCard{capView: cv, Pending: pending[ref]}
		if cc.Pending != "" {
			dc.Pending++
		}
		_, capab, _ := s.eng.Capability(v.ID, cv.Name)
		cc.Readable = capab.Readable()
		if capab.Poll > 0 {
			cc.StaleAfter = 3 * capab.Poll
			cc.Stale = cv.Reading != nil && now.Sub(cv.Reading.At) > cc.StaleAfter
		}
		if rc := cv.Receipt; rc != nil && cv.Reading != nil && rc.Value.Equal(cv.Reading.Value) {
			cc.Since = rc.At
		}
		if capab.Kind == devices.KindActuator {
			cc.Control = s.controlOf(v.ID, capab, cv.Reading)
		} else if capab.Type == value.TypeNumber {
			label := cv.Name + " of " + v.ID + " over the last " + strings.TrimSuffix(window.String(), "0m0s")
			cc.Chart = drawChart(series(ref), now.Add(-window), now, w, h, label)
		}
		dc.Caps = append(dc.Caps, cc)
	}
	return dc
}

// controlOf gives an actuator's control, bounded by its envelope.
func (s *Server) controlOf(device string, c devices.Capability, rd *devices.Reading) *control {
	ct := &control{Type: c.Type.String(), Options: slices.Clone(c.Enum)}
	if rd != nil && rd.Value.Type == c.Type {
		ct.Current, ct.Known = rd.Value.String(), true
		ct.On = c.Type == value.TypeBool && rd.Value.Bool
	}
	if pol, ok := s.eng.Policy(device, c.Name); ok {
		if pol.Safe != nil {
			ct.Safe = stateText(*pol.Safe, c.Unit)
		}
		if env := pol.Envelope; env != nil {
			if env.HasMin {
				ct.Min = value.Number(env.Min).String()
			}
			if env.HasMax {
				ct.Max = value.Number(env.Max).String()
			}
			if env.Step > 0 {
				ct.Step = value.Number(env.Step).String()
			}
			if len(env.Allowed) > 0 {
				ct.Options = ct.Options[:0]
				for _, a := range env.Allowed {
					ct.Options = append(ct.Options, a.String())
				}
			}
		}
	}
	if ct.Step == "" {
		ct.Step = "any"
	}
	return ct
}

// commandForm sends a command from the console: the device form's or a
// card's control. The person goes back to the page the form was on.
func (s *Server) commandForm(c echo.Context) error {
	to := "/devices"
	if b := c.FormValue("back"); strings.HasPrefix(b, "/devices/") && !strings.ContainsAny(b[len("/devices/"):], "/?#\\") {
		to = b
	}
	b := commandBody{Device: c.FormValue("device"), Capability: c.FormValue("capability"), Reason: c.FormValue("reason")}
	_, capab, _ := s.eng.Capability(b.Device, b.Capability)
	b.Value = formValue(c.FormValue("value"), capab.Type)
	r, _, err := s.command(c, b, "console")
	if err != nil {
		return formError(c, to, err)
	}
	if r.Outcome == "refused" && s.outsideEnvelope(b) {
		// The value typed is the mistake: the refusal is said next to
		// its field, as a form's error, not below the form.
		return backError(c, to, "value", commandNote(b, r, capab))
	}
	return backOutcome(c, to, commandNote(b, r, capab), r)
}

// outsideEnvelope reports whether a command's value is one its envelope
// never admits (below the minimum, above the maximum, off a step, not an
// allowed value), whatever the rate and the dwell.
func (s *Server) outsideEnvelope(b commandBody) bool {
	var v value.Value
	pol, ok := s.eng.Policy(b.Device, b.Capability)
	if !ok || pol.Envelope == nil || len(b.Value) == 0 || json.Unmarshal(b.Value, &v) != nil {
		return false
	}
	fits, _ := pol.Envelope.Check(v, governance.History{}, time.Time{})
	return !fits
}

// formValue is a value typed in a form, as JSON, for a capability of
// type t (TypeNone when not known): an enum or a string is text however
// it looks ("2" is the enum 2, not a number), unless typed in quotes;
// anything else that is not JSON is taken as text too. Empty is none:
// a read.
func formValue(raw string, t value.Type) json.RawMessage {
	v := strings.TrimSpace(raw)
	if v == "" {
		return nil
	}
	text := t == value.TypeEnum || t == value.TypeString
	if (text && !strings.HasPrefix(v, `"`)) || !json.Valid([]byte(v)) {
		v = strconv.Quote(v)
	}
	return json.RawMessage(v)
}

// commandNote says what came of a command to capab from the console, in
// words.
func commandNote(b commandBody, r result, capab devices.Capability) string {
	unit := capab.Unit
	what := b.Device + "." + b.Capability
	if len(b.Value) > 0 {
		var v value.Value
		if json.Unmarshal(b.Value, &v) == nil {
			if capab.Type == value.TypeEnum && v.Type == value.TypeString {
				v = value.Enum(v.Text) // JSON tells no enum from a string
			}
			what += " → " + stateText(v, unit)
		}
	}
	var note string
	switch {
	case r.Reading != nil:
		note = what + " reads " + stateText(r.Reading, unit)
		if r.Reading.Quality != devices.QualityGood {
			note += " (" + r.Reading.Quality.String() + ")"
		}
	case r.Approval != nil:
		note = what + ": waiting for approval " + r.Approval.ID + " on the Approvals page"
	case r.Receipt != nil:
		note = what + ": " + actOf(&runtime.Attempt{Receipt: r.Receipt}, nil).Text
	default:
		note = what + ": " + strings.ReplaceAll(r.Outcome, "_", " ")
	}
	if r.Why != "" {
		note += " — " + r.Why
	}
	return note + "."
}
