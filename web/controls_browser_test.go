package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// controlsSite is a site whose greenhouse has, besides the tank and the
// valve, the thermostat (a number, 10 to 28 °C by 0.5) and the roof vent
// (an enum), each labelled, as the demo has them.
func controlsSite(t *testing.T) (*site, *sim.Greenhouse) {
	t.Helper()
	num := func(name, unit string) []devices.Capability {
		return []devices.Capability{{Name: name, Kind: devices.KindActuator, Type: value.TypeNumber, Unit: unit, ReadBack: true}}
	}
	gh, err := sim.New(sim.Options{Devices: []devices.Device{
		{ID: "tank-1", Label: "Tank 1", Area: "gh", Driver: "sim", Address: "tank",
			Capabilities: []devices.Capability{{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber, Unit: "%"}}},
		{ID: "valve-1", Label: "Valve 1", Area: "gh", Driver: "sim", Address: "valve",
			Capabilities: []devices.Capability{{Name: "open", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}},
		{ID: "thermostat-1", Label: "Thermostat 1", Area: "gh", Driver: "sim", Address: "thermostat", Capabilities: num("setpoint", "°C")},
		{ID: "vent-1", Label: "Roof vent", Area: "gh", Driver: "sim", Address: "vent", Capabilities: []devices.Capability{
			{Name: "position", Kind: devices.KindActuator, Type: value.TypeEnum, Enum: []string{"closed", "half", "open"}, ReadBack: true}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	safeSet, shut := value.Number(16), value.Enum("closed")
	readBack := &runtime.Confirm{ReadBack: true, Within: 2 * time.Second}
	s := newSite(t, siteOptions{
		driver: func(devices.Driver) devices.Driver { return gh },
		policies: map[string]runtime.CapPolicy{
			"thermostat-1.setpoint": {Effects: &runtime.Declared{Reversible: true, Contained: true, Costs: true},
				Envelope: &governance.Envelope{Type: value.TypeNumber, Min: 10, Max: 28, HasMin: true, HasMax: true, Step: 0.5},
				Confirm:  readBack, Safe: &safeSet},
			"vent-1.position": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Confirm: readBack, Safe: &shut},
		},
	})
	s.waitOnline(4)
	for _, d := range []string{`"thermostat-1","capability":"setpoint"`, `"vent-1","capability":"position"`} {
		s.expect("POST", "/api/v1/commands", "operator", `{"device":`+d+`}`, 200, "")
	}
	return s, gh
}

// TestNumberAndEnumControls sets the thermostat's setpoint with its
// stepper and the roof vent's position with its select, from their cards
// on the Devices page, at desk and at phone size, as an operator: each
// command waits for approval (the card says so where it was tapped), acts
// once approved, and the card then shows the new state, confirmed. The
// stepper offers only the envelope; a value outside it is refused by the
// browser before it is sent, and by the gateway (for a client that does
// not check) with the error next to the field. The cards name the
// devices by their labels, with their ids still shown.
func TestNumberAndEnumControls(t *testing.T) {
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			s, gh := controlsSite(t)
			b := newBrowser(t, s.srv.URL)
			b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
			b.login("olga", "/devices")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			thermo, vent := `document.getElementById("device-thermostat-1")`, `document.getElementById("device-vent-1")`
			input, sel := `#device-thermostat-1 form.control input[name="value"]`, `#device-vent-1 form.control select[name="value"]`
			b.poll("the setpoint read", thermo+`.querySelector(".cap-value").textContent.includes("30 °C")`)
			if h := eval[string](b, thermo+`.querySelector("h2").textContent`); !strings.Contains(h, "Thermostat 1 · gh") {
				t.Errorf("the thermostat's card is headed %q, want its label and area", h)
			}
			if text := eval[string](b, thermo+`.querySelector("p.area").textContent`); !strings.Contains(text, "thermostat-1") {
				t.Errorf("the thermostat's card does not show its id: %q", text)
			}
			bounds := eval[[]string](b, `(() => { const i = document.querySelector('`+input+`');
				return [i.type, i.min, i.max, i.step, document.querySelector('label[for="' + i.id + '"]').textContent]; })()`)
			if strings.Join(bounds[:4], " ") != "number 10 28 0.5" || !strings.Contains(bounds[4], "in °C (from 10 up to 28)") {
				t.Errorf("the setpoint's stepper is %q, want a number from 10 to 28 by 0.5 in °C, labelled so", bounds)
			}
			if opts := eval[string](b, `Array.from(document.querySelector('`+sel+`').options).map(o => o.value).join(" ")`); opts != "closed half open" {
				t.Errorf("the vent's select offers %q, want closed half open", opts)
			}

			// Outside the envelope: the browser refuses it, and nothing is sent.
			b.do("typing 35 °C", chromedp.SetValue(chromedp.CSS(input), "35"), chromedp.Click(chromedp.CSS(`#device-thermostat-1 form.control .set button`)))
			if !eval[bool](b, `(() => { const i = document.querySelector('`+input+`'); return i.validity.rangeOverflow && i.validationMessage !== ""; })()`) {
				t.Error("the stepper took 35 °C, above the envelope's 28")
			}
			// A client that does not check is refused by the gateway, the
			// error next to the field.
			eval[bool](b, `document.querySelector('`+input+`').form.noValidate = true`)
			b.do("sending 35 °C unchecked", chromedp.Click(chromedp.CSS(`#device-thermostat-1 form.control .set button`)))
			b.poll("the error next to the field", `(() => { const i = document.querySelector('`+input+`'), p = i && i.nextElementSibling;
				return !!p && p.matches("p.field-error[role=alert]") && p.textContent.includes("above the maximum 28") &&
					i.getAttribute("aria-invalid") === "true" && (i.getAttribute("aria-describedby") || "").includes(p.id); })()`)
			if r := eval[map[string]float64](b, `(() => { const r = document.querySelector('`+input+`').nextElementSibling.getBoundingClientRect();
				return {top: r.top, bottom: r.bottom, h: innerHeight}; })()`); r["top"] < 0 || r["bottom"] > r["h"] {
				t.Errorf("the error is out of view: %v", r)
			}
			if n := len(s.eng.Approvals()); n != 0 || gh.Received("thermostat-1", "setpoint") != 0 {
				t.Fatalf("35 °C was sent on: %d requests wait, %d writes", n, gh.Received("thermostat-1", "setpoint"))
			}
			b.shot("controls-refused-" + vp.name)

			// In the envelope: it waits for approval, then acts.
			eval[bool](b, `!(document.querySelector('`+input+`').form.noValidate = false)`)
			b.do("setting 22.5 °C", chromedp.SetValue(chromedp.CSS(input), "22.5"), chromedp.Click(chromedp.CSS(`#device-thermostat-1 form.control .set button`)))
			b.poll("the request in place", thermo+`.querySelector("p.outcome") !== null && `+thermo+`.querySelector("p.outcome").textContent.includes("thermostat-1.setpoint → 22.5 °C: waiting for approval")`)
			b.poll("the request marker", thermo+`.textContent.includes("1 request waiting")`)
			id := approvalID.FindStringSubmatch(s.expect("GET", "/api/v1/approvals", "viewer", "", 200, "thermostat-1"))[1]
			s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"approve","device":"thermostat-1","capability":"setpoint","value":22.5}`, 200, "approved")
			b.poll("the new setpoint, confirmed", thermo+`.querySelector(".cap-value").textContent.includes("22.5 °C") && `+thermo+`.textContent.includes("✓ confirmed") &&
				document.querySelector('`+input+`').value === "22.5"`)

			// The vent: a select, the same way.
			b.do("opening the vent", chromedp.SetValue(chromedp.CSS(sel), "open"), chromedp.Click(chromedp.CSS(`#device-vent-1 form.control .set button`)))
			b.poll("the vent's request in place", vent+`.querySelector("p.outcome") !== null && `+vent+`.querySelector("p.outcome").textContent.includes("vent-1.position → open: waiting for approval")`)
			id = approvalID.FindStringSubmatch(s.expect("GET", "/api/v1/approvals", "viewer", "", 200, "vent-1"))[1]
			s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"approve","device":"vent-1","capability":"position","value":"open"}`, 200, "approved")
			b.poll("the vent open, confirmed", vent+`.querySelector(".cap-value").textContent.includes("open") && `+vent+`.textContent.includes("✓ confirmed") &&
				document.querySelector('`+sel+`').value === "open" && !`+vent+`.textContent.includes("request waiting")`)
			if st := gh.State(); st.Setpoint != 22.5 || st.Vent != "open" {
				t.Errorf("the greenhouse has the setpoint at %v and the vent %q, want 22.5 and open", st.Setpoint, st.Vent)
			}
			b.shot("controls-" + vp.name)
		})
	}
}
