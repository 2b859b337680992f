package web

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// The sparklines of the Devices page cover the last hour. The journal is
// read once from that hour's start and then only for what is new, so a
// page refreshed on every reading reads a few events, not an hour.
const (
	sparkWindow = time.Hour
	// maxPoints bounds each series; the oldest go first.
	maxPoints = 3600
	// maxScan bounds the events one chart reads, so that a journal full
	// of readings cannot hold a page for long.
	maxScan = 200_000
)

// point is one numeric reading.
type point struct {
	At time.Time
	V  float64
}

// history keeps the last hour of the numeric readings of every
// capability, from the journal, for the sparklines.
type history struct {
	mu     sync.Mutex
	seq    uint64 // the last event read
	series map[string][]point
}

// journal is what history reads: the engine's events.
type eventLog interface {
	Events(ctx context.Context, since uint64, limit int) ([]runtime.Event, error)
	LastSeq() uint64
}

// update reads the events since the last update and drops what is older
// than the window.
func (h *history) update(ctx context.Context, j eventLog, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.series == nil {
		h.series = map[string][]point{}
		h.seq = seqAt(ctx, j, now.Add(-sparkWindow))
	}
	h.seq = readPoints(ctx, j, h.seq, "", func(ref string, p point) {
		s := append(h.series[ref], p)
		if len(s) > maxPoints {
			s = s[len(s)-maxPoints:]
		}
		h.series[ref] = s
	})
	cut := now.Add(-sparkWindow)
	for ref, s := range h.series {
		i := 0
		for i < len(s) && s[i].At.Before(cut) {
			i++
		}
		if i == len(s) {
			delete(h.series, ref)
		} else if i > 0 {
			h.series[ref] = s[i:]
		}
	}
}

// points returns a copy of the series of "device.capability".
func (h *history) points(ref string) []point {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]point(nil), h.series[ref]...)
}

// seqAt returns the sequence number after which the events at or after t
// begin: the journal is in time order, so it is searched by halves.
func seqAt(ctx context.Context, j eventLog, t time.Time) uint64 {
	lo, hi := uint64(0), j.LastSeq()
	for lo < hi {
		mid := lo + (hi-lo)/2
		evs, err := j.Events(ctx, mid, 1)
		if err != nil || len(evs) == 0 {
			return lo
		}
		if evs[0].At.Before(t) {
			lo = evs[0].Seq
		} else {
			hi = mid
		}
	}
	return lo
}

// readPoints calls fn with every numeric reading after since (of device,
// if not ""), reading at most maxScan events, and returns the last
// sequence number read.
func readPoints(ctx context.Context, j eventLog, since uint64, device string, fn func(ref string, p point)) uint64 {
	for read := 0; read < maxScan; {
		evs, err := j.Events(ctx, since, 1000)
		if err != nil || len(evs) == 0 {
			return since
		}
		for _, ev := range evs {
			since = ev.Seq
			if ev.Kind != runtime.KindObserved || (device != "" && ev.Device != device) {
				continue
			}
			var b runtime.ObservedBody
			if json.Unmarshal(ev.Body, &b) != nil || b.Value.Type != value.TypeNumber || b.Quality != "good" {
				continue
			}
			at := b.At
			if at.IsZero() {
				at = ev.At
			}
			fn(b.Device+"."+b.Capability, point{At: at, V: b.Value.Num})
		}
		read += len(evs)
	}
	return since
}

// chart is a series drawn as a line: an inline SVG with no script and no
// library, sized by its container.
type chart struct {
	SVG      template.HTML
	Min, Max float64
	Points   int
	// From and To are the times at the chart's left and right edges.
	From, To time.Time
}

// minSpan is the least time a chart spans: a single reading, or readings
// a moment apart, are drawn over at least this.
const minSpan = time.Minute

// drawChart draws the points between from and to into a w×h box. The
// x-axis spans the readings, from the first to "to", within the window:
// a gateway started minutes ago draws its minutes across the whole box,
// not in a sliver at the right of an hour. Each column of the box keeps
// the lowest and the highest reading that falls in it, so that a spike
// is drawn however many readings share a column. The SVG is named by
// label; the chart's From, To, Points, Min and Max are for the words
// beside it.
func drawChart(pts []point, from, to time.Time, w, h int, label string) chart {
	// Readings heard late are journaled late with their own time: the
	// line is drawn in the order of their times, within the window.
	pts = slices.DeleteFunc(slices.Clone(pts), func(p point) bool { return p.At.Before(from) || p.At.After(to) })
	slices.SortStableFunc(pts, func(a, b point) int { return a.At.Compare(b.At) })
	c := chart{Points: len(pts)}
	if len(pts) == 0 || !to.After(from) {
		return c
	}
	if first := pts[0].At; first.After(from) {
		from = first
		if to.Sub(from) < minSpan {
			from = to.Add(-minSpan)
		}
	}
	c.From, c.To = from, to
	c.Min, c.Max = math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		c.Min, c.Max = math.Min(c.Min, p.V), math.Max(c.Max, p.V)
	}
	span := c.Max - c.Min
	if span == 0 {
		span = 1
	}
	const pad = 2
	y := func(v float64) float64 { return pad + (float64(h)-2*pad)*(1-(v-c.Min)/span) }
	x := func(t time.Time) int {
		return int(float64(w-1) * float64(t.Sub(from)) / float64(to.Sub(from)))
	}
	// A sparkline is drawn on every sensor's card: its markup is kept
	// short. Its title names it (an image's accessible name); its times
	// and range are said in words by the card beside it, and the line is
	// styled by devices.css.
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" preserveAspectRatio="none" role="img"><title>%s</title><polyline points="`,
		w, h, template.HTMLEscapeString(label))
	col, lo, hi, first := -1, 0.0, 0.0, true
	flush := func() {
		if col < 0 {
			return
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(strconv.Itoa(col) + "," + strconv.FormatFloat(y(lo), 'f', 0, 64))
		if hi != lo {
			b.WriteString(" " + strconv.Itoa(col) + "," + strconv.FormatFloat(y(hi), 'f', 0, 64))
		}
	}
	if len(pts) == 1 {
		// One reading is a level, not a point: drawn from when it was
		// read to now.
		pts = []point{pts[0], {At: to, V: pts[0].V}}
	}
	for _, p := range pts {
		px := min(max(x(p.At), 0), w-1)
		if px != col {
			flush()
			col, lo, hi = px, p.V, p.V
			continue
		}
		lo, hi = math.Min(lo, p.V), math.Max(hi, p.V)
	}
	flush()
	b.WriteString(`"/></svg>`)
	c.SVG = template.HTML(b.String())
	return c
}
