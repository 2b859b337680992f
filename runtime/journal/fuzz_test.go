package journal

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

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
	withRefs := runtime.Event{Seq: 9, At: time.Unix(1_700_000_000, 0).UTC(), Kind: runtime.KindApprovalRequested, Body: []byte(`{}`)}
	v, _ := encodeEvent(&withRefs, []ref{
		{bucket: "approvals", key: "apr-1", op: opPut, digest: digestOf([]byte(`{"id":"apr-1"}`))},
		{bucket: "sessions", key: "ab", op: opDelete},
		{bucket: "effects", key: "k", op: opCarry, digest: hash{7}},
	}, hash{4})
	f.Add(v)
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

// FuzzParseCheckpoint feeds checkpoint files to the parser a user points
// journal verify --checkpoint at: it must never panic, and what it accepts
// must be signed by the key.
func FuzzParseCheckpoint(f *testing.F) {
	skey, vkey, err := note.GenerateKey(nil, "shadowgate-fuzz")
	if err != nil {
		f.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		f.Fatal(err)
	}
	good, err := note.Sign(&note.Note{Text: "shadowgate/fuzz\n42\n" + strings.Repeat("A", 43) + "=\n"}, signer)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"note":` + strconv.Quote(string(good)) + `}`))
	f.Add([]byte(`{"seq":3,"kind":"checkpoint","body":{"note":` + strconv.Quote(string(good)) + `}}`))
	f.Add([]byte("shadowgate/fuzz\n18446744073709551616\nAAAA\n\n— shadowgate-fuzz AAAA\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCheckpoint(b, vkey)
		if err != nil {
			return
		}
		if len(c.Hash) != 2*hashSize {
			t.Fatalf("accepted a checkpoint with hash %q", c.Hash)
		}
	})
}
