package shadowgate_test

// This file enforces the import rules of DESIGN §2 with go list.

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/shadowgate/shadowgate"

type pkgInfo struct {
	imports []string // direct
	deps    []string // transitive
}

func listPackages(t *testing.T) map[string]pkgInfo {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkgInfo{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "|")
		pkgs[parts[0]] = pkgInfo{imports: strings.Fields(parts[1]), deps: strings.Fields(parts[2])}
	}
	return pkgs
}

func isStd(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

// ioPackages may not be imported by the pure packages.
var ioPackages = regexp.MustCompile(`^(os|os/.*|net|net/.*|io/fs|io/ioutil|syscall|log|log/slog|path/filepath|database/.*|crypto/rand|math/rand.*)$`)

// violations lists what breaks the rules in pkgs.
func violations(pkgs map[string]pkgInfo) []string {
	var bad []string
	for name, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(name, module), "/")
		switch {
		case rel == "governance" || rel == "devices":
			for _, imp := range p.imports {
				if ioPackages.MatchString(imp) {
					bad = append(bad, rel+" imports "+imp+" (it must do no I/O)")
				}
			}
			for _, d := range p.deps {
				if !isStd(d) {
					bad = append(bad, rel+" depends on "+d+" (standard library only)")
				}
			}
		case rel == "runtime" || strings.HasPrefix(rel, "runtime/"):
			for _, d := range p.deps {
				if strings.HasPrefix(d, module+"/drivers") || strings.HasPrefix(d, module+"/web") || strings.HasPrefix(d, module+"/gateway") {
					bad = append(bad, "runtime depends on "+d)
				}
			}
		case strings.HasPrefix(rel, "drivers/"):
			for _, d := range p.deps {
				if strings.HasPrefix(d, module+"/") && d != module+"/devices" {
					bad = append(bad, rel+" depends on "+d+" (a driver imports only devices of ours)")
				}
			}
		case strings.HasPrefix(rel, "firmware-fixtures"):
			for _, d := range p.deps {
				if strings.HasPrefix(d, module) {
					bad = append(bad, rel+" depends on "+d+" (fixtures play the hardware and import nothing of ours)")
				}
			}
		}
		if rel == "web" || strings.HasPrefix(rel, "web/") || rel == "gateway/mqtt" || rel == "gateway/uplink" {
			// Surfaces use the runtime's public API: no bbolt, no driver.
			for _, imp := range p.imports {
				if strings.HasPrefix(imp, "go.etcd.io/bbolt") || strings.HasPrefix(imp, module+"/drivers") {
					bad = append(bad, rel+" imports "+imp+" (a surface reaches storage and devices through the runtime)")
				}
			}
		}
		for _, d := range p.deps {
			if strings.HasPrefix(d, module+"/cmd") || (d == module+"/gateway" && !strings.HasPrefix(rel, "cmd")) {
				bad = append(bad, rel+" depends on "+d+" (nothing imports cmd or gateway)")
			}
		}
		if rel == "cmd/shadowgate" {
			for _, d := range p.deps {
				if d == "testing" || d == "net/http/httptest" || d == "net/http/pprof" || strings.HasPrefix(d, "github.com/mochi-mqtt/server/v2/config") {
					bad = append(bad, "the binary links "+d)
				}
			}
		}
	}
	return bad
}

func TestImportDirection(t *testing.T) {
	for _, v := range violations(listPackages(t)) {
		t.Error(v)
	}
}

// TestImportDirectionCatchesViolations proves the check can fail.
func TestImportDirectionCatchesViolations(t *testing.T) {
	fake := map[string]pkgInfo{
		module + "/governance":   {imports: []string{"os"}, deps: []string{"os"}},
		module + "/runtime":      {deps: []string{module + "/drivers/sim"}},
		module + "/drivers/sim":  {deps: []string{module + "/runtime", module + "/devices"}},
		module + "/devices":      {deps: []string{"go.etcd.io/bbolt"}},
		module + "/gateway/mqtt": {imports: []string{"go.etcd.io/bbolt"}},
	}
	got := violations(fake)
	for _, want := range []string{"governance imports os", "runtime depends on " + module + "/drivers/sim",
		"drivers/sim depends on " + module + "/runtime", "devices depends on go.etcd.io/bbolt",
		"gateway/mqtt imports go.etcd.io/bbolt"} {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, want)
		}
		if !found {
			t.Errorf("violations(%v) misses %q; got %q", fake, want, got)
		}
	}
}

// TestPureCodeReadsNoClock keeps clock reads out of governance and devices:
// time arrives on the request.
func TestPureCodeReadsNoClock(t *testing.T) {
	clock := regexp.MustCompile(`time\.(Now|Since|Until|Sleep|After|Tick|NewTimer|NewTicker|AfterFunc)\(`)
	for _, dir := range []string{"governance", "devices"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if m := clock.Find(src); m != nil {
				t.Errorf("%s reads the clock (%s); pass the time in", f, m)
			}
		}
	}
}

// pkgDoc matches a package comment: a comment block that runs into the
// package clause.
var pkgDoc = regexp.MustCompile(`(?m)^// (Package|Command) \S+.*\n(//.*\n)*package `)

// TestPackageDocs requires exactly one package comment per package.
func TestPackageDocs(t *testing.T) {
	docs := map[string]int{}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir := filepath.Dir(p)
		if _, ok := docs[dir]; !ok {
			docs[dir] = 0
		}
		if pkgDoc.Match(src) {
			docs[dir]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, n := range docs {
		if n != 1 {
			t.Errorf("%s has %d package comments, want 1", dir, n)
		}
	}
}
