// Command soakplot draws the soak's samples (the CSV TestSoak writes, see
// make soak) as a PNG: one panel per series (RSS, heap, goroutines, open
// files, journal size) against the minutes of the run, with a grey line
// where the site broker was stopped.
//
//	go run ./internal/soakplot -in docs/soak.csv -out docs/soak.png
package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"os"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// series is one panel: a column of the CSV and its colour.
type series struct {
	column string
	title  string
	colour color.RGBA
}

var panels = []series{
	{"rss_mib", "RSS (MiB)", color.RGBA{0xc0, 0x39, 0x2b, 0xff}},
	{"heap_mib", "heap in use (MiB)", color.RGBA{0x27, 0x60, 0xae, 0xff}},
	{"goroutines", "goroutines", color.RGBA{0x1e, 0x84, 0x49, 0xff}},
	{"fds", "open files", color.RGBA{0x8e, 0x44, 0xad, 0xff}},
	{"journal_mib", "journal file (MiB)", color.RGBA{0xd3, 0x54, 0x00, 0xff}},
}

// restartColumn counts the site broker's stops; where it grows, a panel
// gets a grey line.
const restartColumn = "mosquitto_restarts"

// The picture's geometry, in pixels.
const (
	width       = 960
	panelHeight = 170
	marginLeft  = 70
	marginRight = 20
	marginTop   = 24
	marginBot   = 30
)

var (
	background = color.RGBA{0xff, 0xff, 0xff, 0xff}
	ink        = color.RGBA{0x22, 0x22, 0x22, 0xff}
	grid       = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	restart    = color.RGBA{0xaa, 0xaa, 0xaa, 0xff}
)

// table is the CSV: the minutes of each sample and the columns by name.
type table struct {
	minutes  []float64
	columns  map[string][]float64
	restarts []float64 // the minutes at which the broker was stopped
}

// readTable reads the soak's CSV. name is used in errors, which name the
// line: "soak.csv:5: rss_mib: "x" is not a number".
func readTable(r io.Reader, name string) (*table, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s:1: reading the header: %w", name, err)
	}
	at := map[string]int{}
	for i, h := range header {
		at[h] = i
	}
	for _, want := range append([]string{"minutes"}, columnsOf(panels)...) {
		if _, ok := at[want]; !ok {
			return nil, fmt.Errorf("%s:1: the header has no %s column", name, want)
		}
	}
	t := &table{columns: map[string][]float64{}}
	lastRestarts := 0.0
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		num := func(col string) (float64, error) {
			v, err := strconv.ParseFloat(rec[at[col]], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("%s:%d: %s: %q is not a number", name, line, col, rec[at[col]])
			}
			return v, nil
		}
		m, err := num("minutes")
		if err != nil {
			return nil, err
		}
		t.minutes = append(t.minutes, m)
		for _, col := range columnsOf(panels) {
			v, err := num(col)
			if err != nil {
				return nil, err
			}
			t.columns[col] = append(t.columns[col], v)
		}
		if _, ok := at[restartColumn]; ok {
			v, err := num(restartColumn)
			if err != nil {
				return nil, err
			}
			if v > lastRestarts && len(t.minutes) > 1 {
				t.restarts = append(t.restarts, m)
			}
			lastRestarts = v
		}
	}
	if len(t.minutes) < 2 {
		return nil, fmt.Errorf("%s: %d samples; a plot needs two", name, len(t.minutes))
	}
	return t, nil
}

func columnsOf(ss []series) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.column
	}
	return out
}

// render draws every panel, one above the other.
func render(t *table) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, width, panelHeight*len(panels)))
	draw.Draw(img, img.Bounds(), image.NewUniform(background), image.Point{}, draw.Src)
	for i, s := range panels {
		drawPanel(img, image.Rect(0, i*panelHeight, width, (i+1)*panelHeight), t, s)
	}
	return img
}

// drawPanel draws one series into r: a title with its first and last
// values, the plot box with its value range on the left and the minutes
// below, and the line.
func drawPanel(img *image.RGBA, r image.Rectangle, t *table, s series) {
	ys := t.columns[s.column]
	box := image.Rect(r.Min.X+marginLeft, r.Min.Y+marginTop, r.Max.X-marginRight, r.Max.Y-marginBot)
	lo, hi := bounds(ys)
	if hi-lo < 1e-9 {
		lo, hi = lo-1, hi+1
	}
	step := niceStep((hi - lo) / 4)
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	x0, x1 := t.minutes[0], t.minutes[len(t.minutes)-1]
	if x1 <= x0 {
		x1 = x0 + 1
	}
	px := func(m float64) int { return box.Min.X + int(math.Round((m-x0)/(x1-x0)*float64(box.Dx()-1))) }
	py := func(v float64) int { return box.Max.Y - 1 - int(math.Round((v-lo)/(hi-lo)*float64(box.Dy()-1))) }

	label(img, r.Min.X+marginLeft, r.Min.Y+16, ink, fmt.Sprintf("%s: %s at start, %s at end", s.title, format(ys[0]), format(ys[len(ys)-1])))
	for v := lo; v <= hi+step/2; v += step {
		y := py(v)
		hline(img, box.Min.X, box.Max.X, y, grid)
		text := strconv.FormatFloat(v, 'f', max(0, -int(math.Floor(math.Log10(step)))), 64)
		label(img, box.Min.X-6-7*len(text), y+4, ink, text)
	}
	for _, m := range minuteTicks(x0, x1) {
		x := px(m)
		vline(img, x, box.Min.Y, box.Max.Y, grid)
		text := strconv.FormatFloat(m, 'f', -1, 64)
		label(img, x-7*len(text)/2, box.Max.Y+14, ink, text)
	}
	label(img, box.Max.X-7*len("minutes"), box.Max.Y+27, ink, "minutes")
	for _, m := range t.restarts {
		for y := box.Min.Y; y < box.Max.Y; y += 6 {
			vline(img, px(m), y, min(y+3, box.Max.Y), restart)
		}
	}
	rect(img, box, ink)
	for i := 1; i < len(ys); i++ {
		line(img, px(t.minutes[i-1]), py(ys[i-1]), px(t.minutes[i]), py(ys[i]), s.colour)
	}
}

func bounds(ys []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, y := range ys {
		lo, hi = min(lo, y), max(hi, y)
	}
	return lo, hi
}

// niceStep returns the smallest of 1, 2 or 5 times a power of ten that
// is at least raw, so that the value axis has round labels.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// format writes a value with as many decimals as its size needs.
func format(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// minuteTicks returns round minutes from x0 to x1, about eight of them.
func minuteTicks(x0, x1 float64) []float64 {
	step := 1.0
	for _, s := range []float64{0.5, 1, 2, 5, 10, 15, 30, 60, 120, 240} {
		step = s
		if (x1-x0)/s <= 10 {
			break
		}
	}
	var out []float64
	for m := math.Ceil(x0/step) * step; m <= x1+1e-9; m += step {
		out = append(out, m)
	}
	return out
}

func label(img *image.RGBA, x, y int, c color.Color, text string) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(text)
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x < x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y < y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

func rect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	hline(img, r.Min.X, r.Max.X, r.Min.Y, c)
	hline(img, r.Min.X, r.Max.X, r.Max.Y-1, c)
	vline(img, r.Min.X, r.Min.Y, r.Max.Y, c)
	vline(img, r.Max.X-1, r.Min.Y, r.Max.Y, c)
}

// line draws a two-pixel-wide line from (x0, y0) to (x1, y1), Bresenham's
// way.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		img.SetRGBA(x0, y0+1, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

func run(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	t, err := readTable(f, in)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, render(t)); err != nil {
		return fmt.Errorf("encoding %s: %w", out, err)
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

func main() {
	in := flag.String("in", "docs/soak.csv", "the soak's CSV")
	out := flag.String("out", "docs/soak.png", "the PNG to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "soakplot:", err)
		os.Exit(1)
	}
}
