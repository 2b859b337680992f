package access

import (
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"golang.org/x/crypto/bcrypt"
)

// Role is what a user may do. Each role may do what the ones below it may.
type Role int

// The roles, weakest first.
const (
	Viewer Role = iota + 1
	Operator
	Approver
	Admin
)

var roleNames = map[Role]string{Viewer: "viewer", Operator: "operator", Approver: "approver", Admin: "admin"}

func (r Role) String() string {
	if s, ok := roleNames[r]; ok {
		return s
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole reads a role by name.
func ParseRole(s string) (Role, error) {
	for r, name := range roleNames {
		if name == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown role %q (want viewer, operator, approver or admin)", s)
}

// AtLeast reports whether r may do what min may.
func (r Role) AtLeast(min Role) bool { return r >= min }

// User is one account.
type User struct {
	Name string
	Role Role
	// Hash is the bcrypt hash of the password.
	Hash []byte
	// Publish and Subscribe are MQTT topic filters the user may use; nil
	// means the defaults of the role.
	Publish, Subscribe []string
}

// CheckHash reports whether h is a bcrypt hash this build accepts.
func CheckHash(h []byte) error {
	if _, err := bcrypt.Cost(h); err != nil {
		return errors.New("not a bcrypt hash (make one with shadowgate hash-password)")
	}
	return nil
}

// Users is a set of accounts, safe for concurrent use once built. A set
// never changes: new accounts are a new set, which remembers nothing of
// the old one's checks (see [Users.CheckCached]).
type Users struct {
	byName map[string]*User
	// remembered holds the successful checks of CheckCached; nil in a set
	// not made by NewUsers, which then remembers nothing.
	remembered *remembered
	// comparisons counts bcrypt comparisons, for Comparisons.
	comparisons atomic.Uint64
}

// NewUsers builds the set; names must be unique and hashes bcrypt.
func NewUsers(us []User) (*Users, error) {
	s := &Users{byName: map[string]*User{}, remembered: newRemembered()}
	for i := range us {
		u := us[i]
		if u.Name == "" {
			return nil, errors.New("a user has no name")
		}
		if _, dup := s.byName[u.Name]; dup {
			return nil, fmt.Errorf("user %s is defined twice", u.Name)
		}
		if err := CheckHash(u.Hash); err != nil {
			return nil, fmt.Errorf("user %s: %w", u.Name, err)
		}
		s.byName[u.Name] = &u
	}
	return s, nil
}

// Lookup returns a user by name.
func (s *Users) Lookup(name string) (*User, bool) {
	u, ok := s.byName[name]
	return u, ok
}

// Names returns the user names, sorted.
func (s *Users) Names() []string {
	out := make([]string, 0, len(s.byName))
	for n := range s.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// dummyHash is compared against when the user does not exist, so that a
// wrong name costs as much time as a wrong password. It is a fixed hash at
// bcrypt's default cost, made once when this was written: making it when
// the package loads cost every start a bcrypt run (about 90 ms here,
// several times that on an armv6 board), `shadowgate version` and `check`
// included, and making it on first use doubled the first unknown name's
// cost. Its password is of no use to anyone: a match is refused all the
// same, the user being unknown.
var dummyHash = []byte("$2a$10$Q17snz7g24elHF59OIPNaeVbYbP3JVQmNfMvShXcm/0fmqizXbHz6")

// Check returns the user when name and password match. It compares with
// bcrypt every time, whether or not the user exists, so that a wrong name
// costs as much as a wrong password. It is safe for concurrent use.
func (s *Users) Check(name string, password []byte) (*User, bool) {
	u, ok := s.byName[name]
	var h []byte
	if ok {
		h = u.Hash
	} else {
		h = dummyHash
	}
	s.comparisons.Add(1)
	if bcrypt.CompareHashAndPassword(h, password) != nil || !ok {
		return nil, false
	}
	return u, true
}

// Comparisons returns how many passwords s has compared with bcrypt, by
// Check or by a CheckCached that found nothing to take. It is safe for
// concurrent use.
func (s *Users) Comparisons() uint64 { return s.comparisons.Load() }

// HashPassword returns a bcrypt hash of password at the default cost.
func HashPassword(password []byte) ([]byte, error) {
	if len(password) < 8 {
		return nil, errors.New("a password needs at least 8 characters")
	}
	return bcrypt.GenerateFromPassword(password, bcrypt.DefaultCost)
}
