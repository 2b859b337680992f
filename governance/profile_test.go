package governance

import (
	"testing"

	"pgregory.net/rapid"
)

// genScopeSet draws scope sets over a small alphabet, so that overlaps,
// subtrees and duplicates are common.
func genScopeSet() *rapid.Generator[ScopeSet] {
	seg := rapid.SampledFrom([]string{"a", "b", "c"})
	path := rapid.Custom(func(t *rapid.T) string {
		n := rapid.IntRange(1, 3).Draw(t, "depth")
		s := seg.Draw(t, "seg0")
		for i := 1; i < n; i++ {
			s += "/" + seg.Draw(t, "seg")
		}
		return s
	})
	return rapid.Custom(func(t *rapid.T) ScopeSet {
		if rapid.IntRange(0, 9).Draw(t, "everything") == 0 {
			return Everything()
		}
		n := rapid.IntRange(0, 4).Draw(t, "members")
		members := make([]string, 0, n)
		for range n {
			p := path.Draw(t, "path")
			if rapid.Bool().Draw(t, "tree") {
				p += "/**"
			}
			members = append(members, p)
		}
		s, err := ParseScopeSet(members)
		if err != nil {
			t.Fatalf("ParseScopeSet(%q): %v", members, err)
		}
		return s
	})
}

func genProfile() *rapid.Generator[EffectProfile] {
	return rapid.Custom(func(t *rapid.T) EffectProfile {
		return EffectProfile{
			Reads:      genScopeSet().Draw(t, "reads"),
			Writes:     genScopeSet().Draw(t, "writes"),
			Reaches:    rapid.Bool().Draw(t, "reaches"),
			Reversible: rapid.Bool().Draw(t, "reversible"),
			Contained:  rapid.Bool().Draw(t, "contained"),
			Costs:      rapid.Bool().Draw(t, "costs"),
		}
	})
}

func TestNarrowsIsAPartialOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, q, r := genProfile().Draw(t, "p"), genProfile().Draw(t, "q"), genProfile().Draw(t, "r")
		if !p.Narrows(p) {
			t.Fatalf("not reflexive: %v", p)
		}
		if p.Narrows(q) && q.Narrows(p) && !p.Equal(q) {
			t.Fatalf("not antisymmetric: %v and %v narrow each other but differ", p, q)
		}
		if p.Narrows(q) && q.Narrows(r) && !p.Narrows(r) {
			t.Fatalf("not transitive: %v <= %v <= %v", p, q, r)
		}
	})
}

func TestMeetIsTheGreatestLowerBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, q, r := genProfile().Draw(t, "p"), genProfile().Draw(t, "q"), genProfile().Draw(t, "r")
		m := p.Meet(q)
		if !m.Narrows(p) || !m.Narrows(q) {
			t.Fatalf("Meet widens a side: %v meet %v = %v", p, q, m)
		}
		if r.Narrows(p) && r.Narrows(q) && !r.Narrows(m) {
			t.Fatalf("Meet is not greatest: %v is below %v and %v but not below %v", r, p, q, m)
		}
		if !m.Equal(q.Meet(p)) {
			t.Fatalf("Meet is not commutative: %v vs %v", m, q.Meet(p))
		}
	})
}

func TestJoinIsTheLeastUpperBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, q, r := genProfile().Draw(t, "p"), genProfile().Draw(t, "q"), genProfile().Draw(t, "r")
		j := p.Join(q)
		if !p.Narrows(j) || !q.Narrows(j) {
			t.Fatalf("Join is below a side: %v join %v = %v", p, q, j)
		}
		if p.Narrows(r) && q.Narrows(r) && !j.Narrows(r) {
			t.Fatalf("Join is not least: %v and %v are below %v but %v is not", p, q, r, j)
		}
	})
}

func TestNothingAndWorstBoundEverything(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genProfile().Draw(t, "p")
		if !Nothing().Narrows(p) {
			t.Fatalf("Nothing does not narrow %v", p)
		}
		if !p.Narrows(Worst()) {
			t.Fatalf("%v does not narrow Worst", p)
		}
	})
}

func TestScopeSetMembers(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, "nothing"},
		{[]string{"a/b", "a/**"}, "a/**"},
		{[]string{"a/b/**", "a/**", "b"}, "a/**, b"},
		{[]string{"b", "a", "b"}, "a, b"},
		{[]string{"x", "**"}, "**"},
		{[]string{"ab/c", "a/**"}, "a/**, ab/c"},
	}
	for _, tc := range tests {
		s, err := ParseScopeSet(tc.in)
		if err != nil {
			t.Fatalf("ParseScopeSet(%q): %v", tc.in, err)
		}
		if got := s.String(); got != tc.want {
			t.Errorf("ParseScopeSet(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "a//b", "/a", "a/", "a/*/b", "a/../b"} {
		if _, err := ParseScopeSet([]string{bad}); err == nil {
			t.Errorf("ParseScopeSet(%q) succeeded, want an error", bad)
		}
	}
	tree, _ := ParseScopeSet([]string{"greenhouse/**"})
	if !tree.Contains("greenhouse") || !tree.Contains("greenhouse/zone-a/tank-1") || tree.Contains("greenhouses/x") {
		t.Errorf("greenhouse/** membership is wrong")
	}
}
