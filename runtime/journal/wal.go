package journal

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/klauspost/compress/s2"

	"github.com/shadowgate/shadowgate/internal/failpoint"
)

// The log is the journal's durability path (see the package doc, "The
// log"): segment files in a directory beside the store, each written
// whole once (zeros) and then reused, holding frames appended one group
// commit at a time, each frame written and made durable with one
// fdatasync.

const (
	segMagic   = "SGWAL\x00\x01\x00"
	segHeader  = 40         // magic ‖ u64 index ‖ u64 first seq ‖ u64 preallocated size ‖ u32 0 ‖ u32 crc
	frameMagic = 0x53474631 // "SGF1"
	frameHead  = 28         // u32 magic ‖ u32 len ‖ u64 first seq ‖ u32 count ‖ u8 codec ‖ 3 zero ‖ u32 crc
	// codecs of a frame's payload: 0 and 1 hold entries as encodeEntries
	// makes them (written by earlier builds, still read), 2, 3 (zstd) and
	// 4 (Snappy) as packEntries does.
	codecRaw          = 0
	codecFlate        = 1
	codecPacked       = 2
	codecPackedZstd   = 3
	codecPackedSnappy = 4
	// flagPrune marks an entry whose event prunes the events it names
	// when the store applies it.
	flagPrune = 1
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// DefaultSegmentSize is the size a log segment is preallocated to.
const DefaultSegmentSize = 4 << 20

// segment is one file of the log.
type segment struct {
	index      uint64
	path       string
	first      uint64 // the seq its first frame holds (or would hold)
	last       uint64 // the seq of its last entry; first-1 while empty
	prealloc   int64
	end        int64 // where the next frame goes
	sealedNext bool  // its last frame names a successor
	// align is the unit of a direct write to its open file (see put); 0
	// while it is written through the page cache.
	align int64
}

// room is how long the segment may grow: the size it was made, or def
// for a file made without one.
func (s *segment) room(def int64) int64 {
	if s.prealloc > 0 {
		return s.prealloc
	}
	return def
}

// logEntry is one event as the log holds it: the stored value of the
// event (as in the store), the JSON of each record it puts, in the order
// of its record changes, and its flags.
type logEntry struct {
	value []byte
	js    [][]byte // one per ref: the JSON of an opPut, nil otherwise
	flags byte
}

// wal is the log. It is used by the journal's writer alone (append, roll)
// and, with the store's applier holding the journal's lock, by remove.
type wal struct {
	dir     string
	segSize int64
	segs    []*segment // oldest first; the last is the one appended to
	f       *os.File   // the last segment, open for writing
	// spares are segments the store holds, kept to be written over: a new
	// file would be written whole with zeros first.
	spares []string
	// top is the highest index a segment or spare here has had: a new
	// segment takes a higher one, so that what a reused file held before
	// never passes its check (a frame's CRC names its segment's index).
	top  uint64
	buf  []byte
	zbuf []byte
	// dbuf is the memory of direct writes; last holds the bytes of the
	// last unit a direct write put, at lastAt in lastSeg, so that the
	// next frame's first unit is made without reading it back.
	dbuf    []byte
	last    []byte
	lastSeg *segment
	lastAt  int64

	// counts, for Stats and benchmarks
	syncs, written int64
}

// walDir is the directory of the log of the store at path.
func walDir(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".wal"
}

func segName(index uint64) string { return fmt.Sprintf("%016x.seg", index) }

// LogError says the log cannot be trusted: a frame in its middle is
// damaged, a segment is missing, or it does not continue the store.
type LogError struct {
	Segment string
	Offset  int64
	Err     error
}

func (e *LogError) Error() string {
	if e.Segment == "" {
		return "the log: " + e.Err.Error()
	}
	return fmt.Sprintf("the log's segment %s at byte %d: %v", e.Segment, e.Offset, e.Err)
}

func (e *LogError) Unwrap() error { return e.Err }

// scanned is what opening the log found.
type scanned struct {
	entries []scannedEntry
	// torn is the tail that was cut, if any: its segment and offset.
	torn *LogError
	// unstarted names a last segment whose start a crash cut short.
	unstarted string
}

// unstarted reports whether s is a segment whose header was never
// written: all zeros where it goes, or the header of the spare it was
// renamed from (a lower index). Its frames, if any, are a spare's past.
func unstarted(s *segment) bool {
	f, err := os.Open(s.path)
	if err != nil {
		return false
	}
	defer f.Close()
	hdr := make([]byte, segHeader)
	n, _ := io.ReadFull(f, hdr)
	if allZero(hdr[:n]) {
		return true
	}
	return n == segHeader && string(hdr[:8]) == segMagic &&
		crc32.Checksum(hdr[:segHeader-4], crcTable) == binary.BigEndian.Uint32(hdr[segHeader-4:]) &&
		binary.BigEndian.Uint64(hdr[8:]) < s.index
}

type scannedEntry struct {
	logEntry
	seg *segment
}

// openWAL reads the log in dir. With write set it cuts a torn tail (and
// says so in scanned.torn) and opens the last segment for appending. A
// frame that cannot be read with valid frames after it, a missing
// segment, or a segment shorter than it was made is a *LogError.
func openWAL(dir string, segSize int64, write bool) (*wal, scanned, error) {
	w := &wal{dir: dir, segSize: segSize}
	var sc scanned
	names, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, sc, fmt.Errorf("reading the log %s: %w", dir, err)
	}
	for _, de := range names {
		name := de.Name()
		if strings.HasSuffix(name, ".spare") {
			idx, err := strconv.ParseUint(strings.TrimSuffix(name, ".spare"), 16, 64)
			if err != nil {
				return nil, sc, &LogError{Segment: name, Err: errors.New("a file the log never writes")}
			}
			w.spares = append(w.spares, filepath.Join(dir, name))
			w.top = max(w.top, idx)
			continue
		}
		if !strings.HasSuffix(name, ".seg") {
			continue
		}
		idx, err := strconv.ParseUint(strings.TrimSuffix(name, ".seg"), 16, 64)
		if err != nil || segName(idx) != name {
			return nil, sc, &LogError{Segment: name, Err: errors.New("a file the log never writes")}
		}
		w.segs = append(w.segs, &segment{index: idx, path: filepath.Join(dir, name)})
		w.top = max(w.top, idx)
	}
	slices.SortFunc(w.segs, func(a, b *segment) int { return compareU64(a.index, b.index) })
	for i, s := range w.segs {
		if i > 0 && s.index != w.segs[i-1].index+1 {
			return nil, sc, &LogError{Segment: segName(w.segs[i-1].index + 1), Err: errors.New("the segment is missing (deleted)")}
		}
		last := i == len(w.segs)-1
		if last && (i == 0 || !w.segs[i-1].sealedNext) && unstarted(s) {
			// A roll a crash cut short: the file was made (or a spare
			// renamed) but its header never written and synced, so no
			// frame was ever written to it. It is set aside.
			sc.unstarted = segName(s.index)
			if write {
				if err := os.Remove(s.path); err != nil {
					return nil, sc, fmt.Errorf("removing an unstarted log segment: %w", err)
				}
			}
			w.segs = w.segs[:i]
			break
		}
		ents, torn, err := readSegment(s, last)
		if err != nil {
			return nil, sc, err
		}
		if i > 0 && s.first != w.segs[i-1].last+1 {
			return nil, sc, &LogError{Segment: segName(s.index), Err: fmt.Errorf("it starts at event %d, but the segment before ends at %d", s.first, w.segs[i-1].last)}
		}
		if torn != nil {
			sc.torn = torn
			if write {
				if err := cutTail(s, torn.Offset); err != nil {
					return nil, sc, err
				}
			}
		}
		for _, e := range ents {
			sc.entries = append(sc.entries, scannedEntry{logEntry: e, seg: s})
		}
		if last && s.sealedNext {
			return nil, sc, &LogError{Segment: segName(s.index + 1), Err: errors.New("the segment is missing (deleted): the one before names it")}
		}
	}
	if write {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, sc, fmt.Errorf("making the log %s: %w", dir, err)
		}
		if n := len(w.segs); n > 0 {
			f, err := os.OpenFile(w.segs[n-1].path, os.O_RDWR, 0)
			if err != nil {
				return nil, sc, fmt.Errorf("opening the log: %w", err)
			}
			w.f = f
			w.direct(w.segs[n-1], f)
		}
	}
	return w, sc, nil
}

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readSegment reads the frames of s. A frame that fails its check is the
// end of the log if nothing valid follows it in s and s is the last
// segment (a torn write, returned as the cut to make); otherwise it is a
// *LogError.
func readSegment(s *segment, last bool) ([]logEntry, *LogError, error) {
	data, err := os.ReadFile(s.path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the log's segment %s: %w", s.path, err)
	}
	name := segName(s.index)
	bad := func(off int64, format string, args ...any) error {
		return &LogError{Segment: name, Offset: off, Err: fmt.Errorf(format, args...)}
	}
	if len(data) < segHeader || string(data[:8]) != segMagic {
		return nil, nil, bad(0, "no segment header")
	}
	if crc32.Checksum(data[:segHeader-4], crcTable) != binary.BigEndian.Uint32(data[segHeader-4:]) {
		return nil, nil, bad(0, "the segment header fails its checksum")
	}
	if idx := binary.BigEndian.Uint64(data[8:]); idx != s.index {
		return nil, nil, bad(0, "the header says it is segment %016x (moved)", idx)
	}
	s.first = binary.BigEndian.Uint64(data[16:])
	s.prealloc = int64(binary.BigEndian.Uint64(data[24:]))
	if int64(len(data)) < s.prealloc {
		return nil, nil, bad(int64(len(data)), "the segment is %d bytes, but it was made %d long (truncated)", len(data), s.prealloc)
	}
	s.last, s.end = s.first-1, segHeader
	var out []logEntry
	off := int64(segHeader)
	for off < int64(len(data)) {
		n, ents, sealed, err := readFrame(data[off:], s.index, s.last+1)
		if n == 0 && err == nil {
			break // zeros: the end
		}
		if err != nil {
			// Valid frames after a bad one are damage in the middle.
			// None: the end of what this segment holds, where a write
			// a crash cut short may lie (a frame of ours that fails its
			// check), or what a reused segment held before.
			if later := nextValid(data, off+1, s.index); later >= 0 {
				return nil, nil, bad(off, "%v, with the log going on after it", err)
			}
			if last && looksTorn(data[off:], s.last+1) {
				return out, &LogError{Segment: name, Offset: off, Err: err}, nil
			}
			break
		}
		out = append(out, ents...)
		s.last += uint64(len(ents))
		off += n
		s.end = off
		if sealed {
			// The segment ends here; what follows is from its last use.
			s.sealedNext = true
			break
		}
	}
	return out, nil, nil
}

// looksTorn reports whether b starts as a frame holding event seq would:
// a write of ours that a crash cut short, not a reused segment's past.
func looksTorn(b []byte, seq uint64) bool {
	return len(b) >= 16 && binary.BigEndian.Uint32(b) == frameMagic && binary.BigEndian.Uint64(b[8:]) == seq
}

// readFrame reads the frame at the start of b, whose first entry must be
// seq. It returns its length, or 0 with no error at zeros (the end).
func readFrame(b []byte, segIndex, seq uint64) (int64, []logEntry, bool, error) {
	if len(b) < 4 || binary.BigEndian.Uint32(b) == 0 {
		if allZero(b[:min(len(b), frameHead)]) {
			return 0, nil, false, nil
		}
	}
	if len(b) < frameHead {
		return 0, nil, false, errors.New("a frame ends before its header does")
	}
	if binary.BigEndian.Uint32(b) != frameMagic {
		return 0, nil, false, errors.New("no frame where one should start")
	}
	size := int64(binary.BigEndian.Uint32(b[4:]))
	if size > int64(len(b)-frameHead) {
		return 0, nil, false, fmt.Errorf("a frame of %d bytes runs past the segment's end", size)
	}
	payload := b[frameHead : frameHead+size]
	if frameCRC(segIndex, b[:frameHead-4], payload) != binary.BigEndian.Uint32(b[frameHead-4:]) {
		return 0, nil, false, errors.New("a frame fails its checksum")
	}
	first, count, codec := binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint32(b[16:]), b[20]
	if count == 0 {
		// A seal: the segment ends here and the next one follows.
		return frameHead + size, nil, true, nil
	}
	if first != seq {
		return 0, nil, false, fmt.Errorf("a frame starts at event %d, want %d", first, seq)
	}
	raw := payload
	switch codec {
	case codecRaw, codecPacked:
	case codecFlate:
		var err error
		raw, err = io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(payload)), maxFrameRead))
		if err != nil {
			return 0, nil, false, fmt.Errorf("a frame's payload does not inflate: %w", err)
		}
	case codecPackedZstd:
		_, dec, err := coders()
		if err == nil {
			raw, err = dec.DecodeAll(payload, nil)
		}
		if err != nil {
			return 0, nil, false, fmt.Errorf("a frame's payload does not decompress: %w", err)
		}
	case codecPackedSnappy:
		n, err := s2.DecodedLen(payload)
		if err == nil && n > maxBlockRaw {
			err = fmt.Errorf("it would be %d bytes, over the limit of %d", n, maxBlockRaw)
		}
		if err == nil {
			raw, err = s2.Decode(nil, payload)
		}
		if err != nil {
			return 0, nil, false, fmt.Errorf("a frame's payload does not decompress: %w", err)
		}
	default:
		return 0, nil, false, fmt.Errorf("a frame of unknown codec %d", codec)
	}
	var ents []logEntry
	var err error
	if codec == codecPacked || codec == codecPackedZstd || codec == codecPackedSnappy {
		ents, err = unpackEntries(raw, first, uint64(count))
	} else {
		ents, err = decodeEntries(raw, int(count))
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("frame of events %d to %d: %w", first, first+uint64(count)-1, err)
	}
	return frameHead + size, ents, false, nil
}

// nextValid returns the offset of the first valid frame at or after from,
// or -1.
func nextValid(data []byte, from int64, segIndex uint64) int64 {
	for off := from; off+frameHead <= int64(len(data)); off++ {
		if binary.BigEndian.Uint32(data[off:]) != frameMagic {
			continue
		}
		size := int64(binary.BigEndian.Uint32(data[off+4:]))
		if size > int64(len(data))-off-frameHead {
			continue
		}
		if frameCRC(segIndex, data[off:off+frameHead-4], data[off+frameHead:off+frameHead+size]) == binary.BigEndian.Uint32(data[off+frameHead-4:]) {
			return off
		}
	}
	return -1
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func frameCRC(segIndex uint64, head, payload []byte) uint32 {
	h := crc32.New(crcTable)
	_ = binary.Write(h, binary.BigEndian, segIndex)
	h.Write(head)
	h.Write(payload)
	return h.Sum32()
}

// cutTail sets the end of s where a torn write begins: the next frame
// is written over it, and nothing after it is read as log (a frame is
// read only if it continues the one before).
func cutTail(s *segment, off int64) error {
	s.end = off
	return nil
}

// encodeEntries appends the entries, each as uvarint len ‖ value ‖ u8
// flags ‖ (uvarint len ‖ JSON) per record change.
func encodeEntries(b []byte, ents []logEntry) []byte {
	for _, e := range ents {
		b = binary.AppendUvarint(b, uint64(len(e.value)))
		b = append(b, e.value...)
		b = appendTail(b, e)
	}
	return b
}

// packEntries appends the entries of a frame, consecutive events, to b as
// the log keeps them: the prev of the first and the hash of the last, then
// for each entry its event packed as a block packs it (appendPacked: the
// seq left out, the times as differences), its flags, and its records'
// JSON as encodeEntries writes them. The other hashes are computed again
// when the frame is read, and the last must come out.
func packEntries(b []byte, ents []logEntry) []byte {
	_, prev, _ := splitValue(ents[0].value)
	_, _, last := splitValue(ents[len(ents)-1].value)
	b = append(b, prev[:]...)
	b = append(b, last[:]...)
	var at, mono int64
	for _, e := range ents {
		c, _, _ := splitValue(e.value)
		b = appendPacked(b, c, &at, &mono)
		b = appendTail(b, e)
	}
	return b
}

// unpackEntries takes apart what packEntries made of count entries from
// first.
func unpackEntries(b []byte, first, count uint64) ([]logEntry, error) {
	if len(b) < 2*hashSize {
		return nil, errShort
	}
	var prev, last hash
	copy(prev[:], b)
	copy(last[:], b[hashSize:])
	b = b[2*hashSize:]
	// Each entry takes at least six bytes: no more are made than fit.
	if count > uint64(len(b))/6 {
		return nil, fmt.Errorf("%d entries cannot fit in %d bytes", count, len(b))
	}
	out := make([]logEntry, 0, count)
	var at, mono int64
	for i := range count {
		var c []byte
		var err error
		if b, c, err = unpackOne(b, first+i, &at, &mono, nil); err != nil {
			return nil, err
		}
		h := chain(c, prev)
		c = append(append(c, prev[:]...), h[:]...)
		prev = h
		e := logEntry{value: c}
		if e.flags, e.js, b, err = takeTail(b); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d stray bytes after the entries", len(b))
	}
	if prev != last {
		return nil, fmt.Errorf("events %d to %d do not match the frame's hash (altered)", first, first+count-1)
	}
	return out, nil
}

func decodeEntries(b []byte, count int) ([]logEntry, error) {
	// Each entry takes at least three bytes: no more are made than fit.
	if count > len(b)/3 {
		return nil, fmt.Errorf("%d entries cannot fit in %d bytes", count, len(b))
	}
	out := make([]logEntry, 0, count)
	for range count {
		var e logEntry
		var err error
		if e.value, b, err = takeBytes(b); err != nil {
			return nil, err
		}
		if e.flags, e.js, b, err = takeTail(b); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d stray bytes after the entries", len(b))
	}
	return out, nil
}

// takeBytes takes a uvarint length and that many bytes from b.
func takeBytes(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errShort
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// appendTail appends what follows an entry's event: its flags and the
// JSON of each of its record changes. takeTail reads it back.
func appendTail(b []byte, e logEntry) []byte {
	b = append(b, e.flags)
	b = binary.AppendUvarint(b, uint64(len(e.js)))
	for _, js := range e.js {
		b = binary.AppendUvarint(b, uint64(len(js)))
		b = append(b, js...)
	}
	return b
}

// takeTail takes what follows an entry's event from b: its flags and the
// JSON of each of its record changes (nil where there is none).
func takeTail(b []byte) (byte, [][]byte, []byte, error) {
	if len(b) < 1 {
		return 0, nil, nil, errShort
	}
	flags := b[0]
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return 0, nil, nil, errShort
	}
	b = b[1+k:]
	var js [][]byte
	for range n {
		var v []byte
		var err error
		if v, b, err = takeBytes(b); err != nil {
			return 0, nil, nil, err
		}
		if len(v) == 0 {
			v = nil
		}
		js = append(js, v)
	}
	return flags, js, b, nil
}

// append writes one frame holding ents, the first of which is event
// first, and makes it durable with one fdatasync. A frame that does not
// fit the segment's room goes to a new one. waited says a caller waits
// for the frame (see appendFrame).
func (w *wal) append(first uint64, ents []logEntry, waited bool) error {
	// A batch too big for one frame goes in several, made durable by
	// one fdatasync after the last.
	for len(ents) > 0 {
		n, size := 0, 0
		for n < len(ents) && (n == 0 || size+len(ents[n].value) <= maxFrameRaw) {
			size += len(ents[n].value)
			for _, js := range ents[n].js {
				size += len(js)
			}
			n++
		}
		if err := w.appendFrame(first, ents[:n], waited); err != nil {
			return err
		}
		first, ents = first+uint64(n), ents[n:]
	}
	if err := datasync(w.f); err != nil {
		return fmt.Errorf("syncing the log: %w", err)
	}
	w.syncs++
	return nil
}

// maxFrameRaw bounds the entries of one frame, before compression; a
// frame of one entry may be bigger. maxFrameRead bounds what a frame may
// inflate to when read.
const (
	maxFrameRaw  = 8 << 20
	maxFrameRead = 1 << 30
)

// appendFrame writes one frame holding ents, unsynced. It is compressed
// when that pays, and within what a reader will decompress: a frame a
// caller waits for (a durable point) with Snappy, in microseconds, and one
// nobody waits for (readings at the flush interval) with zstd, which
// takes ten times as long for a tenth fewer bytes.
func (w *wal) appendFrame(first uint64, ents []logEntry, waited bool) error {
	raw := packEntries(w.buf[:0], ents)
	w.buf = raw
	payload, codec := raw, byte(codecPacked)
	if len(raw) > 512 && len(raw) <= maxBlockRaw {
		var z []byte
		zc := byte(codecPackedSnappy)
		if waited {
			z = s2.EncodeSnappy(w.zbuf[:cap(w.zbuf)], raw)
		} else if enc, _, err := coders(); err == nil {
			z, zc = enc.EncodeAll(raw, w.zbuf[:0]), codecPackedZstd
		}
		if z != nil {
			w.zbuf = z
			if len(z) < len(raw)*7/8 {
				payload, codec = z, zc
			}
		}
	}
	size := int64(frameHead + len(payload))
	if len(w.segs) == 0 || w.f == nil {
		if err := w.roll(first); err != nil {
			return err
		}
	} else if s := w.segs[len(w.segs)-1]; s.end > segHeader && s.end+size+frameHead > s.room(w.segSize) {
		// The successor first, then the seal that names it: a crash
		// between leaves a segment that is not sealed, never a seal
		// that names nothing.
		old := w.f
		w.f = nil
		if err := w.roll(first); err != nil {
			w.f = old
			return err
		}
		err := w.seal(s, old)
		_ = old.Close()
		if err != nil {
			return err
		}
	}
	s := w.segs[len(w.segs)-1]
	frame := make([]byte, 0, size)
	frame = binary.BigEndian.AppendUint32(frame, frameMagic)
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(payload)))
	frame = binary.BigEndian.AppendUint64(frame, first)
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(ents)))
	frame = append(frame, codec, 0, 0, 0)
	frame = binary.BigEndian.AppendUint32(frame, frameCRC(s.index, frame, payload))
	frame = append(frame, payload...)
	// The memory of a frame of a rare size is not kept.
	if cap(w.buf) > maxKeptDirect {
		w.buf = nil
	}
	if cap(w.zbuf) > maxKeptDirect {
		w.zbuf = nil
	}
	if err := w.writeTo(w.f, s, frame, false); err != nil {
		return err
	}
	s.last = first + uint64(len(ents)) - 1
	return nil
}

// writeTo puts frame at the segment's end, and with sync fdatasyncs it.
func (w *wal) writeTo(f *os.File, s *segment, frame []byte, sync bool) error {
	at := s.end
	if failpoint.Enabled {
		// A crash here leaves half a frame: a torn write.
		half := len(frame) / 2
		if err := w.put(f, s, frame[:half], at); err != nil {
			return fmt.Errorf("writing the log: %w", err)
		}
		if err := failpoint.Inject(failpoint.JournalLogTorn); err != nil {
			return err
		}
		frame, at = frame[half:], at+int64(half)
	}
	if err := w.put(f, s, frame, at); err != nil {
		return fmt.Errorf("writing the log: %w", err)
	}
	w.written += int64(len(frame))
	s.end = at + int64(len(frame))
	if !sync {
		return nil
	}
	if err := datasync(f); err != nil {
		return fmt.Errorf("syncing the log: %w", err)
	}
	w.syncs++
	return nil
}

// seal ends the last segment with a frame that names its successor, so
// that a successor deleted later is found.
func (w *wal) seal(s *segment, f *os.File) error {
	frame := make([]byte, 0, frameHead)
	frame = binary.BigEndian.AppendUint32(frame, frameMagic)
	frame = binary.BigEndian.AppendUint32(frame, 0)
	frame = binary.BigEndian.AppendUint64(frame, s.last+1)
	frame = binary.BigEndian.AppendUint32(frame, 0)
	frame = append(frame, 0, 0, 0, 0)
	frame = binary.BigEndian.AppendUint32(frame, frameCRC(s.index, frame, nil))
	if err := w.writeTo(f, s, frame, true); err != nil {
		return err
	}
	s.sealedNext = true
	return nil
}

// roll starts a new segment whose first event is first: a spare segment
// renamed, or a new file written whole with zeros, so that appends to it
// neither allocate blocks nor convert them (each would commit ext4's
// journal, a card write of its own); its header is written and synced,
// and the directory synced.
func (w *wal) roll(first uint64) error {
	idx := w.top + 1
	if n := len(w.segs); n > 0 && w.segs[n-1].index+1 != idx {
		return fmt.Errorf("starting a log segment: the last is %016x, but %016x was used", w.segs[n-1].index, w.top)
	}
	if _, err := os.Stat(w.dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(w.dir, 0o700); err != nil {
			return fmt.Errorf("making the log: %w", err)
		}
		// The directory's own entry survives a power cut too.
		if err := syncDir(filepath.Dir(w.dir)); err != nil {
			return fmt.Errorf("making the log: %w", err)
		}
	}
	s := &segment{index: idx, path: filepath.Join(w.dir, segName(idx)), first: first, last: first - 1, end: segHeader}
	f, size, err := w.segmentFile(s.path)
	if err != nil {
		return fmt.Errorf("starting a log segment: %w", err)
	}
	s.prealloc = size
	hdr := make([]byte, 0, segHeader)
	hdr = append(hdr, segMagic...)
	hdr = binary.BigEndian.AppendUint64(hdr, idx)
	hdr = binary.BigEndian.AppendUint64(hdr, first)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(size))
	hdr = binary.BigEndian.AppendUint32(hdr, 0)
	hdr = binary.BigEndian.AppendUint32(hdr, crc32.Checksum(hdr, crcTable))
	if _, err = f.WriteAt(hdr, 0); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(w.dir)
	}
	if err != nil {
		f.Close()
		_ = os.Remove(s.path) // never started: no frame is in it
		return fmt.Errorf("starting a log segment: %w", err)
	}
	w.syncs += 2
	w.written += segHeader
	if w.f != nil {
		_ = w.f.Close()
	}
	w.f = f
	w.direct(s, f)
	w.segs = append(w.segs, s)
	w.top = idx
	return nil
}

const (
	// memAlign is the alignment of the memory a direct write is made from.
	memAlign = 4096
	// maxKeptDirect bounds the memory kept for a frame, its compressed
	// payload and its direct write.
	maxKeptDirect = 256 << 10
)

// direct turns on direct writes to f, the open file of s, where its file
// system allows them: a frame then costs the card the units (512 bytes
// on an SD card) it touches, where through the page cache it costs a
// 4 KiB page, written again by every fdatasync of a frame in it. Only a
// segment written whole is written directly, so that no direct write
// allocates or extends the file.
func (w *wal) direct(s *segment, f *os.File) {
	a := directAlign(f)
	if a == 0 || s.prealloc == 0 || s.prealloc%a != 0 {
		return
	}
	if err := setDirect(f, true); err == nil {
		s.align = a
	}
}

// put writes b at off in f, the open file of s. A direct write is of whole
// units: the bytes of its first unit before off (the end of the frame
// before, kept from the last put or read back), b, and zeros to the end of
// its last unit; where nothing was written yet, a segment holds zeros or
// a spare's past, which no reader takes for this segment's frames. A
// write the file system refuses as direct is made through the page cache,
// and so is every later one to f.
func (w *wal) put(f *os.File, s *segment, b []byte, off int64) error {
	a := s.align
	if a == 0 {
		_, err := f.WriteAt(b, off)
		return err
	}
	start, end := off-off%a, off+int64(len(b))
	if r := end % a; r != 0 {
		end += a - r
	}
	if end > s.prealloc {
		return w.buffered(f, s, b, off, nil)
	}
	buf := w.aligned(int(end - start))
	head := int(off - start)
	if head > 0 {
		if w.lastSeg == s && w.lastAt == start && len(w.last) == int(a) {
			copy(buf, w.last[:head])
		} else if _, err := f.ReadAt(buf[:a], start); err != nil {
			return w.buffered(f, s, b, off, err)
		}
	}
	n := copy(buf[head:], b)
	clear(buf[head+n:])
	if _, err := f.WriteAt(buf, start); err != nil {
		return w.buffered(f, s, b, off, err)
	}
	w.lastSeg, w.lastAt = s, end-a
	w.last = append(w.last[:0], buf[len(buf)-int(a):]...)
	return nil
}

// buffered turns direct writes to f off and writes b at off through the
// page cache, after a direct write failed with err (nil: it was not
// tried). Only a refusal (EINVAL) is worth the retry.
func (w *wal) buffered(f *os.File, s *segment, b []byte, off int64, err error) error {
	if err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	if err := setDirect(f, false); err != nil {
		return err
	}
	s.align, w.lastSeg = 0, nil
	_, err = f.WriteAt(b, off)
	return err
}

// aligned returns n bytes of memory at an address that is a multiple of
// memAlign, as direct writes need.
func (w *wal) aligned(n int) []byte {
	m := w.dbuf
	if cap(m) < n+memAlign {
		m = make([]byte, n+memAlign)
		if n <= maxKeptDirect {
			w.dbuf = m // a frame of a rare size is not kept for
		}
	}
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(m[:1]))) % memAlign); r != 0 {
		skip = memAlign - r
	}
	return m[skip : skip+n]
}

// segmentFile returns a file at path for a new segment, and its size: a
// spare renamed, or a new file of segSize zeros.
func (w *wal) segmentFile(path string) (*os.File, int64, error) {
	for len(w.spares) > 0 {
		sp := w.spares[len(w.spares)-1]
		w.spares = w.spares[:len(w.spares)-1]
		if err := os.Rename(sp, path); err != nil {
			continue // gone: the next, or a new file
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err == nil && st.Size() >= segHeader+frameHead {
			return f, st.Size(), nil
		}
		f.Close()
		_ = os.Remove(path)
	}
	// A disk without room for a whole segment gets a smaller one, down to
	// minSegment: the journal goes on until it is truly full.
	for size := w.segSize; ; size /= 4 {
		f, err := w.zeroFile(path, size)
		if err == nil {
			return f, size, nil
		}
		if !errors.Is(err, syscall.ENOSPC) || size/4 < minSegment {
			return nil, 0, err
		}
	}
}

// minSegment is the smallest segment made on a disk short of room.
const minSegment = 64 << 10

// zeroFile makes a file of size zeros at path.
func (w *wal) zeroFile(path string, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	// The blocks together, where the file system can; where it says there
	// is no room, there is none.
	if err := preallocate(f, size); errors.Is(err, syscall.ENOSPC) {
		f.Close()
		_ = os.Remove(path)
		return nil, err
	}
	zeros := make([]byte, min(size, 256<<10))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			f.Close()
			_ = os.Remove(path)
			return nil, err
		}
	}
	w.written += size
	return f, nil
}

// maxSpares is how many segments the store holds are kept to be reused.
const maxSpares = 2

// removeThrough removes the segments whose every event is at or before
// seq, oldest first, and says how many. The last segment stays open
// unless all is true.
func (w *wal) removeThrough(seq uint64, all bool) (int, error) {
	n := 0
	for len(w.segs) > 0 {
		s := w.segs[0]
		if s.last > seq || (len(w.segs) == 1 && !all) {
			break
		}
		if len(w.segs) == 1 && w.f != nil {
			_ = w.f.Close()
			w.f = nil
		}
		if err := failpoint.Inject(failpoint.JournalLogRemove); err != nil {
			return n, err
		}
		if len(w.spares) < maxSpares {
			spare := filepath.Join(w.dir, fmt.Sprintf("%016x.spare", s.index))
			if err := os.Rename(s.path, spare); err != nil {
				return n, fmt.Errorf("keeping a log segment to reuse: %w", err)
			}
			w.spares = append(w.spares, spare)
		} else if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("removing a log segment: %w", err)
		}
		w.segs = w.segs[1:]
		n++
	}
	if n > 0 {
		if err := syncDir(w.dir); err != nil {
			return n, fmt.Errorf("removing log segments: %w", err)
		}
	}
	return n, nil
}

// holdsFrom reports whether the log holds segment index or a later one.
func (w *wal) holdsFrom(index uint64) bool {
	return len(w.segs) > 0 && w.segs[len(w.segs)-1].index >= index
}

func (w *wal) close() error {
	if w == nil || w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
