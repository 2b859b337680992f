package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"
)

// The store keeps its events in blocks: a run of consecutive events under
// the key of the first, their canonical bytes compressed together with
// zstd, and of their hashes only the one before the block and the block's
// last. The events of a reference site's half hour differ in a value and
// a time, and a block of them takes a sixth of their size or less, where
// one event a key took its own bytes and both its hashes. Every other hash
// is computed again when the block is read, and the block's last must come
// out: a block is read whole or not at all. A file written before blocks
// keeps its events one a key (formatV1, formatV2) and is read as it is;
// the events written since go into blocks. See the package doc for the
// layout.

// formatBlock is the first byte of a block.
const formatBlock = 3

const (
	// blockEvents and blockBytes bound a block: at most this many events,
	// and no more events once their stored values (canonical bytes and
	// hashes) reach blockBytes. A read of one event decompresses its
	// block.
	blockEvents = 256
	blockBytes  = 64 << 10
	// blockHeader is the format byte, the count and the two hashes.
	blockHeader = 1 + 4 + 2*hashSize
	// maxBlockRaw bounds what a block may decompress to: a file that says
	// more is damaged, and is not given the memory. An event bigger than
	// maxAlone is stored alone, uncompressed, so that no block written
	// comes near it.
	maxBlockRaw = 16 << 20
	maxAlone    = 1 << 20
)

var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
	zstdErr  error
)

// coders returns the shared zstd encoder and decoder; EncodeAll and
// DecodeAll are safe for concurrent use. The window is bounded to a block,
// so that neither keeps more memory than a block needs.
func coders() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		zstdEnc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
			zstd.WithWindowSize(1<<17), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if zstdErr != nil {
			return
		}
		zstdDec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(maxBlockRaw), zstd.WithDecoderMaxWindow(maxBlockRaw))
	})
	return zstdEnc, zstdDec, zstdErr
}

// storedEvent is one event of the store: its value as one event a key keeps it
// (canonical bytes, prev, hash).
type storedEvent struct {
	seq   uint64
	value []byte
}

// splitValue returns the parts of an event's stored value.
func splitValue(v []byte) (canonical []byte, prev, h hash) {
	n := len(v) - 2*hashSize
	copy(prev[:], v[n:])
	copy(h[:], v[n+hashSize:])
	return v[:n], prev, h
}

// canonHead is the fixed start of canonical bytes: the format, seq, at
// and mono.
const canonHead = 1 + 3*8

// packEvents returns the bytes a block compresses: for each event, its
// format, at and mono as the signed difference from the event before
// (zigzag varints; from zero for the first), and the rest of its
// canonical bytes as a uvarint length and the bytes. The seq is left out:
// the i-th event of a block is its first plus i. Times a few seconds
// apart take two to four bytes where they took sixteen, and compress.
func packEvents(canon [][]byte) []byte {
	size := 0
	for _, c := range canon {
		size += len(c)
	}
	out := make([]byte, 0, size)
	var at, mono int64
	for _, c := range canon {
		out = appendPacked(out, c, &at, &mono)
	}
	return out
}

// appendPacked appends the canonical bytes c packed (see packEvents),
// after an event whose times were *at and *mono, and makes them c's.
func appendPacked(out, c []byte, at, mono *int64) []byte {
	a, m := int64(binary.BigEndian.Uint64(c[9:])), int64(binary.BigEndian.Uint64(c[17:]))
	out = append(out, c[0])
	out = binary.AppendVarint(out, a-*at)
	out = binary.AppendVarint(out, m-*mono)
	out = binary.AppendUvarint(out, uint64(len(c)-canonHead))
	out = append(out, c[canonHead:]...)
	*at, *mono = a, m
	return out
}

// unpackOne takes one packed event, seq, from the start of plain: it
// appends its canonical bytes to buf, and returns what is left of plain
// and buf.
func unpackOne(plain []byte, seq uint64, at, mono *int64, buf []byte) ([]byte, []byte, error) {
	if len(plain) < 1 {
		return nil, nil, fmt.Errorf("event %d: %w", seq, errShort)
	}
	f := plain[0]
	da, k1 := binary.Varint(plain[1:])
	if k1 <= 0 {
		return nil, nil, fmt.Errorf("event %d: a bad time", seq)
	}
	dm, k2 := binary.Varint(plain[1+k1:])
	if k2 <= 0 {
		return nil, nil, fmt.Errorf("event %d: a bad monotonic time", seq)
	}
	rest, k3 := binary.Uvarint(plain[1+k1+k2:])
	if k3 <= 0 || rest > uint64(len(plain)-1-k1-k2-k3) {
		return nil, nil, fmt.Errorf("event %d: %w", seq, errShort)
	}
	plain = plain[1+k1+k2+k3:]
	*at, *mono = *at+da, *mono+dm
	buf = append(buf, f)
	buf = binary.BigEndian.AppendUint64(buf, seq)
	buf = binary.BigEndian.AppendUint64(buf, uint64(*at))
	buf = binary.BigEndian.AppendUint64(buf, uint64(*mono))
	buf = append(buf, plain[:rest]...)
	return plain[rest:], buf, nil
}

// unpackEvents takes apart what packEvents made of n events from first,
// appending each event's canonical bytes to buf; it returns buf and where
// each event ends in it.
func unpackEvents(plain []byte, first, n uint64, buf []byte) ([]byte, []int, error) {
	ends := make([]int, 0, n)
	var at, mono int64
	for i := range n {
		var err error
		if plain, buf, err = unpackOne(plain, first+i, &at, &mono, buf); err != nil {
			return nil, nil, fmt.Errorf("the block's %w", err)
		}
		ends = append(ends, len(buf))
	}
	if len(plain) != 0 {
		return nil, nil, fmt.Errorf("%d stray bytes after the block's %d events", len(plain), n)
	}
	return buf, ends, nil
}

// encodeBlock returns the block of values, consecutive events of one
// chain, each as encodeEvent made it.
func encodeBlock(values [][]byte) ([]byte, error) {
	enc, _, err := coders()
	if err != nil {
		return nil, fmt.Errorf("starting the store's compressor: %w", err)
	}
	canon := make([][]byte, len(values))
	for i, v := range values {
		canon[i], _, _ = splitValue(v)
	}
	_, prev, _ := splitValue(values[0])
	_, _, last := splitValue(values[len(values)-1])
	return sealBlock(enc, uint32(len(values)), prev, last, packEvents(canon)), nil
}

// sealBlock returns the block of n events from their packed bytes.
func sealBlock(enc *zstd.Encoder, n uint32, prev, last hash, plain []byte) []byte {
	out := make([]byte, 0, blockHeader+len(plain)/3)
	out = append(out, formatBlock)
	out = binary.BigEndian.AppendUint32(out, n)
	out = append(out, prev[:]...)
	out = append(out, last[:]...)
	return enc.EncodeAll(plain, out)
}

// blockCount returns how many events the block v holds, without reading
// them; 0 if v is not a block.
func blockCount(v []byte) uint64 {
	if len(v) < blockHeader || v[0] != formatBlock {
		return 0
	}
	return uint64(binary.BigEndian.Uint32(v[1:]))
}

// isBlock reports whether a stored value is a block.
func isBlock(v []byte) bool { return len(v) > 0 && v[0] == formatBlock }

// decodeBlock reads the block stored under first: each event's value as
// one event a key keeps it, its hashes computed again from the block's
// first. The last must match the block's: an altered event, a block moved
// or cut, does not read.
func decodeBlock(first uint64, v []byte) ([]storedEvent, error) {
	n := blockCount(v)
	if n == 0 {
		if len(v) < blockHeader {
			return nil, errShort
		}
		return nil, errors.New("a block of no events")
	}
	// No block is written with more; a count beyond it is damage, not
	// memory to give.
	if n > blockEvents {
		return nil, fmt.Errorf("a block of %d events, more than the %d one holds", n, blockEvents)
	}
	_, dec, err := coders()
	if err != nil {
		return nil, fmt.Errorf("starting the store's decompressor: %w", err)
	}
	var prev, last hash
	copy(prev[:], v[5:])
	copy(last[:], v[5+hashSize:])
	plain, err := dec.DecodeAll(v[blockHeader:], nil)
	if err != nil {
		return nil, fmt.Errorf("the block's events cannot be decompressed: %w", err)
	}
	// Each event takes at least four bytes packed.
	if n*4 > uint64(len(plain)) {
		return nil, fmt.Errorf("%d events cannot fit in the block's %d bytes", n, len(plain))
	}
	canon, ends, err := unpackEvents(plain, first, n, make([]byte, 0, len(plain)+int(n)*24))
	if err != nil {
		return nil, err
	}
	out := make([]storedEvent, 0, n)
	buf := make([]byte, 0, len(canon)+int(n)*2*hashSize)
	from := 0
	for i, end := range ends {
		c := canon[from:end]
		from = end
		h := chain(c, prev)
		start := len(buf)
		buf = append(buf, c...)
		buf = append(buf, prev[:]...)
		buf = append(buf, h[:]...)
		out = append(out, storedEvent{seq: first + uint64(i), value: buf[start:len(buf):len(buf)]})
		prev = h
	}
	if prev != last {
		return nil, fmt.Errorf("events %d to %d do not match their block's hash (altered)", first, first+n-1)
	}
	return out, nil
}

// blockCache keeps the blocks read last, decoded, for the reads that come
// back to the same few (a session's or a record's event, a start's state
// records). A block is never changed under its key, only deleted (a prune
// writes what it keeps of one under a new key); an entry is used only if
// the stored block still has the header and length it was read with.
type blockCache struct {
	mu      sync.Mutex
	entries [8]cachedBlock
	next    int
}

type cachedBlock struct {
	first uint64
	head  [blockHeader]byte
	size  int
	evs   []storedEvent
}

func (c *blockCache) lookup(first uint64, v []byte) []storedEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.entries {
		e := &c.entries[i]
		if e.evs != nil && e.first == first && e.size == len(v) && string(e.head[:]) == string(v[:blockHeader]) {
			return e.evs
		}
	}
	return nil
}

func (c *blockCache) add(first uint64, v []byte, evs []storedEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.entries[c.next]
	c.next = (c.next + 1) % len(c.entries)
	e.first, e.size, e.evs = first, len(v), evs
	copy(e.head[:], v)
}

// history reads the store's events in a transaction, in order, whether
// one a key or in blocks: each event as its stored value (canonical bytes,
// prev, hash), as decodeEvent reads it.
type history struct {
	c     *bolt.Cursor
	cache *blockCache // nil: none
	// cur is what the cursor's key holds, i the event at hand in it.
	cur []storedEvent
	i   int
	// got is the block get read last.
	got []storedEvent
}

func newHistory(tx *bolt.Tx) *history {
	if b := tx.Bucket(bJournal); b != nil {
		return &history{c: b.Cursor()}
	}
	return &history{} // a file whose first open stopped before it was made: no events
}

// events reads the store's events in tx, with the journal's cache of
// blocks.
func (j *DB) events(tx *bolt.Tx) *history {
	h := newHistory(tx)
	h.cache = &j.blocks
	return h
}

// load makes k, v the cursor's key at hand. A key that cannot be read
// returns its sequence and the error; the next call goes past it.
func (h *history) load(k, v []byte, at int) (uint64, []byte, error) {
	h.cur, h.i = nil, 0
	if k == nil {
		return 0, nil, nil
	}
	if len(k) != 8 {
		return 0, nil, fmt.Errorf("a key of %d bytes in the journal", len(k))
	}
	seq := keySeq(k)
	if !isBlock(v) {
		h.cur = []storedEvent{{seq: seq, value: v}}
		return seq, v, nil
	}
	var evs []storedEvent
	if h.cache != nil {
		evs = h.cache.lookup(seq, v)
	}
	if evs == nil {
		var err error
		if evs, err = decodeBlock(seq, v); err != nil {
			return seq, nil, fmt.Errorf("the block of events from %d: %w", seq, err)
		}
		if h.cache != nil {
			h.cache.add(seq, v, evs)
		}
	}
	h.cur, h.i = evs, min(at, len(evs)-1)
	return h.cur[h.i].seq, h.cur[h.i].value, nil
}

// first goes to the oldest event.
func (h *history) first() (uint64, []byte, error) {
	if h.c == nil {
		return 0, nil, nil
	}
	k, v := h.c.First()
	return h.load(k, v, 0)
}

// last goes to the newest event.
func (h *history) last() (uint64, []byte, error) {
	if h.c == nil {
		return 0, nil, nil
	}
	k, v := h.c.Last()
	return h.load(k, v, int(blockCount(v)))
}

// next goes to the event after the one at hand; 0 at the end.
func (h *history) next() (uint64, []byte, error) {
	if h.i+1 < len(h.cur) {
		h.i++
		return h.cur[h.i].seq, h.cur[h.i].value, nil
	}
	if h.c == nil {
		return 0, nil, nil
	}
	k, v := h.c.Next()
	return h.load(k, v, 0)
}

// seek goes to the first event at or after seq.
func (h *history) seek(seq uint64) (uint64, []byte, error) {
	if h.c == nil {
		return 0, nil, nil
	}
	k, v := h.c.Seek(seqKey(seq))
	if k == nil || keySeq(k) > seq {
		var pk, pv []byte
		if k == nil {
			pk, pv = h.c.Last()
		} else {
			pk, pv = h.c.Prev()
		}
		if len(pk) == 8 && blockCount(pv) > 0 && keySeq(pk)+blockCount(pv) > seq {
			return h.load(pk, pv, int(seq-keySeq(pk)))
		}
		k, v = h.c.Seek(seqKey(seq))
	}
	return h.load(k, v, 0)
}

// get returns the stored value of event seq, nil if the store holds none.
func (h *history) get(seq uint64) ([]byte, error) {
	if n := len(h.got); n > 0 && h.got[0].seq <= seq && seq <= h.got[n-1].seq {
		return h.got[seq-h.got[0].seq].value, nil
	}
	s, v, err := h.seek(seq)
	if err != nil {
		return nil, err
	}
	if s != seq || v == nil {
		return nil, nil
	}
	if len(h.cur) > 1 {
		h.got = h.cur
	}
	return v, nil
}

// putBlocks stores the values of consecutive events, the first of them
// first, as blocks.
func putBlocks(jb *bolt.Bucket, first uint64, values [][]byte) error {
	for len(values) > 0 {
		// An event too big to share a block that a reader would
		// decompress is kept alone, as files before blocks keep events.
		if v := values[0]; len(v) > maxAlone {
			if len(v) < 1+8+2*hashSize || binary.BigEndian.Uint64(v[1:]) != first {
				return fmt.Errorf("an event stored alone is not event %d", first)
			}
			if err := jb.Put(seqKey(first), v); err != nil {
				return fmt.Errorf("event %d: %w", first, err)
			}
			first++
			values = values[1:]
			continue
		}
		n, size := 0, 0
		for n < len(values) && n < blockEvents && size < blockBytes && len(values[n]) <= maxAlone {
			v := values[n]
			if len(v) < 1+8+2*hashSize || binary.BigEndian.Uint64(v[1:]) != first+uint64(n) {
				return fmt.Errorf("a block's event %d is not event %d", n, first+uint64(n))
			}
			size += len(v)
			n++
		}
		blk, err := encodeBlock(values[:n])
		if err != nil {
			return err
		}
		if err := jb.Put(seqKey(first), blk); err != nil {
			return fmt.Errorf("events %d to %d: %w", first, first+uint64(n)-1, err)
		}
		first += uint64(n)
		values = values[n:]
	}
	return nil
}
