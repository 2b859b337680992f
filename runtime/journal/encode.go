package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
)

// domainTag separates journal hashes from every other use of SHA-256.
const domainTag = "shadowgate.journal.v1\x00"

const (
	// formatV1 is an event that changes no record.
	formatV1 = 1
	// formatV2 is an event followed by the records it changes (see refs).
	formatV2 = 2
	hashSize = sha256.Size
)

// hash is one link of the chain.
type hash [hashSize]byte

func (h hash) String() string { return hex.EncodeToString(h[:]) }

// appendCanonical appends the canonical encoding of ev and the record
// changes it witnesses (see the package doc) to b.
func appendCanonical(b []byte, ev *runtime.Event, refs []ref) []byte {
	if len(refs) == 0 {
		b = append(b, formatV1)
	} else {
		b = append(b, formatV2)
	}
	b = binary.BigEndian.AppendUint64(b, ev.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(ev.At.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(ev.Mono))
	b = appendStr(b, ev.BootID)
	b = appendStr(b, string(ev.Kind))
	b = appendStr(b, ev.Run)
	b = binary.BigEndian.AppendUint64(b, uint64(int64(ev.Step)))
	b = appendStr(b, ev.Device)
	b = appendStr(b, string(ev.Body))
	if len(refs) > 0 {
		b = binary.BigEndian.AppendUint32(b, uint32(len(refs)))
		for _, r := range refs {
			b = appendStr(b, r.bucket)
			b = appendStr(b, r.key)
			b = append(b, byte(r.op))
			b = append(b, r.digest[:]...)
		}
	}
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// chain returns the hash of an event's canonical bytes after prev.
func chain(canonical []byte, prev hash) hash {
	h := sha256.New()
	h.Write([]byte(domainTag))
	h.Write(canonical)
	h.Write(prev[:])
	var out hash
	h.Sum(out[:0])
	return out
}

// encodeEvent returns the stored value of ev with its record changes after
// prev, and its hash.
func encodeEvent(ev *runtime.Event, refs []ref, prev hash) ([]byte, hash) {
	b := appendCanonical(make([]byte, 0, 96+len(ev.Body)+len(refs)*80+2*hashSize), ev, refs)
	h := chain(b, prev)
	b = append(b, prev[:]...)
	b = append(b, h[:]...)
	return b, h
}

// errShort is a stored value that ends too soon.
var errShort = errors.New("truncated")

// decoded is a stored event taken apart.
type decoded struct {
	ev        runtime.Event
	refs      []ref
	canonical []byte // aliases the stored value
	prev      hash
	hash      hash
}

// decodeEvent takes a stored value apart. It checks the layout, not the
// hash. The event's strings are copies; canonical aliases v.
func decodeEvent(v []byte) (decoded, error) {
	var d decoded
	if len(v) < 2*hashSize+1 {
		return d, errShort
	}
	body := v[:len(v)-2*hashSize]
	copy(d.prev[:], v[len(body):])
	copy(d.hash[:], v[len(body)+hashSize:])
	d.canonical = body
	r := reader{b: body}
	f := r.u8()
	if r.err != nil {
		return d, r.err
	}
	if f != formatV1 && f != formatV2 {
		return d, fmt.Errorf("unknown event format %d", f)
	}
	d.ev.Seq = r.u64()
	d.ev.At = time.Unix(0, int64(r.u64())).UTC()
	d.ev.Mono = int64(r.u64())
	d.ev.BootID = r.str()
	d.ev.Kind = runtime.Kind(r.str())
	d.ev.Run = r.str()
	d.ev.Step = int(int64(r.u64()))
	d.ev.Device = r.str()
	if b := r.bytes(); len(b) > 0 {
		d.ev.Body = append([]byte(nil), b...)
	}
	if f == formatV2 {
		n := r.u32()
		if r.err == nil && n == 0 {
			return d, errors.New("a format 2 event names no records")
		}
		// Each ref takes at least 4+4+1+32 bytes: a count beyond what is
		// left is damage, not an allocation to make.
		if r.err == nil && uint64(n) > uint64(len(r.b))/41 {
			return d, fmt.Errorf("%d record changes cannot fit in %d bytes", n, len(r.b))
		}
		for i := uint32(0); i < n && r.err == nil; i++ {
			var x ref
			x.bucket = r.str()
			x.key = r.str()
			x.op = refOp(r.u8())
			copy(x.digest[:], r.take(hashSize))
			if r.err == nil && !x.op.valid() {
				return d, fmt.Errorf("record change %d has unknown operation %d", i, x.op)
			}
			d.refs = append(d.refs, x)
		}
	}
	if r.err != nil {
		return d, r.err
	}
	if len(r.b) != 0 {
		return d, fmt.Errorf("%d stray bytes after the body", len(r.b))
	}
	d.ev.Prev, d.ev.Hash = d.prev.String(), d.hash.String()
	return d, nil
}

// reader reads the canonical encoding, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = errShort
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) bytes() []byte {
	lb := r.take(4)
	if lb == nil {
		return nil
	}
	return r.take(int(binary.BigEndian.Uint32(lb)))
}

func (r *reader) str() string { return string(r.bytes()) }

// seqKey is the journal bucket's key of seq.
func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// link is a {seq, hash} pair: the head or the anchor of the chain.
type link struct {
	Seq  uint64
	Hash hash
}

func (l link) encode() []byte { return append(seqKey(l.Seq), l.Hash[:]...) }

func decodeLink(b []byte) (link, error) {
	var l link
	if len(b) != 8+hashSize {
		return l, fmt.Errorf("a link is %d bytes, want %d", len(b), 8+hashSize)
	}
	l.Seq = binary.BigEndian.Uint64(b)
	copy(l.Hash[:], b[8:])
	return l, nil
}
