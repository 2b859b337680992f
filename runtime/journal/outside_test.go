package journal_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
)

// verifyFromOutside re-verifies the chain of the store at path from the
// layout the package doc gives, and nothing of the package: it returns
// how many events it walked and the sequence and hash of the newest.
func verifyFromOutside(t *testing.T, path string) (int, uint64, string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	n, next := 0, uint64(0)
	prev := make([]byte, 32)
	err = db.View(func(tx *bolt.Tx) error {
		if a := tx.Bucket([]byte("meta")).Get([]byte("anchor")); a != nil {
			next, prev = binary.BigEndian.Uint64(a)+1, a[8:]
		} else {
			next = 1
		}
		err := tx.Bucket([]byte("journal")).ForEach(func(k, v []byte) error {
			key := binary.BigEndian.Uint64(k)
			if key != next {
				return fmt.Errorf("key %d where %d was due", key, next)
			}
			if v[0] != 3 { // an event alone: canonical ‖ prev ‖ hash
				c, p, h := v[:len(v)-64], v[len(v)-64:len(v)-32], v[len(v)-32:]
				if binary.BigEndian.Uint64(c[1:]) != key || !bytes.Equal(p, prev) || !bytes.Equal(link(c, p), h) {
					return fmt.Errorf("event %d does not chain", key)
				}
				prev, next, n = h, next+1, n+1
				return nil
			}
			count := binary.BigEndian.Uint32(v[1:])
			if !bytes.Equal(v[5:37], prev) {
				return fmt.Errorf("the block from %d does not follow the event before", key)
			}
			plain, err := dec.DecodeAll(v[69:], nil)
			if err != nil {
				return err
			}
			var at, mono uint64
			for i := range uint64(count) {
				var c []byte
				c, plain = unpacked(plain, key+i, &at, &mono)
				prev = link(c, prev)
			}
			if len(plain) != 0 || !bytes.Equal(prev, v[37:69]) {
				return fmt.Errorf("the block from %d does not come to its hash", key)
			}
			next, n = next+uint64(count), n+int(count)
			return nil
		})
		if err != nil {
			return err
		}
		head := tx.Bucket([]byte("meta")).Get([]byte("head"))
		if binary.BigEndian.Uint64(head) != next-1 || !bytes.Equal(head[8:], prev) {
			return fmt.Errorf("the head is not the newest event %d", next-1)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("from outside: %v", err)
	}
	return n, next - 1, hex.EncodeToString(prev)
}

// TestTheStoreVerifiesFromOutside: a journal of old and new events, pruned
// inside a block, verifies by the package doc's layout alone, and its
// newest hash is the one the journal serves.
func TestTheStoreVerifiesFromOutside(t *testing.T) {
	path := filepath.Join(t.TempDir(), journal.FileName)
	j, err := journal.Open(path, journal.Options{MaxEvents: 400, StoreEvents: 128})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		d := runtime.Async
		if i%97 == 96 || i == 999 {
			d = runtime.Sync
		}
		e := runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Device: "tank-1", Body: fmt.Appendf(nil, `{"value":%d}`, i%13)}, Durability: d}
		if _, err := j.Commit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	// A prune is chosen as the store is written and done by an event
	// after it: durable points until one is done.
	runtimetest.WaitFor(t, "the oldest events pruned", func() bool {
		e := runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Device: "tank-1", Body: []byte(`{"value":0}`)}, Durability: runtime.Sync}
		if _, err := j.Commit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		return j.Stats().PrunedEvents > 0
	})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	n, last, newestHash := verifyFromOutside(t, path)
	j, err = journal.Open(path, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	rep, err := j.Verify(t.Context())
	if err != nil || !rep.OK || uint64(n) != rep.Count || last != rep.Last || rep.Anchor == 0 {
		t.Fatalf("from outside %d events to %d; verify %+v, %v", n, last, rep, err)
	}
	newest, err := j.Events(t.Context(), last-1, 1)
	if err != nil || len(newest) != 1 || newest[0].Hash != newestHash {
		t.Fatalf("the newest event: %+v, %v; from outside its hash is %s", newest, err, newestHash)
	}
}

// logFromOutside re-verifies the log's segments in dir from the layout the
// package doc gives, from the event after seq (whose hash is prev), and
// returns the newest sequence and hash it holds.
func logFromOutside(t *testing.T, dir string, seq uint64, prev []byte) (uint64, string) {
	t.Helper()
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, seg := range segs {
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if string(data[:8]) != "SGWAL\x00\x01\x00" || crc32.Checksum(data[:36], table) != binary.BigEndian.Uint32(data[36:]) {
			t.Fatalf("%s: not a segment", seg)
		}
		index := binary.BigEndian.Uint64(data[8:])
		for off := 40; off+28 <= len(data) && binary.BigEndian.Uint32(data[off:]) == 0x53474631; {
			size := int(binary.BigEndian.Uint32(data[off+4:]))
			first, count, codec := binary.BigEndian.Uint64(data[off+8:]), binary.BigEndian.Uint32(data[off+16:]), data[off+20]
			payload := data[off+28 : off+28+size]
			crc := crc32.New(table)
			_ = binary.Write(crc, binary.BigEndian, index)
			crc.Write(data[off : off+24])
			crc.Write(payload)
			if crc.Sum32() != binary.BigEndian.Uint32(data[off+24:]) {
				t.Fatalf("%s at %d: a frame fails its CRC", seg, off)
			}
			off += 28 + size
			if count == 0 {
				break // a seal
			}
			switch codec {
			case 2:
			case 3:
				if payload, err = dec.DecodeAll(payload, nil); err != nil {
					t.Fatal(err)
				}
			case 4: // Snappy's block format, which S2 reads
				if payload, err = s2.Decode(nil, payload); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("%s: a frame of codec %d, which this build does not write", seg, codec)
			}
			if first != seq+1 || !bytes.Equal(payload[:32], prev) {
				t.Fatalf("%s: a frame from %d does not follow event %d", seg, first, seq)
			}
			last, b := payload[32:64], payload[64:]
			var at, mono uint64
			for i := range uint64(count) {
				var c []byte
				c, b = unpacked(b, first+i, &at, &mono)
				b = b[1:] // the flags
				n, k := binary.Uvarint(b)
				b = b[k:]
				for range n {
					l, k := binary.Uvarint(b)
					b = b[k+int(l):]
				}
				prev = link(c, prev)
			}
			if len(b) != 0 || !bytes.Equal(prev, last) {
				t.Fatalf("%s: the frame from %d does not come to its hash", seg, first)
			}
			seq = first + uint64(count) - 1
		}
	}
	return seq, hex.EncodeToString(prev)
}

// TestTheLogVerifiesFromOutside: what a running journal holds only in its
// log (the store behind it) verifies by the package doc's layout alone,
// following the store's head.
func TestTheLogVerifiesFromOutside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, journal.FileName)
	j, err := journal.Open(path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var newest runtime.Event
	for i := range 300 {
		d := runtime.Async
		if i%50 == 49 {
			d = runtime.Sync
		}
		e := runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Device: "tank-1", Body: fmt.Appendf(nil, `{"value":%d}`, i)}, Durability: d}
		var err error
		if newest, err = j.Commit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	// The store has not been written (its interval is half an hour): the
	// log holds every event, from the first.
	seq, hash := logFromOutside(t, filepath.Join(dir, "shadowgate.wal"), 0, make([]byte, 32))
	if seq != newest.Seq || hash != newest.Hash {
		t.Fatalf("from outside the log ends at %d %s; the journal's newest is %d %s", seq, hash, newest.Seq, newest.Hash)
	}
}

// unpacked takes one packed event, seq, from the start of b, after an
// event whose times were *at and *mono, and returns its canonical bytes
// and the rest of b.
func unpacked(b []byte, seq uint64, at, mono *uint64) ([]byte, []byte) {
	format := b[0]
	da, k1 := binary.Varint(b[1:])
	dm, k2 := binary.Varint(b[1+k1:])
	rest, k3 := binary.Uvarint(b[1+k1+k2:])
	b = b[1+k1+k2+k3:]
	*at, *mono = *at+uint64(da), *mono+uint64(dm)
	c := binary.BigEndian.AppendUint64([]byte{format}, seq)
	c = binary.BigEndian.AppendUint64(c, *at)
	c = binary.BigEndian.AppendUint64(c, *mono)
	return append(c, b[:rest]...), b[rest:]
}

// link is an event's hash: SHA-256 of the domain tag, its canonical bytes
// and the hash before.
func link(canonical, prev []byte) []byte {
	h := sha256.New()
	h.Write([]byte("shadowgate.journal.v1\x00"))
	h.Write(canonical)
	h.Write(prev)
	return h.Sum(nil)
}
