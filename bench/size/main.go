// Command size builds the shadowgate binary the way the Makefile does and
// prints its stripped size and each module's share of the code.
//
//	go run ./bench/size [-goos linux] [-goarch arm64] [-tags 'a b']
//
// It builds twice into a temporary directory: once stripped (-s -w, the
// size that ships) and once with symbols, whose text symbols
// (go tool nm -size) it sums by module. A symbol belongs to the longest
// module path (from the binary's build information) that prefixes it; one
// whose first path element has no dot is the standard library ("std");
// the rest, such as the linker's own symbols, is "(other)". The shares
// are of the code (.text) only: read-only data and the pc tables grow
// roughly with it but are not attributed.
package main

import (
	"bufio"
	"cmp"
	"debug/buildinfo"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
)

func main() {
	goos := flag.String("goos", "linux", "GOOS to build for")
	goarch := flag.String("goarch", goruntime.GOARCH, "GOARCH to build for")
	goarm := flag.String("goarm", "", "GOARM when -goarch is arm")
	tags := flag.String("tags", "", "build tags, as go build -tags takes them")
	pkg := flag.String("pkg", "./cmd/shadowgate", "the main package to build")
	bench := flag.String("bench", "", "also print the stripped size as this benchmark's result, in go test -bench's format (for make bench)")
	flag.Parse()
	if err := run(os.Stdout, *goos, *goarch, *goarm, *tags, *pkg, *bench); err != nil {
		fmt.Fprintln(os.Stderr, "size:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, goos, goarch, goarm, tags, pkg, bench string) error {
	dir, err := os.MkdirTemp("", "shadowgate-size-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	stripped, full := filepath.Join(dir, "stripped"), filepath.Join(dir, "full")
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if goarm != "" {
		env = append(env, "GOARM="+goarm)
	}
	for _, b := range []struct{ out, ldflags string }{{stripped, "-s -w"}, {full, ""}} {
		cmd := exec.Command("go", "build", "-trimpath", "-tags", tags, "-ldflags", b.ldflags, "-o", b.out, pkg)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s: %w", pkg, err)
		}
	}
	fi, err := os.Stat(stripped)
	if err != nil {
		return err
	}
	bi, err := buildinfo.ReadFile(full)
	if err != nil {
		return fmt.Errorf("reading build information: %w", err)
	}
	modules := []string{bi.Main.Path}
	for _, d := range bi.Deps {
		modules = append(modules, d.Path)
	}
	nm := exec.Command("go", "tool", "nm", "-size", "-sort", "size", full)
	nm.Stderr = os.Stderr
	out, err := nm.StdoutPipe()
	if err != nil {
		return err
	}
	if err := nm.Start(); err != nil {
		return fmt.Errorf("go tool nm: %w", err)
	}
	rows, total, err := group(out, bi.Main.Path, modules)
	if werr := nm.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("go tool nm: %w", werr)
	}
	if err != nil {
		return err
	}
	arch := goos + "/" + goarch
	if goarm != "" {
		arch += "v" + goarm
	}
	if tags == "" {
		tags = "(none)"
	}
	fmt.Fprintf(w, "%s, tags %s: stripped %d bytes (%.1f MiB), code %d bytes\n\n", arch, tags, fi.Size(), float64(fi.Size())/(1<<20), total)
	fmt.Fprintf(w, "%-40s %10s %6s\n", "module", "code bytes", "share")
	for _, r := range rows {
		fmt.Fprintf(w, "%-40s %10d %5.1f%%\n", r.Module, r.Bytes, 100*float64(r.Bytes)/float64(total))
	}
	if bench != "" {
		fmt.Fprintf(w, "%s 1 %d stripped-bytes\n", bench, fi.Size())
	}
	return nil
}

// A row is one module's code.
type row struct {
	Module string
	Bytes  int64
}

// group sums the sizes of the text symbols in nm's output (lines of
// "address size type name") by module, largest first. mainPath is the main
// module, whose package main's symbols are named "main.".
func group(r io.Reader, mainPath string, modules []string) (rows []row, total int64, err error) {
	// Longest first, so that a nested module wins over its parent.
	modules = slices.Clone(modules)
	slices.SortFunc(modules, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	sums := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || (f[2] != "T" && f[2] != "t") {
			continue
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("nm line %q: %w", sc.Text(), err)
		}
		// The name may hold spaces (generic shapes); it is all that follows
		// the type column.
		name := strings.Join(f[3:], " ")
		sums[moduleOf(name, mainPath, modules)] += size
		total += size
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	for m, n := range sums {
		rows = append(rows, row{m, n})
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Module, b.Module))
	})
	return rows, total, nil
}

// moduleOf names the module a symbol belongs to; modules are sorted
// longest first.
func moduleOf(name, mainPath string, modules []string) string {
	// Equality and hash functions of types carry the type's name.
	for _, p := range []string{"type:.eq.", "type:.hash.", "go:itab."} {
		name = strings.TrimPrefix(name, p)
	}
	name = strings.TrimLeft(name, "*")
	if rest, ok := strings.CutPrefix(name, "["); ok { // an array type: [4]pkg.T
		if _, elem, ok := strings.Cut(rest, "]"); ok {
			name = strings.TrimLeft(elem, "*")
		}
	}
	if strings.HasPrefix(name, "main.") {
		return mainPath
	}
	for _, m := range modules {
		if rest, ok := strings.CutPrefix(name, m); ok && rest != "" && (rest[0] == '/' || rest[0] == '.') {
			return m
		}
	}
	// The standard library: the first element of the package path has no
	// dot (vendor/golang.org/x/... included). Type arguments, which may
	// name other packages, are not part of it.
	name, _, _ = strings.Cut(name, "[")
	i := strings.IndexAny(name, "./")
	switch {
	case i <= 0 || strings.Contains(name[:i], ":"):
	case name[i] == '/' || !strings.Contains(name, "/"):
		return "std"
	}
	return "(other)"
}
