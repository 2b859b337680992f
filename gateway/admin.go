package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/store"
)

// adminHashFile holds the hash of the generated admin password.
const adminHashFile = "admin.bcrypt"

// firstAdmin returns the admin of a gateway configured without users. On
// the first start it makes a password, keeps only its hash in the state
// directory, and writes the password to notice, once.
func firstAdmin(stateDir string, notice io.Writer) (access.User, error) {
	path := filepath.Join(stateDir, adminHashFile)
	u := access.User{Name: "admin", Role: access.Admin}
	b, err := os.ReadFile(path)
	if err == nil {
		u.Hash = []byte(strings.TrimSpace(string(b)))
		if err := access.CheckHash(u.Hash); err != nil {
			return u, fmt.Errorf("%s: %w", path, err)
		}
		return u, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return u, fmt.Errorf("reading %s: %w", path, err)
	}
	var raw [15]byte
	_, _ = rand.Read(raw[:])
	password := base64.RawURLEncoding.EncodeToString(raw[:])
	if u.Hash, err = access.HashPassword([]byte(password)); err != nil {
		return u, err
	}
	if err := os.WriteFile(path, append(u.Hash, '\n'), 0o600); err != nil {
		return u, fmt.Errorf("storing the admin password's hash: %w", err)
	}
	if notice == nil {
		notice = os.Stderr
	}
	fmt.Fprintf(notice, "\nNo users are configured, so an admin was made for the console and MQTT:\n"+
		"  user: admin\n  password: %s\nThis is shown once; only its hash is kept, in %s.\n\n", password, path)
	return u, nil
}

// memSessions keeps console sessions in memory, for a gateway whose
// journal cannot be used: logins work, and end with the process.
type memSessions struct {
	mu sync.Mutex
	m  map[string]store.Session
}

func newMemSessions() *memSessions { return &memSessions{m: map[string]store.Session{}} }

func (s *memSessions) Put(cookie string, sess store.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[cookie] = sess
	return nil
}

func (s *memSessions) Get(cookie string, now time.Time) (store.Session, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[cookie]
	if !ok || !now.Before(sess.Expires) {
		return store.Session{}, false, nil
	}
	return sess, true, nil
}

func (s *memSessions) Delete(cookie string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, cookie)
	return nil
}

func (s *memSessions) Prune(now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.m {
		if !now.Before(v.Expires) {
			delete(s.m, k)
			n++
		}
	}
	return n, nil
}
