package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/governance"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// guardedPump is minimal with a flow meter and a pump that has every
// safety feature in time.
const guardedPump = `gateway: {id: t}
drivers: [{name: sim, type: sim}]
devices:
  - id: tank-1
    driver: sim
    address: tank
    capabilities: [{name: level, kind: sensor, type: number}]
  - id: flow-1
    driver: sim
    address: flow
    capabilities: [{name: rate, kind: sensor, type: number}]
  - id: pump-1
    driver: sim
    address: pump
    capabilities:
      - name: "on"
        kind: actuator
        type: bool
        read_back: true
        poll: 10s
        effects: {reversible: true}
        safe: false
        ttl: 10m
        on_start: safe
        on_stop: keep
        while: [{sensor: tank-1.level, op: ">", value: 5, max_age: 20s}]
        confirm: {sensor: flow-1.rate, op: ">", value: 1, start_within: 2s, travel_within: 8s, watch: 3s, on_contradiction: safe}
alarms:
  max_shelve: 2h
  classes:
    drift: {priority: high, latching: true}
`

func TestSafetyInTimeConfig(t *testing.T) {
	b, err := Load("c.yaml", []byte(guardedPump))
	if err != nil {
		t.Fatal(err)
	}
	p := b.Policies["pump-1.on"]
	if p.Safe == nil || *p.Safe != value.Bool(false) || p.TTL != 10*time.Minute || p.OnStart != runtime.SafeDrive || p.OnStop != runtime.SafeKeep {
		t.Fatalf("policy %+v", p)
	}
	if len(p.While) != 1 || p.While[0] != (governance.Condition{Sensor: "tank-1.level", Op: governance.OpGT, Value: value.Number(5), MaxAge: 20 * time.Second}) {
		t.Fatalf("while %+v", p.While)
	}
	c := p.Confirm
	if c == nil || c.Sensor != "flow-1.rate" || c.StartWithin != 2*time.Second || c.Within != 8*time.Second || c.Watch != 3*time.Second || c.OnDiscrepancy != runtime.SafeDrive {
		t.Fatalf("confirm %+v", c)
	}
	if b.MaxShelve != 2*time.Hour || b.AlarmClasses[runtime.AlarmDrift] != (runtime.AlarmClass{Priority: runtime.PriorityHigh, Latching: true}) ||
		b.AlarmClasses[runtime.AlarmSafeDrive].Priority != runtime.PriorityCritical {
		t.Fatalf("alarms %v %+v", b.MaxShelve, b.AlarmClasses)
	}
	for _, d := range b.Devices {
		if d.ID == "pump-1" && d.Capabilities[0].Poll != 10*time.Second {
			t.Fatalf("an actuator with read_back is polled, to see it switched by hand: %+v", d.Capabilities[0])
		}
	}
}

func TestSafetyInTimeConfigErrors(t *testing.T) {
	edit := func(old, new string) string {
		if !strings.Contains(guardedPump, old) {
			t.Fatalf("guardedPump has no %q", old)
		}
		return strings.Replace(guardedPump, old, new, 1)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"ttl without safe", edit("        safe: false\n", ""), `c.yaml:22:14: devices[2].capabilities[0].ttl: a ttl needs a safe value to drive pump-1.on to (add safe:)`},
		{"while without safe", edit("        safe: false\n        ttl: 10m\n        on_start: safe\n", ""), `devices[2].capabilities[0].while: a running interlock needs a safe value`},
		{"ttl not reversible", edit("effects: {reversible: true}", "effects: {reversible: false}"), `c.yaml:23:14: devices[2].capabilities[0].ttl: a ttl reverts a reversible actuation; declare effects: {reversible: true} on pump-1.on`},
		{"bad ttl", edit("ttl: 10m", "ttl: forever"), `devices[2].capabilities[0].ttl: "forever" is not a positive duration`},
		{"ttl too short", edit("ttl: 10m", "ttl: 1ns"), `devices[2].capabilities[0].ttl: a ttl of 1ns is shorter than a second`},
		{"bad on_start", edit("on_start: safe", "on_start: off"), `c.yaml:24:19: devices[2].capabilities[0].on_start: on_start is safe or keep, not "off"`},
		{"bad on_stop", edit("on_stop: keep", "on_stop: later"), `devices[2].capabilities[0].on_stop: on_stop is safe or keep, not "later"`},
		{"while on itself", edit("while: [{sensor: tank-1.level", "while: [{sensor: pump-1.on"), `devices[2].capabilities[0].while[0].sensor: a running interlock reads another device`},
		{"while unknown", edit("while: [{sensor: tank-1.level", "while: [{sensor: tank-9.level"), `devices[2].capabilities[0].while[0].sensor: unknown reading "tank-9.level"`},
		{"start after travel", edit("start_within: 2s", "start_within: 9s"), `devices[2].capabilities[0].confirm.start_within: start_within 9s is longer than travel_within 8s`},
		{"within twice", edit("travel_within: 8s", "travel_within: 8s, within: 4s"), `devices[2].capabilities[0].confirm.within: within is the older name of travel_within; write one of them`},
		{"bad on_contradiction", edit("on_contradiction: safe", "on_contradiction: panic"), `confirm.on_contradiction: on_contradiction is alarm or safe, not "panic"`},
		{"safe outside envelope", edit("effects: {reversible: true}", "effects: {reversible: true}\n        envelope: {allowed: [true]}"), `devices[2].capabilities[0].safe: the safe value false is outside the envelope`},
		{"when without sensor", edit("confirm: {sensor: flow-1.rate, op: \">\", value: 1,", "confirm: {read_back: true, when: true,"), `confirm.when: when names the value a sensor condition confirms; there is no sensor`},
		{"sensor polled", guardedPump, ""},
		{"sensor with ttl", strings.Replace(guardedPump, "[{name: level, kind: sensor, type: number}]", "[{name: level, kind: sensor, type: number, ttl: 1m}]", 1), `a sensor has no effects, envelope, interlocks, confirm, safe value, ttl, while, on_start or on_stop`},
		{"unknown alarm kind", edit("drift: {priority", "dirft: {priority"), `alarms.classes.dirft: no alarm kind "dirft" (want one of discrepancy, unconfirmed, drift, interlock, safe_drive, locked, schedule)`},
		{"bad priority", edit("priority: high", "priority: urgent"), `alarms.classes.drift.priority: priority "urgent" is not one of critical, high, medium, low`},
		{"bad max_shelve", edit("max_shelve: 2h", "max_shelve: -1h"), `alarms.max_shelve: "-1h" is not a positive duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("c.yaml", []byte(tc.yaml))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "c.yaml:") {
				t.Fatalf("Load error =\n  %v\nwant it to contain\n  %s", err, tc.want)
			}
		})
	}
}

// TestUplinkForwardsAlarmsUnlessTold: alarms go upstream by default, as
// the rest does, and forward.alarms: false keeps them on this gateway.
func TestUplinkForwardsAlarmsUnlessTold(t *testing.T) {
	for _, c := range []struct {
		forward string
		want    bool
	}{{"", true}, {", forward: {alarms: false}", false}} {
		b, err := Load("c.yaml", []byte(minimal+"uplink: {url: \"tcp://site:1883\""+c.forward+"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if f := b.Uplink.Forward; f.Alarms != c.want || !f.Events || !f.Receipts {
			t.Fatalf("uplink %q forwards %+v, want alarms %v", c.forward, f, c.want)
		}
	}
}
