package runtime_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
	"github.com/shadowgate/shadowgate/value"
)

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func times(t testing.TB, ss ...string) []runtime.TimeOfDay {
	t.Helper()
	out := make([]runtime.TimeOfDay, len(ss))
	for i, s := range ss {
		tod, err := runtime.ParseTimeOfDay(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = tod
	}
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// The DST changes of 2025 the cases cross:
//
//	Europe/Berlin        spring 2025-03-30 02:00 CET -> 03:00 CEST (01:00Z)
//	                     fall   2025-10-26 03:00 CEST -> 02:00 CET (01:00Z)
//	America/New_York     spring 2025-03-09 02:00 EST -> 03:00 EDT (07:00Z)
//	                     fall   2025-11-02 02:00 EDT -> 01:00 EST (06:00Z)
//	Australia/Sydney     fall   2025-04-06 03:00 AEDT -> 02:00 AEST (16:00Z on the 5th)
//	                     spring 2025-10-05 02:00 AEST -> 03:00 AEDT (16:00Z on the 4th)
var nextCases = []struct {
	name     string
	zone     string
	at       []string
	weekdays []time.Weekday
	after    string // RFC 3339
	want     string // RFC 3339, in the zone
}{
	{"berlin before the time", "Europe/Berlin", []string{"06:30"}, nil, "2025-03-29T06:00:00+01:00", "2025-03-29T06:30:00+01:00"},
	{"berlin at the time is strictly after", "Europe/Berlin", []string{"06:30"}, nil, "2025-03-29T06:30:00+01:00", "2025-03-30T06:30:00+02:00"},
	{"berlin 06:30 across spring", "Europe/Berlin", []string{"06:30"}, nil, "2025-03-29T07:00:00+01:00", "2025-03-30T06:30:00+02:00"},
	{"berlin 06:30 across fall", "Europe/Berlin", []string{"06:30"}, nil, "2025-10-25T07:00:00+02:00", "2025-10-26T06:30:00+01:00"},
	{"berlin 02:30 in the gap fires as the clocks jump", "Europe/Berlin", []string{"02:30"}, nil, "2025-03-30T00:00:00+01:00", "2025-03-30T03:00:00+02:00"},
	{"berlin after the gap's firing, the next day", "Europe/Berlin", []string{"02:30"}, nil, "2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"},
	{"berlin the gap and its end fire once", "Europe/Berlin", []string{"02:30", "03:00"}, nil, "2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"},
	{"berlin 02:30 twice fires first on summer time", "Europe/Berlin", []string{"02:30"}, nil, "2025-10-26T00:00:00+02:00", "2025-10-26T02:30:00+02:00"},
	{"berlin 02:30 twice never again an hour later", "Europe/Berlin", []string{"02:30"}, nil, "2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"},
	{"berlin between the two 02:30s", "Europe/Berlin", []string{"02:30"}, nil, "2025-10-26T02:00:00+01:00", "2025-10-27T02:30:00+01:00"},
	{"berlin times out of order", "Europe/Berlin", []string{"18:00", "06:30"}, nil, "2025-03-29T07:00:00+01:00", "2025-03-29T18:00:00+01:00"},
	{"berlin weekdays skip the weekend", "Europe/Berlin", []string{"06:30"}, []time.Weekday{time.Monday, time.Friday}, "2025-03-28T07:00:00+01:00", "2025-03-31T06:30:00+02:00"},
	{"berlin weekdays by the zone's date", "Europe/Berlin", []string{"00:30"}, []time.Weekday{time.Saturday}, "2025-03-28T23:00:00Z", "2025-03-29T00:30:00+01:00"},
	{"new york 06:30 across spring", "America/New_York", []string{"06:30"}, nil, "2025-03-08T07:00:00-05:00", "2025-03-09T06:30:00-04:00"},
	{"new york 06:30 across fall", "America/New_York", []string{"06:30"}, nil, "2025-11-01T07:00:00-04:00", "2025-11-02T06:30:00-05:00"},
	{"new york 02:30 in the gap", "America/New_York", []string{"02:30"}, nil, "2025-03-09T00:00:00-05:00", "2025-03-09T03:00:00-04:00"},
	{"new york 01:30 twice, first", "America/New_York", []string{"01:30"}, nil, "2025-11-02T00:00:00-04:00", "2025-11-02T01:30:00-04:00"},
	{"new york 01:30 twice, once", "America/New_York", []string{"01:30"}, nil, "2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"},
	{"sydney 06:30 across fall", "Australia/Sydney", []string{"06:30"}, nil, "2025-04-05T07:00:00+11:00", "2025-04-06T06:30:00+10:00"},
	{"sydney 06:30 across spring", "Australia/Sydney", []string{"06:30"}, nil, "2025-10-04T07:00:00+10:00", "2025-10-05T06:30:00+11:00"},
	{"sydney 02:30 twice, first", "Australia/Sydney", []string{"02:30"}, nil, "2025-04-06T00:00:00+11:00", "2025-04-06T02:30:00+11:00"},
	{"sydney 02:30 twice, once", "Australia/Sydney", []string{"02:30"}, nil, "2025-04-06T02:30:00+11:00", "2025-04-07T02:30:00+10:00"},
	{"sydney 02:30 in the gap", "Australia/Sydney", []string{"02:30"}, nil, "2025-10-05T00:00:00+10:00", "2025-10-05T03:00:00+11:00"},
	{"utc midnight", "UTC", []string{"00:00"}, nil, "2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z"},
}

func TestClockScheduleNext(t *testing.T) {
	for _, tc := range nextCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &runtime.ClockSchedule{Times: times(t, tc.at...), Zone: zone(t, tc.zone), Weekdays: runtime.WeekdaysOf(tc.weekdays...)}
			got := c.Next(utc(tc.after))
			if want := utc(tc.want); !got.Equal(want) || got.Location() != c.Zone {
				t.Errorf("Next(%s) = %s, want %s in %s", tc.after, got.Format(time.RFC3339), want.In(c.Zone).Format(time.RFC3339), tc.zone)
			}
		})
	}
}

// Over a whole year, in each zone, every time of day on the half hour
// fires exactly once a day at that time on the wall clock, except those
// a spring-forward gap swallows: they fire once, with the time at the end
// of the gap, as the clocks jump.
func TestClockScheduleYear(t *testing.T) {
	var all []string
	for h := range 24 {
		for _, m := range []string{":00", ":30"} {
			all = append(all, string(rune('0'+h/10))+string(rune('0'+h%10))+m)
		}
	}
	for _, name := range []string{"Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe", "UTC"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			loc := zone(t, name)
			c := &runtime.ClockSchedule{Times: times(t, all...), Zone: loc}
			from := time.Date(2025, 1, 1, 0, 0, 0, 0, loc)
			to := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
			seen := map[string]int{}
			for f := c.Next(from.Add(-time.Nanosecond)); f.Before(to); f = c.Next(f) {
				seen[f.Format("2006-01-02 15:04")]++
				if f.Minute()%30 != 0 || f.Second() != 0 {
					t.Fatalf("firing %s is not on a half hour", f)
				}
			}
			for k, n := range seen {
				if n != 1 {
					t.Errorf("%s fired %d times", k, n)
				}
			}
			// A wall time that is swallowed by a gap is missing from
			// seen; one that happens twice is counted once.
			missing := 0
			for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
				for _, s := range all {
					if _, ok := seen[d.Format("2006-01-02")+" "+s]; !ok {
						missing++
					}
				}
			}
			wantMissing := map[string]int{"Europe/Berlin": 2, "America/New_York": 2, "Australia/Sydney": 2, "Australia/Lord_Howe": 1, "UTC": 0}[name]
			if missing != wantMissing {
				t.Errorf("%d wall times never fired, want %d (those a spring-forward gap swallows)", missing, wantMissing)
			}
		})
	}
}

func TestClockScheduleMissed(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	c := &runtime.ClockSchedule{Times: times(t, "06:30", "18:00"), Zone: berlin, Weekdays: runtime.WeekdaysOf(time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday)}
	// Friday 12:00 to Tuesday 12:00: Friday 18:00, Monday twice, Tuesday
	// 06:30.
	n, first, last, atLeast := c.Missed(time.Date(2025, 3, 28, 12, 0, 0, 0, berlin), time.Date(2025, 4, 1, 12, 0, 0, 0, berlin))
	if n != 4 || atLeast || !first.Equal(time.Date(2025, 3, 28, 18, 0, 0, 0, berlin)) || !last.Equal(time.Date(2025, 4, 1, 6, 30, 0, 0, berlin)) {
		t.Errorf("Missed = %d, %s, %s, %v; want 4 from Friday 18:00 to Tuesday 06:30", n, first, last, atLeast)
	}
	// A journal written while the wall clock was unset: counting stops,
	// the last firing is still the true one.
	n, _, last, atLeast = c.Missed(time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 4, 1, 12, 0, 0, 0, berlin))
	if n < 10000 || !atLeast || !last.Equal(time.Date(2025, 4, 1, 6, 30, 0, 0, berlin)) {
		t.Errorf("Missed since 1970 = %d, last %s, at least %v; want a bound, Tuesday 06:30, at least", n, last, atLeast)
	}
	if n, _, _, _ := c.Missed(time.Date(2025, 4, 1, 12, 0, 0, 0, berlin), time.Date(2025, 3, 1, 0, 0, 0, 0, berlin)); n != 0 {
		t.Errorf("Missed with the clock behind = %d, want 0", n)
	}
}

func TestParseTimeOfDayAndWeekday(t *testing.T) {
	for _, s := range []string{"00:00", "6:30", "06:30", "23:59"} {
		if _, err := runtime.ParseTimeOfDay(s); err != nil {
			t.Errorf("ParseTimeOfDay(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"25:00", "24:00", "6h", "06:60", "0630", "06:30:00", "-1:30", " 06:30", "06:3", ""} {
		if _, err := runtime.ParseTimeOfDay(s); err == nil || !strings.Contains(err.Error(), "is not a time of day (write it like 06:30") {
			t.Errorf("ParseTimeOfDay(%q) = %v, want an error saying how to write one", s, err)
		}
	}
	for s, want := range map[string]time.Weekday{"mon": time.Monday, "Sunday": time.Sunday, "SAT": time.Saturday} {
		if got, err := runtime.ParseWeekday(s); err != nil || got != want {
			t.Errorf("ParseWeekday(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := runtime.ParseWeekday("mo"); err == nil {
		t.Error(`ParseWeekday("mo") succeeded`)
	}
	if got := runtime.WeekdaysOf(time.Sunday, time.Monday, time.Friday).String(); got != "mon,fri,sun" {
		t.Errorf("Weekdays.String() = %q, want mon,fri,sun", got)
	}
}

func FuzzClockScheduleNext(f *testing.F) {
	f.Add(int64(1743296400), uint8(2), uint8(30), uint8(0), "Europe/Berlin")
	f.Add(int64(1761440400), uint8(1), uint8(30), uint8(0x41), "America/New_York")
	f.Add(int64(1743868800), uint8(2), uint8(30), uint8(0x7f), "Australia/Sydney")
	f.Fuzz(func(t *testing.T, sec int64, h, m, days uint8, name string) {
		loc, err := time.LoadLocation(name)
		if err != nil || sec < -1e11 || sec > 1e11 {
			return
		}
		c := &runtime.ClockSchedule{Times: []runtime.TimeOfDay{{Hour: int(h % 24), Minute: int(m % 60)}}, Zone: loc, Weekdays: runtime.Weekdays(days & 0x7f)}
		after := time.Unix(sec, 0)
		got := c.Next(after)
		if !got.After(after) {
			t.Fatalf("Next(%s) = %s, not after it", after, got)
		}
		if got.Sub(after) > 8*24*time.Hour+2*time.Hour {
			t.Fatalf("Next(%s) = %s, more than a week later", after, got)
		}
	})
}

// clockPlan is a one-step plan that reads the tank, started by the clock.
func clockPlan(name string, at *runtime.ClockSchedule) runtime.Plan {
	return runtime.Plan{Name: name, At: at, Lease: runtime.Lease{MaxSteps: 5},
		Steps: []runtime.PlanStep{{Op: runtime.OpRead, Device: "tank-1", Capability: "level"}}}
}

// fakeWall returns a wall clock that starts at base and goes with the
// bubble's clock, plus jump: synctest's own clock starts in 2000.
func fakeWall(base time.Time, jump *atomic.Int64) func() time.Time {
	start := time.Now()
	return func() time.Time {
		t := base.Add(time.Since(start))
		if jump != nil {
			t = t.Add(time.Duration(jump.Load()))
		}
		return t
	}
}

// running starts w's engine and stops it when the test ends.
func running(t *testing.T, w *world) {
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- w.e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// scheduled returns the start times of the runs the schedule started, by
// plan, in the plan's zone, oldest first.
func scheduled(w *world, loc *time.Location) map[string][]string {
	out := map[string][]string{}
	runs := w.e.Runs()
	for i := len(runs) - 1; i >= 0; i-- {
		if r := runs[i]; r.Origin == "schedule" {
			out[r.Plan] = append(out[r.Plan], r.StartedAt.In(loc).Format("2006-01-02 15:04 MST"))
		}
	}
	return out
}

// A plan at 06:30 in Berlin starts at 06:30 on the wall clock on both
// sides of a change of daylight saving time; weekdays are honoured; a
// time in the spring-forward gap starts once as the clocks jump, and a
// time that happens twice in the fall starts once.
func TestClockPlansAcrossDST(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to string // local, Europe/Berlin: Saturday to Monday
		want     map[string][]string
	}{
		{"spring", "2025-03-29 06:00", "2025-03-31 06:31", map[string][]string{
			"daily":   {"2025-03-29 06:30 CET", "2025-03-30 06:30 CEST", "2025-03-31 06:30 CEST"},
			"sun-mon": {"2025-03-30 06:30 CEST", "2025-03-31 06:30 CEST"},
			"night":   {"2025-03-30 03:00 CEST", "2025-03-31 02:30 CEST"},
		}},
		{"fall", "2025-10-25 06:00", "2025-10-27 06:31", map[string][]string{
			"daily":   {"2025-10-25 06:30 CEST", "2025-10-26 06:30 CET", "2025-10-27 06:30 CET"},
			"sun-mon": {"2025-10-26 06:30 CET", "2025-10-27 06:30 CET"},
			"night":   {"2025-10-26 02:30 CEST", "2025-10-27 02:30 CET"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				berlin := zone(t, "Europe/Berlin")
				base, err := time.ParseInLocation("2006-01-02 15:04", tc.from, berlin)
				if err != nil {
					t.Fatal(err)
				}
				end, err := time.ParseInLocation("2006-01-02 15:04", tc.to, berlin)
				if err != nil {
					t.Fatal(err)
				}
				w := newWorld(t, func(s *setup) {
					s.opts.Now = fakeWall(base, nil)
					s.opts.Plans = []runtime.Plan{
						clockPlan("daily", &runtime.ClockSchedule{Times: times(t, "06:30"), Zone: berlin}),
						clockPlan("sun-mon", &runtime.ClockSchedule{Times: times(t, "06:30"), Zone: berlin, Weekdays: runtime.WeekdaysOf(time.Sunday, time.Monday)}),
						clockPlan("night", &runtime.ClockSchedule{Times: times(t, "02:30"), Zone: berlin}),
					}
				})
				running(t, w)
				time.Sleep(end.Sub(base)) // two days: each simulated second runs the engine's sweep
				synctest.Wait()
				if got := scheduled(w, berlin); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("scheduled starts = %v\nwant %v", got, tc.want)
				}
			})
		})
	}
}

// A second start of a plan while a run of it has not ended is refused,
// whoever asks, naming the run; a repeat of the same request id is not a
// second start; once the run ends the plan starts again. A parked run
// counts as not ended, and its approval is named.
func TestOneRunOfAPlanAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		soak := runtime.Plan{Name: "soak", Lease: runtime.Lease{MaxSteps: 5},
			Steps: []runtime.PlanStep{{Op: runtime.OpWait, Wait: time.Minute}}}
		pump := runtime.Plan{Name: "pump", Lease: runtime.Lease{MaxSteps: 5, MaxActuations: 1},
			Steps: []runtime.PlanStep{{Op: runtime.OpWrite, Device: "pump-1", Capability: "on", Value: on}}}
		race := soak
		race.Name = "race"
		w := newWorld(t, func(s *setup) { s.opts.Plans = []runtime.Plan{soak, pump, race} })
		first, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "soak", Principal: "console:bob", Origin: "console", RequestID: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, who := range []runtime.StartPlan{
			{Plan: "soak", Principal: "console:bob", Origin: "console"},
			{Plan: "soak", Principal: "mqtt:alice", Origin: "mqtt", RequestID: "m1"},
			{Plan: "soak", Principal: "schedule:soak", Origin: "schedule"},
		} {
			_, err := w.e.StartPlan(w.ctx, who)
			var pr *runtime.PlanRunningError
			if !errors.Is(err, runtime.ErrPlanRunning) || !errors.As(err, &pr) || pr.Run != first.ID || !strings.Contains(err.Error(), first.ID) {
				t.Fatalf("second start by %s = %v; want ErrPlanRunning naming %s", who.Principal, err, first.ID)
			}
		}
		again, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "soak", Principal: "console:bob", Origin: "console", RequestID: "r1"})
		if err != nil || again.ID != first.ID {
			t.Fatalf("the same request again = %+v, %v; want run %s", again, err, first.ID)
		}
		if _, err := w.e.Wait(w.ctx, first.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "soak", Principal: "mqtt:alice", Origin: "mqtt", RequestID: "m1"}); err != nil {
			t.Fatalf("start after the run ended = %v", err)
		}

		// Starts at once: one wins.
		var wg sync.WaitGroup
		var won atomic.Int32
		for i := range 8 {
			wg.Go(func() {
				_, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "race", Principal: "api:bot" + string(rune('0'+i)), Origin: "api"})
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, runtime.ErrPlanRunning):
					t.Errorf("a start at once = %v", err)
				}
			})
		}
		wg.Wait()
		if n := won.Load(); n != 1 {
			t.Errorf("%d of 8 starts at once started the plan, want 1", n)
		}

		parked, err := w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "pump", Principal: "console:bob", Origin: "console"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		aps := w.e.Approvals()
		if len(aps) != 1 {
			t.Fatalf("approvals = %+v, want the pump's", aps)
		}
		_, err = w.e.StartPlan(w.ctx, runtime.StartPlan{Plan: "pump", Principal: "api:carol", Origin: "api"})
		if !errors.Is(err, runtime.ErrPlanRunning) || !strings.Contains(err.Error(), parked.ID) || !strings.Contains(err.Error(), aps[0].ID) {
			t.Fatalf("start while parked = %v; want ErrPlanRunning naming %s and approval %s", err, parked.ID, aps[0].ID)
		}
	})
}

// A schedule that comes round while its plan's run has not ended skips
// the start and journals it, naming the run; runs never overlap.
func TestScheduleSkipsWhileARunGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := runtime.Plan{Name: "slow", Every: 10 * time.Second, Lease: runtime.Lease{MaxSteps: 5},
			Steps: []runtime.PlanStep{{Op: runtime.OpWait, Wait: 25 * time.Second}}}
		w := newWorld(t, func(s *setup) { s.opts.Plans = []runtime.Plan{slow} })
		running(t, w)
		time.Sleep(65 * time.Second)
		synctest.Wait()
		// Ticks at 10s (starts, ends at 35s), 20s and 30s skipped, 40s
		// (starts, ends at 65s), 50s and 60s skipped.
		var runs []runtime.RunRecord
		for _, r := range w.e.Runs() {
			if r.Plan == "slow" {
				runs = append(runs, r)
			}
		}
		if len(runs) != 2 {
			t.Fatalf("runs = %+v, want 2", runs)
		}
		evs, _ := w.e.Events(w.ctx, 0, 0)
		var skipped []string
		for _, ev := range evs {
			if ev.Kind != runtime.KindScheduleSkipped {
				continue
			}
			var b runtime.ScheduleSkippedBody
			if err := ev.DecodeBody(&b); err != nil {
				t.Fatal(err)
			}
			if b.Plan != "slow" || !strings.Contains(b.Why, b.Run) {
				t.Errorf("skip %+v", b)
			}
			skipped = append(skipped, b.Run)
		}
		older, newer := runs[1].ID, runs[0].ID // Runs is newest first
		if want := []string{older, older, newer, newer}; !reflect.DeepEqual(skipped, want) {
			t.Errorf("skips name the runs %v, want the run going: %v", skipped, want)
		}
	})
}

// missedBodies returns the schedule_missed bodies in w's journal by plan.
func missedBodies(t *testing.T, w *world) map[string]runtime.ScheduleMissedBody {
	t.Helper()
	evs, _ := w.e.Events(w.ctx, 0, 0)
	out := map[string]runtime.ScheduleMissedBody{}
	for _, ev := range evs {
		if ev.Kind != runtime.KindScheduleMissed {
			continue
		}
		var b runtime.ScheduleMissedBody
		if err := ev.DecodeBody(&b); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[b.Plan]; dup {
			t.Errorf("plan %s reported missed twice", b.Plan)
		}
		out[b.Plan] = b
	}
	return out
}

// After a restart with a gap, each clock plan's missed firings are
// reported once, counted, with the first and the last, and stand as a
// cleared, unacknowledged alarm; they are not run, except once for a plan
// that catches up. A first start misses nothing.
func TestMissedSchedulesAfterARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		berlin := zone(t, "Europe/Berlin")
		plans := []runtime.Plan{
			clockPlan("water", &runtime.ClockSchedule{Times: times(t, "06:30"), Zone: berlin}),
			clockPlan("feed", &runtime.ClockSchedule{Times: times(t, "06:30", "18:00"), Zone: berlin}),
		}
		plans[1].CatchUp = true
		j := runtimetest.NewMemJournal()
		// Monday 05:00: the first start misses nothing, and the gateway
		// stops before 06:30.
		monday := time.Date(2025, 3, 24, 5, 0, 0, 0, berlin)
		first := newWorld(t, func(s *setup) {
			s.opts.Now, s.opts.Plans = fakeWall(monday, nil), plans
			s.journal = func(*runtimetest.MemJournal) runtime.Journal { return j }
		})
		ctx, cancel := context.WithCancel(first.ctx)
		done := make(chan error, 1)
		go func() { done <- first.e.Run(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := missedBodies(t, first); len(got) != 0 || len(scheduled(first, berlin)) != 0 {
			t.Fatalf("a first start reported %+v and ran %v; want nothing", got, scheduled(first, berlin))
		}
		first.do("console:bob", "look", "tank-1", "level", value.Value{}) // the last event: Monday 05:01
		cancel()
		<-done

		// Thursday 17:00: water missed Monday to Thursday at 06:30;
		// feed those and three at 18:00.
		thursday := time.Date(2025, 3, 27, 17, 0, 0, 0, berlin)
		second := newWorld(t, func(s *setup) {
			s.opts.Now, s.opts.Plans = fakeWall(thursday, nil), plans
			s.journal = func(*runtimetest.MemJournal) runtime.Journal { return j }
		})
		running(t, second)
		time.Sleep(time.Minute)
		synctest.Wait()
		got := missedBodies(t, second)
		feed, water := got["feed"], got["water"]
		whys := map[string]string{"feed": feed.Why, "water": water.Why}
		at := func(d, hm string) time.Time {
			t, _ := time.ParseInLocation("2006-01-02 15:04", "2025-03-"+d+" "+hm, berlin)
			return t
		}
		want := map[string]runtime.ScheduleMissedBody{
			"water": {Plan: "water", Cause: runtime.MissedNotRunning, Count: 4, First: at("24", "06:30"), Last: at("27", "06:30"),
				Why: "plan water missed 4 scheduled starts while the gateway was not running (first 2025-03-24 06:30 CET, last 2025-03-27 06:30 CET); not run late"},
			"feed": {Plan: "feed", Cause: runtime.MissedNotRunning, Count: 7, First: at("24", "06:30"), Last: at("27", "06:30"), CatchUp: true},
		}
		// The windows, the catch-up run and its words are checked below.
		for plan, b := range got {
			b.Since, b.Until, b.Run = time.Time{}, time.Time{}, ""
			b.First, b.Last = b.First.In(berlin), b.Last.In(berlin)
			if plan == "feed" {
				b.Why = ""
			}
			got[plan] = b
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("schedule_missed = %+v\nwant %+v", got, want)
		}
		if b := feed; b.Run == "" || !strings.Contains(b.Why, "run once to catch up, as "+b.Run) {
			t.Errorf("feed's catch-up: %+v", b)
		}
		if b := water; !b.Since.Equal(monday.Add(time.Minute)) || !b.Until.Equal(thursday) {
			t.Errorf("water's window = %s to %s, want %s to %s", b.Since, b.Until, monday.Add(time.Minute), thursday)
		}
		if got, want := scheduled(second, berlin), map[string][]string{"feed": {"2025-03-27 17:00 CET"}}; !reflect.DeepEqual(got, want) {
			t.Errorf("runs at start = %v, want %v", got, want)
		}
		for _, plan := range []string{"water", "feed"} {
			a, ok := second.e.Alarm("schedule." + plan)
			if !ok || a.Kind != runtime.AlarmSchedule || a.Plan != plan || a.State != runtime.AlarmClearedUnacked || a.Condition || a.Message != whys[plan] {
				t.Errorf("alarm of %s = %+v, %v; want a cleared, unacknowledged schedule alarm saying %q", plan, a, ok, whys[plan])
			}
		}
		// The restart itself is not missed again, and 18:00 starts.
		time.Sleep(time.Hour + time.Minute)
		synctest.Wait()
		if n := len(missedBodies(t, second)); n != 2 {
			t.Errorf("%d schedule_missed events, want 2", n)
		}
		if got, want := scheduled(second, berlin), map[string][]string{"feed": {"2025-03-27 17:00 CET", "2025-03-27 18:00 CET"}}; !reflect.DeepEqual(got, want) {
			t.Errorf("runs by 18:00 = %v, want %v", got, want)
		}
	})
}

// A wall clock set forward past a firing while the gateway runs (the first
// time sync of a board without a real-time clock) misses it: reported,
// not run hours late.
func TestClockSetForwardMisses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		berlin := zone(t, "Europe/Berlin")
		var jump atomic.Int64
		w := newWorld(t, func(s *setup) {
			s.opts.Now = fakeWall(time.Date(2025, 3, 24, 5, 0, 0, 0, berlin), &jump)
			s.opts.Plans = []runtime.Plan{clockPlan("water", &runtime.ClockSchedule{Times: times(t, "06:30", "08:00"), Zone: berlin})}
		})
		running(t, w)
		time.Sleep(10 * time.Minute)
		jump.Store(int64(2 * time.Hour)) // 05:10 becomes 07:10
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		got := missedBodies(t, w)
		if b := got["water"]; b.Count != 1 || b.Cause != runtime.MissedLate || !strings.Contains(b.Why, "more than 1m0s late (its wall clock was set forward") {
			t.Errorf("schedule_missed = %+v, want water's 06:30 missed as the clock was set", got)
		}
		if runs := scheduled(w, berlin); len(runs) != 0 {
			t.Errorf("runs = %v, want none", runs)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got, want := scheduled(w, berlin), map[string][]string{"water": {"2025-03-24 08:00 CET"}}; !reflect.DeepEqual(got, want) {
			t.Errorf("runs by 08:10 = %v, want %v", got, want)
		}
	})
}
