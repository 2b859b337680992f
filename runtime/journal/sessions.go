package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Session is a console login. The file keeps it under the SHA-256 of its
// cookie, so reading the file does not give a usable cookie.
type Session struct {
	User    string    `json:"user"`
	Role    string    `json:"role"`
	Remote  string    `json:"remote"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Sessions is the console's session store, in the journal's file.
type Sessions struct{ j *DB }

// Sessions returns the journal's session store.
func (j *DB) Sessions() *Sessions { return &Sessions{j: j} }

func sessionKey(cookie string) []byte {
	h := sha256.Sum256([]byte(cookie))
	return []byte(hex.EncodeToString(h[:]))
}

// Put stores a session under its cookie.
func (s *Sessions) Put(cookie string, sess Session) error {
	b, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	return s.j.update(func(tx *bolt.Tx) error { return tx.Bucket(bSessions).Put(sessionKey(cookie), b) })
}

// Get returns the session of a cookie, if it exists and has not expired.
func (s *Sessions) Get(cookie string, now time.Time) (Session, bool, error) {
	var sess Session
	var found bool
	err := s.j.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bSessions).Get(sessionKey(cookie))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &sess)
	})
	if err != nil || !found || !now.Before(sess.Expires) {
		return Session{}, false, err
	}
	return sess, true, nil
}

// Delete ends a session.
func (s *Sessions) Delete(cookie string) error {
	return s.j.update(func(tx *bolt.Tx) error { return tx.Bucket(bSessions).Delete(sessionKey(cookie)) })
}

// Prune deletes expired sessions and returns how many.
func (s *Sessions) Prune(now time.Time) (int, error) {
	n := 0
	err := s.j.update(func(tx *bolt.Tx) error {
		n = 0
		b := tx.Bucket(bSessions)
		var old [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var sess Session
			if json.Unmarshal(v, &sess) != nil || !now.Before(sess.Expires) {
				old = append(old, append([]byte(nil), k...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(old)
		return nil
	})
	return n, err
}
