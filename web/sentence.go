package web

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// eventSentence says what ev records in one sentence a person reads,
// without its time: "ann approved valve-1.open", "refused valve-1.open →
// true: mode observe does not permit it". An event of a kind it does not
// know, or whose body it cannot read, is its kind and a short form of its
// body. It never panics.
func eventSentence(ev runtime.Event) string {
	if s, ok := sentenceOf(ev); ok {
		return s
	}
	short := strings.Join(strings.Fields(string(ev.Body)), " ")
	if short == "" {
		return clip(string(ev.Kind)) + shortRef(ev.Device)
	}
	return clip(string(ev.Kind)) + shortRef(ev.Device) + ": " + clip(short)
}

func shortRef(device string) string {
	if device == "" {
		return ""
	}
	return " " + clip(device)
}

// sentenceOf writes the sentence of ev's kind, or returns false when the
// kind is not known or its body cannot be read.
func sentenceOf(ev runtime.Event) (string, bool) {
	w, ok := sentenceWriters[ev.Kind]
	if !ok || len(ev.Body) == 0 {
		return "", false
	}
	return w(ev.Body)
}

// sentenceWriters write the sentence of each kind from its body.
var sentenceWriters = map[runtime.Kind]func([]byte) (string, bool){
	runtime.KindStarted:           startedSentence,
	runtime.KindInvoked:           invokedSentence,
	runtime.KindObserved:          observedSentence,
	runtime.KindRefused:           refusedSentence,
	runtime.KindFailed:            failedSentence,
	runtime.KindApprovalRequested: requestedSentence,
	runtime.KindApprovalAnswered:  answeredSentence,
	runtime.KindApprovalExpired:   answeredSentence,
	runtime.KindActed:             actedSentence,
	runtime.KindAlarm:             alarmSentence,
	runtime.KindModeChanged:       modeSentence,
	runtime.KindRuleAdded:         ruleSentence,
	runtime.KindRuleRevoked:       revokedSentence,
	runtime.KindConfigChanged:     configSentence,
	runtime.KindDeviceOnline:      func(b []byte) (string, bool) { return deviceSentence(b, true) },
	runtime.KindDeviceOffline:     func(b []byte) (string, bool) { return deviceSentence(b, false) },
	runtime.KindEnded:             endedSentence,
	runtime.KindRecovered:         recoveredSentence,
	runtime.KindReconciled:        reconciledSentence,
	runtime.KindCheckpoint:        checkpointSentence,
	runtime.KindLogin:             loginSentence,
	runtime.KindLink:              linkSentence,
	runtime.KindSafeDrive:         safeDriveSentence,
	runtime.KindDrift:             driftSentence,
	runtime.KindScheduleSkipped:   skippedSentence,
	runtime.KindScheduleMissed:    missedSentence,
	kindRecords:                   recordsSentence,
	kindSession:                   sessionSentence,
}

// kindRecords is the journal's own event about its records (retention,
// pruning), runtime/journal's KindRecords, which web does not import.
const kindRecords runtime.Kind = "records"

// kindSession records a console session opened or closed,
// runtime/journal's KindSession.
const kindSession runtime.Kind = "session"

// decodeBody reads a body into v: a JSON object, or false.
func decodeBody(b []byte, v any) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Unmarshal(b, v) == nil
}

// sentenceBuilder joins the parts of a sentence that are not empty, each part
// already carrying its own separator.
type sentenceBuilder struct{ b strings.Builder }

// add writes the parts as they are; free text goes through freeText.
func (s *sentenceBuilder) add(parts ...string) *sentenceBuilder {
	for _, p := range parts {
		s.b.WriteString(p)
	}
	return s
}

// with writes prefix and text when text is not "".
func (s *sentenceBuilder) with(prefix, text string) *sentenceBuilder {
	if text != "" {
		s.b.WriteString(prefix)
		s.b.WriteString(freeText(text))
	}
	return s
}

func (s *sentenceBuilder) done() (string, bool) {
	return strings.TrimSpace(s.b.String()), s.b.Len() > 0
}

// maxFreeText bounds, in runes, one piece of free text in a sentence.
const maxFreeText = 240

// freeText folds free text's spaces and line breaks and clips it to
// maxFreeText runes.
func freeText(t string) string {
	t = strings.Join(strings.Fields(strings.ToValidUTF8(t, "?")), " ")
	if utf8.RuneCountInString(t) > maxFreeText {
		t = string([]rune(t)[:maxFreeText]) + "…"
	}
	return t
}

// eventRef names device.capability, "" when the device is unknown.
func eventRef(device, capability string) string {
	switch {
	case device == "":
		return ""
	case capability == "":
		return freeText(device)
	}
	return freeText(device + "." + capability)
}

// toValue is " → value", or "" for no value.
func toValue(v *value.Value) string {
	if v == nil || v.IsZero() {
		return ""
	}
	return " → " + clip(v.String())
}

// sentenceTime shows a time inside a sentence, in the gateway's zone, as the
// page's times are before the browser shows them in its own.
func sentenceTime(t time.Time) string {
	return t.Local().Format("2006-01-02 15:04:05 MST")
}

func startedSentence(b []byte) (string, bool) {
	var x runtime.StartedBody
	if !decodeBody(b, &x) || x.Plan == "" {
		return "", false
	}
	var s sentenceBuilder
	if x.ResumedAtStep > 0 {
		s.add(freeText(x.Plan), " resumed at step ", strconv.Itoa(x.ResumedAtStep), " after a restart").with(", waiting for ", x.Approval)
		return s.done()
	}
	who := freeText(personInSentence(x.Principal))
	if who == "" {
		who = "someone"
	}
	if x.Plan == "command" {
		s.add(who, " sent a command")
	} else {
		s.add(who, " started ", freeText(x.Plan))
	}
	return s.with(": ", x.Reason).done()
}

func invokedSentence(b []byte) (string, bool) {
	var x runtime.AttemptBody
	if !decodeBody(b, &x) || x.Device == "" {
		return "", false
	}
	act := eventRef(x.Device, x.Capability) + toValue(&x.Value)
	var s sentenceBuilder
	switch x.State {
	case runtime.AttemptStaged:
		s.add("staged ", act).with(" for ", personInSentence(x.Principal))
	case runtime.AttemptAuthorized:
		s.add("authorized ", act)
		if mode, ok := strings.CutPrefix(x.Authorization, "verdict:"); ok {
			s.with(" by mode ", mode)
		} else {
			s.with(" by ", x.Authorization)
		}
	case runtime.AttemptExecuting:
		s.add("writing ", act)
	default:
		s.add(freeText(string(x.State)), " ", act)
	}
	return s.with(": ", x.Reason).done()
}

func observedSentence(b []byte) (string, bool) {
	var x runtime.ObservedBody
	if !decodeBody(b, &x) || x.Device == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add(eventRef(x.Device, x.Capability), " read ", valueText(&x.Value))
	if x.Quality != "" && x.Quality != "good" {
		s.add(" (", freeText(x.Quality), ")")
	}
	return s.with(", for ", personInSentence(x.Principal)).done()
}

func refusedSentence(b []byte) (string, bool) {
	var x runtime.RefusedBody
	if !decodeBody(b, &x) || x.Why == "" && x.Device == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add("refused")
	if r := eventRef(x.Device, x.Capability); r != "" {
		s.add(" ", r, toValue(x.Value))
	}
	return s.with(": ", x.Why).done()
}

func failedSentence(b []byte) (string, bool) {
	var x runtime.FailedBody
	if !decodeBody(b, &x) || x.Device == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add(eventRef(x.Device, x.Capability), " failed")
	if x.Outcome != "" {
		s.add(" (", freeText(x.Outcome), ")")
	}
	return s.with(": ", x.Error).with(", device code ", x.Code).done()
}

func requestedSentence(b []byte) (string, bool) {
	var x runtime.Approval
	if !decodeBody(b, &x) {
		return "", false
	}
	var s sentenceBuilder
	who := freeText(personInSentence(x.Principal))
	if who == "" {
		who = "someone"
	}
	switch {
	case x.Kind == "mode_change" || x.Device == "" && x.Mode != "":
		s.add(who, " asked for mode ", freeText(x.Mode))
	case x.Device != "":
		s.add(who, " asked ", eventRef(x.Device, x.Capability), toValue(&x.Value))
	default:
		return "", false
	}
	if x.Reason != "" {
		s.add(", for ", strconv.Quote(freeText(x.Reason)))
	}
	s.with(": ", x.Why)
	switch {
	case x.AdminOnly:
		s.add("; an admin must approve")
	case x.Required > 1:
		s.add("; ", strconv.Itoa(x.Required), " people must approve")
	}
	return s.done()
}

// answeredSentence writes an answer (an AnsweredBody) or a request closed
// without one (a ClosedBody: expired or superseded).
func answeredSentence(b []byte) (string, bool) {
	var x struct {
		runtime.AnsweredBody
		Why string `json:"why"`
	}
	if !decodeBody(b, &x) || x.Approval == "" {
		return "", false
	}
	what := eventRef(x.Device, x.Capability)
	if what == "" {
		what = "request " + freeText(x.Approval)
	}
	var s sentenceBuilder
	if x.Decision == "" {
		s.add(what, " ", freeText(string(x.Status)))
		if x.Device != "" {
			s.add(" (", freeText(x.Approval), ")")
		}
		return s.with(": ", x.Why).done()
	}
	who := freeText(personInSentence(x.By))
	if who == "" {
		who = freeText(x.Person)
	}
	switch x.Decision {
	case runtime.Deny:
		s.add(who, " denied ", what, toValue(x.Value))
	case runtime.Approve, runtime.ApproveAndRule:
		s.add(who, " approved ", what)
		switch {
		case x.Value != nil:
			s.add(toValue(x.Value))
		case x.Record != nil:
			s.add(toValue(&x.Record.Value))
		}
		s.with(" and made rule ", x.Rule)
	default:
		s.add(who, " answered ", freeText(string(x.Decision)), " to ", what)
	}
	s.with(": ", x.Reason)
	if x.Status == runtime.ApprovalPending {
		s.add("; it waits for another approval")
	}
	return s.done()
}

func actedSentence(b []byte) (string, bool) {
	var x runtime.Receipt
	if !decodeBody(b, &x) || x.Device == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add("acted ", eventRef(x.Device, x.Capability), toValue(&x.Value), "; ")
	switch x.Confirmation {
	case runtime.Confirmed:
		s.add("confirmed")
		if x.Observed != nil {
			s.add(", reads ", valueText(x.Observed))
		}
	case runtime.NotStarted:
		s.add("contradicted: it never started")
	case runtime.WrongFinal:
		s.add("contradicted: it did not reach the value")
	case runtime.Returned:
		s.add("contradicted: it reached the value and went back")
	case runtime.Unconfirmed:
		s.add("not confirmed: no good reading to tell")
	case runtime.NotChecked:
		s.add("nothing is set up to confirm it")
	default:
		s.add(freeText(string(x.Confirmation)))
	}
	if x.Confirmation != runtime.Confirmed {
		s.with(" (", x.Detail)
		if x.Detail != "" {
			s.add(")")
		}
	}
	if x.Driver != "" && x.Driver != "ok" {
		s.with("; the driver answered ", x.Driver)
	}
	if !x.Until.IsZero() {
		s.add("; back to safe at ", sentenceTime(x.Until), " unless commanded again")
	}
	return s.done()
}

func alarmSentence(b []byte) (string, bool) {
	var x runtime.AlarmBody
	if !decodeBody(b, &x) || x.Alarm.ID == "" {
		return "", false
	}
	a := &x.Alarm
	id := freeText(a.ID)
	var s sentenceBuilder
	switch x.Action {
	case runtime.AlarmRaised:
		s.add("alarm ", id, " raised (", freeText(string(a.Priority)), ")")
		if a.Count > 1 {
			s.add(", ", strconv.Itoa(a.Count), " times")
		}
		s.with(": ", a.Message)
	case runtime.AlarmCleared:
		s.add("alarm ", id, " cleared").with(": ", a.ClearedWhy)
	case runtime.AlarmAcknowledged:
		s.add(freeText(personInSentence(x.By)), " acknowledged alarm ", id).with(": ", x.Comment)
	case runtime.AlarmShelved:
		s.add(freeText(personInSentence(x.By)), " shelved alarm ", id)
		if !a.ShelvedUntil.IsZero() {
			s.add(" until ", sentenceTime(a.ShelvedUntil))
		}
		s.with(": ", a.ShelveReason)
	case runtime.AlarmUnshelved:
		s.add("alarm ", id, " unshelved").with(" by ", personInSentence(x.By))
	default:
		s.add("alarm ", id, " ", freeText(x.Action)).with(" by ", personInSentence(x.By))
	}
	return s.done()
}

func modeSentence(b []byte) (string, bool) {
	var x runtime.ModeChangedBody
	if !decodeBody(b, &x) || x.To == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add("mode changed").with(" from ", x.From).with(" to ", x.To).with(" by ", personInSentence(x.By))
	if !x.Expires.IsZero() {
		s.add(" until ", sentenceTime(x.Expires))
	}
	return s.with(": ", x.Reason).done()
}

func ruleSentence(b []byte) (string, bool) {
	var x runtime.RuleRecord
	if !decodeBody(b, &x) || x.Rule.ID == "" {
		return "", false
	}
	r := &x.Rule
	var s sentenceBuilder
	by := freeText(peopleInSentence(r.MadeBy))
	if by == "" {
		by = "the configuration"
	}
	s.add(by, " made rule ", freeText(r.ID), ": ", freeText(string(r.Decision)), " ", freeText(r.Principal), " ",
		eventRef(r.Device, r.Capability), " ", matchText(&r.Values))
	if !r.ExpiresAt.IsZero() {
		s.add(" until ", sentenceTime(r.ExpiresAt))
	}
	return s.with(", for ", r.Reason).done()
}

// matchText says which values a rule covers.
func matchText(m *governance.ValueMatch) string {
	if m.Any() {
		return "any value"
	}
	var parts []string
	if len(m.Set) > 0 {
		vs := make([]string, 0, len(m.Set))
		for i := range m.Set {
			vs = append(vs, m.Set[i].String())
		}
		parts = append(parts, "→ "+clip(strings.Join(vs, " or ")))
	}
	if m.HasMin {
		parts = append(parts, "from "+strconv.FormatFloat(m.Min, 'g', -1, 64))
	}
	if m.HasMax {
		parts = append(parts, "up to "+strconv.FormatFloat(m.Max, 'g', -1, 64))
	}
	return strings.Join(parts, " ")
}

func revokedSentence(b []byte) (string, bool) {
	var x runtime.RuleRevokedBody
	if !decodeBody(b, &x) || x.Rule == "" {
		return "", false
	}
	var s sentenceBuilder
	by := freeText(personInSentence(x.By))
	if by == "" {
		by = "the gateway"
	}
	return s.add(by, " revoked rule ", freeText(x.Rule)).done()
}

func configSentence(b []byte) (string, bool) {
	var x runtime.ConfigChangedBody
	if !decodeBody(b, &x) || x.File == "" {
		return "", false
	}
	var s sentenceBuilder
	by := freeText(personInSentence(x.By))
	if by == "" {
		by = "the gateway"
	}
	s.add(by, " put ", freeText(x.File), " in force")
	s.with(": ", firstThree(x.Changes))
	return s.with("; waits for a restart: ", firstThree(x.Restart)).done()
}

// firstThree joins the first three items of a list and counts the rest.
func firstThree(items []string) string {
	if len(items) > 3 {
		return strings.Join(items[:3], "; ") + " and " + strconv.Itoa(len(items)-3) + " more"
	}
	return strings.Join(items, "; ")
}

func deviceSentence(b []byte, online bool) (string, bool) {
	var x runtime.DeviceBody
	if !decodeBody(b, &x) || x.Device == "" {
		return "", false
	}
	var s sentenceBuilder
	if online {
		return s.add(freeText(x.Device), " came online").done()
	}
	return s.add(freeText(x.Device), " went offline").with(": ", x.Reason).done()
}

func endedSentence(b []byte) (string, bool) {
	var x runtime.EndedBody
	if !decodeBody(b, &x) || x.End == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add("run ended: ", freeText(strings.ReplaceAll(string(x.End), "_", " ")), ", ", countText(x.Steps, "step"), ", ", countText(x.Actuations, "act"))
	if d, err := time.ParseDuration(x.Spent); err == nil {
		if d < time.Millisecond {
			s.add(" in under 1ms")
		} else {
			s.add(" in ", d.Round(time.Millisecond).String())
		}
	}
	return s.with(": ", x.Why).done()
}

// countText counts things: "1 step", "2 steps".
func countText(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

func recoveredSentence(b []byte) (string, bool) {
	var x runtime.RecoveredBody
	if !decodeBody(b, &x) || x.Device == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add("at start, ", eventRef(x.Device, x.Capability), toValue(&x.Value), " was found ", freeText(string(x.From)))
	return s.with(", now ", string(x.To)).with(": ", x.Why).done()
}

func reconciledSentence(b []byte) (string, bool) {
	var x runtime.ReconciledBody
	if !decodeBody(b, &x) || x.Device == "" {
		return "", false
	}
	var s sentenceBuilder
	by := freeText(personInSentence(x.By))
	if by == "" {
		by = "the gateway"
	}
	s.add(by, " settled ", eventRef(x.Device, x.Capability), toValue(&x.Value), ": ",
		freeText(strings.ReplaceAll(string(x.Found), "_", " ")))
	return s.with(", ", x.Why).done()
}

func checkpointSentence(b []byte) (string, bool) {
	var x runtime.CheckpointBody
	if !decodeBody(b, &x) || x.Size == 0 {
		return "", false
	}
	var s sentenceBuilder
	return s.add("checkpoint signed for events up to ", seqText(x.Size)).with(" with key ", x.Key).done()
}

func loginSentence(b []byte) (string, bool) {
	var x runtime.LoginBody
	if !decodeBody(b, &x) || x.Action == "" {
		return "", false
	}
	var s sentenceBuilder
	switch x.Action {
	case "login":
		s.add(freeText(x.User), " logged in").with(" on ", x.Surface).with(" from ", x.Remote)
	case "logout":
		s.add(freeText(x.User), " logged out").with(" of ", x.Surface)
	case "login_failed":
		s.add(countText(x.Failures, "failed login")).with(" from ", x.Remote).with(" on ", x.Surface).with(" as ", strings.Join(x.Users, ", "))
		if x.OtherUsers > 0 {
			s.add(" and ", countText(x.OtherUsers, "other user"))
		}
		if x.LockedOut {
			s.add("; locked out")
		}
		s.with(": ", x.Why)
	default:
		s.add(freeText(x.Action)).with(" by ", x.User).with(" on ", x.Surface)
	}
	return s.done()
}

func linkSentence(b []byte) (string, bool) {
	var x runtime.LinkBody
	if !decodeBody(b, &x) || x.State == "" {
		return "", false
	}
	link := freeText(x.Link)
	if link == "" {
		link = "a link"
	}
	var s sentenceBuilder
	s.add(link, " ", freeText(x.State)).with(" to ", x.Broker).with(": ", x.Why)
	if x.Backlog > 0 || x.Dropped > 0 {
		s.add("; ", countText(x.Backlog, "message"), " waiting, ", strconv.FormatInt(x.Dropped, 10), " dropped")
	}
	return s.done()
}

func safeDriveSentence(b []byte) (string, bool) {
	var x runtime.SafeDriveBody
	if !decodeBody(b, &x) || x.Device == "" {
		return "", false
	}
	var s sentenceBuilder
	ref := eventRef(x.Device, x.Capability)
	if x.Outcome == "done" {
		s.add("drive of ", ref, " to safe", toValue(&x.Safe), " not needed")
	} else {
		s.add("driving ", ref, " to safe", toValue(&x.Safe))
	}
	s.with(" (", x.Trigger)
	if x.Trigger != "" {
		s.add(")")
	}
	if x.Try > 1 {
		s.add(", try ", strconv.Itoa(x.Try))
	}
	return s.with(": ", x.Why).done()
}

func driftSentence(b []byte) (string, bool) {
	var x runtime.DriftBody
	if !decodeBody(b, &x) || x.Device == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add(eventRef(x.Device, x.Capability), " moved from ", valueText(&x.From), " to ", valueText(&x.To), " with no command")
	if x.Commanded != nil {
		s.add(" (last commanded ", valueText(x.Commanded), ")")
	}
	return s.done()
}

func skippedSentence(b []byte) (string, bool) {
	var x runtime.ScheduleSkippedBody
	if !decodeBody(b, &x) || x.Plan == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add("scheduled start of ", freeText(x.Plan), " skipped")
	return s.with(": ", x.Why).done()
}

func missedSentence(b []byte) (string, bool) {
	var x runtime.ScheduleMissedBody
	if !decodeBody(b, &x) || x.Plan == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add(freeText(x.Plan), " missed ")
	if x.AtLeast {
		s.add("at least ")
	}
	s.add(countText(x.Count, "scheduled start"))
	if x.CatchUp && x.Run != "" {
		s.add("; caught up as ", freeText(x.Run))
	}
	return s.with(": ", x.Why).done()
}

func recordsSentence(b []byte) (string, bool) {
	var x struct {
		PruneThrough uint64    `json:"prune_through"`
		Carried      int       `json:"carried"`
		Pruned       int       `json:"pruned"`
		OlderThan    time.Time `json:"older_than"`
		Adopted      int       `json:"adopted"`
		Why          string    `json:"why"`
	}
	if !decodeBody(b, &x) {
		return "", false
	}
	var s sentenceBuilder
	switch {
	case x.Adopted > 0:
		s.add("the journal adopted ", countText(x.Adopted, "record"))
	case x.PruneThrough > 0:
		s.add("the journal pruned events up to ", seqText(x.PruneThrough))
		if x.Carried > 0 {
			s.add(", carrying ", countText(x.Carried, "live record"))
		}
	case x.Pruned > 0:
		s.add("the journal deleted ", countText(x.Pruned, "ended record"))
		if !x.OlderThan.IsZero() {
			s.add(" older than ", sentenceTime(x.OlderThan))
		}
	default:
		return "", false
	}
	return s.with(": ", x.Why).done()
}

func sessionSentence(b []byte) (string, bool) {
	var x struct {
		Op      string    `json:"op"`
		User    string    `json:"user"`
		Role    string    `json:"role"`
		Remote  string    `json:"remote"`
		Expires time.Time `json:"expires"`
	}
	if !decodeBody(b, &x) || x.User == "" || x.Op == "" {
		return "", false
	}
	var s sentenceBuilder
	s.add("session of ", freeText(x.User)).with(" (", x.Role)
	if x.Role != "" {
		s.add(")")
	}
	s.add(" ", freeText(x.Op)).with(" from ", x.Remote)
	if !x.Expires.IsZero() {
		s.add(", until ", sentenceTime(x.Expires))
	}
	return s.done()
}
