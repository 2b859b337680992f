package access

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"time"
)

// rememberFor bounds how long CheckCached takes a password without bcrypt
// after bcrypt last accepted it: then the next check compares again.
const rememberFor = 10 * time.Minute

// rememberAtMost bounds how many users' checks a set remembers at once;
// when it is full, the oldest check is forgotten to make room.
const rememberAtMost = 1024

// remembered is what CheckCached keeps of successful checks: per user, a
// MAC of the name and password under a random key that never leaves the
// process, the hash the password matched and when. It keeps no password
// and nothing that a password can be read back from without the key.
type remembered struct {
	key [32]byte
	now func() time.Time

	// mu guards checks.
	mu     sync.Mutex
	checks map[string]check
}

// check is one successful check: mac is the MAC of the name and the
// password, hash a copy of the user's hash it matched, at when.
type check struct {
	mac  [sha256.Size]byte
	hash []byte
	at   time.Time
}

func newRemembered() *remembered {
	r := &remembered{now: time.Now, checks: map[string]check{}}
	_, _ = rand.Read(r.key[:]) // never fails (crypto/rand, Go 1.24+)
	return r
}

// mac is HMAC-SHA256 under r.key of the name's length, the name and the
// password: the length keeps ("a\x00b", "c") apart from ("a", "b\x00c").
func (r *remembered) mac(name string, password []byte) [sha256.Size]byte {
	m := hmac.New(sha256.New, r.key[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	m.Write(n[:])
	m.Write([]byte(name))
	m.Write(password)
	var sum [sha256.Size]byte
	m.Sum(sum[:0])
	return sum
}

// CheckCached is [Users.Check] for clients that reconnect often, as MQTT
// clients do: a password that bcrypt accepted for a user within the last
// 10 minutes is taken again without bcrypt, in microseconds instead of
// tens of milliseconds, so a storm of reconnects does not cost seconds of
// CPU. Anything else is checked by Check: a wrong password, an unknown
// name and a password not seen for 10 minutes cost bcrypt as before, so
// guessing stays slow and a wrong name costs as much as a wrong password.
//
// Only successes are remembered, at most 1024 users' (the oldest check
// goes first), each for 10 minutes from the bcrypt check that made it; a
// success taken from memory does not extend it. A remembered check holds
// for the user's hash it matched: a set whose user has another hash, or no
// such user, takes nothing from it, and a set made by NewUsers (as a
// change of users makes one) starts with nothing remembered. What is kept
// is an HMAC-SHA256 of the name and password under a random key made with
// the set and never stored, not the password. It is safe for concurrent
// use.
func (s *Users) CheckCached(name string, password []byte) (*User, bool) {
	r := s.remembered
	if r == nil {
		return s.Check(name, password)
	}
	mac := r.mac(name, password)
	if u, ok := s.byName[name]; ok && r.holds(name, mac, u.Hash) {
		return u, true
	}
	u, ok := s.Check(name, password)
	if ok {
		r.add(name, check{mac: mac, hash: append([]byte(nil), u.Hash...), at: r.now()})
	}
	return u, ok
}

// holds reports whether a check of name with mac against hash is
// remembered and still good; it forgets one that no longer is, unless
// only the password differs (a wrong guess must not evict a client).
func (r *remembered) holds(name string, mac [sha256.Size]byte, hash []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.checks[name]
	if !ok {
		return false
	}
	if age := r.now().Sub(c.at); age < 0 || age >= rememberFor || !hmac.Equal(c.hash, hash) {
		delete(r.checks, name)
		return false
	}
	return hmac.Equal(c.mac[:], mac[:])
}

// add remembers c as name's check, making room if the table is full.
func (r *remembered) add(name string, c check) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.checks[name]; !ok && len(r.checks) >= rememberAtMost {
		r.makeRoomLocked(c.at)
	}
	r.checks[name] = c
}

// makeRoomLocked forgets the expired checks, or the oldest one if none
// has expired. It scans the table: it runs only after a bcrypt check,
// which costs far more than 1024 comparisons of times.
func (r *remembered) makeRoomLocked(now time.Time) {
	oldest, first := "", true
	var oldestAt time.Time
	for name, c := range r.checks {
		if age := now.Sub(c.at); age < 0 || age >= rememberFor {
			delete(r.checks, name)
			continue
		}
		if first || c.at.Before(oldestAt) {
			oldest, oldestAt, first = name, c.at, false
		}
	}
	if len(r.checks) >= rememberAtMost {
		delete(r.checks, oldest)
	}
}
