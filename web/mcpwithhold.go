//go:build !shadowgate_omit_mcp

package web

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/shadowgate/shadowgate/runtime"
)

// withholding is what an agent may not be shown of what the gateway
// holds: the readings the judge would not let it read. Every tool and
// resource that shows readings it did not read itself (list_devices, a
// device's resource, the journal) goes through it, so that a rule or a
// mode that refuses an agent a read also keeps the value from it there.
type withholding struct {
	// denied names, by "device.capability", why a read is refused.
	denied map[string]string
	// online is every device online; an event of another device cannot
	// be judged, and is withheld when it carries values.
	online map[string]bool
}

// withheldFor judges, for principal, a read of every readable capability
// of every device online.
func (m *mcpSurface) withheldFor(ctx context.Context, principal string) withholding {
	w := withholding{denied: map[string]string{}, online: map[string]bool{}}
	eng := m.web.eng
	for _, d := range eng.Devices() {
		w.online[d.ID] = true
		for _, c := range d.Capabilities {
			if !c.Readable() {
				continue
			}
			if err := eng.MayRead(ctx, principal, d.ID, c.Name); err != nil {
				w.denied[d.ID+"."+c.Name] = err.Error()
			}
		}
	}
	return w
}

// mentioned returns why the first denied capability that text names is
// withheld, and "" when it names none.
func (w withholding) mentioned(text string) string {
	for ref, why := range w.denied {
		if strings.Contains(text, ref) {
			return "withheld: it concerns " + ref + ", which you may not read (" + why + ")"
		}
	}
	return ""
}

// device clears from dv what the agent may not read: a capability's
// reading, its receipt and its lock (each holds a value), and the
// alarms that speak of it.
func (w withholding) device(dv deviceView) deviceView {
	caps := make([]capView, 0, len(dv.Capabilities))
	for _, cv := range dv.Capabilities {
		if why, ok := w.denied[dv.ID+"."+cv.Name]; ok {
			cv.Reading, cv.Age, cv.Receipt, cv.LockedBy = nil, "", nil, nil
			cv.Withheld = "withheld: you may not read it (" + why + ")"
		}
		caps = append(caps, cv)
	}
	dv.Capabilities = caps
	alarms := make([]alarmView, 0, len(dv.Alarms))
	for _, a := range dv.Alarms {
		if w.mentioned(a.Device+"."+a.Capability+" "+a.Message) == "" {
			alarms = append(alarms, a)
		}
	}
	dv.Alarms = alarms
	return dv
}

// valueless are the kinds of event that carry no reading.
var valueless = map[runtime.Kind]bool{
	runtime.KindDeviceOnline: true, runtime.KindDeviceOffline: true, runtime.KindLink: true,
}

// event returns ev, or ev with its body replaced by why it is withheld:
// an event of a capability the agent may not read, one whose body names
// such a capability (an interlock's reading in another device's event),
// or one that carries values of a device not online, which cannot be
// judged.
func (w withholding) event(ev runtime.Event) runtime.Event {
	why := ""
	var b struct {
		Capability string `json:"capability"`
	}
	_ = json.Unmarshal(ev.Body, &b) // a body without one names none
	switch {
	case ev.Device != "" && b.Capability != "" && w.denied[ev.Device+"."+b.Capability] != "":
		ref := ev.Device + "." + b.Capability
		why = "withheld: it concerns " + ref + ", which you may not read (" + w.denied[ref] + ")"
	case ev.Device != "" && !w.online[ev.Device] && !valueless[ev.Kind]:
		why = "withheld: device " + ev.Device + " is not online, so whether you may read it cannot be judged"
	default:
		why = w.mentioned(string(ev.Body))
	}
	if why == "" {
		return ev
	}
	ev.Body, _ = json.Marshal(map[string]string{"withheld": why})
	return ev
}
