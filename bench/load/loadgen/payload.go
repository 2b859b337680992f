package loadgen

import (
	"encoding/binary"
	"errors"
	"time"
)

// stampLen is the bytes of a stamp: the send time and a sequence number.
const stampLen = 16

// errShort is returned by Parse for a payload too short to hold a stamp.
var errShort = errors.New("payload shorter than its stamp")

// Stamp writes the send time (as an offset from a base all the load's
// clients share, so that latency is measured on the monotonic clock) and
// a sequence number into the first stampLen bytes of p.
func Stamp(p []byte, sent time.Duration, seq uint64) {
	binary.BigEndian.PutUint64(p[0:8], uint64(sent))
	binary.BigEndian.PutUint64(p[8:16], seq)
}

// Parse reads what Stamp wrote.
func Parse(p []byte) (sent time.Duration, seq uint64, err error) {
	if len(p) < stampLen {
		return 0, 0, errShort
	}
	return time.Duration(binary.BigEndian.Uint64(p[0:8])), binary.BigEndian.Uint64(p[8:16]), nil
}

// newPayload returns a payload of size bytes whose bytes after the stamp
// are printable filler.
func newPayload(size int) []byte {
	p := make([]byte, size)
	for i := stampLen; i < size; i++ {
		p[i] = 'a' + byte(i%26)
	}
	return p
}
