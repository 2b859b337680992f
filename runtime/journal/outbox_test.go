package journal

import (
	"fmt"
	"testing"

	"github.com/shadowgate/shadowgate/store"
)

func TestOutbox(t *testing.T) {
	path := tempPath(t)
	j, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := j.Outbox()
	if _, ok, _ := o.Cursor(); ok {
		t.Fatal("a fresh outbox has a cursor")
	}
	var msgs []store.OutMessage
	for i := range 10 {
		msgs = append(msgs, store.OutMessage{Topic: "t/events", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), Essential: i%4 == 0})
	}
	if err := o.Append(msgs, 42); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, path, Options{})
	o = j.Outbox()
	if c, ok, err := o.Cursor(); err != nil || !ok || c != 42 {
		t.Fatalf("cursor after reopen = %d %v %v", c, ok, err)
	}
	got, err := o.Peek(0, 3)
	if err != nil || len(got) != 3 || got[0].Seq != 1 || string(got[2].Payload) != `{"i":2}` || !got[0].Essential {
		t.Fatalf("Peek = %+v, %v", got, err)
	}
	if err := o.Delete([]uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	n, bytes, _ := o.Usage()
	if n != 8 {
		t.Fatalf("usage after delete = %d messages", n)
	}
	// Trimming to almost nothing drops the telemetry, oldest first, and
	// keeps the essential messages (seqs 5 and 9).
	dropped, err := o.Trim(bytes / 4)
	if err != nil || dropped != 6 {
		t.Fatalf("Trim dropped %d, %v; want 6", dropped, err)
	}
	left, _ := o.Peek(0, 100)
	if len(left) != 2 || left[0].Seq != 5 || left[1].Seq != 9 || !left[0].Essential || !left[1].Essential {
		t.Fatalf("left after trim = %+v", left)
	}
	if n, _, _ := o.Usage(); n != 2 {
		t.Fatalf("count after trim = %d", n)
	}
	more, _ := o.Peek(5, 10)
	if len(more) != 1 || more[0].Seq != 9 {
		t.Fatalf("Peek after 5 = %+v", more)
	}
}
