package shadowgate_test

// This file enforces the import rules of DESIGN §2 with go list.

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// ours reports whether p is a package of this module, and returns its
// path inside the module.
func ours(p string) (string, bool) {
	if p == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(p, module+"/")
	return rel, ok
}

// under reports whether rel is dir or a package below it.
func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

// surfaces are the packages people and machines talk to. They use the
// runtime's public API and small interfaces: they never link storage or a
// driver, not even through another package.
var surfaces = []string{"web", "gateway/mqtt", "gateway/uplink", "gateway/command"}

// violations lists what breaks the rules in pkgs. Every rule is checked on
// the transitive dependencies, so a rule cannot be dodged by a detour.
func violations(pkgs map[string]pkgInfo) []string {
	var bad []string
	for name, p := range pkgs {
		rel, _ := ours(name)
		deps := p.deps
		ourDeps := func(allowed ...string) {
			for _, d := range deps {
				dr, mine := ours(d)
				if mine && !slices.Contains(allowed, dr) {
					bad = append(bad, rel+" depends on "+d+" (it may use only "+strings.Join(allowed, ", ")+" of ours)")
				}
			}
		}
		switch {
		case rel == "value" || rel == "governance" || rel == "devices" || rel == "store":
			// Pure leaves: the standard library, no I/O, and only the value type of ours.
			for _, d := range deps {
				if !isStd(d) {
					if dr, mine := ours(d); !mine || dr != "value" || rel == "value" {
						bad = append(bad, rel+" depends on "+d+" (standard library only)")
					}
				}
			}
			if rel != "store" {
				for _, imp := range p.imports {
					if ioPackages.MatchString(imp) {
						bad = append(bad, rel+" imports "+imp+" (it must do no I/O)")
					}
				}
			}
		case rel == "access":
			ourDeps()
		case rel == "runtime/runtimetest":
			// Test support, never linked into the binary (checked below):
			// its rigs may reach a driver.
			ourDeps("devices", "devices/devicetest", "drivers/sim", "governance", "internal/failpoint", "runtime", "value")
		case under(rel, "runtime"):
			for _, d := range deps {
				dr, mine := ours(d)
				if mine && (under(dr, "drivers") || under(dr, "web") || under(dr, "gateway") || under(dr, "access") || under(dr, "cmd")) {
					bad = append(bad, rel+" depends on "+d+" (the runtime knows no driver and no surface)")
				}
			}
		case under(rel, "devices/"):
			ourDeps("devices", "value")
		case under(rel, "drivers"):
			// A driver may use its own subpackages (drivers/serial/line
			// within drivers/serial), never another driver.
			top := strings.Join(strings.SplitN(rel, "/", 3)[:2], "/")
			allowed := []string{"devices", "value", "devices/devicetest"}
			for _, d := range deps {
				if dr, mine := ours(d); mine && under(dr, top) {
					allowed = append(allowed, dr)
				}
			}
			ourDeps(allowed...)
		case under(rel, "firmware-fixtures"):
			// A fixture plays hardware: it uses nothing of the gateway's,
			// only its own packages (the PLC simulator's command uses its
			// library).
			top := strings.Join(strings.SplitN(rel, "/", 3)[:2], "/")
			var own []string
			for _, d := range deps {
				if dr, mine := ours(d); mine && under(dr, top) {
					own = append(own, dr)
				}
			}
			ourDeps(own...)
		}
		for _, s := range surfaces {
			if !under(rel, s) {
				continue
			}
			for _, d := range deps {
				dr, mine := ours(d)
				if strings.HasPrefix(d, "go.etcd.io/bbolt") || (mine && (under(dr, "drivers") || under(dr, "runtime/journal"))) {
					bad = append(bad, rel+" depends on "+d+" (a surface reaches storage and devices through the runtime and store)")
				}
			}
		}
		for _, d := range deps {
			dr, mine := ours(d)
			if !mine {
				continue
			}
			if under(dr, "cmd") || (dr == "gateway" && !under(rel, "cmd")) {
				bad = append(bad, rel+" depends on "+d+" (nothing imports cmd or gateway)")
			}
		}
		if rel == "cmd/shadowgate" {
			for _, d := range deps {
				dr, _ := ours(d)
				// gopcua's server (3.8 MB of nodeset) is the PLC simulator's,
				// never the gateway's.
				if d == "testing" || d == "net/http/httptest" || d == "net/http/pprof" || strings.HasPrefix(d, "github.com/mochi-mqtt/server/v2/config") ||
					strings.HasPrefix(d, "github.com/gopcua/opcua/server") || dr == "runtime/runtimetest" {
					bad = append(bad, "the binary links "+d)
				}
			}
		}
	}
	slices.Sort(bad)
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
		module + "/governance":  {imports: []string{"os"}, deps: []string{"os"}},
		module + "/runtime":     {deps: []string{module + "/drivers/sim"}},
		module + "/drivers/sim": {deps: []string{module + "/runtime", module + "/devices"}},
		module + "/devices":     {deps: []string{"go.etcd.io/bbolt"}},
		// A driver may use its own subpackages, not another driver's.
		module + "/drivers/gpio":          {deps: []string{module + "/drivers/serial/line", module + "/devices"}},
		module + "/drivers/serial/modbus": {deps: []string{module + "/drivers/serial/port", module + "/devices"}},
		module + "/firmware-fixtures/x":   {deps: []string{module + "/value"}},
		// The surface imports nothing of storage itself: the runtime's
		// journal brings bbolt in behind its back.
		module + "/gateway/mqtt":   {imports: []string{module + "/runtime/journal"}, deps: []string{module + "/runtime/journal", "go.etcd.io/bbolt"}},
		module + "/gateway/uplink": {imports: []string{module + "/store"}, deps: []string{module + "/store", module + "/gateway/mqtt", module + "/runtime/journal", "go.etcd.io/bbolt"}},
		module + "/value":          {deps: []string{module + "/devices"}},
		module + "/cmd/shadowgate": {deps: []string{module + "/runtime/runtimetest", "github.com/gopcua/opcua/server"}},
	}
	got := violations(fake)
	for _, g := range got {
		if strings.HasPrefix(g, "drivers/serial/modbus") {
			t.Errorf("a driver's own subpackage was taken for another driver: %s", g)
		}
	}
	for _, want := range []string{"governance imports os", "runtime depends on " + module + "/drivers/sim",
		"drivers/sim depends on " + module + "/runtime", "devices depends on go.etcd.io/bbolt",
		"gateway/mqtt depends on go.etcd.io/bbolt", "gateway/mqtt depends on " + module + "/runtime/journal",
		"gateway/uplink depends on go.etcd.io/bbolt", "value depends on " + module + "/devices",
		"the binary links " + module + "/runtime/runtimetest", "the binary links github.com/gopcua/opcua/server",
		"drivers/gpio depends on " + module + "/drivers/serial/line", "firmware-fixtures/x depends on " + module + "/value"} {
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
	for _, dir := range []string{"governance", "devices", "value"} {
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
