package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// fakeLog is a journal of events in memory, one a second from t0.
type fakeLog struct{ evs []runtime.Event }

func (f *fakeLog) Events(_ context.Context, since uint64, limit int) ([]runtime.Event, error) {
	if since >= uint64(len(f.evs)) {
		return nil, nil
	}
	out := f.evs[since:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (f *fakeLog) LastSeq() uint64 { return uint64(len(f.evs)) }

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func (f *fakeLog) add(kind runtime.Kind, device, capability string, v value.Value, quality string) {
	seq := uint64(len(f.evs) + 1)
	at := t0.Add(time.Duration(seq) * time.Second)
	body, _ := json.Marshal(runtime.ObservedBody{Device: device, Capability: capability, Value: v, Quality: quality, At: at})
	f.evs = append(f.evs, runtime.Event{Seq: seq, At: at, Kind: kind, Device: device, Body: body})
}

func TestSeqAtFindsTheFirstEventAtOrAfter(t *testing.T) {
	f := &fakeLog{}
	for range 1000 {
		f.add(runtime.KindObserved, "tank-1", "level", value.Number(1), "good")
	}
	for _, tc := range []struct {
		at   time.Time
		want uint64
	}{
		{t0, 0}, {t0.Add(time.Second), 0}, {t0.Add(2 * time.Second), 1}, {t0.Add(500 * time.Second), 499},
		{t0.Add(1000 * time.Second), 999}, {t0.Add(2000 * time.Second), 1000},
	} {
		if got := seqAt(context.Background(), f, tc.at); got != tc.want {
			t.Errorf("seqAt(t0+%s) = %d, want %d", tc.at.Sub(t0), got, tc.want)
		}
	}
	if got := seqAt(context.Background(), &fakeLog{}, t0); got != 0 {
		t.Errorf("seqAt of an empty journal = %d", got)
	}
}

// TestHistoryKeepsTheLastHourOfGoodNumbers: only good numeric readings
// are kept, the hour slides, and an update reads only what is new.
func TestHistoryKeepsTheLastHourOfGoodNumbers(t *testing.T) {
	f := &fakeLog{}
	for i := range 7200 {
		f.add(runtime.KindObserved, "tank-1", "level", value.Number(float64(i)), "good")
	}
	f.add(runtime.KindObserved, "tank-1", "level", value.Number(-5), "bad")
	f.add(runtime.KindObserved, "valve-1", "open", value.Bool(true), "good")
	f.add(runtime.KindActed, "tank-1", "level", value.Number(-7), "good")
	var h history
	now := t0.Add(7203 * time.Second)
	h.update(context.Background(), f, now)
	pts := h.points("tank-1.level")
	// Reading i is at t0+(i+1)s; the hour before now begins at t0+3603s.
	if len(pts) != 3598 || pts[0].V != 3602 || pts[len(pts)-1].V != 7199 {
		t.Fatalf("points = %d, from %v to %v; want the last hour, 3602 to 7199", len(pts), pts[0].V, pts[len(pts)-1].V)
	}
	if got := h.points("valve-1.open"); len(got) != 0 {
		t.Errorf("a bool is charted: %v", got)
	}
	f.add(runtime.KindObserved, "tank-1", "level", value.Number(1e6), "good")
	h.update(context.Background(), f, now.Add(time.Second))
	if pts := h.points("tank-1.level"); pts[len(pts)-1].V != 1e6 || pts[0].V != 3603 {
		t.Errorf("after one more reading, the series runs %v to %v", pts[0].V, pts[len(pts)-1].V)
	}
}

var polyline = regexp.MustCompile(`points="([^"]*)"`)

// TestChartKeepsSpikes: a spike among thousands of readings in one
// column is still drawn, and the chart names its range.
func TestChartKeepsSpikes(t *testing.T) {
	var pts []point
	for i := range 3600 {
		v := 20.0
		if i == 1800 {
			v = 95
		}
		pts = append(pts, point{At: t0.Add(time.Duration(i) * time.Second), V: v})
	}
	c := drawChart(pts, t0, t0.Add(time.Hour), 120, 28, `level of "tank" <1>`)
	if c.Min != 20 || c.Max != 95 || c.Points != 3600 {
		t.Fatalf("chart = min %v max %v points %d", c.Min, c.Max, c.Points)
	}
	m := polyline.FindStringSubmatch(string(c.SVG))
	if m == nil {
		t.Fatalf("no line in %s", c.SVG)
	}
	if n := len(strings.Fields(m[1])); n > 2*120 {
		t.Errorf("%d points drawn in a 120-wide chart", n)
	}
	if !regexp.MustCompile(`,2( |$)`).MatchString(m[1]) {
		t.Errorf("the spike is not drawn at the top: %s", m[1])
	}
	if !strings.Contains(string(c.SVG), `<title>level of &#34;tank&#34; &lt;1&gt;</title>`) {
		t.Errorf("the label is not escaped: %s", c.SVG)
	}
	if c := drawChart(nil, t0, t0.Add(time.Hour), 120, 28, "x"); c.SVG != "" {
		t.Errorf("an empty series draws %s", c.SVG)
	}
}

// TestServedScriptIsTheSourceWithoutComments: the script and stylesheet
// sent lose only their comments and spaces, and the stylesheet its rules'
// last semicolons (see TestTightenedScript for
// the script's strings, which keep theirs).
func TestServedScriptIsTheSourceWithoutComments(t *testing.T) {
	comments := map[string]*regexp.Regexp{"app.js": regexp.MustCompile(`(?m)^\s*//.*$`), "style.css": regexp.MustCompile(`(?s)/\*.*?\*/`)}
	space := regexp.MustCompile(`\s+`)
	for name, comment := range comments {
		src, err := fs.ReadFile(assets, "assets/static/"+name)
		if err != nil {
			t.Fatal(err)
		}
		sent := staticFiles()["/"+name]
		if len(sent) >= len(src) {
			t.Errorf("%s: sent %d bytes of %d", name, len(sent), len(src))
		}
		// A rule's last semicolon is dropped too.
		squeeze := func(b []byte) []byte { return bytes.ReplaceAll(space.ReplaceAll(b, nil), []byte(";}"), []byte("}")) }
		if got, want := squeeze(sent), squeeze(comment.ReplaceAll(src, nil)); !bytes.Equal(got, want) {
			t.Errorf("%s: sent differs from its source in more than comments and spaces", name)
		}
	}
}

// TestChartDrawsInTimeOrder: a reading heard late is drawn where its time
// puts it, and one from before the window is left out.
func TestChartDrawsInTimeOrder(t *testing.T) {
	pts := []point{{t0.Add(10 * time.Minute), 1}, {t0.Add(50 * time.Minute), 3}, {t0.Add(20 * time.Minute), 2}, {t0.Add(-time.Minute), 99}}
	c := drawChart(pts, t0, t0.Add(time.Hour), 60, 28, "x")
	if c.Points != 3 || c.Max != 3 {
		t.Fatalf("chart of %d points, max %v; want 3 points, max 3", c.Points, c.Max)
	}
	m := polyline.FindStringSubmatch(string(c.SVG))
	last := -1
	for _, xy := range strings.Fields(m[1]) {
		x, _, _ := strings.Cut(xy, ",")
		n, _ := strconv.Atoi(x)
		if n < last {
			t.Fatalf("the line goes back in time: %s", m[1])
		}
		last = n
	}
}

// TestFormValueByType: what a person types is read as the capability's
// type would have it.
func TestFormValueByType(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		typ  value.Type
		want string
	}{
		{"2", value.TypeEnum, `"2"`}, {"low", value.TypeEnum, `"low"`}, {`"low"`, value.TypeEnum, `"low"`},
		{"42", value.TypeString, `"42"`}, {"true", value.TypeString, `"true"`}, {`"a b"`, value.TypeString, `"a b"`},
		{"21.5", value.TypeNumber, `21.5`}, {"true", value.TypeBool, `true`}, {" true ", value.TypeBool, `true`},
		{"low", value.TypeNone, `"low"`}, {"7", value.TypeNone, `7`}, {"", value.TypeEnum, ``}, {"  ", value.TypeNumber, ``},
	} {
		if got := string(formValue(tc.raw, tc.typ)); got != tc.want {
			t.Errorf("formValue(%q, %s) = %s, want %s", tc.raw, tc.typ, got, tc.want)
		}
	}
}

// TestChartSpansItsReadings: readings of the last five minutes of an
// hour's window fill the chart, not its right twelfth; the chart says its
// start and end and its range, and a lone reading is drawn over a minute
// at least.
func TestChartSpansItsReadings(t *testing.T) {
	now := t0.Add(time.Hour)
	var pts []point
	for i := range 5 {
		pts = append(pts, point{At: now.Add(-5*time.Minute + time.Duration(i)*time.Minute), V: float64(10 + i)})
	}
	c := drawChart(pts, t0, now, 120, 28, "level of tank-1 over the last 1h")
	m := polyline.FindStringSubmatch(string(c.SVG))
	if m == nil {
		t.Fatalf("no line in %s", c.SVG)
	}
	x0, _, _ := strings.Cut(strings.Fields(m[1])[0], ",")
	if x0 != "0" {
		t.Errorf("the first reading is drawn at x=%s, want 0 (the chart spans the readings): %s", x0, m[1])
	}
	if !c.From.Equal(pts[0].At) || !c.To.Equal(now) {
		t.Errorf("the chart spans %v to %v, want %v to %v", c.From, c.To, pts[0].At, now)
	}
	if want := `role="img"><title>level of tank-1 over the last 1h</title>`; !strings.Contains(string(c.SVG), want) {
		t.Errorf("the chart is not named %q: %s", want, c.SVG)
	}
	if c.Points != 5 || c.Min != 10 || c.Max != 14 {
		t.Errorf("the chart says %d readings from %v to %v, want 5 from 10 to 14", c.Points, c.Min, c.Max)
	}
	// A lone reading a second old: a level over the last minute.
	one := drawChart([]point{{now.Add(-time.Second), 3}}, t0, now, 120, 28, "x")
	if !one.From.Equal(now.Add(-time.Minute)) {
		t.Errorf("a lone reading's chart starts at %v, want a minute before the end", one.From)
	}
}
