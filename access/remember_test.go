package access

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// clockUsers is a set of ann (password "ann-password") and bob
// ("bob-password") whose remembered checks read the returned clock.
func clockUsers(t *testing.T) (*Users, *time.Time) {
	t.Helper()
	us, err := NewUsers([]User{
		{Name: "ann", Role: Operator, Hash: minHash(t, "ann-password")},
		{Name: "bob", Role: Viewer, Hash: minHash(t, "bob-password")},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	us.remembered.now = func() time.Time { return now }
	return us, &now
}

func minHash(t testing.TB, pw string) []byte {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// try checks name and password with CheckCached and says whether it
// passed and whether bcrypt compared.
func try(us *Users, name, pw string) (ok, compared bool) {
	before := us.Comparisons()
	_, ok = us.CheckCached(name, []byte(pw))
	return ok, us.Comparisons() != before
}

func TestCheckCached(t *testing.T) {
	us, now := clockUsers(t)
	steps := []struct {
		name         string
		user, pw     string
		advance      time.Duration
		ok, compared bool
	}{
		{"first check compares", "ann", "ann-password", 0, true, true},
		{"repeat is remembered", "ann", "ann-password", time.Minute, true, false},
		{"wrong password still compares and fails", "ann", "wrong-password", 0, false, true},
		{"a wrong guess does not evict the right one", "ann", "ann-password", 0, true, false},
		{"another user's password fails", "ann", "bob-password", 0, false, true},
		{"unknown name compares and fails", "carol", "ann-password", 0, false, true},
		{"another user is remembered apart", "bob", "bob-password", 0, true, true},
		{"just before the TTL, remembered", "ann", "ann-password", rememberFor - time.Minute - time.Nanosecond, true, false},
		{"at the TTL, compared again", "ann", "ann-password", time.Nanosecond, true, true},
		{"then remembered again", "ann", "ann-password", time.Second, true, false},
		{"a remembered check is not extended by use", "ann", "ann-password", rememberFor - time.Second, true, true},
		{"a clock that went back compares", "ann", "ann-password", -time.Hour, true, true},
	}
	for _, s := range steps {
		*now = now.Add(s.advance)
		ok, compared := try(us, s.user, s.pw)
		if ok != s.ok || compared != s.compared {
			t.Fatalf("%s: CheckCached(%q, %q) ok=%v compared=%v, want ok=%v compared=%v", s.name, s.user, s.pw, ok, compared, s.ok, s.compared)
		}
	}
}

// A change of password, a removed user or a new set of users refuses a
// remembered password at once.
func TestCheckCachedForgetsChangedUsers(t *testing.T) {
	t.Run("new set", func(t *testing.T) {
		us, _ := clockUsers(t)
		if ok, _ := try(us, "ann", "ann-password"); !ok {
			t.Fatal("the right password was refused")
		}
		next, err := NewUsers([]User{{Name: "ann", Role: Operator, Hash: minHash(t, "new-password")}})
		if err != nil {
			t.Fatal(err)
		}
		if ok, compared := try(next, "ann", "ann-password"); ok || !compared {
			t.Fatalf("old password after a change: ok=%v compared=%v, want refused by bcrypt", ok, compared)
		}
		if ok, _ := try(next, "ann", "new-password"); !ok {
			t.Fatal("the new password was refused")
		}
	})
	t.Run("hash replaced in place", func(t *testing.T) {
		us, _ := clockUsers(t)
		u, _ := us.CheckCached("ann", []byte("ann-password"))
		copy(u.Hash, minHash(t, "new-password")) // as a caller holding the *User could
		if ok, compared := try(us, "ann", "ann-password"); ok || !compared {
			t.Fatalf("old password after the hash changed: ok=%v compared=%v, want refused by bcrypt", ok, compared)
		}
		if len(us.remembered.checks) != 0 {
			t.Fatalf("the stale check is still kept: %d checks", len(us.remembered.checks))
		}
	})
	t.Run("user removed", func(t *testing.T) {
		us, _ := clockUsers(t)
		_, _ = us.CheckCached("ann", []byte("ann-password"))
		delete(us.byName, "ann")
		if ok, _ := try(us, "ann", "ann-password"); ok {
			t.Fatal("a removed user's remembered password was taken")
		}
	})
}

// The table holds at most rememberAtMost users; a full table drops the
// expired checks, or else the oldest one.
func TestRememberedIsBounded(t *testing.T) {
	r := newRemembered()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range rememberAtMost + 10 {
		r.add(fmt.Sprintf("u%d", i), check{at: start.Add(time.Duration(i) * time.Millisecond)})
		if len(r.checks) > rememberAtMost {
			t.Fatalf("%d checks kept after %d adds, want at most %d", len(r.checks), i+1, rememberAtMost)
		}
	}
	for i := range 10 {
		if _, ok := r.checks[fmt.Sprintf("u%d", i)]; ok {
			t.Fatalf("u%d, among the oldest, is still kept", i)
		}
	}
	if _, ok := r.checks[fmt.Sprintf("u%d", rememberAtMost+9)]; !ok {
		t.Fatal("the newest check was not kept")
	}
	r.add("late", check{at: start.Add(rememberFor + time.Hour)})
	if len(r.checks) != 1 {
		t.Fatalf("%d checks kept once all others expired, want 1", len(r.checks))
	}
}

// What is kept is a MAC and the hash, never the password.
func TestRememberedKeepsNoPassword(t *testing.T) {
	us, _ := clockUsers(t)
	pw := []byte("ann-password")
	_, _ = us.CheckCached("ann", pw)
	c, ok := us.remembered.checks["ann"]
	if !ok {
		t.Fatal("nothing remembered")
	}
	if bytes.Contains(c.mac[:], pw) || bytes.Contains(c.hash, pw) {
		t.Fatal("the password is kept")
	}
	if us.remembered.mac("an", []byte("nann-password")) == c.mac {
		t.Fatal(`("an", "nann-password") has the MAC of ("ann", "ann-password")`)
	}
	other, _ := clockUsers(t)
	if other.remembered.mac("ann", pw) == c.mac {
		t.Fatal("two sets of users made the same MAC: the key is not random")
	}
}

func TestCheckCachedConcurrent(t *testing.T) {
	us, _ := clockUsers(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				pw := "ann-password"
				if i%2 == 1 {
					pw = "wrong-password"
				}
				if _, ok := us.CheckCached("ann", []byte(pw)); ok != (i%2 == 0) {
					t.Errorf("CheckCached(ann, %q) = %v", pw, ok)
				}
			}
		})
	}
	wg.Wait()
}

// A set not made by NewUsers remembers nothing and refuses everyone.
func TestCheckCachedZeroUsers(t *testing.T) {
	var us Users
	if _, ok := us.CheckCached("ann", []byte("ann-password")); ok {
		t.Fatal("the zero Users took a password")
	}
}

// A remembered check allocates little: it is what every reconnect costs.
func TestCheckCachedAllocs(t *testing.T) {
	us, _ := clockUsers(t)
	pw := []byte("ann-password")
	_, _ = us.CheckCached("ann", pw)
	if n := testing.AllocsPerRun(100, func() { us.CheckCached("ann", pw) }); n > 10 {
		t.Errorf("a remembered check makes %v allocations, want at most 10 (an HMAC and the lookups)", n)
	}
}
