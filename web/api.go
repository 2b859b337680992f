package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

func (s *Server) routes() {
	e := s.e
	e.Use(s.identify)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", s.metrics, need(access.Viewer))
	e.GET("/static/*", s.static)

	pg := e.Group("", s.csrf())
	pg.GET("/login", s.loginPage)
	pg.POST("/login", s.login)
	pg.POST("/logout", s.logout)
	s.pageRoutes(pg)

	api := e.Group("/api/v1", s.csrf())
	viewer, operator, approver, admin := need(access.Viewer), need(access.Operator), need(access.Approver), need(access.Admin)
	api.GET("/devices", s.apiDevices, viewer)
	api.POST("/commands", s.apiCommand, operator)
	api.GET("/approvals", s.apiApprovals, viewer)
	api.POST("/approvals/:id", s.apiAnswer, approver)
	api.GET("/runs", s.apiRuns, viewer)
	api.POST("/plans/:name/start", s.apiStartPlan, operator)
	api.POST("/runs/:id/cancel", s.apiCancelRun, operator)
	api.GET("/events", s.apiEvents, viewer)
	api.GET("/events/stream", s.apiStream, viewer)
	api.GET("/mode", s.apiMode, viewer)
	api.POST("/mode", s.apiSetMode, operator)
	api.GET("/rules", s.apiRules, viewer)
	api.GET("/rules/:id", s.apiRule, viewer)
	api.DELETE("/rules/:id", s.apiRevoke, admin)
	api.GET("/locks", s.apiLocks, viewer)
	api.POST("/attempts/:id/resolve", s.apiResolve, admin)
	api.GET("/alarms", s.apiAlarms, viewer)
	api.GET("/alarms/:id", s.apiAlarm, viewer)
	api.POST("/alarms/:id/ack", s.apiAckAlarm, operator)
	api.POST("/alarms/:id/shelve", s.apiShelveAlarm, admin)
	api.GET("/journal/verify", s.apiVerify, viewer)
	api.GET("/journal/backup", s.apiBackup, admin)
}

// bind decodes a JSON body strictly, naming what is wrong: a body that is
// not valid UTF-8, an unknown field, or a key given twice (at any depth)
// is refused.
func bind(c echo.Context, v any) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return problem(http.StatusRequestEntityTooLarge, "the body is over the limit")
		}
		return problem(http.StatusBadRequest, "the body cannot be read")
	}
	if err := checkBody(body); err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te) && te.Field == "":
			return problem(http.StatusBadRequest, "the body: want a JSON object, got a JSON "+te.Value)
		case errors.As(err, &te):
			return problem(http.StatusBadRequest, fmt.Sprintf("field %q: want a %s, got a JSON %s", te.Field, jsonKind(te.Type), te.Value))
		case errors.As(err, &se):
			return problem(http.StatusBadRequest, fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.TrimPrefix(err.Error(), "json: unknown field ")
			if n, err := strconv.Unquote(name); err == nil {
				name = n
			}
			return problem(http.StatusBadRequest, "unknown field "+command.QuoteShort(name))
		}
		return problem(http.StatusBadRequest, clipDetail("malformed JSON: "+err.Error()))
	}
	if dec.More() {
		return problem(http.StatusBadRequest, "malformed JSON: more than one value")
	}
	if err := command.RepeatedKey(body); err != nil {
		return problem(http.StatusBadRequest, "the body: "+err.Error())
	}
	return nil
}

// jsonKind names what JSON a Go type takes, in the words of the body
// rather than of the code.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

// capView is a capability with its state.
type capView struct {
	Name       string           `json:"name"`
	Kind       string           `json:"kind"`
	Type       string           `json:"type"`
	Unit       string           `json:"unit,omitempty"`
	Enum       []string         `json:"enum,omitempty"`
	Reading    *devices.Reading `json:"reading,omitempty"`
	Age        string           `json:"age,omitempty"`
	Receipt    *runtime.Receipt `json:"receipt,omitempty"`
	LockedBy   *runtime.Attempt `json:"locked_by,omitempty"`
	Interlocks []string         `json:"interlocks,omitempty"`
	// Withheld says why the reading, the receipt and the lock are left
	// out: the judge would not let the caller read them (MCP).
	Withheld string `json:"withheld,omitempty"`
}

type deviceView struct {
	ID string `json:"id"`
	// Label is what people call the device ("Pump 1"), if it has one.
	Label        string    `json:"label,omitempty"`
	Area         string    `json:"area"`
	Driver       string    `json:"driver"`
	Capabilities []capView `json:"capabilities"`
	// Alarms are the device's standing alarms (active or unacknowledged).
	Alarms []alarmView `json:"alarms,omitempty"`
}

func (s *Server) deviceViews() []deviceView {
	states := map[string]runtime.StateRecord{}
	for _, st := range s.eng.States() {
		states[st.Device+"."+st.Capability] = st
	}
	locks := map[string]runtime.Attempt{}
	for _, a := range s.eng.Locks() {
		locks[a.Device+"."+a.Capability] = a
	}
	alarms := s.standingAlarms()
	now := s.opts.Now()
	var out []deviceView
	for _, d := range s.eng.Devices() {
		dv := deviceView{ID: d.ID, Label: d.Label, Area: d.Area, Driver: d.Driver, Capabilities: []capView{}, Alarms: alarms[d.ID]}
		for _, c := range d.Capabilities {
			cv := capView{Name: c.Name, Kind: c.Kind.String(), Type: c.Type.String(), Unit: c.Unit, Enum: c.Enum}
			st := states[d.ID+"."+c.Name]
			if st.Reading != nil {
				cv.Reading, cv.Age = st.Reading, age(now.Sub(st.Reading.At))
			}
			cv.Receipt = st.Receipt
			if a, ok := locks[d.ID+"."+c.Name]; ok {
				cv.LockedBy = &a
			}
			for _, cond := range s.eng.Interlocks(d.ID, c.Name) {
				cv.Interlocks = append(cv.Interlocks, cond.String())
			}
			dv.Capabilities = append(dv.Capabilities, cv)
		}
		out = append(out, dv)
	}
	return out
}

// age says how old something is, for people.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m ago"
	}
	return d.Round(time.Minute).String() + " ago"
}

func (s *Server) apiDevices(c echo.Context) error {
	return c.JSON(http.StatusOK, nonNil(s.deviceViews()))
}

// commandBody is a command from the API or the console.
type commandBody struct {
	Device     string          `json:"device"`
	Capability string          `json:"capability"`
	Value      json.RawMessage `json:"value"`
	ID         string          `json:"id"`
	Reason     string          `json:"reason"`
}

// result is the outcome of a command, named as on MQTT.
type result struct {
	Outcome   string            `json:"outcome"`
	Why       string            `json:"why,omitempty"`
	RequestID string            `json:"request_id"`
	Run       string            `json:"run,omitempty"`
	Approval  *runtime.Approval `json:"approval,omitempty"`
	Receipt   *runtime.Receipt  `json:"receipt,omitempty"`
	Reading   *devices.Reading  `json:"reading,omitempty"`
	Replayed  bool              `json:"replayed,omitempty"`
	// ErrorID names the log line with the detail of a failure of the
	// gateway itself, which Why tells in public words.
	ErrorID string `json:"error_id,omitempty"`
}

// outcomeOf names an observation's outcome as MQTT replies do. An act the
// world contradicted is "contradicted", never "acted": a client must not
// take it for success.
func outcomeOf(k runtime.ObservationKind, rc *runtime.Receipt) string {
	switch k {
	case runtime.Acted:
		if rc != nil && rc.Confirmation.Discrepant() {
			return "contradicted"
		}
		return "acted"
	case runtime.Completed:
		return "completed"
	case runtime.Refused:
		return "refused"
	case runtime.ApprovalRequest:
		return "pending_approval"
	}
	return "failed"
}

// command runs a command for the caller, from the API or a console form.
func (s *Server) command(c echo.Context, b commandBody, origin string) (result, int, error) {
	id := userOf(c)
	if b.Device == "" || b.Capability == "" {
		return result{}, 0, problem(http.StatusBadRequest, `fields "device" and "capability" are required`)
	}
	if err := reasonError(b.Reason); err != nil {
		return result{}, 0, err
	}
	if len(b.ID) > 128 {
		return result{}, 0, problem(http.StatusBadRequest, `field "id": at most 128 characters`)
	}
	_, capab, ok := s.eng.Capability(b.Device, b.Capability)
	if !ok {
		if why := s.eng.DeviceWhy(b.Device); why != nil {
			return result{}, 0, problem(http.StatusServiceUnavailable, "device "+clip(b.Device)+" is offline: "+why.Error())
		}
		return result{}, 0, problem(http.StatusNotFound, "device "+clip(b.Device)+" is not online or has no capability "+clip(b.Capability))
	}
	var v value.Value
	if len(b.Value) > 0 && string(bytes.TrimSpace(b.Value)) != "null" {
		var err error
		if v, err = value.ParseValue(capab.Type, b.Value, capab.Enum); err != nil {
			return result{}, 0, problem(http.StatusBadRequest, `field "value": `+clipIn(err.Error(), string(b.Value)))
		}
	}
	obs, err := s.eng.Do(c.Request().Context(), runtime.Command{Principal: id.Principal, Origin: origin, RequestID: b.ID,
		Reason: b.Reason, Device: b.Device, Capability: b.Capability, Value: v})
	if err != nil {
		return result{}, 0, s.engineError(c, err, "the command could not be run")
	}
	r := result{Outcome: outcomeOf(obs.Kind, obs.Receipt), Why: obs.Why, RequestID: obs.RequestID, Run: obs.Run, Approval: obs.Approval,
		Receipt: obs.Receipt, Reading: obs.Reading, Replayed: obs.Replayed, ErrorID: obs.ErrorID}
	status := http.StatusOK
	if obs.Kind == runtime.ApprovalRequest {
		status = http.StatusAccepted
	}
	return r, status, nil
}

func (s *Server) apiCommand(c echo.Context) error {
	var b commandBody
	if err := bind(c, &b); err != nil {
		return err
	}
	r, status, err := s.command(c, b, "api")
	if err != nil {
		return err
	}
	return c.JSON(status, r)
}

// maxReasonBytes bounds a reason, as an MQTT command's is bounded: it
// goes into the journal, the console and every reply.
const maxReasonBytes = 1024

// reasonError refuses a reason longer than maxReasonBytes.
func reasonError(reason string) error {
	if len(reason) > maxReasonBytes {
		return problem(http.StatusBadRequest, fmt.Sprintf(`field "reason": longer than %d bytes`, maxReasonBytes))
	}
	return nil
}

// conditionView is an interlock with the reading behind it.
type conditionView struct {
	Condition string           `json:"condition"`
	Sensor    string           `json:"sensor"`
	Reading   *devices.Reading `json:"reading,omitempty"`
	Age       string           `json:"age"`
	Holds     bool             `json:"holds"`
	// Unit is the sensor's unit, if it has one.
	Unit string `json:"unit,omitempty"`
	// Why says why it does not hold: no reading, a bad or stale one, or
	// a value on the wrong side.
	Why string `json:"why,omitempty"`
}

// approvalView is a pending approval as a person needs to see it.
type approvalView struct {
	runtime.Approval
	Conditions []conditionView `json:"conditions,omitempty"`
	ExpiresIn  string          `json:"expires_in"`
	// Outcome is what came of an answered approval's act, if known.
	Outcome *runtime.Attempt `json:"outcome,omitempty"`
	// Act says what came of an approved act, in words: acted and
	// confirmed or contradicted, refused at the act and why.
	Act *actView `json:"act,omitempty"`
	// Foresight is what a pending act would meet, approved now: a
	// request the mode or an interlock would now refuse says so.
	Foresight *runtime.Foresight `json:"foresight,omitempty"`
	// Area and Unit place the act and give its value's unit.
	Area string `json:"area,omitempty"`
	Unit string `json:"unit,omitempty"`
}

func (s *Server) approvalView(ctx context.Context, a runtime.Approval) approvalView {
	now := s.opts.Now()
	v := approvalView{Approval: a, ExpiresIn: a.Expires.Sub(now).Round(time.Second).String()}
	// The conditions the act checks: the interlocks and the running
	// interlocks, none for a command to the safe value.
	var conds []governance.Condition
	if pol, ok := s.eng.Policy(a.Device, a.Capability); ok && a.Kind == "actuation" && (pol.Safe == nil || !a.Value.Equal(*pol.Safe)) {
		conds = append(pol.Interlocks, pol.While...)
	}
	for _, cond := range conds {
		cv := conditionView{Condition: cond.String(), Sensor: cond.Sensor, Age: "never read"}
		if dev, cp, ok := strings.Cut(cond.Sensor, "."); ok {
			if _, c, ok := s.eng.Capability(dev, cp); ok {
				cv.Unit = c.Unit
			}
		}
		if rd, ok := s.eng.Reading(cond.Sensor); ok && !rd.At.IsZero() {
			r := rd
			cv.Reading, cv.Age = &r, age(now.Sub(rd.At))
		}
		// The judge's own test, so the person sees what the act will meet.
		cv.Holds, cv.Why = cond.Eval(s.eng.Facts(), now)
		v.Conditions = append(v.Conditions, cv)
	}
	if d, c, ok := s.eng.Capability(a.Device, a.Capability); ok {
		v.Area, v.Unit = d.Area, c.Unit
	}
	if f, ok := s.eng.Foresee(a.ID); ok {
		v.Foresight = &f
	}
	if a.Status != runtime.ApprovalPending && a.Key != "" {
		if at, ok, err := s.eng.Attempt(ctx, a.Key); err == nil && ok {
			v.Outcome = &at
		}
	}
	if a.Status == runtime.ApprovalApproved && a.Kind != "mode_change" {
		v.Act = actOf(v.Outcome, s.runRecord(a.Run))
	}
	return v
}

func (s *Server) apiApprovals(c echo.Context) error {
	out := []approvalView{}
	for _, a := range s.eng.Approvals() {
		out = append(out, s.approvalView(c.Request().Context(), a))
	}
	return c.JSON(http.StatusOK, out)
}

// answerBody is a person's answer. Device, capability and value name the
// act the person was shown; they must match the approval's.
type answerBody struct {
	Decision     string          `json:"decision"`
	Reason       string          `json:"reason"`
	Device       string          `json:"device"`
	Capability   string          `json:"capability"`
	Value        json.RawMessage `json:"value"`
	Mode         string          `json:"mode"`
	RuleFor      string          `json:"rule_for"`
	RuleAnyValue bool            `json:"rule_any_value"`
}

// answer answers an approval for the caller, from the API or a form.
func (s *Server) answer(c echo.Context, apID string, b answerBody) (runtime.Approval, error) {
	id := userOf(c)
	if err := reasonError(b.Reason); err != nil {
		return runtime.Approval{}, err
	}
	ap, ok := s.eng.Approval(apID)
	if !ok {
		return runtime.Approval{}, problem(http.StatusNotFound, "approval "+clip(apID)+" does not exist")
	}
	if ap.Kind == "mode_change" {
		if b.Mode != ap.Mode {
			return ap, problem(http.StatusConflict, fmt.Sprintf("approval %s asks for mode %s, not %s: answer the request you were shown", ap.ID, ap.Mode,
				command.QuoteShort(b.Mode)))
		}
	} else {
		// An enum's answer names the value asked for; which values the
		// capability takes was judged when it was asked.
		var allowed []string
		if ap.Value.Type == value.TypeEnum {
			allowed = []string{ap.Value.Text}
		}
		shown, err := value.ParseValue(ap.Value.Type, b.Value, allowed)
		if b.Device != ap.Device || b.Capability != ap.Capability || err != nil || !shown.Equal(ap.Value) {
			return ap, problem(http.StatusConflict, fmt.Sprintf("approval %s is for %s.%s = %s; the answer must name that act (device, capability, value)",
				ap.ID, ap.Device, ap.Capability, ap.Value))
		}
	}
	ans := runtime.Answer{By: id.Principal, Admin: id.Role.AtLeast(access.Admin), Decision: runtime.Decision(b.Decision), Reason: b.Reason,
		RuleAnyValue: b.RuleAnyValue}
	switch ans.Decision {
	case runtime.Approve, runtime.Deny:
	case runtime.ApproveAndRule:
		if ap.Kind != "actuation" {
			return ap, problem(http.StatusBadRequest, fmt.Sprintf(`field "decision": approval %s is a %s; a rule can only be added for an actuation`,
				ap.ID, strings.ReplaceAll(ap.Kind, "_", " ")))
		}
	default:
		return ap, problem(http.StatusBadRequest, `field "decision": `+command.QuoteShort(b.Decision)+` is not approve, deny or approve_and_rule`)
	}
	if ans.Decision == runtime.Deny && strings.TrimSpace(b.Reason) == "" {
		return ap, problem(http.StatusBadRequest, `field "reason": a denial says why`)
	}
	if b.RuleFor != "" {
		d, err := durationParam(`field "rule_for"`, b.RuleFor, time.Second, s.opts.MaxRuleTTL)
		if err != nil {
			return ap, err
		}
		ans.RuleFor = d
	}
	out, err := s.eng.Answer(c.Request().Context(), apID, ans)
	var closed *runtime.ClosedError
	switch {
	case err == nil:
		return out, nil
	case errors.As(err, &closed):
		return out, problem(http.StatusConflict, "approval "+ap.ID+" is "+string(closed.Status)+"; it can no longer be answered")
	case errors.Is(err, runtime.ErrNotPermitted):
		return out, problem(http.StatusForbidden, clipIn(err.Error(), apID, b.Reason))
	case errors.Is(err, runtime.ErrApprovalNotFound):
		return out, problem(http.StatusNotFound, clipIn(err.Error(), apID, b.Reason))
	}
	if out.Kind == "mode_change" && out.Status == runtime.ApprovalApproved {
		// The approval is recorded; the wider mode it grants is not.
		return out, s.engineError(c, err, "approved, but mode "+out.Mode+" is not in force: the journal could not record it; ask again")
	}
	return out, s.engineError(c, err, "the answer could not be recorded")
}

func (s *Server) apiAnswer(c echo.Context) error {
	var b answerBody
	if err := bind(c, &b); err != nil {
		return err
	}
	ap, err := s.answer(c, c.Param("id"), b)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.approvalView(c.Request().Context(), ap))
}

func (s *Server) apiRuns(c echo.Context) error {
	return c.JSON(http.StatusOK, s.runs(c))
}

// runs returns the runs that pass the query's plan, status and origin.
func (s *Server) runs(c echo.Context) []runtime.RunRecord {
	plan, status, origin := c.QueryParam("plan"), c.QueryParam("status"), c.QueryParam("origin")
	out := []runtime.RunRecord{}
	for _, r := range s.eng.Runs() {
		if (plan == "" || r.Plan == plan) && (status == "" || string(r.Status) == status || string(r.End) == status) &&
			(origin == "" || r.Origin == origin) {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) apiStartPlan(c echo.Context) error {
	var b struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	}
	if err := bind(c, &b); err != nil {
		return err
	}
	rec, err := s.startPlan(c, runtime.StartPlan{Plan: c.Param("name"), Principal: userOf(c).Principal,
		Origin: "api", RequestID: b.ID, Reason: b.Reason})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, rec)
}

func (s *Server) apiCancelRun(c echo.Context) error {
	var b struct {
		Reason string `json:"reason"`
	}
	if err := bind(c, &b); err != nil {
		return err
	}
	if err := s.cancelRun(c, c.Param("id"), b.Reason); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"run": c.Param("id"), "status": "cancelling"})
}

// cancelRun cancels a run for the caller, from the API or a form.
func (s *Server) cancelRun(c echo.Context, id, reason string) error {
	if err := reasonError(reason); err != nil {
		return err
	}
	err := s.eng.CancelRun(id, userOf(c).Principal, reason)
	switch {
	case errors.Is(err, runtime.ErrRunNotFound):
		return problem(http.StatusNotFound, clipIn(err.Error(), id))
	case errors.Is(err, runtime.ErrRunEnded):
		return problem(http.StatusConflict, clipIn(err.Error(), id))
	case errors.Is(err, runtime.ErrBadCancel):
		return problem(http.StatusBadRequest, clipIn(err.Error(), id, reason))
	case err != nil:
		return s.engineError(c, err, "the run could not be cancelled")
	}
	return nil
}

// startPlan starts a run of a plan for the caller, from the API or a form.
func (s *Server) startPlan(c echo.Context, sp runtime.StartPlan) (runtime.RunRecord, error) {
	if err := reasonError(sp.Reason); err != nil {
		return runtime.RunRecord{}, err
	}
	rec, err := s.eng.StartPlan(c.Request().Context(), sp)
	switch {
	case errors.Is(err, runtime.ErrUnknownPlan):
		return rec, problem(http.StatusNotFound, clipIn(err.Error(), sp.Plan, sp.RequestID, sp.Reason))
	case errors.Is(err, runtime.ErrPlanRunning):
		// One run of a plan at a time; the message names the running one.
		return rec, problem(http.StatusConflict, clipIn(err.Error(), sp.Plan, sp.RequestID, sp.Reason))
	case err != nil:
		return rec, s.engineError(c, err, "the plan could not be started")
	}
	return rec, nil
}

// maxEvents bounds limit and tail on /api/v1/events.
const maxEvents = 10000

func (s *Server) apiEvents(c echo.Context) error {
	since, limit := uint64(0), 200
	newest := s.eng.LastSeq()
	v, err := numParam(c, "since")
	if err != nil {
		return err
	}
	if v != "" {
		n, err := seqParam(`query "since"`, v, newest)
		if err != nil {
			return err
		}
		since = n
	}
	if v, err = numParam(c, "limit"); err != nil {
		return err
	}
	if v != "" {
		n, err := countParam(`query "limit"`, v, 1, maxEvents)
		if err != nil {
			return err
		}
		limit = n
	}
	tail := 0
	if v, err = numParam(c, "tail"); err != nil {
		return err
	}
	if v != "" {
		// The newest n written events, whatever since says. The newest
		// sequence may not be written yet, so read a little further back.
		n, err := countParam(`query "tail"`, v, 1, maxEvents)
		if err != nil {
			return err
		}
		tail, limit = n, maxEvents
		since = 0
		if back := uint64(n) + 512; newest > back {
			since = newest - back
		}
	}
	kinds := splitList(c.QueryParam("kind"))
	device := c.QueryParam("device")
	out := []runtime.Event{}
	for len(out) < limit {
		evs, err := s.eng.Events(c.Request().Context(), since, 1000)
		if err != nil {
			return s.internal(c, http.StatusServiceUnavailable, "the journal cannot be read", err)
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			since = ev.Seq
			if (len(kinds) == 0 || slices.Contains(kinds, string(ev.Kind))) && (device == "" || ev.Device == device) {
				out = append(out, ev)
				if len(out) == limit {
					break
				}
			}
		}
	}
	if tail > 0 && len(out) > tail {
		out = out[len(out)-tail:]
	}
	return c.JSON(http.StatusOK, out)
}

// nonNil returns s, or an empty slice for nil, so that an empty list is
// [] in JSON and never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s *Server) apiMode(c echo.Context) error {
	var names []string
	for _, m := range s.eng.Modes() {
		names = append(names, m.Name)
	}
	return c.JSON(http.StatusOK, map[string]any{"mode": s.eng.Mode(c.Request().Context()), "modes": nonNil(names)})
}

func (s *Server) setMode(c echo.Context, mode, reason string) (runtime.ModeRecord, *runtime.Approval, error) {
	if err := reasonError(reason); err != nil {
		return runtime.ModeRecord{}, nil, err
	}
	rec, ap, err := s.eng.SetMode(c.Request().Context(), userOf(c).Principal, mode, reason)
	switch {
	case errors.Is(err, runtime.ErrUnknownMode):
		return rec, nil, problem(http.StatusBadRequest, `field "mode": `+clipIn(err.Error(), mode, reason))
	case errors.Is(err, runtime.ErrModeChangePending):
		return rec, nil, problem(http.StatusConflict, err.Error())
	case err != nil && rec.Name == mode:
		// A narrowing stands even when the journal cannot record it; say
		// so, for it will not survive a restart.
		return rec, nil, s.engineError(c, err, "mode "+mode+" is in force until the gateway restarts, but the journal could not record it")
	case err != nil:
		return rec, nil, s.engineError(c, err, "the mode could not be changed")
	}
	return rec, ap, nil
}

func (s *Server) apiSetMode(c echo.Context) error {
	var b struct {
		Mode   string `json:"mode"`
		Reason string `json:"reason"`
	}
	if err := bind(c, &b); err != nil {
		return err
	}
	rec, ap, err := s.setMode(c, b.Mode, b.Reason)
	if err != nil {
		return err
	}
	if ap != nil {
		return c.JSON(http.StatusAccepted, map[string]any{"mode": rec, "approval": ap,
			"why": "mode " + b.Mode + " is wider than " + rec.Name + ": " + adminsMust(ap.Required) + " " + ap.ID})
	}
	return c.JSON(http.StatusOK, map[string]any{"mode": rec})
}

func (s *Server) apiRules(c echo.Context) error {
	return c.JSON(http.StatusOK, nonNil(s.eng.Rules()))
}

func (s *Server) apiRule(c echo.Context) error {
	for _, r := range s.eng.Rules() {
		if r.Rule.ID == c.Param("id") {
			return c.JSON(http.StatusOK, r)
		}
	}
	return problem(http.StatusNotFound, "rule "+clip(c.Param("id"))+" is not in force")
}

func (s *Server) apiRevoke(c echo.Context) error {
	if err := s.revoke(c, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// revoke ends a rule for the caller, from the API or a form.
func (s *Server) revoke(c echo.Context, id string) error {
	err := s.eng.RevokeRule(c.Request().Context(), id, userOf(c).Principal)
	switch {
	case errors.Is(err, runtime.ErrRuleNotFound):
		return problem(http.StatusNotFound, clipIn(err.Error(), id))
	case errors.Is(err, runtime.ErrRuleFromConfiguration):
		return problem(http.StatusConflict, clipIn(err.Error(), id))
	case err != nil && errors.Is(err, runtime.ErrNotWitnessed):
		// Revoking narrows: it stands, but only until a restart.
		return s.engineError(c, err, "rule "+clip(id)+" is revoked until the gateway restarts, but the journal could not record it")
	case err != nil:
		return s.engineError(c, err, "the rule could not be revoked")
	}
	return nil
}

func (s *Server) apiLocks(c echo.Context) error {
	return c.JSON(http.StatusOK, nonNil(s.eng.Locks()))
}

// resolveBody is an admin's word on an attempt whose effect is unknown:
// found is "acted" or "not_acted", and the note says how they know.
type resolveBody struct {
	Found string `json:"found"`
	Note  string `json:"note"`
}

func (s *Server) apiResolve(c echo.Context) error {
	var b resolveBody
	if err := bind(c, &b); err != nil {
		return err
	}
	a, err := s.resolve(c, c.Param("id"), b)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

func (s *Server) resolve(c echo.Context, attempt string, b resolveBody) (runtime.Attempt, error) {
	id := userOf(c)
	found := runtime.Found(b.Found)
	if found != runtime.FoundActed && found != runtime.FoundNotActed {
		return runtime.Attempt{}, problem(http.StatusBadRequest, `field "found": `+command.QuoteShort(b.Found)+
			` is not "acted" (the act took effect) or "not_acted" (it did not)`)
	}
	if strings.TrimSpace(b.Note) == "" {
		return runtime.Attempt{}, problem(http.StatusBadRequest, `field "note": resolving attempt `+clip(attempt)+
			" needs a note saying what was found")
	}
	a, err := s.eng.Resolve(c.Request().Context(), runtime.Resolution{Attempt: attempt, By: id.Principal,
		Admin: id.Role.AtLeast(access.Admin), Found: found, Note: b.Note})
	switch {
	case errors.Is(err, runtime.ErrAttemptNotLocked):
		return a, problem(http.StatusNotFound, clipIn(err.Error(), attempt, b.Note))
	case errors.Is(err, runtime.ErrNotPermitted):
		return a, problem(http.StatusForbidden, clipIn(err.Error(), attempt, b.Note))
	case errors.Is(err, runtime.ErrFoundRequired):
		return a, problem(http.StatusBadRequest, clipIn(err.Error(), attempt, b.Note))
	case err != nil:
		return a, s.engineError(c, err, "the resolution could not be recorded")
	}
	return a, nil
}

func (s *Server) apiVerify(c echo.Context) error {
	if s.opts.Verify == nil {
		return problem(http.StatusServiceUnavailable, "the journal cannot be checked: it is not open")
	}
	rep, err := s.opts.Verify(c.Request().Context())
	if err != nil {
		return s.internal(c, http.StatusServiceUnavailable, "the journal cannot be checked", err)
	}
	return c.JSON(http.StatusOK, rep)
}

// apiBackup streams a consistent copy of the journal file, for
// `shadowgate journal backup` while the gateway holds it. The copy holds
// everything the journal does, so only an admin takes it.
func (s *Server) apiBackup(c echo.Context) error {
	if s.opts.Backup == nil {
		return problem(http.StatusServiceUnavailable, "the journal cannot be backed up: it is not open")
	}
	// One at a time: each takes a copy the size of the journal beside it.
	if !s.backingUp.TryLock() {
		return problem(http.StatusConflict, "a backup is being taken; try again when it is done")
	}
	defer s.backingUp.Unlock()
	// A reader that stops reading is given up on, not waited for.
	_ = http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Now().Add(15 * time.Minute))
	c.Response().Header().Set(echo.HeaderContentType, "application/octet-stream")
	c.Response().Header().Set(echo.HeaderContentDisposition, `attachment; filename="shadowgate.db"`)
	c.Response().WriteHeader(http.StatusOK)
	if _, err := s.opts.Backup(c.Response()); err != nil {
		// The status is sent: the client sees a short copy, which does
		// not verify; the log says why.
		s.opts.Logger.Error("journal backup through the API failed", "error", err)
	}
	return nil
}

// engineError is what a client is told of an error from the engine that
// no sentinel of the call names. The engine stopping and a request that
// ended are said as such; anything else (a journal that cannot be
// written, say) is not the client's doing: it is logged with an error id,
// and public is what the client reads.
func (s *Server) engineError(c echo.Context, err error, public string) error {
	switch {
	case errors.Is(err, runtime.ErrStopped):
		return problem(http.StatusServiceUnavailable, "the gateway is stopping; try again once it is back")
	case c.Request().Context().Err() != nil:
		return problem(http.StatusServiceUnavailable, "the request ended before the gateway answered")
	}
	return s.internal(c, http.StatusServiceUnavailable, public, err)
}

// adminsMust says how many admins must approve a mode change.
func adminsMust(required int) string {
	if required <= 1 {
		return "an admin must approve"
	}
	return strconv.Itoa(required) + " different admins must approve"
}
