// Command table reads benchmark results in benchstat's input format (the
// output of go test -bench, any number of packages and -count runs) and
// prints the performance table: each figure, its result, its target, the
// baseline it is compared with in the same run, the ratio, and whether
// the target is met.
//
//	go run ./bench/table bench/results.txt
//
// A figure whose benchmarks are missing from the results is printed as
// "not measured", and the command exits 1, so that make bench fails when a
// row cannot be filled.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: table RESULTS (the output of go test -bench)")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(2)
	}
	defer f.Close()
	res, err := parse(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "table: %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	if missing := render(os.Stdout, res, figures); missing > 0 {
		fmt.Fprintf(os.Stderr, "table: %d figure(s) not measured\n", missing)
		os.Exit(1)
	}
}

// results holds the mean of each metric of each benchmark, by
// "package-suffix Benchmark/name" without the -GOMAXPROCS suffix, and by
// the bare name too when only one package has it.
type results map[string]map[string]float64

// parse reads go test -bench output. The package is taken from "pkg:"
// lines; each benchmark is known as its name and as "pkg name", where pkg
// is the last path elements after the module ("runtime/journal").
func parse(r io.Reader) (results, error) {
	sums := map[string]map[string][]float64{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if p, ok := strings.CutPrefix(text, "pkg: "); ok {
			pkg = shortPkg(strings.TrimSpace(p))
			continue
		}
		if !strings.HasPrefix(text, "Benchmark") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 4 || len(fields)%2 != 0 {
			continue // a benchmark's log line, not a result
		}
		if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
			continue
		}
		name := trimProcs(fields[0])
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %q is not a number (metric %s of %s)", line, fields[i], fields[i+1], name)
			}
			for _, key := range []string{name, pkg + " " + name} {
				if sums[key] == nil {
					sums[key] = map[string][]float64{}
				}
				sums[key][fields[i+1]] = append(sums[key][fields[i+1]], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := results{}
	for name, ms := range sums {
		out[name] = map[string]float64{}
		for unit, vs := range ms {
			s := 0.0
			for _, v := range vs {
				s += v
			}
			out[name][unit] = s / float64(len(vs))
		}
	}
	return out, nil
}

// shortPkg is a package path without the module's.
func shortPkg(p string) string {
	const module = "github.com/shadowgate/shadowgate/"
	if s, ok := strings.CutPrefix(p, module); ok {
		return s
	}
	return p
}

// trimProcs drops the -N GOMAXPROCS suffix go test adds.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// get returns a metric of a benchmark, and whether it was measured.
func (r results) get(name, unit string) (float64, bool) {
	v, ok := r[name][unit]
	return v, ok
}

// row is one line of the table.
type row struct {
	result, baseline, ratio string
	met                     bool
}

// figure is one line of the table: what it measures and how it is worked
// out from the results; eval returns false if a benchmark is missing.
type figure struct {
	name, target string
	eval         func(r results) (row, bool)
}

// render prints the table and returns how many figures were not measured.
func render(w io.Writer, r results, figs []figure) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tresult\ttarget\tbaseline\tratio\tmet")
	missing := 0
	for _, f := range figs {
		rw, ok := f.eval(r)
		if !ok {
			missing++
			fmt.Fprintf(tw, "%s\tnot measured\t%s\t\t\t\n", f.name, f.target)
			continue
		}
		met := "no"
		if rw.met {
			met = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.name, rw.result, f.target, rw.baseline, rw.ratio, met)
	}
	_ = tw.Flush()
	return missing
}

// dur writes nanoseconds in a unit that suits them.
func dur(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

// times writes a ratio; one far below 1 as a fraction, "1/617×".
func times(x float64) string {
	if x > 0 && x < 0.1 {
		return fmt.Sprintf("1/%.0f×", 1/x)
	}
	return fmt.Sprintf("%.2f×", x)
}
