package gateway

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/value"
)

// tamper changes the state directory's journal with raw bbolt, as someone
// who can write the file would.
func tamper(t *testing.T, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(journal.Path(dir), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// serve fails closed on a journal changed behind its back: a forged mode,
// a forged rule, garbage in a record, a flipped body in the middle of the
// chain. Each time the gateway starts, reads sensors, keeps the forged
// record out, refuses every write and says why.
func TestServeFailsClosedOnATamperedJournal(t *testing.T) {
	forged := func(v string) []byte { // a record naming event 1, which never made it
		return append(binary.BigEndian.AppendUint64([]byte{0x01}, 1), v...)
	}
	cases := []struct {
		name   string
		mutate func(tx *bolt.Tx) error
		why    string
	}{
		{"forged mode", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("state")).Put([]byte("mode"), forged(`{"name":"maintenance","by":"eve"}`))
		}, "state/mode"},
		{"forged mode without an event", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("state")).Put([]byte("mode"), []byte(`{"name":"maintenance","by":"eve"}`))
		}, "state/mode"},
		{"forged rule", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("rules")).Put([]byte("rule-x"),
				forged(`{"rule":{"id":"rule-x","principal":"*","device":"valve-1","capability":"open","decision":"allow"}}`))
		}, "rules/rule-x"},
		{"garbage record", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("runs")).Put([]byte("run-x"), []byte("\xff\xfe not json"))
		}, "runs/run-x"},
		{"flipped byte in the events", func(tx *bolt.Tx) error {
			// The store keeps the events in compressed blocks: a byte
			// flipped in the first names the block from event 1.
			b := tx.Bucket([]byte("journal"))
			k, v := b.Cursor().First()
			v = append([]byte(nil), v...)
			v[len(v)-70] ^= 0x20
			return b.Put(k, v)
		}, "the block of events from 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := demoOnFreePorts(t)
			b.StateDir = t.TempDir()
			b.Plans = nil
			e, stop := runUntilReady(t, b)
			if obs, _ := e.Read(t.Context(), "test:alice", "tank-1", "level"); obs.Kind != runtime.Completed {
				t.Fatalf("read = %+v", obs)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			tamper(t, b.StateDir, tc.mutate)

			e, stop = runUntilReady(t, b)
			defer func() {
				if err := stop(); err != nil {
					t.Error(err)
				}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for e.Healthy() == nil && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // the chain is verified in the background
			}
			if err := e.Healthy(); err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Healthy = %v; want it to name %q", err, tc.why)
			}
			if m := e.Mode(t.Context()); m.Name == "maintenance" {
				t.Fatalf("the forged mode is in force: %+v", m)
			}
			if obs, _ := e.Read(t.Context(), "test:alice", "tank-1", "level"); obs.Kind != runtime.Completed {
				t.Fatalf("a read on a tampered journal = %+v", obs)
			}
			obs, err := e.Do(t.Context(), runtime.Command{Principal: "test:alice", Origin: "test", RequestID: "after",
				Device: "valve-1", Capability: "open", Value: value.Bool(true)})
			if err != nil || obs.Kind != runtime.Refused || !strings.Contains(obs.Why, tc.why) {
				t.Fatalf("a write on a tampered journal = %+v, %v; want refused naming %q", obs, err, tc.why)
			}
		})
	}
}
