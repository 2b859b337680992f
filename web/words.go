package web

import (
	"cmp"
	"strings"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// stateText shows a capability's value for people, with its unit: a
// bool as ON or OFF, a number with its unit, an enum as its word,
// "unknown" for none.
func stateText(v any, unit string) string {
	var x value.Value
	switch v := v.(type) {
	case value.Value:
		x = v
	case *value.Value:
		if v != nil {
			x = *v
		}
	case *devices.Reading:
		if v != nil {
			x = v.Value
		}
	}
	switch x.Type {
	case value.TypeNone:
		return "unknown"
	case value.TypeBool:
		if x.Bool {
			return "ON"
		}
		return "OFF"
	case value.TypeNumber:
		if unit != "" {
			return x.String() + " " + unit
		}
	case value.TypeEnum:
		// One of a few known words: shown as the word, as its select
		// offers it.
		return x.Text
	}
	return x.String()
}

// decisionText says a person's answer in words.
func decisionText(d runtime.Decision) string {
	switch d {
	case runtime.Approve:
		return "Approved"
	case runtime.ApproveAndRule:
		return "Approved with a rule"
	case runtime.Deny:
		return "Denied"
	}
	return string(d)
}

// surfaces says where a person came from, by the prefix of their
// principal.
var surfaces = map[string]string{
	"console": "in the console",
	"api":     "through the API",
	"mqtt":    "over MQTT",
	"mqtts":   "over MQTT",
	"uplink":  "through the uplink",
}

// personParts splits a person's principal, "console:demo", into the name
// people know them by and where they came from: "demo", "in the
// console". A principal that is not a person's (a schedule, an agent, the
// gateway) is its own name, with where "".
func personParts(p string) (name, where string) {
	prefix, rest, ok := strings.Cut(p, ":")
	if w, known := surfaces[prefix]; ok && known && rest != "" {
		return rest, w
	}
	return p, ""
}

// personText names a principal for people: "demo, in the console", "ann,
// over MQTT"; one that is not a person's, as it is.
func personText(p string) string {
	name, where := personParts(p)
	if where == "" {
		return name
	}
	return name + ", " + where
}

// personInSentence names a principal inside a sentence: "demo (in the
// console)".
func personInSentence(p string) string {
	name, where := personParts(p)
	if where == "" {
		return name
	}
	return name + " (" + where + ")"
}

// peopleInSentence names the people of a list of principals, "console:ann,
// mqtt:bob", inside a sentence: "ann (in the console) and bob (over MQTT)".
func peopleInSentence(ps string) string {
	if ps == "" {
		return ""
	}
	ws := strings.Split(ps, ", ")
	for i, p := range ws {
		ws[i] = personInSentence(p)
	}
	return andList(ws)
}

// answerLine is one person's answer to a request, for people.
type answerLine struct {
	Decision, By, Reason string
}

// Asker names who asked for the act, for people: "demo, in the console".
func (v approvalView) Asker() string { return personText(v.Principal) }

// AnswerLines are the answers given, the people named for people.
func (v approvalView) AnswerLines() []answerLine {
	out := make([]answerLine, 0, len(v.Answers))
	for _, a := range v.Answers {
		out = append(out, answerLine{Decision: decisionText(a.Decision), By: personText(a.By), Reason: a.Reason})
	}
	return out
}

// Approvers names the people who approved so far: "ann, in the console
// and bob, over MQTT".
func (v approvalView) Approvers() string {
	ws := make([]string, 0, len(v.Answers))
	for _, a := range v.Answers {
		ws = append(ws, personText(a.By))
	}
	return andList(ws)
}

// AckedByPerson names who acknowledged the alarm, for people.
func (v alarmView) AckedByPerson() string { return personText(v.AckedBy) }

// ShelvedByPerson names who shelved the alarm, for people.
func (v alarmView) ShelvedByPerson() string { return personText(v.ShelvedBy) }

// DeviceName is what people call a device: its label, or its id when it
// has none or is not known.
func (v *statusView) DeviceName(id string) string {
	if v == nil || v.srv == nil {
		return id
	}
	if d, ok := v.srv.device(id); ok {
		return d.Name()
	}
	return id
}

// ReadBack says what an answered act's confirmation saw, to follow the
// act's text ("acted and confirmed"): " by flow-1.rate reading 1.41
// L/min" (the sensor that confirms it, named, with its unit), " by
// reading ON back"; ", flow-1.rate reading 0 L/min" or ", read back OFF"
// when not confirmed; "" when nothing was observed.
func (v *statusView) ReadBack(a approvalView) string {
	if a.Outcome == nil || a.Outcome.Receipt == nil || a.Outcome.Receipt.Observed == nil || v == nil || v.srv == nil {
		return ""
	}
	rc := a.Outcome.Receipt
	confirmed := rc.Confirmation == runtime.Confirmed
	if pol, ok := v.srv.eng.Policy(rc.Device, rc.Capability); ok && pol.Confirm != nil {
		if sensor := cmp.Or(pol.Confirm.Sensor, pol.Confirm.Feedback); sensor != "" {
			unit := ""
			if dev, cp, ok := strings.Cut(sensor, "."); ok {
				if _, c, ok := v.srv.eng.Capability(dev, cp); ok {
					unit = c.Unit
				}
			}
			if confirmed {
				return " by " + sensor + " reading " + stateText(rc.Observed, unit)
			}
			return ", " + sensor + " reading " + stateText(rc.Observed, unit)
		}
	}
	if confirmed {
		return " by reading " + stateText(rc.Observed, a.Unit) + " back"
	}
	return ", read back " + stateText(rc.Observed, a.Unit)
}

// device returns the device with the id, if it is online.
func (s *Server) device(id string) (devices.Device, bool) {
	for _, d := range s.eng.Devices() {
		if d.ID == id {
			return d, true
		}
	}
	return devices.Device{}, false
}
