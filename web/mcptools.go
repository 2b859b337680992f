//go:build !shadowgate_omit_mcp

package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
)

// mcpInstructions tell an agent what the gateway is and how to behave.
const mcpInstructions = `Shadowgate is a gateway between you and physical equipment. Every read and write you ask for is judged (allowed, asked of a person, or refused) and journaled before it touches hardware.
- request_write never acts at once when the mode asks: it returns "pending_approval" with an approval id and a console link. Tell your user, then call get_approval (with wait_seconds to wait for the answer).
- A refusal carries the judge's reason. Explain it to your user; do not retry the same write, and never try to get around it another way.
- You cannot approve, change the mode or make rules: people do that in the console.`

// The tool names, as agents call them.
const (
	toolListDevices  = "list_devices"
	toolRead         = "read"
	toolRequestWrite = "request_write"
	toolRunPlan      = "run_plan"
	toolGetApproval  = "get_approval"
	toolJournalTail  = "journal_tail"
)

// Limits of the tools' arguments.
const (
	maxReasonLen   = 500
	maxJournalTail = 200
	maxWait        = 60 // seconds get_approval may wait
)

// Arguments of the tools. A field without omitempty is required; the SDK
// checks the schema (types, required and unknown fields) before the
// handler runs, and the handler checks the rest, naming the field.
type (
	listIn struct{}
	readIn struct {
		Device     string `json:"device" jsonschema:"the device id, as list_devices gives it"`
		Capability string `json:"capability" jsonschema:"the capability to read: a sensor, or an actuator's read-back"`
	}
	writeIn struct {
		Device     string `json:"device" jsonschema:"the device id"`
		Capability string `json:"capability" jsonschema:"the actuator capability"`
		Value      any    `json:"value" jsonschema:"the value to set: a bool, a number or an enum string, as the capability's type says"`
		Reason     string `json:"reason" jsonschema:"why you ask, in words a person will read before approving (journaled)"`
		RequestID  string `json:"request_id,omitempty" jsonschema:"an id that makes the request idempotent: the same id gets the first outcome back, never a second act"`
	}
	planIn struct {
		Plan      string `json:"plan" jsonschema:"the plan's name, as list_devices gives it"`
		Reason    string `json:"reason" jsonschema:"why you start it (journaled)"`
		RequestID string `json:"request_id,omitempty" jsonschema:"an id that makes the start idempotent"`
	}
	approvalIn struct {
		ApprovalID  string `json:"approval_id" jsonschema:"the approval id request_write returned"`
		WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (0 to 60) for a person to answer and the act to end; 0 answers at once"`
	}
	journalIn struct {
		Limit  int    `json:"limit,omitempty" jsonschema:"how many of the newest events (1 to 200, default 20)"`
		Kinds  string `json:"kinds,omitempty" jsonschema:"only these kinds, comma-separated (acted,refused,approval_requested,...)"`
		Device string `json:"device,omitempty" jsonschema:"only this device's events"`
	}
)

// capEffects is a capability's effect profile and what it means for a
// tool's hints.
type capEffects struct {
	Profile     string `json:"profile"`
	ReadOnly    bool   `json:"read_only"`
	Destructive bool   `json:"destructive"`
	OpenWorld   bool   `json:"open_world"`
}

func effectsOf(p governance.EffectProfile, write bool) capEffects {
	return capEffects{Profile: p.String(), ReadOnly: !write, Destructive: write && !p.Reversible, OpenWorld: p.Reaches}
}

// mcpCapability is a capability as list_devices tells it.
type mcpCapability struct {
	capView
	// Effects is what a request_write (for an actuator) or a read (for a
	// sensor) of it would do, as the judge sees it.
	Effects capEffects `json:"effects"`
}

type mcpDevice struct {
	ID string `json:"id"`
	// Label is what people call the device: say it to them.
	Label        string          `json:"label,omitempty"`
	Area         string          `json:"area"`
	Capabilities []mcpCapability `json:"capabilities"`
	Alarms       []alarmView     `json:"alarms,omitempty"`
}

type mcpPlan struct {
	Name    string     `json:"name"`
	Steps   []string   `json:"steps"`
	Effects capEffects `json:"effects"`
}

// hints are the tools' annotations and the descriptions of what they
// would do, from the effect profiles of the devices online and the plans.
type hints struct {
	read, write, plan      *mcp.ToolAnnotations
	readList, writeList    []string
	planList               []string
	readDesc, writeDesc    string
	planDesc               string
	writeProfiles          map[string]governance.EffectProfile
	anyWrite, anyPlanWrite bool
}

func ptr[T any](v T) *T { return &v }

// hintsNow works out the hints from the engine's devices and plans. A
// write tool with no actuator known gets the worst case: destructive and
// open-world.
func (m *mcpSurface) hintsNow() hints {
	eng := m.web.eng
	h := hints{writeProfiles: map[string]governance.EffectProfile{}}
	readReach, writeReach, destructive := false, false, false
	for _, d := range eng.Devices() {
		for _, c := range d.Capabilities {
			if c.Readable() {
				p := runtime.ReadProfile(&d, &c)
				readReach = readReach || p.Reaches
				h.readList = append(h.readList, fmt.Sprintf("- %s.%s (%s %s%s): %s", d.ID, c.Name, c.Kind, c.Type, unitSuffix(c.Unit), p))
			}
			if c.Kind == devices.KindActuator {
				var pol *runtime.CapPolicy
				if cp, ok := eng.Policy(d.ID, c.Name); ok {
					pol = &cp
				}
				p := runtime.Profile(&d, &c, pol)
				h.writeProfiles[d.ID+"."+c.Name] = p
				h.anyWrite = true
				writeReach = writeReach || p.Reaches
				destructive = destructive || !p.Reversible
				h.writeList = append(h.writeList, fmt.Sprintf("- %s.%s (%s%s): %s%s", d.ID, c.Name, c.Type, enumSuffix(c.Enum), p, reversibleWord(p)))
			}
		}
	}
	// An actuator the configuration governs whose device is not online
	// may come back at any moment: until it does, its profile is not
	// known, and the hints take the worst.
	for _, t := range eng.Governed() {
		if _, ok := h.writeProfiles[t]; ok {
			continue
		}
		dev, capName, _ := strings.Cut(t, ".")
		if d, _, _ := eng.Capability(dev, capName); d.ID != "" {
			continue // online, and t is not one of its actuators
		}
		destructive, writeReach = true, true
		h.writeList = append(h.writeList, "- "+t+": not online now; its effect profile is not known, so these hints take the worst")
	}
	if !h.anyWrite {
		destructive, writeReach = true, true
	}
	planDestructive, planReach := false, false
	for _, pl := range eng.Plans() {
		var steps []string
		for _, st := range pl.Steps {
			steps = append(steps, st.Describe())
			if st.Op != runtime.OpWrite {
				continue
			}
			h.anyPlanWrite = true
			p, ok := h.writeProfiles[st.Device+"."+st.Capability]
			if !ok {
				p = governance.Worst() // a device not online: the worst case
			}
			planDestructive = planDestructive || !p.Reversible
			planReach = planReach || p.Reaches
		}
		h.planList = append(h.planList, "- "+pl.Name+": "+strings.Join(steps, "; "))
	}
	h.read = &mcp.ToolAnnotations{Title: "Read a sensor", ReadOnlyHint: true, DestructiveHint: ptr(false), IdempotentHint: true,
		OpenWorldHint: ptr(readReach)}
	h.write = &mcp.ToolAnnotations{Title: "Request a write (judged; may wait for a person)", DestructiveHint: ptr(destructive),
		OpenWorldHint: ptr(writeReach)}
	h.plan = &mcp.ToolAnnotations{Title: "Start a plan (judged step by step)", ReadOnlyHint: !h.anyPlanWrite,
		DestructiveHint: ptr(planDestructive), OpenWorldHint: ptr(planReach)}
	h.readDesc = "Read a sensor, or an actuator's read-back, now. The read is a governed step: the judge may refuse it, and the journal keeps it. Its effect profile (what it reads):\n" +
		orNone(h.readList)
	h.writeDesc = "Ask the gateway to set an actuator. The request is judged before anything moves: allowed (it acts, reads the world back and returns the receipt), asked of a person (it returns pending_approval at once, with the approval id and a console link: follow it with get_approval), or refused (a tool error with the judge's reason: explain it, do not retry). Each actuator's effect profile, which the judge and these hints go by:\n" +
		orNone(h.writeList)
	h.planDesc = "Start a named plan, a sequence of steps each judged like request_write; a step that asks parks the run until a person answers. Plans:\n" + orNone(h.planList)
	return h
}

func orNone(lines []string) string {
	if len(lines) == 0 {
		return "(none online now)"
	}
	return strings.Join(lines, "\n")
}

func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	return ", " + u
}

func enumSuffix(e []string) string {
	if len(e) == 0 {
		return ""
	}
	return " of " + strings.Join(e, "|")
}

func reversibleWord(p governance.EffectProfile) string {
	if p.Reversible {
		return " (reversible)"
	}
	return ""
}

// refresh adds the tools and resources, again when their hints changed
// or force is set (the SDK then tells connected agents the list changed).
// Refreshes run one at a time, each from working out the hints to adding
// the tools, so that the last to finish is the newest.
func (m *mcpSurface) refresh(force bool) {
	m.refreshing.Lock()
	defer m.refreshing.Unlock()
	h := m.hintsNow()
	key := jsonText([]any{h.read, h.write, h.plan, h.readDesc, h.writeDesc, h.planDesc})
	m.mu.Lock()
	same := key == m.hints
	m.hints = key
	m.mu.Unlock()
	if same && !force {
		return
	}
	viewOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)}
	withTitle := func(a *mcp.ToolAnnotations, title string) *mcp.ToolAnnotations {
		b := *a
		b.Title = title
		return &b
	}
	mcp.AddTool(m.srv, &mcp.Tool{Name: toolListDevices, Annotations: withTitle(viewOnly, "List devices"),
		Description: "List the devices online, each capability with its type, unit, latest reading, interlocks and effect profile, the plans, and the mode in force. Reads the gateway's state only; touches no hardware."},
		guard(m, toolListDevices, m.listDevices))
	mcp.AddTool(m.srv, &mcp.Tool{Name: toolRead, Annotations: h.read, Description: h.readDesc}, guard(m, toolRead, m.read))
	mcp.AddTool(m.srv, &mcp.Tool{Name: toolRequestWrite, Annotations: h.write, Description: h.writeDesc}, guard(m, toolRequestWrite, m.requestWrite))
	mcp.AddTool(m.srv, &mcp.Tool{Name: toolRunPlan, Annotations: h.plan, Description: h.planDesc}, guard(m, toolRunPlan, m.runPlan))
	mcp.AddTool(m.srv, &mcp.Tool{Name: toolGetApproval, Annotations: withTitle(viewOnly, "Follow an approval"),
		Description: "Say where a request that asked a person stands: pending, approved, denied or expired, who answered and why, and, once approved, what came of the act (acted and confirmed or contradicted by the read-back, or refused at the act, saying what changed). With wait_seconds it waits for a change, and sends a progress notification when a person answers if the call asked for progress."},
		guard(m, toolGetApproval, m.getApproval))
	mcp.AddTool(m.srv, &mcp.Tool{Name: toolJournalTail, Annotations: withTitle(viewOnly, "Read the journal"),
		Description: "The newest events of the journal, the hash-chained record of every judgement, approval and act, oldest first."},
		guard(m, toolJournalTail, m.journalTail))
	m.srv.AddResource(&mcp.Resource{URI: "shadowgate://journal/newest", Name: "journal", Title: "The journal's newest events",
		MIMEType: "application/json", Description: "The newest 50 events of the journal, oldest first."}, guardResource(m, m.journalResource))
	m.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "shadowgate://devices/{id}", Name: "device", Title: "A device's state",
		MIMEType: "application/json", Description: "A device's capabilities with their latest readings, receipts, locks and alarms."}, guardResource(m, m.deviceResource))
	var uris []string
	for _, d := range m.web.eng.Devices() {
		uri := "shadowgate://devices/" + url.PathEscape(d.ID)
		uris = append(uris, uri)
		m.srv.AddResource(&mcp.Resource{URI: uri, Name: "device " + d.ID, Title: d.ID + " (" + d.Area + ")", MIMEType: "application/json"},
			guardResource(m, m.deviceResource))
	}
	m.mu.Lock()
	gone := slices.DeleteFunc(m.deviceURIs, func(u string) bool { return slices.Contains(uris, u) })
	m.deviceURIs = uris
	m.mu.Unlock()
	if len(gone) > 0 {
		m.srv.RemoveResources(gone...)
	}
}

// guard makes a panic in a tool a tool error with an error id, logged
// with the detail, for the SDK runs a handler on a goroutine of its own
// without recovering: a panic would stop the gateway.
func guard[In any](m *mcpSurface, tool string, h mcp.ToolHandlerFor[In, any]) mcp.ToolHandlerFor[In, any] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out any, err error) {
		defer func() {
			if p := recover(); p != nil {
				pe := command.Internal(m.web.log, "internal error", fmt.Errorf("mcp tool %s: panic: %v", tool, p), "tool", tool)
				res, out, err = nil, nil, fmt.Errorf("%s (error id %s)", pe.Message, pe.ID)
			}
		}()
		return h(ctx, req, in)
	}
}

// guardResource is guard for a resource's handler.
func guardResource(m *mcpSurface, h mcp.ResourceHandler) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (res *mcp.ReadResourceResult, err error) {
		defer func() {
			if p := recover(); p != nil {
				pe := command.Internal(m.web.log, "internal error", fmt.Errorf("mcp resource %s: panic: %v", req.Params.URI, p))
				res, err = nil, fmt.Errorf("%s (error id %s)", pe.Message, pe.ID)
			}
		}()
		return h(ctx, req)
	}
}

// caller is the agent behind a tool call, checked against what the tool
// needs: the role, the mode in force, and the token's rate.
func (m *mcpSurface) caller(ctx context.Context, req *mcp.CallToolRequest, tool string, min access.Role) (*identity, error) {
	return m.agent(ctx, req.Extra, tool, min)
}

// agent is the agent behind a call or a read of a resource, checked
// against the role, the mode in force and the token's rate.
func (m *mcpSurface) agent(ctx context.Context, extra *mcp.RequestExtra, tool string, min access.Role) (*identity, error) {
	if extra == nil || extra.TokenInfo == nil {
		return nil, errors.New("no token: the MCP endpoint needs a bearer token")
	}
	name := strings.TrimPrefix(extra.TokenInfo.UserID, "mcp:")
	i := slices.IndexFunc(m.web.opts.Tokens, func(t Token) bool { return t.Name == name })
	if i < 0 || !slices.Contains(m.opts.Tokens, name) {
		return nil, errors.New("token " + name + " is no longer admitted to MCP")
	}
	id := &identity{User: name, Role: m.web.opts.Tokens[i].Role, Principal: "mcp:" + name, Token: true}
	if !id.Role.AtLeast(min) {
		return nil, needRole(id, min, tool)
	}
	if mode := m.web.eng.Mode(ctx).Name; !m.admitted(ctx, name, mode) {
		return nil, m.refusal(mode)
	}
	if wait, ok := m.allow(name, false, m.web.opts.Now()); !ok {
		return nil, fmt.Errorf("refused: token %s is over its %d calls a minute; try again in %s", name, m.opts.PerMinute,
			wait.Round(time.Second)+time.Second)
	}
	return id, nil
}

// apiRecorder keeps the response of a call made through the API's code
// from a tool: its body, for a handler that writes one, and its status.
type apiRecorder struct {
	h    http.Header
	body bytes.Buffer
	code int
}

func (w *apiRecorder) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}
func (w *apiRecorder) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *apiRecorder) WriteHeader(code int)        { w.code = code }

// apiContext is an echo context for calling the API's code from a tool,
// as id: the same checks, the same engine calls, the same errors.
func (m *mcpSurface) apiContext(ctx context.Context, id *identity, target string) (echo.Context, *apiRecorder) {
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, target, http.NoBody)
	w := &apiRecorder{}
	c := m.web.e.NewContext(r, w)
	c.SetPath(MCPPath)
	c.Set(ctxIdentity, id)
	return c, w
}

// toolError is what an agent reads of an error from the API's code: its
// public detail, and the error id of a failure of the gateway itself.
func (m *mcpSurface) toolError(c echo.Context, err error) error {
	_, detail, errorID := m.web.public(c, err)
	if errorID != "" {
		return fmt.Errorf("%s (error id %s)", detail, errorID)
	}
	return errors.New(detail)
}

// base is the console's address for links.
func (m *mcpSurface) base(req *mcp.CallToolRequest) string {
	if m.opts.ConsoleURL != "" {
		return strings.TrimSuffix(m.opts.ConsoleURL, "/")
	}
	if req.Extra != nil && req.Extra.Header != nil {
		if host := req.Extra.Header.Get(consoleHeader); host != "" {
			return host
		}
	}
	return ""
}

func (m *mcpSurface) listDevices(ctx context.Context, req *mcp.CallToolRequest, _ listIn) (*mcp.CallToolResult, any, error) {
	id, err := m.caller(ctx, req, toolListDevices, access.Viewer)
	if err != nil {
		return nil, nil, err
	}
	eng := m.web.eng
	hold := m.withheldFor(ctx, id.Principal)
	var out struct {
		Mode    string      `json:"mode"`
		Devices []mcpDevice `json:"devices"`
		Plans   []mcpPlan   `json:"plans"`
		Note    string      `json:"note"`
	}
	out.Mode = eng.Mode(ctx).Name
	out.Devices, out.Plans = []mcpDevice{}, []mcpPlan{}
	h := m.hintsNow()
	for _, dv := range m.web.deviceViews() {
		dv = hold.device(dv)
		md := mcpDevice{ID: dv.ID, Label: dv.Label, Area: dv.Area, Alarms: dv.Alarms, Capabilities: []mcpCapability{}}
		for _, cv := range dv.Capabilities {
			mc := mcpCapability{capView: cv}
			if p, ok := h.writeProfiles[dv.ID+"."+cv.Name]; ok {
				mc.Effects = effectsOf(p, true)
			} else if d, c, ok := eng.Capability(dv.ID, cv.Name); ok {
				mc.Effects = effectsOf(runtime.ReadProfile(&d, &c), false)
			}
			md.Capabilities = append(md.Capabilities, mc)
		}
		out.Devices = append(out.Devices, md)
	}
	for _, pl := range eng.Plans() {
		mp := mcpPlan{Name: pl.Name, Steps: []string{}, Effects: capEffects{Profile: "reads and waits only", ReadOnly: true}}
		for _, st := range pl.Steps {
			mp.Steps = append(mp.Steps, st.Describe())
			if st.Op == runtime.OpWrite {
				p, ok := h.writeProfiles[st.Device+"."+st.Capability]
				if !ok {
					p = governance.Worst()
				}
				e := effectsOf(p, true)
				if mp.Effects.ReadOnly {
					mp.Effects = e
				} else {
					mp.Effects.Profile += "; " + e.Profile
					mp.Effects.Destructive = mp.Effects.Destructive || e.Destructive
					mp.Effects.OpenWorld = mp.Effects.OpenWorld || e.OpenWorld
				}
			}
		}
		out.Plans = append(out.Plans, mp)
	}
	out.Note = "Mode " + out.Mode + " decides what runs, what asks a person and what is refused. You act as mcp:" +
		strings.TrimPrefix(req.Extra.TokenInfo.UserID, "mcp:") + "."
	return nil, out, nil
}

// mcpResult is a read's or a write's outcome, as the API gives it, with
// what an agent needs to follow a request that asks.
type mcpResult struct {
	result
	// ApprovalID and ConsoleURL are set when a person must answer.
	ApprovalID string `json:"approval_id,omitempty"`
	ConsoleURL string `json:"console_url,omitempty"`
	// Next says what to do now, in words.
	Next string `json:"next,omitempty"`
}

func (m *mcpSurface) read(ctx context.Context, req *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
	id, err := m.caller(ctx, req, toolRead, access.Viewer)
	if err != nil {
		return nil, nil, err
	}
	if err := needField("device", in.Device); err != nil {
		return nil, nil, err
	}
	if err := needField("capability", in.Capability); err != nil {
		return nil, nil, err
	}
	c, _ := m.apiContext(ctx, id, MCPPath)
	r, _, err := m.web.command(c, commandBody{Device: in.Device, Capability: in.Capability}, "mcp")
	if err != nil {
		return nil, nil, m.toolError(c, err)
	}
	return m.outcome(req, r)
}

func (m *mcpSurface) requestWrite(ctx context.Context, req *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
	id, err := m.caller(ctx, req, toolRequestWrite, access.Operator)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range [][2]string{{"device", in.Device}, {"capability", in.Capability}, {"reason", in.Reason}} {
		if err := needField(f[0], f[1]); err != nil {
			return nil, nil, err
		}
	}
	if len(in.Reason) > maxReasonLen {
		return nil, nil, fmt.Errorf(`argument "reason": at most %d characters`, maxReasonLen)
	}
	if len(in.RequestID) > 128 {
		return nil, nil, errors.New(`argument "request_id": at most 128 characters`)
	}
	if in.Value == nil {
		return nil, nil, errors.New(`argument "value": a write needs a value (a bool, a number or an enum string)`)
	}
	raw, err := json.Marshal(in.Value)
	if err != nil {
		return nil, nil, fmt.Errorf(`argument "value": %v`, err)
	}
	if _, c, ok := m.web.eng.Capability(in.Device, in.Capability); ok && c.Kind != devices.KindActuator {
		return nil, nil, fmt.Errorf(`argument "capability": %s of %s is a sensor; only an actuator is written (read it with %s)`,
			clip(in.Capability), clip(in.Device), toolRead)
	}
	c, _ := m.apiContext(ctx, id, MCPPath)
	r, _, err := m.web.command(c, commandBody{Device: in.Device, Capability: in.Capability, Value: raw, ID: in.RequestID,
		Reason: in.Reason}, "mcp")
	if err != nil {
		return nil, nil, m.toolError(c, err)
	}
	return m.outcome(req, r)
}

// outcome is a command's result as a tool's: a refusal or a failure is a
// tool error whose text is the judge's reason, so that the agent can tell
// its user; a request that asks says how to follow it.
func (m *mcpSurface) outcome(req *mcp.CallToolRequest, r result) (*mcp.CallToolResult, any, error) {
	out := mcpResult{result: r}
	switch r.Outcome {
	case "pending_approval":
		if r.Approval != nil {
			out.ApprovalID = r.Approval.ID
			out.ConsoleURL = m.base(req) + "/approvals#approval-" + r.Approval.ID
			out.Next = "A person must approve this in the console before anything moves; tell your user, then call " + toolGetApproval +
				` with approval_id "` + r.Approval.ID + `" (wait_seconds up to 60 waits for the answer). It expires at ` +
				r.Approval.Expires.UTC().Format(time.RFC3339) + "."
		}
		return nil, out, nil
	case "refused", "failed":
		why := r.Outcome + ": " + r.Why
		if r.ErrorID != "" {
			why += " (error id " + r.ErrorID + ")"
		}
		if r.Outcome == "refused" {
			why += ". The gateway's judge decided this; explain it to your user rather than retrying."
		}
		res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: why}}}
		return res, out, nil
	case "contradicted":
		out.Next = "The gateway acted, but the world did not follow (the read-back contradicted it); an alarm is raised. Tell your user; do not repeat the write."
	}
	return nil, out, nil
}

func needField(name, v string) error {
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("argument %q: required, and not empty", name)
	}
	return nil
}

func (m *mcpSurface) runPlan(ctx context.Context, req *mcp.CallToolRequest, in planIn) (*mcp.CallToolResult, any, error) {
	id, err := m.caller(ctx, req, toolRunPlan, access.Operator)
	if err != nil {
		return nil, nil, err
	}
	if err := needField("plan", in.Plan); err != nil {
		return nil, nil, err
	}
	if err := needField("reason", in.Reason); err != nil {
		return nil, nil, err
	}
	if len(in.Reason) > maxReasonLen {
		return nil, nil, fmt.Errorf(`argument "reason": at most %d characters`, maxReasonLen)
	}
	if len(in.RequestID) > 128 {
		return nil, nil, errors.New(`argument "request_id": at most 128 characters`)
	}
	c, _ := m.apiContext(ctx, id, MCPPath)
	rec, err := m.web.startPlan(c, runtime.StartPlan{Plan: in.Plan, Principal: id.Principal, Origin: "mcp", RequestID: in.RequestID,
		Reason: in.Reason})
	if err != nil {
		return nil, nil, m.toolError(c, err)
	}
	// The mode may have changed since the agent was admitted, after
	// watchModes cancelled the agents' runs: this one goes too.
	if mode := m.web.eng.Mode(ctx).Name; !m.admits(mode) {
		m.cancelAgentRuns(mode)
		return nil, nil, m.refusal(mode)
	}
	return nil, map[string]any{"run": rec, "console_url": m.base(req) + "/runs",
		"next": "The run is under way; each step is judged. A step that asks parks the run: its approval appears in journal_tail (approval_requested) and in the console."}, nil
}

// mcpApproval is an approval as get_approval tells it.
type mcpApproval struct {
	approvalView
	// Done is true once nothing more will come of it: denied, expired,
	// or approved and the act ended.
	Done       bool   `json:"done"`
	Summary    string `json:"summary"`
	ConsoleURL string `json:"console_url,omitempty"`
}

func (m *mcpSurface) approvalNow(ctx context.Context, req *mcp.CallToolRequest, apID string) (mcpApproval, bool) {
	ap, ok := m.web.eng.Approval(apID)
	if !ok {
		return mcpApproval{}, false
	}
	v := mcpApproval{approvalView: m.web.approvalView(ctx, ap), ConsoleURL: m.base(req) + "/approvals#approval-" + ap.ID}
	var by []string
	for _, a := range ap.Answers {
		by = append(by, a.By)
	}
	who := strings.Join(by, " and ")
	switch ap.Status {
	case runtime.ApprovalPending:
		v.Summary = "waiting for a person (" + strconv.Itoa(len(ap.Answers)) + " of " + strconv.Itoa(ap.Required) + " approvals so far)"
	case runtime.ApprovalApproved:
		v.Summary = "approved by " + who
		switch {
		case v.Act == nil || v.Act.Result == "acting":
			v.Summary += "; the act is under way"
		default:
			v.Done = true
			v.Summary += "; " + v.Act.Text
			if v.Act.Why != "" {
				v.Summary += ": " + v.Act.Why
			}
		}
	case runtime.ApprovalDenied:
		v.Done = true
		v.Summary = "denied by " + who
		if n := len(ap.Answers); n > 0 && ap.Answers[n-1].Reason != "" {
			v.Summary += ": " + ap.Answers[n-1].Reason
		}
	default:
		v.Done = true
		v.Summary = string(ap.Status) + "; nothing was done"
	}
	return v, true
}

func (m *mcpSurface) getApproval(ctx context.Context, req *mcp.CallToolRequest, in approvalIn) (*mcp.CallToolResult, any, error) {
	if _, err := m.caller(ctx, req, toolGetApproval, access.Viewer); err != nil {
		return nil, nil, err
	}
	if err := needField("approval_id", in.ApprovalID); err != nil {
		return nil, nil, err
	}
	if in.WaitSeconds < 0 || in.WaitSeconds > maxWait {
		return nil, nil, fmt.Errorf(`argument "wait_seconds": %d is not from 0 to %d`, in.WaitSeconds, maxWait)
	}
	// Every event after this point is seen: whatever changes the approval
	// after it is read wakes the wait.
	since := m.web.eng.FromNow()
	v, ok := m.approvalNow(ctx, req, in.ApprovalID)
	if !ok {
		return nil, nil, errors.New(`argument "approval_id": approval ` + clip(in.ApprovalID) + " does not exist")
	}
	if v.Done || in.WaitSeconds == 0 {
		return nil, v, nil
	}
	// Wait for the events of its run, and tell each change as progress.
	wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitSeconds)*time.Second)
	defer cancel()
	wctx, stop := m.untilBye(wctx)
	defer stop()
	tok := req.Params.GetProgressToken()
	step, last := 0.0, v.Summary
	errChanged := errors.New("changed")
	if tok != nil {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: step, Message: "waiting: " + v.Summary})
	}
	for !v.Done {
		err := m.web.eng.Subscribe(wctx, since, func(ev runtime.Event) error {
			since = ev.Seq
			switch {
			case ev.Run == v.Run, ev.Kind == runtime.KindApprovalAnswered, ev.Kind == runtime.KindApprovalExpired,
				ev.Kind == runtime.KindModeChanged, ev.Kind == runtime.KindConfigChanged:
				return errChanged
			}
			return nil
		})
		if !errors.Is(err, errChanged) {
			break // the wait is over, the call ended, or the gateway stops
		}
		// A mode that admits no agent ends the wait, as it refuses a
		// new call: the agent hears nothing more of the approval.
		if mode := m.web.eng.Mode(ctx).Name; !m.admitted(ctx, strings.TrimPrefix(req.Extra.TokenInfo.UserID, "mcp:"), mode) {
			return nil, nil, m.refusal(mode)
		}
		v, _ = m.approvalNow(ctx, req, in.ApprovalID)
		if v.Summary != last && tok != nil {
			last, step = v.Summary, step+1
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: step, Message: v.Summary})
		}
	}
	return nil, v, nil
}

func (m *mcpSurface) journalTail(ctx context.Context, req *mcp.CallToolRequest, in journalIn) (*mcp.CallToolResult, any, error) {
	id, err := m.caller(ctx, req, toolJournalTail, access.Viewer)
	if err != nil {
		return nil, nil, err
	}
	if in.Limit == 0 {
		in.Limit = 20
	}
	if in.Limit < 1 || in.Limit > maxJournalTail {
		return nil, nil, fmt.Errorf(`argument "limit": %d is not from 1 to %d`, in.Limit, maxJournalTail)
	}
	evs, err := m.events(ctx, id, in.Limit, in.Kinds, in.Device)
	if err != nil {
		return nil, nil, err
	}
	return nil, map[string]any{"events": evs}, nil
}

// events reads the newest events through the API's events handler, with
// its checks of the query.
func (m *mcpSurface) events(ctx context.Context, id *identity, n int, kinds, device string) ([]runtime.Event, error) {
	q := url.Values{"tail": {strconv.Itoa(n)}}
	if kinds != "" {
		q.Set("kind", kinds)
	}
	if device != "" {
		q.Set("device", device)
	}
	c, w := m.apiContext(ctx, id, "/api/v1/events?"+q.Encode())
	if err := m.web.apiEvents(c); err != nil {
		return nil, m.toolError(c, err)
	}
	out := []runtime.Event{}
	if err := json.Unmarshal(w.body.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("reading the journal's events: %w", err)
	}
	hold := m.withheldFor(ctx, id.Principal)
	for i := range out {
		out[i] = hold.event(out[i])
	}
	return out, nil
}

// resourceCaller is the agent reading a resource: any admitted token
// may, in a mode that admits agents, within its rate.
func (m *mcpSurface) resourceCaller(ctx context.Context, req *mcp.ReadResourceRequest) (*identity, error) {
	return m.agent(ctx, req.Extra, "reading a resource", access.Viewer)
}

func (m *mcpSurface) journalResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	id, err := m.resourceCaller(ctx, req)
	if err != nil {
		return nil, err
	}
	evs, err := m.events(ctx, id, 50, "", "")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: jsonText(evs)}}}, nil
}

func (m *mcpSurface) deviceResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	id, err := m.resourceCaller(ctx, req)
	if err != nil {
		return nil, err
	}
	dev, ok := strings.CutPrefix(req.Params.URI, "shadowgate://devices/")
	if ok {
		dev, _ = url.PathUnescape(dev)
	}
	for _, dv := range m.web.deviceViews() {
		if ok && dv.ID == dev {
			dv = m.withheldFor(ctx, id.Principal).device(dv)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: jsonText(dv)}}}, nil
		}
	}
	return nil, mcp.ResourceNotFoundError(req.Params.URI)
}
