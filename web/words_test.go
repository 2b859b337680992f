package web

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/drivers/sim"
	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// TestApprovalCardsInPlainWords: a request's card and its answered card
// name the device by its label, a bool as ON/OFF on both, the people
// without their surface's prefix, and the sensor that confirmed the act,
// with its reading's unit.
func TestApprovalCardsInPlainWords(t *testing.T) {
	gh, err := sim.New(sim.Options{Devices: []devices.Device{
		{ID: "tank-1", Label: "Tank 1", Area: "gh", Driver: "sim", Address: "tank",
			Capabilities: []devices.Capability{{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber, Unit: "%"}}},
		{ID: "valve-1", Label: "Valve 1", Area: "gh", Driver: "sim", Address: "valve",
			Capabilities: []devices.Capability{{Name: "open", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := newSite(t, siteOptions{driver: func(devices.Driver) devices.Driver { return gh }, policies: map[string]runtime.CapPolicy{
		"valve-1.open": {Effects: &runtime.Declared{Reversible: true, Contained: true}, Safe: &closed,
			// Confirmed by the tank: full enough, it says the valve may run.
			Confirm: &runtime.Confirm{Sensor: "tank-1.level", Op: governance.OpGT, Value: value.Number(5), Within: 2 * time.Second}},
	}})
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level"}`, 200, "")
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open"}`, 200, "")
	id := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/commands", "operator",
		`{"device":"valve-1","capability":"open","value":true}`, 202, "pending_approval"))[1]
	b := s.browser()
	b.login("ann", "password-1")
	_, page, _ := b.page("/approvals")
	for _, want := range []string{
		`<h2 id="h-` + id + `">Valve 1 <span class="area">(gh)</span>: open OFF → <strong>ON</strong></h2>`,
		"<dt>Act</dt><dd>valve-1.open → ON</dd>",
		"<dt>Asked by</dt><dd>operator, through the API, giving no reason</dd>",
		"asked by operator, through the API.",
		"The rule lets <strong>operator, through the API</strong> set",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the waiting card does not say %q:\n%s", want, page)
		}
	}
	s.expect("POST", "/api/v1/approvals/"+id, "approver", `{"decision":"approve","device":"valve-1","capability":"open","value":true}`, 200, "approved")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(page, "acted and confirmed") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		_, page, _ = b.page("/approvals")
	}
	for _, want := range []string{
		`<h3>Valve 1: open → ON: <span class="status">approved, acted and confirmed</span></h3>`,
		"valve-1.open, approval " + id,
		"<p>Approved by approver, through the API. </p>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the answered card does not say %q:\n%s", want, page)
		}
	}
	// The simulated tank fills slowly: 60 %, or a little over, when read.
	if !regexp.MustCompile(`✓ The act: acted and confirmed by tank-1\.level reading 60(\.\d+)? %</span>`).MatchString(page) {
		t.Errorf("the answered card does not say it was confirmed by the tank's reading, with its unit:\n%s", page)
	}
	for _, code := range []string{"api:operator", "api:approver", "→ true", "read back 60"} {
		if strings.Contains(page, code) {
			t.Errorf("the Approvals page says %q", code)
		}
	}
}
