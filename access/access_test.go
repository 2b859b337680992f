package access

import (
	"log/slog"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestRoles(t *testing.T) {
	for _, name := range []string{"viewer", "operator", "approver", "admin"} {
		r, err := ParseRole(name)
		if err != nil || r.String() != name {
			t.Fatalf("ParseRole(%q) = %v, %v", name, r, err)
		}
	}
	if _, err := ParseRole("root"); err == nil {
		t.Fatal("ParseRole accepted root")
	}
	if !Admin.AtLeast(Approver) || Operator.AtLeast(Approver) || !Viewer.AtLeast(Viewer) {
		t.Fatal("the roles are out of order")
	}
}

func TestUsers(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("s3cret-pass"), bcrypt.MinCost)
	us, err := NewUsers([]User{{Name: "ann", Role: Operator, Hash: h}})
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := us.Check("ann", []byte("s3cret-pass")); !ok || u.Role != Operator {
		t.Fatal("the right password was refused")
	}
	for _, c := range []struct{ name, pw string }{{"ann", "wrong"}, {"bob", "s3cret-pass"}, {"", ""}} {
		if _, ok := us.Check(c.name, []byte(c.pw)); ok {
			t.Fatalf("Check(%q, %q) passed", c.name, c.pw)
		}
	}
	if _, err := NewUsers([]User{{Name: "x", Hash: []byte("plain")}}); err == nil {
		t.Fatal("a plain-text password was taken as a hash")
	}
	if _, err := NewUsers([]User{{Name: "a", Hash: h}, {Name: "a", Hash: h}}); err == nil {
		t.Fatal("a user defined twice was accepted")
	}
	if _, err := HashPassword([]byte("short")); err == nil {
		t.Fatal("a 5-character password was hashed")
	}
}

func TestLimiter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLimiter(slog.New(slog.DiscardHandler), func() time.Time { return now })
	for range 5 {
		if l.Blocked("10.0.0.1:5000") {
			t.Fatal("blocked before five failures")
		}
		l.Failed("mqtt", "10.0.0.1:5000", "ann", "wrong")
	}
	if !l.Blocked("10.0.0.1:6000") {
		t.Fatal("five failures from one host did not block it (any port)")
	}
	if l.Blocked("10.0.0.2:5000") {
		t.Fatal("another host was blocked")
	}
	now = now.Add(61 * time.Second)
	if l.Blocked("10.0.0.1:5000") {
		t.Fatal("still blocked after the window")
	}
	l.Failed("mqtt", "10.0.0.3:1", "ann", "wrong")
	l.Succeeded("10.0.0.3:1")
	if l.Blocked("10.0.0.3:1") {
		t.Fatal("blocked after a success")
	}
}

// The dummy hash an unknown name is compared against is a bcrypt hash at
// the default cost, as a user's would be, so that both cost the same.
func TestDummyHashIsAtTheDefaultCost(t *testing.T) {
	if cost, err := bcrypt.Cost(dummyHash); err != nil || cost != bcrypt.DefaultCost {
		t.Fatalf("the dummy hash's cost = %d, %v; want %d", cost, err, bcrypt.DefaultCost)
	}
}
