package web

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shadowgate/shadowgate/runtime"
)

// at1 is the time the sentences' bodies carry, and at1s how a sentence
// shows it.
var (
	at1  = time.Date(2026, 3, 4, 10, 42, 3, 0, time.UTC)
	at1s = sentenceTime(at1)
)

// sentenceCases are one or more events of every kind the journal writes,
// as their bodies are journaled, and the sentence each reads as.
var sentenceCases = []struct {
	name string
	kind runtime.Kind
	body string
	want string
}{
	{"started", runtime.KindStarted, `{"origin":"api","plan":"flush","principal":"api:operator","reason":"night rinse","request_id":"p-1"}`,
		"operator (through the API) started flush: night rinse"},
	{"started command", runtime.KindStarted, `{"origin":"mqtt","plan":"command","principal":"mqtt:line-3","reason":"","request_id":"r"}`,
		"line-3 (over MQTT) sent a command"},
	{"started resumed", runtime.KindStarted, `{"approval":"apr-1","origin":"api","plan":"flush","principal":"api:operator","reason":"","request_id":"p","resumed_at_step":2}`,
		"flush resumed at step 2 after a restart, waiting for apr-1"},
	{"invoked staged", runtime.KindInvoked, `{"attempt":"act-1","authorization":"","capability":"power","device":"pump-1","key":"k","principal":"mqtt:line-3","state":"staged","value":true}`,
		"staged pump-1.power → true for line-3 (over MQTT)"},
	{"invoked authorized by mode", runtime.KindInvoked, `{"attempt":"act-1","authorization":"verdict:interlocked","capability":"power","device":"pump-1","key":"k","principal":"p","state":"authorized","value":true}`,
		"authorized pump-1.power → true by mode interlocked"},
	{"invoked authorized by approval", runtime.KindInvoked, `{"attempt":"act-1","authorization":"auth-9","capability":"power","device":"pump-1","key":"k","principal":"p","state":"authorized","value":true,"reason":"fill"}`,
		"authorized pump-1.power → true by auth-9: fill"},
	{"invoked executing", runtime.KindInvoked, `{"attempt":"act-1","authorization":"auth-9","capability":"power","device":"pump-1","key":"k","principal":"p","state":"executing","value":false}`,
		"writing pump-1.power → false"},
	{"observed", runtime.KindObserved, `{"device":"tank-1","capability":"level","value":60.5,"quality":"good","at":"2026-03-04T10:42:03Z","principal":"gateway:poll"}`,
		"tank-1.level read 60.5, for gateway:poll"},
	{"observed uncertain", runtime.KindObserved, `{"device":"tank-1","capability":"level","value":null,"quality":"bad","at":"2026-03-04T10:42:03Z","principal":""}`,
		"tank-1.level read unknown (bad)"},
	{"refused", runtime.KindRefused, `{"device":"heater","capability":"power","value":true,"why":"mode observe does not permit it","stage":"ceiling","mode":"observe"}`,
		"refused heater.power → true: mode observe does not permit it"},
	{"refused without a device", runtime.KindRefused, `{"why":"the journal is read-only","stage":"journal"}`,
		"refused: the journal is read-only"},
	{"failed", runtime.KindFailed, `{"attempt":"act-2","capability":"power","device":"pump-1","error":"timeout after 2s","outcome":"unknown"}`,
		"pump-1.power failed (unknown): timeout after 2s"},
	{"approval requested", runtime.KindApprovalRequested, `{"id":"apr-1","kind":"actuation","device":"pump-1","capability":"power","value":true,"principal":"mqtt:line-3","origin":"mqtt","why":"the mode asks a person","stage":"ask_line","required":1,"status":"pending","requested_at":"2026-03-04T10:42:03Z","expires":"2026-03-04T10:52:03Z"}`,
		"line-3 (over MQTT) asked pump-1.power → true: the mode asks a person"},
	{"approval requested by two", runtime.KindApprovalRequested, `{"id":"apr-1","kind":"actuation","device":"pump-1","capability":"power","value":true,"principal":"api:operator","origin":"api","reason":"fill the tank","why":"mode two-person asks","stage":"ask_line","required":2,"status":"pending"}`,
		`operator (through the API) asked pump-1.power → true, for "fill the tank": mode two-person asks; 2 people must approve`},
	{"mode change requested", runtime.KindApprovalRequested, `{"id":"apr-2","kind":"mode_change","value":null,"mode":"maintenance","principal":"api:operator","origin":"mode","why":"mode maintenance is wider than supervised","stage":"mode","required":1,"admin_only":true,"status":"pending"}`,
		"operator (through the API) asked for mode maintenance: mode maintenance is wider than supervised; an admin must approve"},
	{"approved", runtime.KindApprovalAnswered, `{"approval":"apr-1","by":"console:demo","capability":"power","decision":"approve","device":"pump-1","person":"demo","reason":"","rule":"","status":"approved"}`,
		"demo (in the console) approved pump-1.power"},
	{"approved with its value", runtime.KindApprovalAnswered, `{"approval":"apr-1","by":"console:demo","capability":"power","decision":"approve","device":"pump-1","person":"demo","reason":"","rule":"","status":"approved","value":true}`,
		"demo (in the console) approved pump-1.power → true"},
	{"denied with its value", runtime.KindApprovalAnswered, `{"approval":"apr-1","by":"console:demo","capability":"power","decision":"deny","device":"pump-1","person":"demo","reason":"tank empty","rule":"","status":"denied","value":true}`,
		"demo (in the console) denied pump-1.power → true: tank empty"},
	{"approved and rule", runtime.KindApprovalAnswered, `{"approval":"apr-1","by":"api:approver","capability":"open","decision":"approve_and_rule","device":"valve-1","person":"approver","reason":"night shift","rule":"rule-1","status":"approved"}`,
		"approver (through the API) approved valve-1.open and made rule rule-1: night shift"},
	{"one of two approvals", runtime.KindApprovalAnswered, `{"approval":"apr-1","by":"api:approver2","capability":"open","decision":"approve","device":"valve-1","person":"approver2","reason":"","record":{"id":"apr-1","kind":"actuation","device":"valve-1","capability":"open","value":true,"status":"pending"},"rule":"","status":"pending"}`,
		"approver2 (through the API) approved valve-1.open → true; it waits for another approval"},
	{"denied", runtime.KindApprovalAnswered, `{"approval":"apr-1","by":"console:ann","capability":"open","decision":"deny","device":"valve-1","person":"ann","reason":"tank is being cleaned","rule":"","status":"denied"}`,
		"ann (in the console) denied valve-1.open: tank is being cleaned"},
	{"mode change approved", runtime.KindApprovalAnswered, `{"approval":"apr-2","by":"api:admin","capability":"","decision":"approve","device":"","person":"admin","reason":"","rule":"","status":"approved"}`,
		"admin (through the API) approved request apr-2"},
	{"superseded", runtime.KindApprovalAnswered, `{"approval":"apr-1","capability":"open","device":"valve-1","status":"superseded","why":"a newer request replaced it"}`,
		"valve-1.open superseded (apr-1): a newer request replaced it"},
	{"expired", runtime.KindApprovalExpired, `{"approval":"apr-1","capability":"open","device":"valve-1","status":"expired","why":"no answer within 10m0s"}`,
		"valve-1.open expired (apr-1): no answer within 10m0s"},
	{"acted confirmed", runtime.KindActed, `{"key":"k","attempt":"act-1","device":"pump-1","capability":"power","value":true,"driver":"ok","confirmation":"confirmed","observed":true,"at":"2026-03-04T10:42:03Z"}`,
		"acted pump-1.power → true; confirmed, reads true"},
	{"acted contradicted", runtime.KindActed, `{"key":"k","attempt":"act-1","device":"valve-1","capability":"open","value":true,"driver":"ok","confirmation":"wrong_final","observed":false,"detail":"valve-1.open is false after 1s","at":"2026-03-04T10:42:03Z","until":"2026-03-04T10:42:03Z"}`,
		"acted valve-1.open → true; contradicted: it did not reach the value (valve-1.open is false after 1s); back to safe at " + at1s + " unless commanded again"},
	{"acted not started", runtime.KindActed, `{"key":"k","attempt":"act-1","device":"valve-1","capability":"open","value":true,"driver":"ok","confirmation":"not_started","at":"2026-03-04T10:42:03Z"}`,
		"acted valve-1.open → true; contradicted: it never started"},
	{"acted returned", runtime.KindActed, `{"key":"k","attempt":"act-1","device":"valve-1","capability":"open","value":true,"driver":"ok","confirmation":"returned","at":"2026-03-04T10:42:03Z"}`,
		"acted valve-1.open → true; contradicted: it reached the value and went back"},
	{"acted unconfirmed", runtime.KindActed, `{"key":"k","attempt":"act-1","device":"valve-1","capability":"open","value":true,"driver":"ok","confirmation":"unconfirmed","at":"2026-03-04T10:42:03Z"}`,
		"acted valve-1.open → true; not confirmed: no good reading to tell"},
	{"acted not checked", runtime.KindActed, `{"key":"k","attempt":"act-1","device":"lamp","capability":"on","value":true,"driver":"busy","confirmation":"not_checked","at":"2026-03-04T10:42:03Z"}`,
		"acted lamp.on → true; nothing is set up to confirm it; the driver answered busy"},
	{"alarm raised", runtime.KindAlarm, `{"action":"raised","alarm":{"id":"discrepancy.pump-1.power","kind":"discrepancy","priority":"high","state":"active_unacknowledged","condition":true,"message":"","count":1},"by":"gateway"}`,
		"alarm discrepancy.pump-1.power raised (high)"},
	{"alarm raised again", runtime.KindAlarm, `{"action":"raised","alarm":{"id":"drift.valve-1.open","kind":"drift","priority":"medium","message":"moved with no command","count":3},"by":"gateway"}`,
		"alarm drift.valve-1.open raised (medium), 3 times: moved with no command"},
	{"alarm cleared", runtime.KindAlarm, `{"action":"cleared","alarm":{"id":"discrepancy.valve-1.open","priority":"high","cleared_why":"attempt act-2 was confirmed","count":1},"by":"gateway"}`,
		"alarm discrepancy.valve-1.open cleared: attempt act-2 was confirmed"},
	{"alarm acknowledged", runtime.KindAlarm, `{"action":"acknowledged","alarm":{"id":"discrepancy.valve-1.open","priority":"high"},"by":"console:olga","comment":"fitter called"}`,
		"olga (in the console) acknowledged alarm discrepancy.valve-1.open: fitter called"},
	{"alarm shelved", runtime.KindAlarm, `{"action":"shelved","alarm":{"id":"drift.valve-1.open","priority":"medium","shelved_until":"2026-03-04T10:42:03Z","shelve_reason":"sensor swap"},"by":"console:adam"}`,
		"adam (in the console) shelved alarm drift.valve-1.open until " + at1s + ": sensor swap"},
	{"alarm unshelved", runtime.KindAlarm, `{"action":"unshelved","alarm":{"id":"drift.valve-1.open","priority":"medium"},"by":"gateway"}`,
		"alarm drift.valve-1.open unshelved by gateway"},
	{"mode changed", runtime.KindModeChanged, `{"by":"admin","expires":"2026-03-04T10:42:03Z","from":"supervised","reason":"pump swap","to":"maintenance"}`,
		"mode changed from supervised to maintenance by admin until " + at1s + ": pump swap"},
	{"mode changed for good", runtime.KindModeChanged, `{"by":"api:operator","expires":"0001-01-01T00:00:00Z","from":"maintenance","reason":"","to":"observe"}`,
		"mode changed from maintenance to observe by operator (through the API)"},
	{"rule added", runtime.KindRuleAdded, `{"rule":{"id":"rule-1","principal":"api:operator","device":"valve-1","capability":"open","values":{"set":[true]},"decision":"allow","expires_at":"2026-03-04T10:42:03Z","made_by":"api:approver","reason":"night shift","approvals":1},"made_at":"2026-03-04T10:12:03Z"}`,
		"approver (through the API) made rule rule-1: allow api:operator valve-1.open → true until " + at1s + ", for night shift"},
	{"rule of the configuration", runtime.KindRuleAdded, `{"rule":{"id":"cfg-1","principal":"*","device":"heater","capability":"setpoint","values":{"min":5,"max":30,"has_min":true,"has_max":true},"decision":"deny"},"made_at":"2026-03-04T10:12:03Z"}`,
		"the configuration made rule cfg-1: deny * heater.setpoint from 5 up to 30"},
	{"rule revoked", runtime.KindRuleRevoked, `{"by":"api:admin","rule":"rule-1"}`, "admin (through the API) revoked rule rule-1"},
	{"config changed", runtime.KindConfigChanged, `{"file":"/etc/shadowgate/shadowgate.yaml","digest":"ab","changes":["mode supervised: approvals 1 → 2","plan flush added","rule cfg-1 removed","device pump-2 added"],"restart":["mqtt"],"by":"signal"}`,
		"signal put /etc/shadowgate/shadowgate.yaml in force: mode supervised: approvals 1 → 2; plan flush added; rule cfg-1 removed and 1 more; waits for a restart: mqtt"},
	{"device online", runtime.KindDeviceOnline, `{"device":"pump-1"}`, "pump-1 came online"},
	{"device offline", runtime.KindDeviceOffline, `{"device":"pump-1","reason":"serial port closed"}`, "pump-1 went offline: serial port closed"},
	{"ended", runtime.KindEnded, `{"actuations":1,"end":"completed","spent":"15.789296ms","steps":1,"why":""}`,
		"run ended: completed, 1 step, 1 act in 16ms"},
	{"ended short", runtime.KindEnded, `{"actuations":0,"end":"lease_exhausted","spent":"271µs","steps":2,"why":"the lease ran out"}`,
		"run ended: lease exhausted, 2 steps, 0 acts in under 1ms: the lease ran out"},
	{"recovered", runtime.KindRecovered, `{"attempt":"act-3","capability":"open","device":"valve-1","from":"executing","key":"k","to":"unknown","value":true,"why":"the gateway stopped while it acted"}`,
		"at start, valve-1.open → true was found executing, now unknown: the gateway stopped while it acted"},
	{"reconciled", runtime.KindReconciled, `{"attempt":"act-3","by":"api:admin","capability":"open","device":"valve-1","found":"not_acted","key":"k","observed":null,"value":true,"why":"valve seen shut on site"}`,
		"admin (through the API) settled valve-1.open → true: not acted, valve seen shut on site"},
	{"checkpoint", runtime.KindCheckpoint, `{"note":"gw\n120\nabc=\n\n— gw sig\n","size":120,"hash":"ab","key":"gw+1234"}`,
		"checkpoint signed for events up to 120 with key gw+1234"},
	{"login", runtime.KindLogin, `{"action":"login","remote":"10.0.0.7","surface":"console","user":"olga"}`, "olga logged in on console from 10.0.0.7"},
	{"logout", runtime.KindLogin, `{"action":"logout","remote":"10.0.0.7","surface":"console","user":"olga"}`, "olga logged out of console"},
	{"login failed", runtime.KindLogin, `{"action":"login_failed","failures":5,"locked_out":true,"other_users":2,"remote":"10.0.0.9","surface":"console,api","users":["root","admin"]}`,
		"5 failed logins from 10.0.0.9 on console,api as root, admin and 2 other users; locked out"},
	{"link", runtime.KindLink, `{"backlog":12,"backlog_bytes":3000,"broker":"mqtts://cloud:8883","dropped":0,"link":"uplink","state":"disconnected","why":"EOF"}`,
		"uplink disconnected to mqtts://cloud:8883: EOF; 12 messages waiting, 0 dropped"},
	{"safe drive", runtime.KindSafeDrive, `{"device":"valve-1","capability":"open","trigger":"ttl","why":"its dead-man time ran out","safe":false,"try":2,"outcome":"driving"}`,
		"driving valve-1.open to safe → false (ttl), try 2: its dead-man time ran out"},
	{"safe drive done", runtime.KindSafeDrive, `{"device":"valve-1","capability":"open","trigger":"stop","why":"already at safe","safe":false,"try":1,"outcome":"done"}`,
		"drive of valve-1.open to safe → false not needed (stop): already at safe"},
	{"drift", runtime.KindDrift, `{"device":"valve-1","capability":"open","from":false,"to":true,"commanded":false,"at":"2026-03-04T10:42:03Z"}`,
		"valve-1.open moved from false to true with no command (last commanded false)"},
	{"schedule skipped", runtime.KindScheduleSkipped, `{"due":"2026-03-04T10:42:03Z","plan":"flush","run":"run-1","why":"run run-1 of flush has not ended"}`,
		"scheduled start of flush skipped: run run-1 of flush has not ended"},
	{"schedule missed", runtime.KindScheduleMissed, `{"at_least":true,"catch_up":true,"cause":"not_running","count":100,"plan":"flush","run":"run-2","why":"the gateway was not running"}`,
		"flush missed at least 100 scheduled starts; caught up as run-2: the gateway was not running"},
	{"session opened", kindSession, `{"expires":"2026-03-04T10:42:03Z","op":"opened","remote":"127.0.0.1","role":"viewer","user":"vera"}`,
		"session of vera (viewer) opened from 127.0.0.1, until " + at1s},
	{"session closed", kindSession, `{"op":"closed","user":"vera"}`, "session of vera closed"},
	{"records pruned", kindRecords, `{"prune_through":4096,"hash":"ab","carried":3}`, "the journal pruned events up to 4096, carrying 3 live records"},
	{"records deleted", kindRecords, `{"pruned":7,"older_than":"2026-03-04T10:42:03Z"}`, "the journal deleted 7 ended records older than " + at1s},
	{"records adopted", kindRecords, `{"adopted":2,"why":"records written by a build that did not back them by events"}`,
		"the journal adopted 2 records: records written by a build that did not back them by events"},

	// What cannot be read is its kind and a short form, never a panic.
	{"unknown kind", "calibrated", `{"device":"tank-1",  "offset": 2}`, `calibrated tank-1: {"device":"tank-1", "offset": 2}`},
	{"unknown kind without a body", "calibrated", ``, "calibrated tank-1"},
	{"not JSON", runtime.KindActed, `{"device":`, `acted tank-1: {"device":`},
	{"an array", runtime.KindRefused, `["why"]`, `refused tank-1: ["why"]`},
	{"a field of the wrong type", runtime.KindAlarm, `{"action":"raised","alarm":{"id":5}}`, `alarm tank-1: {"action":"raised","alarm":{"id":5}}`},
	{"a body without its subject", runtime.KindModeChanged, `{"by":"x"}`, `mode_changed tank-1: {"by":"x"}`},
	{"a long body", "calibrated", `{"note":"` + strings.Repeat("x", 300) + `"}`, `calibrated tank-1: {"note":"` + strings.Repeat("x", 71) + "…"},
}

// allKinds are the kinds the journal writes: runtime's, and
// runtime/journal's own (records, session).
var allKinds = []runtime.Kind{runtime.KindStarted, runtime.KindInvoked, runtime.KindObserved, runtime.KindRefused,
	runtime.KindFailed, runtime.KindApprovalRequested, runtime.KindApprovalAnswered, runtime.KindApprovalExpired,
	runtime.KindActed, runtime.KindAlarm, runtime.KindModeChanged, runtime.KindRuleAdded, runtime.KindRuleRevoked,
	runtime.KindDeviceOnline, runtime.KindDeviceOffline, runtime.KindEnded, runtime.KindRecovered, runtime.KindReconciled,
	runtime.KindConfigChanged, runtime.KindSafeDrive, runtime.KindDrift, runtime.KindScheduleSkipped,
	runtime.KindScheduleMissed, runtime.KindLink, runtime.KindLogin, runtime.KindCheckpoint, kindRecords, kindSession}

func TestEventSentence(t *testing.T) {
	covered := map[runtime.Kind]bool{}
	for _, tc := range sentenceCases {
		t.Run(tc.name, func(t *testing.T) {
			ev := runtime.Event{Seq: 7, At: at1, Kind: tc.kind, Device: "tank-1", Body: json.RawMessage(tc.body)}
			got := eventSentence(ev)
			if got != tc.want {
				t.Errorf("eventSentence(%s %s) =\n%q\nwant\n%q", tc.kind, tc.body, got, tc.want)
			}
			if _, ok := sentenceOf(ev); ok {
				covered[tc.kind] = true
			}
		})
	}
	for _, k := range allKinds {
		if _, ok := sentenceWriters[k]; !ok {
			t.Errorf("no sentence for kind %s", k)
		}
		if !covered[k] {
			t.Errorf("no case reads an event of kind %s as a sentence", k)
		}
	}
	for k := range sentenceWriters {
		if !slices.Contains(allKinds, k) {
			t.Errorf("a sentence for kind %s, which allKinds does not list", k)
		}
	}
}

// kindDecl is the declaration of an event kind in runtime's source.
var kindDecl = regexp.MustCompile(`(?m)^\s*(?:const\s+)?Kind\w*\s+(?:runtime\.)?Kind\s*=\s*"([a-z_]+)"`)

// TestEverySourceKindHasASentence reads runtime's source for the kinds it
// declares, so that a kind added there without a sentence here fails.
func TestEverySourceKindHasASentence(t *testing.T) {
	var files []string
	for _, dir := range []string{"../runtime", "../runtime/journal"} {
		fs, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(fs) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		files = append(files, fs...)
	}
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range kindDecl.FindAllSubmatch(src, -1) {
			found++
			k := runtime.Kind(m[1])
			if _, ok := sentenceWriters[k]; !ok {
				t.Errorf("%s declares kind %s, which has no sentence", f, k)
			}
			if !slices.Contains(allKinds, k) {
				t.Errorf("%s declares kind %s, which allKinds does not list", f, k)
			}
		}
	}
	if found < len(allKinds) {
		t.Errorf("found %d kinds declared in runtime, fewer than the %d known: the pattern is stale", found, len(allKinds))
	}
}

// FuzzEventSentence checks that any kind and body reads as a sentence:
// never a panic, never empty, valid UTF-8 of bounded length.
func FuzzEventSentence(f *testing.F) {
	for _, tc := range sentenceCases {
		f.Add(string(tc.kind), []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		got := eventSentence(runtime.Event{Kind: runtime.Kind(kind), Device: "d", Body: body})
		if got == "" || !utf8.ValidString(got) || utf8.RuneCountInString(got) > 3000 {
			t.Fatalf("eventSentence(%q, %q) = %q", kind, body, got)
		}
	})
}

// fakeJournal is a journal of the sequences first to last, whose reads
// are counted.
type fakeJournal struct {
	first, last uint64
	read        int
}

func (j *fakeJournal) events(_ context.Context, since uint64, limit int) ([]runtime.Event, error) {
	var out []runtime.Event
	for s := max(since+1, j.first); s <= j.last && len(out) < limit; s++ {
		k := runtime.KindObserved
		if s%10 == 0 {
			k = runtime.KindActed
		}
		out = append(out, runtime.Event{Seq: s, Kind: k})
	}
	j.read += len(out)
	return out, nil
}

func TestScanBack(t *testing.T) {
	acted := func(ev *runtime.Event) bool { return ev.Kind == runtime.KindActed }
	none := func(*runtime.Event) bool { return false }
	all := func(*runtime.Event) bool { return true }
	for _, tc := range []struct {
		name          string
		first, last   uint64
		before        uint64
		keep          func(*runtime.Event) bool
		n             int
		newest, lo    uint64
		more          bool
		maxRead       int
		journalFirstX uint64 // a journal pruned after the page learnt its first
	}{
		{name: "the newest page", first: 1, last: 100_000, before: 100_001, keep: all, n: 50, newest: 100_000, lo: 99_951, more: true, maxRead: journalWindow},
		{name: "a few match", first: 1, last: 100_000, before: 100_001, keep: acted, n: 50, newest: 100_000, lo: 99_501, more: true, maxRead: 2 * journalWindow},
		{name: "near the start", first: 1, last: 100_000, before: 31, keep: all, n: 30, newest: 30, lo: 1, maxRead: 30},
		{name: "a pruned journal", first: 9_001, last: 10_000, before: 9_041, keep: acted, n: 4, newest: 9_040, lo: 9_001, maxRead: 40},
		{name: "none match: the read is bounded", first: 1, last: 1_000_000, before: 1_000_001, keep: none, n: 0,
			lo: 1_000_001 - journalScan, more: true, maxRead: journalScan},
		{name: "pruned meanwhile", first: 1, journalFirstX: 9_990, last: 10_000, before: 10_001, keep: all, n: 11, newest: 10_000, lo: 1,
			maxRead: 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &fakeJournal{first: tc.first, last: tc.last}
			if tc.journalFirstX != 0 {
				j.first = tc.journalFirstX
			}
			evs, lo, more, err := scanBack(t.Context(), j.events, tc.before, tc.first, tc.keep)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != tc.n || lo != tc.lo || more != tc.more {
				t.Fatalf("scanBack(before %d) = %d events down to %d, more %v; want %d down to %d, more %v", tc.before, len(evs), lo, more,
					tc.n, tc.lo, tc.more)
			}
			for i := range evs {
				if evs[i].Seq >= tc.before || i > 0 && evs[i].Seq >= evs[i-1].Seq || !tc.keep(&evs[i]) {
					t.Fatalf("event %d of the page is %d: not newest first below %d, or not kept", i, evs[i].Seq, tc.before)
				}
			}
			if len(evs) > 0 && evs[0].Seq != tc.newest {
				t.Errorf("the page starts at %d, want %d", evs[0].Seq, tc.newest)
			}
			if j.read > tc.maxRead {
				t.Errorf("the page read %d events, want at most %d", j.read, tc.maxRead)
			}
		})
	}
}

var (
	journalLink = regexp.MustCompile(`<a href="([^"]*)" rel="(next|prev)">`)
	exportLink  = regexp.MustCompile(`<a href="(/journal/export[^"]*)">`)
	caption     = regexp.MustCompile(`<caption>([^<]*)</caption>`)
	rowSeqs     = regexp.MustCompile(`<tr id="ev-(\d+)"`)
)

// journalView is what a page of the journal shows.
type journalView struct {
	seqs         []uint64
	caption      string
	older, newer string
	export       string
	body         string
}

func (b *browser) journal(path string) journalView {
	b.t.Helper()
	code, body, _ := b.page(path)
	if code != http.StatusOK {
		b.t.Fatalf("GET %s = %d %.300s", path, code, body)
	}
	v := journalView{body: body}
	for _, m := range rowSeqs.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		v.seqs = append(v.seqs, n)
	}
	if m := caption.FindStringSubmatch(body); m != nil {
		v.caption = html.UnescapeString(m[1])
	}
	for _, m := range journalLink.FindAllStringSubmatch(body, -1) {
		if m[2] == "next" {
			v.older = html.UnescapeString(m[1])
		} else {
			v.newer = html.UnescapeString(m[1])
		}
	}
	if m := exportLink.FindStringSubmatch(body); m != nil {
		v.export = html.UnescapeString(m[1])
	}
	return v
}

// noteLinks journals n link events, the last of them synced.
func (s *site) noteLinks(t testing.TB, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.eng.Note(t.Context(), runtime.KindLink, "", runtime.LinkBody{Link: "uplink", State: "connected", Why: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	s.waitSeq(t)
}

// waitSeq waits until the newest event can be read.
func (s *site) waitSeq(t testing.TB) {
	t.Helper()
	last := s.eng.LastSeq()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := s.eng.Events(t.Context(), last-1, 1)
		if err == nil && len(evs) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %d never readable", last)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestJournalPageSentencesAndFilters(t *testing.T) {
	s := newSite(t, siteOptions{})
	s.expect("POST", "/api/v1/mode", "operator", `{"mode":"observe"}`, 200, `"name":"observe"`)
	s.expect("POST", "/api/v1/commands", "operator", `{"device":"valve-1","capability":"open","value":true}`, 200, `"outcome":"refused"`)
	if _, err := s.eng.Read(t.Context(), "test", "tank-1", "level"); err != nil {
		t.Fatal(err)
	}
	s.waitSeq(t)
	b := s.browser()
	if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	v := b.journal("/journal")
	for _, want := range []string{"mode changed from supervised to observe by operator (through the API)",
		"refused valve-1.open → true: mode observe does not permit it", "valve-1 came online", "<details><summary>",
		`&#34;kind&#34;: &#34;refused&#34;`} {
		if !strings.Contains(html.UnescapeString(v.body), html.UnescapeString(want)) {
			t.Errorf("the journal page does not say %q", want)
		}
	}
	if strings.Contains(v.body, "tank-1.level read") || !strings.Contains(v.caption, "readings hidden") {
		t.Errorf("readings are shown by default, or the page does not say they are hidden (%q)", v.caption)
	}
	if v.older != "" || v.newer != "" {
		t.Errorf("one page of events has links to others: %q %q", v.older, v.newer)
	}
	if !strings.Contains(b.journal("/journal?readings=1").body, "tank-1.level read 60") {
		t.Error("readings=1 does not show the readings")
	}
	if got := b.journal("/journal?kind=observed").body; !strings.Contains(got, "tank-1.level read 60") {
		t.Error("the readings chosen by kind are not shown")
	}
	// Filters by kind and device, kept in the export's link, escaped.
	v = b.journal("/journal?kind=refused,+acted&device=valve-1")
	if len(v.seqs) != 1 || !strings.Contains(v.body, "refused valve-1.open") || strings.Contains(v.body, "came online") {
		t.Errorf("kind=refused,acted&device=valve-1 shows %v", v.seqs)
	}
	if !strings.HasPrefix(v.caption, "1 matching event in ") {
		t.Errorf("the caption = %q", v.caption)
	}
	u, err := url.Parse(v.export)
	if err != nil || u.Path != "/journal/export" || u.Query().Get("kind") != "refused,acted" || u.Query().Get("device") != "valve-1" {
		t.Errorf("the export link = %q", v.export)
	}
	v = b.journal("/journal?device=" + url.QueryEscape(`a&b "c"<d> #e`))
	if u, err := url.Parse(v.export); err != nil || u.Query().Get("device") != `a&b "c"<d> #e` || len(u.Query()) != 1 {
		t.Errorf("the export link of an odd device = %q, %v", v.export, err)
	}
	code, export, _ := b.page(v.export)
	if code != http.StatusOK || export != "" {
		t.Errorf("the export of an odd device = %d %q", code, export)
	}
	// One run's events, in the page and in its export.
	evs, err := s.eng.Events(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var run string
	var ofRun []uint64
	for _, ev := range evs {
		if ev.Kind == runtime.KindRefused {
			run = ev.Run
		}
	}
	for _, ev := range evs {
		if run != "" && ev.Run == run {
			ofRun = append([]uint64{ev.Seq}, ofRun...)
		}
	}
	v = b.journal("/journal?run=" + url.QueryEscape(run))
	if run == "" || !slices.Equal(v.seqs, ofRun) || !strings.Contains(v.body, "Only the events of run "+run) {
		t.Errorf("run=%s shows %v, want %v", run, v.seqs, ofRun)
	}
	code, export, _ = b.page(v.export)
	if n := strings.Count(export, "\n"); code != http.StatusOK || n != len(ofRun) || !strings.Contains(v.export, "run="+run) {
		t.Errorf("the export of run %s (%s) = %d, %d events, want %d", run, v.export, code, n, len(ofRun))
	}
	// A run's readings are its steps, shown without asking.
	out := s.expect("POST", "/api/v1/plans/flush/start", "operator", `{"id":"j-1"}`, 202, `"plan":"flush"`)
	flush := regexp.MustCompile(`run-[0-9a-f]+`).FindString(out)
	if _, err := s.eng.Wait(t.Context(), flush); err != nil {
		t.Fatal(err)
	}
	s.waitSeq(t)
	if v := b.journal("/journal?run=" + flush); !strings.Contains(v.body, "tank-1.level read") || len(v.seqs) != 3 {
		t.Errorf("the events of run %s (%v) do not show its reading", flush, v.seqs)
	}
	// A chosen kind stays chosen.
	if !strings.Contains(b.journal("/journal?kind=alarm").body, `<option value="alarm" selected>`) {
		t.Error("the kind chosen is not selected")
	}
	// The chain is checked on request.
	if got := b.journal("/journal?verify=1").body; !strings.Contains(got, `class="card good" role="status"`) {
		t.Errorf("verify=1 does not report the chain:\n%.2000s", got)
	}
}

func TestJournalPaging(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser()
	if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	s.noteLinks(t, 130)
	last := s.eng.LastSeq()
	// Walk back through every page, then forward again.
	var back [][]uint64
	var all []uint64
	v := b.journal("/journal")
	for i := 0; ; i++ {
		if len(v.seqs) == 0 || len(v.seqs) > journalPageSize {
			t.Fatalf("page %d shows %d events", i, len(v.seqs))
		}
		want := fmt.Sprintf("%d events (readings hidden) in ", len(v.seqs))
		if !strings.HasPrefix(v.caption, want) || !strings.HasSuffix(v.caption, fmt.Sprintf("to %d.", last)) {
			t.Errorf("page %d: the caption %q, want %q… to %d", i, v.caption, want, last)
		}
		back = append(back, v.seqs)
		all = append(all, v.seqs...)
		if i > 0 && v.newer == "" {
			t.Errorf("page %d has no Newer link", i)
		}
		if v.older == "" {
			break
		}
		if !strings.Contains(v.older, "before=") {
			t.Fatalf("Older = %q", v.older)
		}
		v = b.journal(v.older)
	}
	if len(back) < 3 || len(back[0]) != journalPageSize {
		t.Fatalf("%d pages, the first of %d events", len(back), len(back[0]))
	}
	for i := 1; i < len(all); i++ {
		if all[i] != all[i-1]-1 {
			t.Fatalf("the pages skip or repeat an event: %d after %d", all[i], all[i-1])
		}
	}
	if all[0] != last || all[len(all)-1] != 1 {
		t.Errorf("the pages show %d to %d, want %d to 1", all[0], all[len(all)-1], last)
	}
	// Newer from the oldest page comes back through the same events.
	for i := len(back) - 2; i >= 0; i-- {
		if v.newer == "" {
			t.Fatalf("no Newer link before page %d", i)
		}
		v = b.journal(v.newer)
		if !slices.Equal(v.seqs, back[i]) && !(i == 0 && len(v.seqs) == len(back[0])) {
			t.Fatalf("Newer shows %v, want page %d, %v", v.seqs, i, back[i])
		}
	}
	if v.newer != "" {
		t.Errorf("the newest events have a Newer link %q", v.newer)
	}
	// Paging keeps the filter.
	v = b.journal("/journal?kind=link&before=" + strconv.FormatUint(last, 10))
	if len(v.seqs) != journalPageSize || v.seqs[0] != last-1 || !strings.Contains(v.older, "kind=link") || !strings.Contains(v.newer, "kind=link") {
		t.Errorf("kind=link before %d: %d events from %v, Older %q, Newer %q", last, len(v.seqs), v.seqs[:1], v.older, v.newer)
	}
	if v := b.journal("/journal?before=0"); len(v.seqs) != 0 || !strings.HasPrefix(v.caption, "No events before 0.") {
		t.Errorf("before=0 shows %v, %q", v.seqs, v.caption)
	}
	if v := b.journal("/journal?after=" + strconv.FormatUint(last, 10)); len(v.seqs) != 0 || v.newer != "" || v.older != "/journal" {
		t.Errorf("after the newest: %v, Newer %q, Older %q", v.seqs, v.newer, v.older)
	}
}

// TestJournalBadQuery: a bound that is not a sequence of this journal is a
// 400 naming the parameter.
func TestJournalBadQuery(t *testing.T) {
	s := newSite(t, siteOptions{})
	b := s.browser()
	if code := b.login("vera", "password-1"); code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	for _, tc := range []struct{ query, name string }{
		{"before=abc", "before"}, {"before=-1", "before"}, {"before=%2B5", "before"}, {"before=1&before=2", "before"},
		{"before=99999999", "before"}, {"after=1e3", "after"}, {"after=18446744073709551616", "after"},
		{"before=1&after=1", "before"},
	} {
		code, body, _ := b.page("/journal?" + tc.query)
		if code != http.StatusBadRequest || !strings.Contains(html.UnescapeString(body), `query "`+tc.name+`"`) {
			t.Errorf("GET /journal?%s = %d %.300s; want 400 naming %s", tc.query, code, body, tc.name)
		}
	}
}

// BenchmarkJournalPage serves pages of a journal of 20,000 events: the
// newest page, a page deep in it, and a filter that matches nothing,
// which reads at most journalScan events, not the journal.
func BenchmarkJournalPage(b *testing.B) {
	s := newSite(b, siteOptions{})
	s.noteLinks(b, 20_000)
	br := s.browser()
	if code := br.login("vera", "password-1"); code != http.StatusSeeOther {
		b.Fatalf("login = %d", code)
	}
	for _, tc := range []struct{ name, page string }{
		{"newest", "/journal"}, {"deep", "/journal?before=1000"}, {"no match", "/journal?kind=alarm"},
	} {
		page := tc.page
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if code, _, _ := br.page(page); code != http.StatusOK {
					b.Fatalf("GET %s = %d", page, code)
				}
			}
		})
	}
}
