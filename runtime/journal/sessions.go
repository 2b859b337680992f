package journal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/internal/failpoint"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
)

// Sessions is the console's session store, in the journal's file. While
// the journal cannot witness (it failed closed), new sessions are kept in
// memory only, so that people can still log in and see why; they end with
// the process.
type Sessions struct {
	j *DB
	// mu guards mem.
	mu  sync.Mutex
	mem map[string]store.Session
}

// Sessions returns the journal's session store. Call it once and share it.
func (j *DB) Sessions() *Sessions { return &Sessions{j: j, mem: map[string]store.Session{}} }

func sessionKey(cookie string) []byte {
	h := sha256.Sum256([]byte(cookie))
	return []byte(hex.EncodeToString(h[:]))
}

// KindSession records a console session opened or closed. It names the
// user, never the cookie.
const KindSession runtime.Kind = "session"

// Put stores a session under its cookie. Like every record, the session is
// witnessed by an event (KindSession) written before Put returns, so a
// session row put into the file by anything else is never honoured.
func (s *Sessions) Put(cookie string, sess store.Session) error {
	if s.j.Err() != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.mem[string(sessionKey(cookie))] = sess
		return nil
	}
	b, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"op": "opened", "user": sess.User, "role": sess.Role, "remote": sess.Remote, "expires": sess.Expires})
	rec := record{ref: ref{bucket: string(bSessions), key: string(sessionKey(cookie)), op: opPut, digest: digestOf(b)}, js: b}
	_, err = s.j.append(context.Background(), runtime.Event{Kind: KindSession, Body: body}, []record{rec}, nil, runtime.Sync)
	if err == nil {
		err = failpoint.Inject(failpoint.SessionWrite)
	}
	return err
}

// Get returns the session of a cookie, if it exists and has not expired.
// A session that no event backs is an error, not a login.
func (s *Sessions) Get(cookie string, now time.Time) (store.Session, bool, error) {
	// Until the start check is done, a session row may be one a later
	// event deleted: wait for it (a moment, once per start).
	<-s.j.Verified()
	if sess, ok := s.memGet(cookie); ok {
		if !now.Before(sess.Expires) {
			return store.Session{}, false, nil
		}
		return sess, true, nil
	}
	var sess store.Session
	if p, ok := s.j.pendingSession(string(sessionKey(cookie))); ok {
		// Durable in the log, not yet in the store.
		if p.deleted || json.Unmarshal(p.js, &sess) != nil || !now.Before(sess.Expires) {
			return store.Session{}, false, nil
		}
		return sess, true, nil
	}
	var found bool
	err := s.j.view(func(tx *bolt.Tx) error {
		key := sessionKey(cookie)
		v := tx.Bucket(bSessions).Get(key)
		if v == nil {
			return nil
		}
		js, err := s.j.backed(tx, bSessions, key, v)
		if err != nil {
			return err
		}
		found = true
		return json.Unmarshal(js, &sess)
	})
	if err != nil || !found || !now.Before(sess.Expires) {
		return store.Session{}, false, err
	}
	return sess, true, nil
}

func (s *Sessions) memGet(cookie string) (store.Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.mem[string(sessionKey(cookie))]
	return sess, ok
}

// Delete ends a session, witnessed by an event.
func (s *Sessions) Delete(cookie string) error {
	key := string(sessionKey(cookie))
	if _, ok := s.memGet(cookie); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.mem, key)
		return nil
	}
	var user string
	if p, ok := s.j.pendingSession(key); ok {
		var sess store.Session
		if p.deleted || json.Unmarshal(p.js, &sess) != nil {
			return nil // nothing to end
		}
		user = sess.User
	}
	_ = s.j.view(func(tx *bolt.Tx) error {
		if user != "" {
			return nil
		}
		if v := tx.Bucket(bSessions).Get([]byte(key)); v != nil {
			if _, js, err := unwrapRecord(v); err == nil {
				var sess store.Session
				if json.Unmarshal(js, &sess) == nil {
					user = sess.User
				}
			}
		}
		return nil
	})
	if user == "" {
		return nil // nothing to end
	}
	body, _ := json.Marshal(map[string]any{"op": "closed", "user": user})
	rec := record{ref: ref{bucket: string(bSessions), key: key, op: opDelete}}
	_, err := s.j.append(context.Background(), runtime.Event{Kind: KindSession, Body: body}, []record{rec}, nil, runtime.Sync)
	return err
}

// pendingSession returns the newest change of a session that the log
// holds and the store does not yet.
func (j *DB) pendingSession(key string) (pendingSession, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	p, ok := j.sessionsPending[key]
	return p, ok
}

// Prune deletes expired sessions and returns how many. The deletion is an
// event, as every change of a record is.
func (s *Sessions) Prune(now time.Time) (int, error) {
	s.mu.Lock()
	for k, sess := range s.mem {
		if !now.Before(sess.Expires) {
			delete(s.mem, k)
		}
	}
	s.mu.Unlock()
	old := recordEnded(bSessions, now, now)
	var refs []record
	err := s.j.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bSessions).ForEach(func(k, v []byte) error {
			if _, js, err := unwrapRecord(v); err == nil && old(js) {
				refs = append(refs, record{ref: ref{bucket: string(bSessions), key: string(k), op: opDeleteIf, digest: digestOf(js)}})
			}
			return nil
		})
	})
	if err != nil || len(refs) == 0 {
		return 0, err
	}
	body, _ := json.Marshal(map[string]any{"op": "expired", "sessions": len(refs)})
	if _, err := s.j.append(context.Background(), runtime.Event{Kind: KindSession, Body: body}, refs, nil, runtime.Sync); err != nil {
		return 0, err
	}
	return len(refs), nil
}
