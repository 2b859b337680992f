package journal

import (
	"bytes"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
)

// FuzzDecodeEvent feeds stored values to the decoder: it must never panic,
// and whatever it accepts must encode back to the same canonical bytes, so
// that verify and export read exactly what was hashed.
func FuzzDecodeEvent(f *testing.F) {
	for _, ev := range []runtime.Event{
		{Seq: 1, At: time.Unix(1_700_000_000, 5).UTC(), Mono: 42, BootID: "b00t", Kind: runtime.KindObserved, Device: "tank-1",
			Body: []byte(`{"value":61.5}`)},
		{Seq: 1 << 40, At: time.Unix(0, 0).UTC(), Kind: runtime.KindInvoked, Run: "run-1", Step: -3, Body: []byte(`{"x":"<&>"}`)},
		{Seq: 7, At: time.Unix(1, 0).UTC(), Kind: runtime.KindEnded},
	} {
		v, _ := encodeEvent(&ev, nil, hash{1, 2, 3})
		f.Add(v)
	}
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 80))
	f.Fuzz(func(t *testing.T, v []byte) {
		d, err := decodeEvent(v)
		if err != nil {
			return
		}
		again := appendCanonical(nil, &d.ev, d.refs)
		if !bytes.Equal(again, d.canonical) {
			t.Fatalf("decoded %+v re-encodes as %x, stored %x", d.ev, again, d.canonical)
		}
	})
}
