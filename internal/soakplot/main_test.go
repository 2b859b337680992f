package main

import (
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `time,minutes,rss_mib,heap_mib,goroutines,fds,journal_mib,mosquitto_restarts
2026-12-01T20:00:00Z,0.00,28.4,6.2,40,14,0.06,0
2026-12-01T20:01:00Z,1.00,35.6,10.5,43,15,0.50,0
2026-12-01T20:02:00Z,2.00,36.1,9.8,44,15,1.10,1
2026-12-01T20:03:00Z,3.00,36.0,11.2,43,16,1.20,1
`

func TestRender(t *testing.T) {
	tab, err := readTable(strings.NewReader(sample), "soak.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.minutes) != 4 || len(tab.restarts) != 1 || tab.restarts[0] != 2 {
		t.Fatalf("readTable: %d samples, restarts at %v; want 4 and [2]", len(tab.minutes), tab.restarts)
	}
	img := render(tab)
	if got, want := img.Bounds(), image.Rect(0, 0, width, panelHeight*len(panels)); got != want {
		t.Errorf("render: bounds %v, want %v", got, want)
	}
	for i, s := range panels {
		// Each series' colour is in its own panel.
		n := 0
		for y := i * panelHeight; y < (i+1)*panelHeight; y++ {
			for x := range width {
				if img.RGBAAt(x, y) == s.colour {
					n++
				}
			}
		}
		if n < 100 {
			t.Errorf("panel %s has %d pixels of its colour, want a line of at least 100", s.column, n)
		}
	}
}

func TestReadTableErrors(t *testing.T) {
	cases := []struct {
		name, csv, want string
	}{
		{"not a number", strings.Replace(sample, "36.1", "x", 1), `soak.csv:4: rss_mib: "x" is not a number`},
		{"missing column", strings.Replace(sample, "fds,", "files,", 1), "soak.csv:1: the header has no fds column"},
		{"short row", sample + "2026-12-01T20:04:00Z,4.00\n", "soak.csv:6: "},
		{"one sample", strings.Join(strings.SplitAfter(sample, "\n")[:2], ""), "soak.csv: 1 samples; a plot needs two"},
		{"empty", "", "soak.csv:1: reading the header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := readTable(strings.NewReader(tc.csv), "soak.csv")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("readTable = %v, want an error starting %q", err, tc.want)
			}
		})
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "soak.csv"), filepath.Join(dir, "soak.png")
	if err := os.WriteFile(in, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, format, err := image.DecodeConfig(f)
	if err != nil || format != "png" || cfg.Width != width {
		t.Errorf("run wrote %s: %v, %+v, %v; want a png %d wide", out, format, cfg, err, width)
	}
}
