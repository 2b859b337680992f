package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
)

// blockKeys returns the journal bucket's keys, each with the number of
// events it holds (1 for an event alone).
func blockKeys(t *testing.T, path string) [][2]uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out [][2]uint64
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bJournal).ForEach(func(k, v []byte) error {
			n := blockCount(v)
			if n == 0 {
				n = 1
			}
			out = append(out, [2]uint64{keySeq(k), n})
			return nil
		})
	})
	return out
}

// TestTheStoreKeepsEventsInBlocks: a store batch is kept as blocks of at
// most blockEvents, each read back as the events that went in, by every
// reader: Events from any point, a record's event, verify.
func TestTheStoreKeepsEventsInBlocks(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	const n = 700
	for i := range n {
		d := runtime.Async
		if i == n-1 {
			d = runtime.Sync
		}
		commit(t, j, d, ev(runtime.KindObserved, fmt.Sprintf(`{"value":%d.5,"unit":"%%","quality":"good"}`, i)), nil)
	}
	settle(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	keys := blockKeys(t, path)
	var blocks, events uint64
	next := uint64(1)
	for _, k := range keys {
		if k[0] != next {
			t.Fatalf("keys %v: %d where %d was due", keys, k[0], next)
		}
		if k[1] > 1 {
			blocks++
		}
		if k[1] > blockEvents {
			t.Fatalf("a block of %d events", k[1])
		}
		events += k[1]
		next += k[1]
	}
	if blocks < 3 || events < n {
		t.Fatalf("keys %v: want the %d events in blocks", keys, n)
	}
	stat, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	j = open(t, path, Options{ReadOnly: true})
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK || rep.Count != events {
		t.Fatalf("verify = %+v, %v", rep, err)
	}
	// Every start point, across and inside blocks, reads the same events.
	all, err := j.Events(t.Context(), 0, 10_000)
	if err != nil || len(all) != int(events) {
		t.Fatalf("Events = %d, %v", len(all), err)
	}
	for _, since := range []uint64{0, 1, 255, 256, 257, 300, uint64(events) - 1} {
		got, err := j.Events(t.Context(), since, 3)
		if err != nil || len(got) == 0 || got[0].Seq != since+1 || got[0].Hash != all[since].Hash || got[0].Prev != all[since].Prev ||
			string(got[0].Body) != string(all[since].Body) {
			t.Fatalf("Events(%d) = %+v, %v", since, got, err)
		}
	}
	for i := 1; i < len(all); i++ {
		if all[i].Prev != all[i-1].Hash {
			t.Fatalf("event %d's prev is not event %d's hash", all[i].Seq, all[i-1].Seq)
		}
	}
	t.Logf("%d events in %d keys, a file of %d bytes", events, len(keys), stat.Size())
}

// TestAFileWrittenBeforeBlocksGoesOnInBlocks: the events of a file with
// one event a key stay as they are, the new ones go into blocks after
// them, and the chain reads whole across the two.
func TestAFileWrittenBeforeBlocksGoesOnInBlocks(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	fill(t, j, 40)
	settle(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	path = tamperCopy(t, path, func(*bolt.Tx) error { return nil }) // as a file before blocks
	j = open(t, path, Options{})
	fill(t, j, 300)
	settle(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	keys := blockKeys(t, path)
	singles := 0
	for _, k := range keys {
		if k[1] == 1 {
			singles++
		}
	}
	if singles < 40 || len(keys) > singles+3 {
		t.Fatalf("keys %v: want the first 40 events alone and the rest in blocks", keys)
	}
	j = open(t, path, Options{ReadOnly: true})
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK {
		t.Fatalf("verify = %+v, %v", rep, err)
	}
	got, err := j.Events(t.Context(), 38, 4)
	if err != nil || len(got) != 4 || got[0].Seq != 39 || got[3].Seq != 42 || got[2].Prev != got[1].Hash {
		t.Fatalf("Events across the two = %+v, %v", got, err)
	}
}

// blockJournal is a closed journal of 600 events in blocks.
func blockJournal(t *testing.T) string {
	t.Helper()
	path := tempPath(t)
	j := open(t, path, Options{})
	fill(t, j, 600)
	settle(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// editBlock rewrites the block holding seq: edit changes its events'
// canonical bytes, header its header, and the block is compressed again as
// the journal would.
func editBlock(seq uint64, edit func(canon [][]byte), header func(h []byte)) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		jb := tx.Bucket(bJournal)
		c := jb.Cursor()
		k, v := c.Seek(seqKey(seq))
		if k == nil || keySeq(k) > seq {
			k, v = c.Prev()
		}
		first := keySeq(k)
		evs, err := decodeBlock(first, v)
		if err != nil {
			return err
		}
		canon := make([][]byte, len(evs))
		for i, e := range evs {
			c, _, _ := splitValue(e.value)
			canon[i] = append([]byte(nil), c...)
		}
		if edit != nil {
			edit(canon)
		}
		enc, _, err := coders()
		if err != nil {
			return err
		}
		out := append([]byte(nil), v[:blockHeader]...)
		if header != nil {
			header(out)
		}
		return jb.Put(k, enc.EncodeAll(packEvents(canon), out))
	}
}

// TestVerifyFindsTamperingInABlock: whatever is done to a block, verify
// names where the chain breaks, and a writable open fails closed.
func TestVerifyFindsTamperingInABlock(t *testing.T) {
	src := blockJournal(t)
	keys := blockKeys(t, src)
	if len(keys) < 3 || keys[1][1] < 2 {
		t.Fatalf("keys %v: want blocks", keys)
	}
	second := keys[1][0] // the first event of the second block
	cases := []struct {
		name   string
		mutate func(tx *bolt.Tx) error
		seq    uint64
		reason string
	}{
		{"a body changed and compressed again", editBlock(second+3, func(c [][]byte) {
			c[3][len(c[3])-2] ^= 1
		}, nil), second, "do not match their block's hash (altered)"},
		{"an event left out", editBlock(second, func(c [][]byte) {
			copy(c[5:], c[6:])
		}, nil), second, "altered"},
		{"a raw byte of the compressed events flipped", func(tx *bolt.Tx) error {
			jb := tx.Bucket(bJournal)
			v := append([]byte(nil), jb.Get(seqKey(second))...)
			v[blockHeader+len(v[blockHeader:])/2] ^= 0x10
			return jb.Put(seqKey(second), v)
		}, second, "the block of events from"},
		{"a count changed", editBlock(second, nil, func(h []byte) {
			binary.BigEndian.PutUint32(h[1:], binary.BigEndian.Uint32(h[1:])-1)
		}), second, "stray bytes"},
		{"the last hash changed", editBlock(second, nil, func(h []byte) { h[blockHeader-1] ^= 1 }), second, "altered"},
		{"the prev changed", editBlock(second, nil, func(h []byte) { h[5] ^= 1 }), second, "altered"},
		{"a block deleted", func(tx *bolt.Tx) error { return tx.Bucket(bJournal).Delete(seqKey(second)) }, second, "missing"},
		{"a block moved", func(tx *bolt.Tx) error {
			jb := tx.Bucket(bJournal)
			v := append([]byte(nil), jb.Get(seqKey(second))...)
			return errors.Join(jb.Delete(seqKey(second)), jb.Put(seqKey(second+1), v))
		}, second, "missing"},
		{"the newest block deleted", func(tx *bolt.Tx) error {
			return tx.Bucket(bJournal).Delete(seqKey(keys[len(keys)-1][0]))
		}, keys[len(keys)-1][0], "removed from the end"},
		{"not a block", func(tx *bolt.Tx) error {
			return tx.Bucket(bJournal).Put(seqKey(second), []byte{formatBlock, 0, 0})
		}, second, "truncated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := rawCopy(t, src, tc.mutate)
			rep := verifyCopy(t, path)
			if rep.OK || rep.BadSeq != tc.seq || !strings.Contains(rep.Reason, tc.reason) {
				t.Fatalf("report = %+v; want bad seq %d, %q", rep, tc.seq, tc.reason)
			}
			j, err := Open(path, Options{})
			if err == nil {
				<-j.Verified()
				err = j.Err()
				_ = j.Close()
			}
			if err == nil {
				t.Fatal("a writable open of the altered journal did not fail closed")
			}
		})
	}
}

// TestRetentionCutsABlockInTwo: a prune that ends inside a block keeps the
// events past it as a block of their own, and the chain verifies from the
// anchor.
func TestRetentionCutsABlockInTwo(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{MaxEvents: 500})
	fill(t, j, 400)
	settle(t, j)
	fill(t, j, 300)
	settle(t, j)
	fill(t, j, 10) // the prune's event, and its application
	settle(t, j)
	rep, err := j.Verify(t.Context())
	if err != nil || !rep.OK || rep.Anchor == 0 {
		t.Fatalf("verify after retention = %+v, %v", rep, err)
	}
	if rep.Anchor%blockEvents == 0 {
		t.Fatalf("the prune ended at %d, a block's end: the test shows nothing", rep.Anchor)
	}
	got, err := j.Events(t.Context(), rep.Anchor, 2)
	if err != nil || len(got) != 2 || got[0].Seq != rep.Anchor+1 {
		t.Fatalf("Events after the anchor = %+v, %v", got, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	keys := blockKeys(t, path)
	if keys[0][0] != rep.Anchor+1 || keys[0][1] < 2 {
		t.Fatalf("keys %v after a prune through %d: want the rest of the cut block first", keys, rep.Anchor)
	}
	j = open(t, path, Options{ReadOnly: true})
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK {
		t.Fatalf("verify after reopening = %+v, %v", rep, err)
	}
}

// TestABlockIsReadWithinBounds: a block that says it holds more than it
// could, or decompresses to more than a block may, is refused without the
// memory.
func TestABlockIsReadWithinBounds(t *testing.T) {
	enc, _, err := coders()
	if err != nil {
		t.Fatal(err)
	}
	head := func(n uint32) []byte {
		b := []byte{formatBlock}
		b = binary.BigEndian.AppendUint32(b, n)
		return append(b, make([]byte, 2*hashSize)...)
	}
	huge := enc.EncodeAll(make([]byte, maxBlockRaw+1), head(1))
	for name, v := range map[string][]byte{
		"a count beyond any block": head(1 << 31),
		"one more than a block":    head(blockEvents + 1),
		"too much inside":          huge,
		"no events":                head(0),
		"short":                    head(1)[:20],
	} {
		if _, err := decodeBlock(1, v); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeBlock feeds stored blocks to the reader: it never panics, and
// what it accepts is consecutive events that chain to the block's hash.
func FuzzDecodeBlock(f *testing.F) {
	var values [][]byte
	prev := hash{9}
	for i := range 5 {
		e := runtime.Event{Seq: uint64(10 + i), Kind: runtime.KindObserved, Device: "tank-1", Body: []byte(fmt.Sprintf(`{"value":%d}`, i))}
		v, h := encodeEvent(&e, nil, prev)
		values = append(values, v)
		prev = h
	}
	blk, err := encodeBlock(values)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint64(10), blk)
	f.Add(uint64(11), blk)
	f.Add(uint64(10), blk[:blockHeader+3])
	f.Add(uint64(1), []byte{formatBlock})
	f.Fuzz(func(t *testing.T, first uint64, v []byte) {
		evs, err := decodeBlock(first, v)
		if err != nil {
			return
		}
		var want hash
		copy(want[:], v[5+hashSize:])
		for i, e := range evs {
			d, err := decodeEvent(e.value)
			if err != nil || d.ev.Seq != first+uint64(i) || chain(d.canonical, d.prev) != d.hash {
				t.Fatalf("event %d of an accepted block: %+v, %v", i, d.ev, err)
			}
			if i == len(evs)-1 && d.hash != want {
				t.Fatal("an accepted block whose last event has another hash")
			}
		}
	})
}

// TestABigEventIsKeptAlone: an event bigger than a block may hold is kept
// one a key, between blocks, and the chain reads whole across it.
func TestABigEventIsKeptAlone(t *testing.T) {
	path := tempPath(t)
	j := open(t, path, Options{})
	fill(t, j, 10)
	commit(t, j, runtime.Sync, ev(runtime.KindObserved, `{"pad":"`+noise(maxAlone+10)+`"}`), nil)
	fill(t, j, 10)
	settle(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	keys := blockKeys(t, path)
	if len(keys) != 3 || keys[0] != [2]uint64{1, 10} || keys[1] != [2]uint64{11, 1} || keys[2] != [2]uint64{12, 10} {
		t.Fatalf("keys %v: want a block, the big event alone, a block", keys)
	}
	j = open(t, path, Options{ReadOnly: true})
	if rep, err := j.Verify(t.Context()); err != nil || !rep.OK || rep.Count != 21 {
		t.Fatalf("verify = %+v, %v", rep, err)
	}
	got, err := j.Events(t.Context(), 10, 2)
	if err != nil || len(got) != 2 || got[0].Seq != 11 || len(got[0].Body) < maxAlone || got[1].Prev != got[0].Hash {
		t.Fatalf("Events across the big event: %d, %v", len(got), err)
	}
}
