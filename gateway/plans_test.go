package gateway

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
)

// withPlan is minimal with one plan, water, whose lines (each indented
// under it) start on line 20 of the file.
func withPlan(lines ...string) string {
	var b strings.Builder
	b.WriteString(minimal + "plans:\n  - name: water\n")
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	b.WriteString("    steps: [{read: tank-1.level}]\n")
	return b.String()
}

// badPlans are plans whose schedule is wrong, with the error each gives:
// the file, the line and column, the key and what is wrong.
var badPlans = []struct {
	name, yaml, want string
}{
	{"hour out of range", withPlan(`at: "25:00"`),
		`c.yaml:20:9: plans[0].at: "25:00" is not a time of day (write it like 06:30, from 00:00 to 23:59)`},
	{"a duration for a time", withPlan(`at: ["06:30", 6h]`),
		`c.yaml:20:19: plans[0].at[1]: "6h" is not a time of day (write it like 06:30, from 00:00 to 23:59)`},
	{"minutes out of range", withPlan("at:", `  - "06:60"`),
		`c.yaml:21:9: plans[0].at[0]: "06:60" is not a time of day`},
	{"no colon", withPlan("at: 0630"), `c.yaml:20:9: plans[0].at: "0630" is not a time of day`},
	{"a mapping for a time", withPlan("at: {hour: 6}"), `c.yaml:20:9: plans[0].at: expected a time of day like 06:30, found a list or a mapping`},
	{"no times", withPlan("at: []"), `c.yaml:20:9: plans[0].at: at lists no time of day`},
	{"a time twice", withPlan(`at: ["06:30", "6:30"]`), `c.yaml:20:19: plans[0].at[1]: 06:30 appears twice in at`},
	{"every and at", withPlan("every: 10m", `at: "06:30"`),
		`c.yaml:21:9: plans[0].at: every and at are exclusive: a plan starts every so long or at times of day, not both`},
	{"unknown zone", withPlan(`at: "06:30"`, "zone: Mars/Olympus_Mons"),
		`c.yaml:21:11: plans[0].zone: unknown time zone "Mars/Olympus_Mons" (write an IANA name like Europe/Berlin`},
	{"a path for a zone", withPlan(`at: "06:30"`, "zone: ../../etc/passwd"), `c.yaml:21:11: plans[0].zone: unknown time zone "../../etc/passwd"`},
	{"unknown day", withPlan(`at: "06:30"`, "weekdays: [mon, funday]"),
		`c.yaml:21:21: plans[0].weekdays[1]: "funday" is not a day of the week (write mon, tue, wed, thu, fri, sat or sun)`},
	{"a day twice", withPlan(`at: "06:30"`, "weekdays: [mon, Monday]"), `c.yaml:21:21: plans[0].weekdays[1]: Monday appears twice in weekdays`},
	{"no days", withPlan(`at: "06:30"`, "weekdays: []"), `c.yaml:21:15: plans[0].weekdays: weekdays lists no day`},
	{"days as one word", withPlan(`at: "06:30"`, "weekdays: mon"), `c.yaml:21:15: plans[0].weekdays: expected a list, found the text "mon"`},
	{"zone without at", withPlan("zone: Europe/Berlin"), `c.yaml:20:11: plans[0].zone: zone is the time zone of at; without at it means nothing`},
	{"weekdays without at", withPlan("every: 1h", "weekdays: [mon]"), `c.yaml:21:15: plans[0].weekdays: weekdays are the days at fires on; without at they mean nothing`},
	{"catch_up without at", withPlan("every: 1h", "catch_up: true"), `c.yaml:21:15: plans[0].catch_up: catch_up runs a plan whose at was missed; without at there is nothing to catch up`},
	{"catch_up as yes", withPlan(`at: "06:30"`, "catch_up: yes"), `c.yaml:21:15: plans[0].catch_up: "yes" is not a boolean in YAML 1.2: write true or false`},
	{"a plan called command", strings.Replace(withPlan(), "name: water", "name: command", 1),
		`c.yaml:19:11: plans[0].name: plan name command is reserved for single commands; choose another name`},
}

func TestPlanScheduleErrorsNameTheLine(t *testing.T) {
	if _, err := Load("c.yaml", []byte(withPlan(`at: "06:30"`))); err != nil {
		t.Fatalf("a plan at 06:30: %v", err)
	}
	for _, tc := range badPlans {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := Load("c.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("Load succeeded (%+v), want %q", b.Plans, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error =\n  %v\nwant it to contain\n  %s", err, tc.want)
			}
		})
	}
}

func TestPlanSchedulesLoad(t *testing.T) {
	y := minimal + `plans:
  - name: water
    at: ["06:30", "18:00"]
    zone: Europe/Berlin
    weekdays: [mon, Wed, friday]
    catch_up: true
    steps: [{read: tank-1.level}]
  - name: feed
    at: 7:15
    steps: [{read: tank-1.level}]
  - name: look
    every: 10m
    steps: [{read: tank-1.level}]
`
	b, err := Load("c.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	type sched struct {
		Name     string
		Every    time.Duration
		Times    string
		Zone     string
		Weekdays string
		CatchUp  bool
	}
	var got []sched
	for _, p := range b.Plans {
		s := sched{Name: p.Name, Every: p.Every, CatchUp: p.CatchUp}
		if p.At != nil {
			for _, t := range p.At.Times {
				s.Times += t.String() + " "
			}
			s.Weekdays = p.At.Weekdays.String()
			if p.At.Zone != nil {
				s.Zone = p.At.Zone.String()
			}
		}
		got = append(got, s)
	}
	want := []sched{
		{Name: "water", Times: "06:30 18:00 ", Zone: "Europe/Berlin", Weekdays: "mon,wed,fri", CatchUp: true},
		{Name: "feed", Times: "07:15 ", Weekdays: "every day"},
		{Name: "look", Every: 10 * time.Minute},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plans = %+v\nwant %+v", got, want)
	}
	if _, err := runtime.New(context.Background(), runtime.Options{Registry: devices.NewRegistry(), Journal: runtimetest.NewMemJournal(),
		Policies: b.Policies, Mode: b.Mode, Plans: b.Plans}); err != nil {
		t.Fatalf("the engine refuses the plans: %v", err)
	}
}

func FuzzPlanSchedule(f *testing.F) {
	for _, tc := range badPlans {
		f.Add(tc.yaml)
	}
	f.Add(withPlan(`at: ["06:30", "18:00"]`, "zone: Australia/Sydney", "weekdays: [sat, sun]", "catch_up: true"))
	f.Fuzz(func(t *testing.T, y string) {
		b, err := Load("f.yaml", []byte(y))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if _, err := runtime.New(context.Background(), runtime.Options{Registry: devices.NewRegistry(), Journal: runtimetest.NewMemJournal(),
			Policies: b.Policies, Modes: b.Modes, Mode: b.Mode, Rules: b.Rules, Plans: b.Plans}); err != nil {
			t.Fatalf("Load accepted plans the engine refuses: %v", err)
		}
	})
}
