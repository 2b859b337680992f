package journal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"

	"github.com/shadowgate/shadowgate/internal/failpoint"
	"github.com/shadowgate/shadowgate/runtime"
)

// Checkpoints sign the chain's head with a key kept outside the journal's
// file, in the C2SP signed-note checkpoint form:
//
//	<origin>
//	<size>            the sequence of the newest event covered
//	<base64 hash>     that event's hash (the head of the chain, not a Merkle root)
//
//	— <key name> <base64 signature>
//
// A chain anyone can re-compute is evidence only against careless
// damage. A checkpoint taken off the device (MQTT, the uplink, a copy of
// the events) is evidence against deliberate re-chaining: a journal
// rewritten after it no longer has the signed hash at the signed size.

// CheckpointOptions make a journal sign checkpoints.
type CheckpointOptions struct {
	// Signer signs them; nil means no checkpoints.
	Signer note.Signer
	// Origin is the checkpoint's first line, naming the journal.
	Origin string
	// Every is how many events at most go by between checkpoints.
	// Default 1000.
	Every uint64
	// Interval is how long at most goes by between checkpoints while
	// events are written. Default 60s.
	Interval time.Duration
}

// checkpointer writes a checkpoint event every Every events or Interval,
// whichever comes first, as long as events other than checkpoints were
// written since the last. It runs in j.bg until ctx ends.
func (j *DB) checkpointer(ctx context.Context) {
	co := j.opts.Checkpoint
	t := time.NewTicker(co.Interval)
	defer t.Stop()
	select {
	case <-j.verified:
	case <-ctx.Done():
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-j.ckKick:
		}
		if err := j.checkpoint(); err != nil {
			j.log.Warn("journal checkpoint not made", "error", err)
		}
	}
}

// checkpoint signs the newest written event and queues the checkpoint
// event, unless nothing but checkpoints was written since the last.
func (j *DB) checkpoint() error {
	j.mu.Lock()
	size, h, last := j.committed, j.committedHash, j.lastCheckpoint
	j.mu.Unlock()
	if size == 0 || size <= last {
		return nil // nothing new since the last checkpoint, itself included
	}
	co := j.opts.Checkpoint
	text := fmt.Sprintf("%s\n%d\n%s\n", co.Origin, size, base64.StdEncoding.EncodeToString(h[:]))
	msg, err := note.Sign(&note.Note{Text: text}, co.Signer)
	if err != nil {
		return fmt.Errorf("signing checkpoint %d: %w", size, err)
	}
	body, err := json.Marshal(runtime.CheckpointBody{Note: string(msg), Size: size, Hash: h.String(),
		Key: co.Signer.Name() + "+" + fmt.Sprintf("%08x", co.Signer.KeyHash())})
	if err != nil {
		return err
	}
	if err := failpoint.Inject(failpoint.JournalCheckpoint); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	ev, _, err := j.enqueueLocked(runtime.Event{Kind: runtime.KindCheckpoint, Body: body}, nil, nil, false)
	if err != nil {
		return err
	}
	j.lastCheckpoint = ev.Seq
	j.lastCheckpointSize = size
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return nil
}

// CheckpointKey reads the signing key in path, or makes one named name and
// writes it there (mode 0600) with its public half beside it in path.pub
// (mode 0644), so that whoever checks a copy of the journal later can be
// given the public key.
func CheckpointKey(path, name string) (note.Signer, string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		skey, vkey, err := note.GenerateKey(rand.Reader, name)
		if err != nil {
			return nil, "", fmt.Errorf("making checkpoint key %s: %w", path, err)
		}
		if err := writeNew(path, []byte(skey+"\n"), 0o600); err != nil {
			return nil, "", fmt.Errorf("writing checkpoint key: %w", err)
		}
		if err := os.WriteFile(path+".pub", []byte(vkey+"\n"), 0o644); err != nil {
			return nil, "", fmt.Errorf("writing checkpoint public key: %w", err)
		}
		b = []byte(skey)
	} else if err != nil {
		return nil, "", fmt.Errorf("reading checkpoint key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, "", fmt.Errorf("checkpoint key %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	s, err := note.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint key %s: %w", path, err)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint key %s has no public half beside it: %w", path, err)
	}
	return s, strings.TrimSpace(string(pub)), nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

// Checkpoint is a verified checkpoint: what its signer vouched for.
type Checkpoint struct {
	Origin string
	Size   uint64
	Hash   string // hex
}

// ParseCheckpoint checks the signature of a checkpoint against the public
// key vkey and returns what it says. text may be the note itself, a
// checkpoint event's body (JSON with "note"), or a whole exported event.
func ParseCheckpoint(text []byte, vkey string) (Checkpoint, error) {
	var c Checkpoint
	msg := bytes.TrimLeft(text, " \t\r\n")
	if len(msg) > 0 && msg[0] == '{' {
		var x struct {
			Note string `json:"note"`
			Body *struct {
				Note string `json:"note"`
			} `json:"body"`
		}
		if err := json.Unmarshal(msg, &x); err != nil {
			return c, fmt.Errorf("the checkpoint is JSON but not a checkpoint: %w", err)
		}
		if x.Body != nil {
			x.Note = x.Body.Note
		}
		msg = []byte(x.Note)
	}
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return c, fmt.Errorf("the public key: %w", err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return c, fmt.Errorf("the checkpoint's signature: %w", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 || lines[len(lines)-1] != "" {
		return c, errors.New("the checkpoint does not have the lines origin, size and hash")
	}
	c.Origin = lines[0]
	if c.Size, err = strconv.ParseUint(lines[1], 10, 64); err != nil {
		return c, fmt.Errorf("the checkpoint's size %q: %w", lines[1], err)
	}
	h, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(h) != hashSize {
		return c, fmt.Errorf("the checkpoint's hash %q is not a base64 SHA-256", lines[2])
	}
	c.Hash = hash(h).String()
	return c, nil
}

// Extends reports whether this journal extends the checkpoint c: its chain
// is whole and the event at c.Size still has the hash c signed. A journal
// re-chained after c was taken does not. It says why not.
func (j *DB) Extends(ctx context.Context, c Checkpoint) (bool, string, error) {
	r, err := j.Verify(ctx)
	if err != nil {
		return false, "", err
	}
	if r.Reason != "" {
		return false, "the chain itself is broken: " + r.String(), nil
	}
	var why string
	err = j.view(func(tx *bolt.Tx) error {
		if c.Size > r.Last {
			why = fmt.Sprintf("the journal ends at seq %d, before the checkpoint's %d (truncated)", r.Last, c.Size)
			return nil
		}
		if c.Size == r.Anchor {
			if a, _ := j.link(tx, kAnchor); a != nil && a.Hash.String() != c.Hash {
				why = fmt.Sprintf("the anchor at seq %d has another hash than the checkpoint signed (re-chained)", c.Size)
			}
			return nil
		}
		if c.Size < r.First {
			why = fmt.Sprintf("event %d was pruned from this copy (it starts at %d): take a newer checkpoint", c.Size, r.First)
			return nil
		}
		v, err := newHistory(tx).get(c.Size)
		var d decoded
		if err == nil {
			d, err = decodeEvent(v)
		}
		if err != nil {
			why = fmt.Sprintf("event %d cannot be read: %v", c.Size, err)
			return nil
		}
		if d.hash.String() != c.Hash {
			why = fmt.Sprintf("event %d has hash %s, the checkpoint signed %s: the journal was re-chained (changed at or before event %d)", c.Size, d.hash, c.Hash, c.Size)
		}
		return nil
	})
	if err != nil {
		return false, "", err
	}
	return why == "", why, nil
}

// CheckCheckpoints checks every checkpoint event the journal holds against
// the public key vkey: each must be signed by it, and the event it signed
// must still have the hash it signed (unless retention pruned it). A chain
// re-computed by someone without the key keeps the old, signed hashes in
// its checkpoints, and is found here. It returns how many it checked and
// what is wrong with each that fails.
func (j *DB) CheckCheckpoints(ctx context.Context, vkey string) (int, []string, error) {
	n := 0
	var bad []string
	err := j.view(func(tx *bolt.Tx) error {
		h, signed := newHistory(tx), newHistory(tx)
		for _, v, err := h.first(); err != nil || v != nil; _, v, err = h.next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err != nil {
				continue // verify names what cannot be read
			}
			d, err := decodeEvent(v)
			if err != nil || d.ev.Kind != runtime.KindCheckpoint {
				continue // verify names what cannot be read
			}
			n++
			cp, err := ParseCheckpoint(d.ev.Body, vkey)
			if err != nil {
				bad = append(bad, fmt.Sprintf("checkpoint event %d: %v", d.ev.Seq, err))
				continue
			}
			sv, err := signed.get(cp.Size)
			if err == nil && sv == nil {
				continue // pruned since
			}
			var sd decoded
			if err == nil {
				sd, err = decodeEvent(sv)
			}
			switch {
			case err != nil:
				bad = append(bad, fmt.Sprintf("checkpoint event %d signed event %d, which cannot be read: %v", d.ev.Seq, cp.Size, err))
			case sd.hash.String() != cp.Hash:
				bad = append(bad, fmt.Sprintf("checkpoint event %d signed event %d with hash %s, which now has another: the journal was re-chained", d.ev.Seq, cp.Size, cp.Hash))
			}
		}
		return nil
	})
	return n, bad, err
}
