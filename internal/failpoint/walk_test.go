package failpoint_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/internal/failpoint"
)

// root is the module's directory, from this package's.
const root = "../.."

// durable names the calls that make something durable: a bbolt write
// transaction (the journal's update, bbolt's Update, Batch and Commit) and
// a driver's write, the one step that touches the world.
var durable = map[string]bool{"update": true, "Update": true, "Batch": true, "Commit": true, "callWrite": true}

// exempt are the functions that make something durable without a
// failpoint, and why none is needed.
var exempt = map[string]string{
	"runtime/journal.(*DB).init":       "creates the buckets when the journal opens, before anything is accepted: a crash leaves a file the next open prepares again",
	"runtime/journal.(*DB).adopt":      "upgrades a schema 1 file in one transaction when it opens, before anything is accepted",
	"runtime/journal.(*DB).index":      "builds the indexes, derived from the records, in one transaction when the journal opens, before anything is accepted: a crash leaves the old head, and the next open builds them again",
	"runtime/journal.(*DB).update":     "is the transaction itself; its callers carry the failpoints",
	"runtime.(*Engine).commit":         "hands every entry to the journal, whose group commit carries the failpoints (journal:commit:*)",
	"runtime/journal.(*DB).setLogMark": "sets or clears the store's log mark in one transaction, when the journal opens before anything is accepted, or at a clean stop after the last write: a crash on either side of it leaves a log the next open takes (TestADeletedLogFailsClosed, the crash matrix's remove and store rows)",
	"runtime/journal.forgetLog":        "writes the backup's own temporary copy, not the journal: a crash leaves a file nobody reads",
}

// writePath are the packages whose durable steps must each have a failpoint.
var writePath = []string{"runtime", "runtime/journal"}

// TestFailpointsList prints the failpoints, so that a run of the tests
// says what the crash tests can reach, and keeps the list sound.
func TestFailpointsList(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range failpoint.All {
		t.Logf("failpoint %s", name)
		if seen[name] {
			t.Errorf("failpoint %s is listed twice", name)
		}
		seen[name] = true
	}
	declared := 0
	for id := range constNames(t) {
		if !strings.HasPrefix(id, "Env") { // the arming variables' names
			declared++
		}
	}
	if declared != len(failpoint.All) {
		t.Errorf("names.go declares %d failpoints, All lists %d", declared, len(failpoint.All))
	}
}

// TestEveryDurableStepHasAFailpoint walks the write path: every function
// that commits a bbolt transaction or calls a driver's write must inject a
// listed failpoint, and every listed failpoint must be injected somewhere.
// A new durable step without a failpoint fails here.
func TestEveryDurableStepHasAFailpoint(t *testing.T) {
	names := constNames(t)
	var sites []site
	for _, pkg := range writePath {
		sites = append(sites, parseDir(t, pkg)...)
	}
	for _, bad := range uncovered(sites, names) {
		t.Error(bad)
	}
	injected := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		for _, n := range injections(f, names) {
			injected[n] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range failpoint.All {
		if !injected[name] {
			t.Errorf("failpoint %s is listed but injected nowhere", name)
		}
	}
}

// TestTheWalkCatchesAnUncoveredStep proves the walk can fail: a commit
// without a failpoint, and a failpoint that is not in the list.
func TestTheWalkCatchesAnUncoveredStep(t *testing.T) {
	src := `package journal
func (j *DB) covered() error {
	return j.update(func(tx *bolt.Tx) error { return failpoint.Inject(failpoint.OutboxAck) })
}
func (j *DB) bare() error { return j.db.Update(nil) }
func (j *DB) unlisted() error {
	_ = failpoint.Inject(failpoint.NotAPoint)
	return j.update(nil)
}
`
	f, err := parser.ParseFile(token.NewFileSet(), "fake.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := uncovered(sitesOf("runtime/journal", f), constNames(t))
	for _, want := range []string{
		"runtime/journal.(*DB).bare calls Update with no failpoint",
		"runtime/journal.(*DB).unlisted calls update with no failpoint",
		"runtime/journal.(*DB).unlisted injects a failpoint that is not in failpoint.All",
	} {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("uncovered misses %q; got %q", want, got)
		}
	}
	if len(got) != 3 {
		t.Errorf("uncovered = %q, want 3 findings", got)
	}
}

// TestTheActPassesItsFailpointsInOrder: in the act, the executing record
// lies between the points before and after it, and the driver's write
// between the point after executing and the one after the driver.
func TestTheActPassesItsFailpointsInOrder(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, "runtime", "act.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := constNames(t)
	at := map[string]token.Pos{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "act" {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if name, ok := injected(n, names); ok && at[name] == 0 {
					at[name] = n.Pos()
				}
				if s, ok := n.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "callWrite" && at["callWrite"] == 0 {
					at["callWrite"] = n.Pos()
				}
			case *ast.Ident:
				if n.Name == "AttemptExecuting" && at["executing"] == 0 {
					at["executing"] = n.Pos()
				}
			}
			return true
		})
	}
	order := []string{failpoint.ActBeforeExecuting, "executing", failpoint.ActAfterExecuting, "callWrite", failpoint.ActAfterDriver, failpoint.ActAfterReceipt}
	for i, k := range order {
		if at[k] == 0 {
			t.Fatalf("runtime/act.go: act has no %s", k)
		}
		if i > 0 && at[k] <= at[order[i-1]] {
			t.Errorf("runtime/act.go: in act, %s (%s) comes before %s (%s)", k, fset.Position(at[k]), order[i-1], fset.Position(at[order[i-1]]))
		}
	}
}

// site is a function on the write path: what it calls that is durable,
// and the failpoints it injects.
type site struct {
	fn      string
	durable []string
	injects []ast.Expr
}

func parseDir(t *testing.T, pkg string) []site {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []site
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sitesOf(pkg, f)...)
	}
	return out
}

func sitesOf(pkg string, f *ast.File) []site {
	var out []site
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		s := site{fn: pkg + "." + funcName(fd)}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fun := c.Fun.(type) {
			case *ast.SelectorExpr:
				if x, ok := fun.X.(*ast.Ident); ok && x.Name == "failpoint" && fun.Sel.Name == "Inject" {
					if len(c.Args) == 1 {
						s.injects = append(s.injects, c.Args[0])
					}
				} else if durable[fun.Sel.Name] {
					s.durable = append(s.durable, fun.Sel.Name)
				}
			case *ast.Ident:
				if durable[fun.Name] {
					s.durable = append(s.durable, fun.Name)
				}
			}
			return true
		})
		if len(s.durable) > 0 || len(s.injects) > 0 {
			out = append(out, s)
		}
	}
	return out
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	var recv string
	switch r := fd.Recv.List[0].Type.(type) {
	case *ast.StarExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			recv = "(*" + id.Name + ")"
		}
	case *ast.Ident:
		recv = r.Name
	}
	return recv + "." + fd.Name.Name
}

// uncovered names each function with a durable call and no listed
// failpoint, and each injection of a name not in the list.
func uncovered(sites []site, names map[string]string) []string {
	var bad []string
	for _, s := range sites {
		listed := 0
		for _, arg := range s.injects {
			if _, ok := nameOf(arg, names); ok {
				listed++
			} else {
				bad = append(bad, s.fn+" injects a failpoint that is not in failpoint.All")
			}
		}
		if len(s.durable) > 0 && listed == 0 && exempt[s.fn] == "" {
			bad = append(bad, s.fn+" calls "+strings.Join(slices.Compact(s.durable), ", ")+" with no failpoint: inject one of internal/failpoint's (add it to All) or say in exempt why none is needed")
		}
	}
	slices.Sort(bad)
	return bad
}

// injections returns the listed names f injects.
func injections(f *ast.File, names map[string]string) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if name, ok := injected(c, names); ok {
				out = append(out, name)
			}
		}
		return true
	})
	return out
}

// injected returns the name c injects, if c is failpoint.Inject of a
// listed constant.
func injected(c *ast.CallExpr, names map[string]string) (string, bool) {
	fun, ok := c.Fun.(*ast.SelectorExpr)
	if !ok || fun.Sel.Name != "Inject" || len(c.Args) != 1 {
		return "", false
	}
	if x, ok := fun.X.(*ast.Ident); !ok || x.Name != "failpoint" {
		return "", false
	}
	return nameOf(c.Args[0], names)
}

func nameOf(arg ast.Expr, names map[string]string) (string, bool) {
	s, ok := arg.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	if x, ok := s.X.(*ast.Ident); !ok || x.Name != "failpoint" {
		return "", false
	}
	v, ok := names[s.Sel.Name]
	return v, ok && slices.Contains(failpoint.All, v)
}

// constNames reads names.go: the failpoints' constants by identifier.
func constNames(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile("names.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "names.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out[id.Name] = v
					}
				}
			}
		}
	}
	return out
}
