package governance

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Scope is a '/'-separated path naming a part of the world, such as
// "greenhouse/zone-a/tank-1". A scope has no empty segments and no
// leading or trailing '/'.
type Scope string

// ParseScope checks s and returns it as a Scope.
func ParseScope(s string) (Scope, error) {
	if s == "" {
		return "", errors.New("scope is empty")
	}
	for seg := range strings.SplitSeq(s, "/") {
		switch seg {
		case "":
			return "", errors.New("scope " + strconv.Quote(s) + " has an empty segment")
		case "**", "*":
			return "", errors.New("scope " + strconv.Quote(s) + " has a wildcard segment; wildcards belong in scope sets")
		case ".", "..":
			return "", errors.New("scope " + strconv.Quote(s) + " has a relative segment")
		}
	}
	return Scope(s), nil
}

// under reports whether s is p or lies below p.
func (s Scope) under(p Scope) bool {
	return s == p || (len(s) > len(p) && strings.HasPrefix(string(s), string(p)) && s[len(p)] == '/')
}

// ScopeSet is a set of scopes: single paths, whole subtrees written
// "prefix/**" (the prefix and everything below it), or everything ("**").
//
// The zero value is the empty set. A ScopeSet is kept in a canonical form
// (sorted, without members that another member already covers), so two sets
// holding the same scopes are equal with ==-like comparison of their
// String forms, and [ScopeSet.Equal] is exact.
type ScopeSet struct {
	everything bool
	paths      []Scope // single scopes, sorted, none covered by a tree
	trees      []Scope // subtree roots, sorted, none under another
}

// Everything is the set of all scopes.
func Everything() ScopeSet { return ScopeSet{everything: true} }

// Scopes returns the set holding exactly the given single scopes.
func Scopes(ss ...Scope) ScopeSet { return normalize(false, slices.Clone(ss), nil) }

// Tree returns the set of root and every scope below it.
func Tree(root Scope) ScopeSet { return ScopeSet{trees: []Scope{root}} }

// ParseScopeSet parses members such as "greenhouse/tank-1",
// "greenhouse/**" and "**". It names the first bad member.
func ParseScopeSet(members []string) (ScopeSet, error) {
	var paths, trees []Scope
	for _, m := range members {
		if m == "**" {
			return Everything(), nil
		}
		if root, ok := strings.CutSuffix(m, "/**"); ok {
			sc, err := ParseScope(root)
			if err != nil {
				return ScopeSet{}, err
			}
			trees = append(trees, sc)
			continue
		}
		sc, err := ParseScope(m)
		if err != nil {
			return ScopeSet{}, err
		}
		paths = append(paths, sc)
	}
	return normalize(false, paths, trees), nil
}

// IsEverything reports whether s holds every scope.
func (s ScopeSet) IsEverything() bool { return s.everything }

// IsEmpty reports whether s holds no scope.
func (s ScopeSet) IsEmpty() bool { return !s.everything && len(s.paths) == 0 && len(s.trees) == 0 }

// Contains reports whether the single scope x is in s.
func (s ScopeSet) Contains(x Scope) bool {
	if s.everything || slices.Contains(s.paths, x) {
		return true
	}
	for _, t := range s.trees {
		if x.under(t) {
			return true
		}
	}
	return false
}

// coversTree reports whether every scope under root is in s.
func (s ScopeSet) coversTree(root Scope) bool {
	if s.everything {
		return true
	}
	for _, t := range s.trees {
		if root.under(t) {
			return true
		}
	}
	return false
}

// SubsetOf reports whether every scope in s is also in o.
func (s ScopeSet) SubsetOf(o ScopeSet) bool {
	if o.everything {
		return true
	}
	if s.everything {
		return false
	}
	for _, p := range s.paths {
		if !o.Contains(p) {
			return false
		}
	}
	for _, t := range s.trees {
		if !o.coversTree(t) {
			return false
		}
	}
	return true
}

// Intersect returns the scopes that are in both s and o.
func (s ScopeSet) Intersect(o ScopeSet) ScopeSet {
	switch {
	case s.everything:
		return o
	case o.everything:
		return s
	}
	var paths, trees []Scope
	for _, p := range s.paths {
		if o.Contains(p) {
			paths = append(paths, p)
		}
	}
	for _, p := range o.paths {
		if s.Contains(p) {
			paths = append(paths, p)
		}
	}
	for _, a := range s.trees {
		for _, b := range o.trees {
			switch {
			case a.under(b):
				trees = append(trees, a)
			case b.under(a):
				trees = append(trees, b)
			}
		}
	}
	return normalize(false, paths, trees)
}

// Union returns the scopes that are in s or o.
func (s ScopeSet) Union(o ScopeSet) ScopeSet {
	if s.everything || o.everything {
		return Everything()
	}
	paths := append(slices.Clone(s.paths), o.paths...)
	trees := append(slices.Clone(s.trees), o.trees...)
	return normalize(false, paths, trees)
}

// Equal reports whether s and o hold the same scopes.
func (s ScopeSet) Equal(o ScopeSet) bool {
	return s.everything == o.everything && slices.Equal(s.paths, o.paths) && slices.Equal(s.trees, o.trees)
}

// Members returns the set as the strings ParseScopeSet accepts.
func (s ScopeSet) Members() []string {
	if s.everything {
		return []string{"**"}
	}
	out := make([]string, 0, len(s.paths)+len(s.trees))
	for _, p := range s.paths {
		out = append(out, string(p))
	}
	for _, t := range s.trees {
		out = append(out, string(t)+"/**")
	}
	slices.Sort(out)
	return out
}

// String returns the members joined by ", ", or "nothing".
func (s ScopeSet) String() string {
	if s.IsEmpty() {
		return "nothing"
	}
	return strings.Join(s.Members(), ", ")
}

// normalize builds the canonical form: trees sorted without any under
// another, paths sorted, deduplicated and not covered by a tree.
func normalize(everything bool, paths, trees []Scope) ScopeSet {
	if everything {
		return Everything()
	}
	slices.Sort(trees)
	trees = slices.Compact(trees)
	keptTrees := trees[:0]
	for i, t := range trees {
		covered := false
		for j, u := range trees {
			if i != j && t != u && t.under(u) {
				covered = true
				break
			}
		}
		if !covered {
			keptTrees = append(keptTrees, t)
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	keptPaths := paths[:0]
	for _, p := range paths {
		covered := false
		for _, t := range keptTrees {
			if p.under(t) {
				covered = true
				break
			}
		}
		if !covered {
			keptPaths = append(keptPaths, p)
		}
	}
	out := ScopeSet{}
	if len(keptPaths) > 0 {
		out.paths = keptPaths
	}
	if len(keptTrees) > 0 {
		out.trees = keptTrees
	}
	return out
}
