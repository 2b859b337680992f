package mqtt

import (
	"strings"
	"testing"
)

// A client that connects again with the password bcrypt accepted is let
// in without bcrypt; a wrong password after it is still refused, and
// still costs bcrypt.
func TestReconnectIsNotCheckedWithBcryptAgain(t *testing.T) {
	gw := startGW(t, gwOptions{})
	users := gw.b.opts.Users
	connect := func(user, password string) (uint64, error) {
		t.Helper()
		before := users.Comparisons()
		c, err := gw.client(user, password)
		if err == nil {
			c.Disconnect(50)
		}
		return users.Comparisons() - before, err
	}
	steps := []struct {
		user, password string
		ok             bool
		comparisons    uint64
	}{
		{"alice", "alice-password", true, 1},
		{"alice", "alice-password", true, 0},
		{"alice", "alice-password", true, 0},
		{"alice", "wrong-password", false, 1},
		{"alice", "alice-password", true, 0},
		{"victor", "alice-password", false, 1},
		{"victor", "victor-password", true, 1},
		{"victor", "victor-password", true, 0},
	}
	for i, s := range steps {
		n, err := connect(s.user, s.password)
		if (err == nil) != s.ok || n != s.comparisons {
			t.Fatalf("step %d: connect as %s with %q: error %v, %d bcrypt comparisons; want ok=%v, %d", i, s.user, s.password, err, n, s.ok, s.comparisons)
		}
		if err != nil && !strings.Contains(err.Error(), "not Authorized") {
			t.Fatalf("step %d: connect as %s: %v, want not Authorized", i, s.user, err)
		}
	}
}
