package mqtt

import (
	"math/rand/v2"
	"strings"
	"testing"

	mochi "github.com/mochi-mqtt/server/v2"
	"golang.org/x/crypto/bcrypt"

	"github.com/shadowgate/shadowgate/access"
)

// aclBroker is a broker (not serving) with a user who lists filters, one
// who takes the role defaults, and anonymous viewers, and a connected
// client of each.
func aclBroker(tb testing.TB) (b *Broker, listed, defaults, anon *mochi.Client) {
	tb.Helper()
	eng, _, j, _ := testEngine(tb, "")
	tb.Cleanup(func() { _ = j.Close() })
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		tb.Fatal(err)
	}
	users, err := access.NewUsers([]access.User{
		{Name: "sensor-7", Role: access.Operator, Hash: h, Publish: []string{"bench/+/temp", "bench/#"}, Subscribe: []string{"bench/#"}},
		{Name: "operator", Role: access.Operator, Hash: h},
	})
	if err != nil {
		tb.Fatal(err)
	}
	viewer := access.Viewer
	b, err = New(eng, Options{Prefix: prefix, Users: users, Anonymous: &viewer})
	if err != nil {
		tb.Fatal(err)
	}
	client := func(id, user string) *mochi.Client {
		cl := b.srv.NewClient(nil, "tcp", id, false)
		cl.Properties.Username = []byte(user)
		return cl
	}
	return b, client("c1", "sensor-7"), client("c2", "operator"), client("c3", "")
}

// aclCases are ACL checks of a fan-in and of the command path, with the
// answers the rules give.
var aclCases = []struct {
	name   string
	client int // 0 listed filters, 1 role defaults, 2 anonymous
	topic  string
	write  bool
	want   bool
}{
	{"listed user publishes on its filter", 0, "bench/3", true, true},
	{"listed user receives on its filter", 0, "bench/3", false, true},
	{"listed user may not publish elsewhere", 0, "other/3", true, false},
	{"default operator commands", 1, prefix + "cmd/valve-1/open", true, true},
	{"default operator reads its replies", 1, prefix + "reply/valve-1/open", false, true},
	{"nobody publishes on the output topics", 1, prefix + "state/valve-1/open", true, false},
	{"default operator may not publish outside", 1, "bench/3", true, false},
	{"anonymous viewer reads the state", 2, prefix + "state/valve-1/open", false, true},
	{"anonymous viewer may not command", 2, prefix + "cmd/valve-1/open", true, false},
}

func TestACLCheck(t *testing.T) {
	b, listed, defaults, anon := aclBroker(t)
	h := &hook{b: b}
	clients := []*mochi.Client{listed, defaults, anon}
	for _, tc := range aclCases {
		if got := h.OnACLCheck(clients[tc.client], tc.topic, tc.write); got != tc.want {
			t.Errorf("%s: OnACLCheck(%s, %q, write=%v) = %v, want %v", tc.name, clients[tc.client].ID, tc.topic, tc.write, got, tc.want)
		}
	}
}

// TestACLCheckAllocatesNothing keeps the check every publish and every
// delivery passes through free of garbage.
func TestACLCheckAllocatesNothing(t *testing.T) {
	b, listed, defaults, anon := aclBroker(t)
	h := &hook{b: b}
	clients := []*mochi.Client{listed, defaults, anon}
	for _, tc := range aclCases {
		if !tc.want {
			continue // a denial logs at debug level, which may allocate
		}
		cl := clients[tc.client]
		if n := testing.AllocsPerRun(100, func() { h.OnACLCheck(cl, tc.topic, tc.write) }); n != 0 {
			t.Errorf("%s: OnACLCheck allocates %v times, want 0", tc.name, n)
		}
	}
}

// BenchmarkACLCheck is the hook's cost per publish (write) and per
// delivery (read) of a fan-in, and of a command.
func BenchmarkACLCheck(b *testing.B) {
	br, listed, defaults, _ := aclBroker(b)
	h := &hook{b: br}
	for _, bc := range []struct {
		name  string
		cl    *mochi.Client
		topic string
		write bool
	}{
		{"publish", listed, "bench/3", true},
		{"deliver", listed, "bench/3", false},
		{"command", defaults, prefix + "cmd/valve-1/open", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !h.OnACLCheck(bc.cl, bc.topic, bc.write) {
					b.Fatal("denied")
				}
			}
		})
	}
}

// splitMatches and splitCovers are the plain definitions Matches and
// Covers must agree with: level by level, after splitting on "/".
func splitMatches(filter, topic string) bool {
	f, t := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, level := range f {
		if level == "#" {
			return i == len(f)-1
		}
		if i >= len(t) || (level != "+" && level != t[i]) {
			return false
		}
	}
	return len(f) == len(t)
}

func splitCovers(pattern, filter string) bool {
	p, f := strings.Split(pattern, "/"), strings.Split(filter, "/")
	for i, level := range p {
		if level == "#" {
			return i == len(p)-1
		}
		if i >= len(f) {
			return false
		}
		switch {
		case f[i] == "#":
			return false
		case level == "+":
		case f[i] == "+" || level != f[i]:
			return false
		}
	}
	return len(p) == len(f)
}

// TestFiltersAgreeWithSplitting compares Matches and Covers with the
// definitions above on random filters and topics made of a few levels.
func TestFiltersAgreeWithSplitting(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	levels := []string{"a", "b", "", "+", "#", "ab"}
	gen := func() string {
		n := r.IntN(5)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = levels[r.IntN(len(levels))]
		}
		return strings.Join(parts, "/")
	}
	for range 20000 {
		x, y := gen(), gen()
		if got, want := Matches(x, y), splitMatches(x, y); got != want {
			t.Fatalf("Matches(%q, %q) = %v, splitting says %v (seed %d)", x, y, got, want, seed)
		}
		if got, want := Covers(x, y), splitCovers(x, y); got != want {
			t.Fatalf("Covers(%q, %q) = %v, splitting says %v (seed %d)", x, y, got, want, seed)
		}
	}
}
