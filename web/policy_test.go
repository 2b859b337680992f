package web

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

func TestRuleWords(t *testing.T) {
	made := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	supervised := governance.ShippedModes()[governance.ModeSupervised]
	twoPerson := supervised
	twoPerson.Name, twoPerson.ApprovalsRequired = "two-person", 2
	for _, tc := range []struct {
		name     string
		rr       runtime.RuleRecord
		mode     governance.Mode
		sentence string // Verb, Who and Act
		made     string
		idle     bool
	}{
		{"a value, made by a person",
			runtime.RuleRecord{MadeAt: made, Rule: governance.Rule{ID: "r-12", Principal: "console:demo", Device: "pump-1", Capability: "power",
				Decision: governance.DecideAllow, Values: governance.ValueMatch{Set: []value.Value{value.Bool(true)}}, MadeBy: "console:demo", Approvals: 1}},
			supervised, "Allow demo (in the console) to set pump-1.power to true", "made by demo (in the console) approving a request", false},
		{"any value, made by two people",
			runtime.RuleRecord{MadeAt: made, Rule: governance.Rule{ID: "r-13", Principal: "mqtt:line-1", Device: "valve-1", Capability: "open",
				Decision: governance.DecideAllow, MadeBy: "console:ann, console:bob", Approvals: 2}},
			twoPerson, "Allow line-1 (over MQTT) to read valve-1.open or set it to any value", "made by ann (in the console) and bob (in the console) approving a request", false},
		{"made by fewer people than the mode needs",
			runtime.RuleRecord{MadeAt: made, Rule: governance.Rule{ID: "r-14", Principal: "api:ci", Device: "valve-1", Capability: "open",
				Decision: governance.DecideAllow, MadeBy: "console:ann", Approvals: 1}},
			twoPerson, "Allow ci (through the API) to read valve-1.open or set it to any value", "made by ann (in the console) approving a request", true},
		{"a set, for anyone",
			runtime.RuleRecord{Rule: governance.Rule{ID: "r-1", Principal: "*", Device: "fan-1", Capability: "speed", Decision: governance.DecideAllow,
				Values: governance.ValueMatch{Set: []value.Value{value.Enum("low"), value.Enum("mid"), value.Enum("high")}}, MadeBy: "configuration"}},
			twoPerson, `Allow anyone to set fan-1.speed to "low", "mid" or "high"`, "from the configuration", false},
		{"a range, denied by prefix",
			runtime.RuleRecord{Rule: governance.Rule{ID: "r-2", Principal: "mqtt:line-*", Device: "*", Capability: "setpoint",
				Decision: governance.DecideDeny, Values: governance.ValueMatch{Min: 10, Max: 80.5, HasMin: true, HasMax: true}, MadeBy: "configuration"}},
			supervised, "Forbid anyone whose name begins with mqtt:line- to set setpoint of any device to a number from 10 to 80.5", "from the configuration", false},
		{"at least",
			runtime.RuleRecord{Rule: governance.Rule{ID: "r-3", Principal: "api:ci", Device: "heater", Capability: "*",
				Decision: governance.DecideDeny, Values: governance.ValueMatch{Min: 60, HasMin: true}, MadeBy: "configuration"}},
			twoPerson, "Forbid ci (through the API) to set any capability of heater to a number of at least 60", "from the configuration", false},
		{"at most",
			runtime.RuleRecord{Rule: governance.Rule{ID: "r-4", Principal: "api:ci", Device: "*", Capability: "*",
				Decision: governance.DecideAllow, Values: governance.ValueMatch{Max: -5, HasMax: true}, MadeBy: "configuration"}},
			twoPerson, "Allow ci (through the API) to set any capability of any device to a number of at most -5", "from the configuration", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ruleWords(tc.rr, tc.mode)
			if got := v.Verb + " " + v.Who + " " + v.Act; got != tc.sentence {
				t.Errorf("ruleWords(%s) says %q, want %q", tc.rr.Rule.ID, got, tc.sentence)
			}
			if v.Made != tc.made {
				t.Errorf("ruleWords(%s).Made = %q, want %q", tc.rr.Rule.ID, v.Made, tc.made)
			}
			if (v.Idle != "") != tc.idle {
				t.Errorf("ruleWords(%s).Idle = %q, want idle %v", tc.rr.Rule.ID, v.Idle, tc.idle)
			}
			if v.Revocable == tc.rr.MadeAt.IsZero() {
				t.Errorf("ruleWords(%s).Revocable = %v for a rule made at %v", tc.rr.Rule.ID, v.Revocable, tc.rr.MadeAt)
			}
		})
	}
}

func TestModeWords(t *testing.T) {
	shipped := governance.ShippedModes()
	twoPerson := shipped[governance.ModeSupervised]
	twoPerson.Name, twoPerson.ApprovalsRequired = "two-person", 2
	for _, tc := range []struct {
		mode governance.Mode
		want string
	}{
		{shipped[governance.ModeObserve], "Reads only: every write is refused."},
		{shipped[governance.ModeSupervised], "Every write asks a person first."},
		{shipped[governance.ModeMaintenance], "Writes run without asking a person, inside their envelope and interlocks. " +
			"It lasts at most 1 h, then the gateway falls back to supervised."},
		{twoPerson, "Every write asks a person first. It narrows supervised. Each request needs 2 different people to approve it."},
	} {
		if got := modeWords(tc.mode); got != tc.want {
			t.Errorf("modeWords(%s) = %q, want %q", tc.mode.Name, got, tc.want)
		}
	}
}

// TestPolicyPageInWords: the Policy page says each rule in force in
// plain words (whom it allows to set what to which value, until when,
// who made it and how, its reason) with no code word, offers an admin
// its revocation, says when a rule decides nothing in the mode in force,
// and says of the mode since when, by whom and until when.
func TestPolicyPageInWords(t *testing.T) {
	s := newSite(t, siteOptions{mode: "supervised"})
	b := s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":false,"reason":"drain"}`, 202, "pending_approval")
	s.expect("POST", "/api/v1/approvals/"+approvalID.FindStringSubmatch(b)[1], "approver",
		`{"decision":"approve_and_rule","device":"valve-1","capability":"open","value":false,"rule_for":"30m","reason":"night shift"}`, 200, `"status":"approved"`)
	rules := s.eng.Rules()
	if len(rules) != 1 {
		t.Fatalf("rules = %+v, want the one approved", rules)
	}
	r := rules[0]
	admin := s.browser()
	if code := admin.login("adam", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	mode := s.eng.Mode(t.Context())
	_, page, _ := admin.page("/policy")
	for _, want := range []string{
		"<strong>Allow</strong> operator (through the API) to set valve-1.open to false, until " + string(timeElement(r.Rule.ExpiresAt)) +
			" (made by approver (through the API) approving a request at " + string(timeElement(r.MadeAt)) + ", rule " + r.Rule.ID + ").",
		"Reason given: “night shift”",
		`<form method="post" action="/rules/` + r.Rule.ID + `/revoke" class="inline-form">`, "Revoke rule " + r.Rule.ID,
		"In force since " + string(timeElement(mode.Since)) + ", set by the configuration, at start.",
		"Every write asks a person first.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the policy page does not say %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "approve_and_rule") || strings.Contains(page, "decides nothing") {
		t.Errorf("the policy page shows a code word, or calls the rule idle:\n%s", page)
	}
	viewer := s.browser()
	if code := viewer.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	if _, page, _ := viewer.page("/policy"); strings.Contains(page, "/revoke") || !strings.Contains(page, r.Rule.ID) {
		t.Errorf("a viewer is offered a revocation, or sees no rule:\n%s", page)
	}

	s.expect("POST", "/api/v1/mode", "admin", `{"mode":"two-person","reason":"audit week"}`, 200, `"name":"two-person"`)
	mode = s.eng.Mode(t.Context())
	_, page, _ = admin.page("/policy")
	for _, want := range []string{
		"It decides nothing in mode two-person, which needs 2 people to approve: 1 person made it, so such requests ask as usual.",
		"In force since " + string(timeElement(mode.Since)) + ", set by admin, through the API.",
		"It narrows supervised. Each request needs 2 different people to approve it.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("in mode two-person the policy page does not say %q:\n%s", want, page)
		}
	}
}

// TestPolicyPageSaysUntilWhen: a mode with a time limit says when it
// ends, on the Policy page and the Overview.
func TestPolicyPageSaysUntilWhen(t *testing.T) {
	s := newSite(t, siteOptions{mode: "supervised"})
	b := s.expect("POST", "/api/v1/mode", "operator", `{"mode":"maintenance","reason":"pump swap"}`, 202, "")
	s.expect("POST", "/api/v1/approvals/"+approvalID.FindStringSubmatch(b)[1], "admin", `{"decision":"approve","mode":"maintenance"}`, 200, `"status":"approved"`)
	mode := s.eng.Mode(t.Context())
	if mode.Name != "maintenance" || mode.Expires.IsZero() {
		t.Fatalf("mode = %+v, want maintenance with an end", mode)
	}
	br := s.browser()
	if code := br.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	for path, want := range map[string]string{
		"/policy": "In force since " + string(timeElement(mode.Since)) + ", set by admin, through the API; it ends at " + string(timeElement(mode.Expires)) +
			", when the gateway falls back to supervised.",
		"/": "In force since " + string(timeElement(mode.Since)) + ", set by admin, through the API; it ends at " + string(timeElement(mode.Expires)) + ".",
	} {
		if _, page, _ := br.page(path); !strings.Contains(page, want) {
			t.Errorf("%s does not say %q:\n%s", path, want, page)
		}
	}
}

// TestOverviewNumbersInWords: every number on the Overview has its
// noun, singular for one and plural otherwise.
func TestOverviewNumbersInWords(t *testing.T) {
	var mq MQTTStats
	var up UplinkStats
	s := newSite(t, siteOptions{mode: "supervised", options: func(o *Options) {
		o.MQTTStats = func() MQTTStats { return mq }
		o.UplinkStats = func() UplinkStats { return up }
	}})
	br := s.browser()
	if code := br.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	for _, tc := range []struct {
		name string
		mq   MQTTStats
		up   UplinkStats
		// ask sends a request that waits for an approval.
		ask       string
		want, not []string
	}{
		{"none", MQTTStats{}, UplinkStats{Configured: true, Connected: true}, "",
			[]string{"No client connected", "Since the gateway started: 0 publishes denied, 0 failed logins.", "Nothing waits to be sent.",
				"0 sent, 0 dropped", "No request waits for an answer", "No alarm waits for acknowledgement", "No active alarm, none shelved."},
			[]string{"0 clients"}},
		{"one", MQTTStats{Clients: 1, DeniedPublishes: 1, FailedLogins: 1}, UplinkStats{Configured: true, Backlog: 1, BacklogBytes: 1, Sent: 1, Dropped: 1},
			`/api/v1/commands {"device":"valve-1","capability":"open","value":true}`,
			[]string{"1 client connected", "1 publish denied, 1 failed login.", "1 message waits to be sent (1 byte).", "1 sent, 1 dropped",
				"1 request waits for an answer", "Answer it"},
			[]string{"1 clients", "1 logins", "1 bytes"}},
		{"many", MQTTStats{Clients: 2, DeniedPublishes: 3, FailedLogins: 4}, UplinkStats{Configured: true, Backlog: 5, BacklogBytes: 600},
			`/api/v1/mode {"mode":"maintenance","reason":"pump swap"}`,
			[]string{"2 clients connected", "3 publishes denied, 4 failed logins.", "5 messages wait to be sent (600 bytes).",
				"2 requests wait for an answer", "Answer them"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mq, up = tc.mq, tc.up
			if path, body, ok := strings.Cut(tc.ask, " "); ok {
				s.expect("POST", path, "operator", body, 202, "")
			}
			_, page, _ := br.page("/")
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("the overview does not say %q:\n%s", w, page)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(page, w) {
					t.Errorf("the overview says %q", w)
				}
			}
		})
	}
}
