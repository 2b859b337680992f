package journal

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/internal/failpoint"
	"github.com/shadowgate/shadowgate/store"
)

// The outbox bucket holds the uplink's queue: messages under "m" plus a
// big-endian sequence, and "cursor" (the newest journal sequence queued),
// "bytes" and "count".
var (
	kOutMsg    = []byte("m")
	kOutCursor = []byte("cursor")
	kOutBytes  = []byte("bytes")
	kOutCount  = []byte("count")
)

func outSize(m *store.OutMessage) int64 { return int64(6 + len(m.Topic) + len(m.Payload)) }

func encodeOut(m *store.OutMessage) []byte {
	var flags byte
	if m.Retain {
		flags |= 1
	}
	if m.Essential {
		flags |= 2
	}
	b := make([]byte, 0, outSize(m))
	b = append(b, 1, flags)
	b = appendStr(b, m.Topic)
	return append(b, m.Payload...)
}

func decodeOut(seq uint64, v []byte) (store.OutMessage, error) {
	m := store.OutMessage{Seq: seq}
	if len(v) < 6 || v[0] != 1 {
		return m, errors.New("not an outbox message")
	}
	m.Retain, m.Essential = v[1]&1 != 0, v[1]&2 != 0
	n := int(binary.BigEndian.Uint32(v[2:6]))
	if len(v) < 6+n {
		return m, errShort
	}
	m.Topic = string(v[6 : 6+n])
	m.Payload = append([]byte(nil), v[6+n:]...)
	return m, nil
}

// Outbox is the uplink's durable queue, in the journal's file.
type Outbox struct{ j *DB }

// Outbox returns the journal's outbox.
func (j *DB) Outbox() *Outbox { return &Outbox{j: j} }

func msgKey(seq uint64) []byte { return append(append([]byte(nil), kOutMsg...), seqKey(seq)...) }

func counter(b *bolt.Bucket, k []byte) int64 {
	if v := b.Get(k); len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func putCounter(b *bolt.Bucket, k []byte, n int64) error {
	return b.Put(k, binary.BigEndian.AppendUint64(nil, uint64(max(n, 0))))
}

// Append queues msgs and records cursor, durably, in one transaction. The
// messages get their sequences in order.
func (o *Outbox) Append(msgs []store.OutMessage, cursor uint64) error { return o.add(msgs, &cursor) }

// Push queues msgs, durably, leaving the cursor as it is.
func (o *Outbox) Push(msgs []store.OutMessage) error { return o.add(msgs, nil) }

func (o *Outbox) add(msgs []store.OutMessage, cursor *uint64) error {
	return o.j.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bOutbox)
		var added int64
		for i := range msgs {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			msgs[i].Seq = seq
			if err := b.Put(msgKey(seq), encodeOut(&msgs[i])); err != nil {
				return err
			}
			added += outSize(&msgs[i])
		}
		if err := putCounter(b, kOutBytes, counter(b, kOutBytes)+added); err != nil {
			return err
		}
		if err := putCounter(b, kOutCount, counter(b, kOutCount)+int64(len(msgs))); err != nil {
			return err
		}
		if failpoint.Enabled { // a closure inlined into its callers keeps its calls: leave none in the shipped build
			if err := failpoint.Inject(failpoint.OutboxAppend); err != nil {
				return err
			}
		}
		if cursor == nil {
			return nil
		}
		return b.Put(kOutCursor, seqKey(*cursor))
	})
}

// Cursor returns the newest journal sequence queued, and whether one was
// ever recorded.
func (o *Outbox) Cursor() (uint64, bool, error) {
	var c uint64
	var ok bool
	err := o.j.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bOutbox).Get(kOutCursor); len(v) == 8 {
			c, ok = binary.BigEndian.Uint64(v), true
		}
		return nil
	})
	return c, ok, err
}

// Peek returns up to n queued messages with Seq > after, oldest first.
func (o *Outbox) Peek(after uint64, n int) ([]store.OutMessage, error) {
	var out []store.OutMessage
	err := o.j.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bOutbox).Cursor()
		for k, v := c.Seek(msgKey(after + 1)); k != nil && len(out) < n && k[0] == kOutMsg[0]; k, v = c.Next() {
			m, err := decodeOut(keySeq(k[1:]), v)
			if err != nil {
				return fmt.Errorf("outbox message %x: %w", k, err)
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// Delete removes messages that were delivered.
func (o *Outbox) Delete(seqs []uint64) error {
	return o.j.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bOutbox)
		var freed, n int64
		for _, s := range seqs {
			k := msgKey(s)
			v := b.Get(k)
			if v == nil {
				continue
			}
			m, err := decodeOut(s, v)
			if err == nil {
				freed += outSize(&m)
			}
			if err := b.Delete(k); err != nil {
				return err
			}
			n++
		}
		if err := putCounter(b, kOutBytes, counter(b, kOutBytes)-freed); err != nil {
			return err
		}
		if failpoint.Enabled { // a closure inlined into its callers keeps its calls: leave none in the shipped build
			if err := failpoint.Inject(failpoint.OutboxAck); err != nil {
				return err
			}
		}
		return putCounter(b, kOutCount, counter(b, kOutCount)-n)
	})
}

// Usage returns how many messages are queued and their bytes.
func (o *Outbox) Usage() (int, int64, error) {
	var n, bytes int64
	err := o.j.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bOutbox)
		n, bytes = counter(b, kOutCount), counter(b, kOutBytes)
		return nil
	})
	return int(n), bytes, err
}

// Trim drops the oldest telemetry while the queue holds more than maxBytes,
// and returns how many messages it dropped. Essential messages stay even
// when they alone are over the bound.
func (o *Outbox) Trim(maxBytes int64) (int, error) {
	dropped := 0
	err := o.j.update(func(tx *bolt.Tx) error {
		dropped = 0
		b := tx.Bucket(bOutbox)
		total := counter(b, kOutBytes)
		if total <= maxBytes {
			return nil
		}
		var drop [][]byte
		var freed int64
		c := b.Cursor()
		for k, v := c.Seek(kOutMsg); k != nil && k[0] == kOutMsg[0] && total-freed > maxBytes; k, v = c.Next() {
			m, err := decodeOut(keySeq(k[1:]), v)
			if err != nil || m.Essential {
				continue
			}
			drop = append(drop, append([]byte(nil), k...))
			freed += outSize(&m)
		}
		for _, k := range drop {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		dropped = len(drop)
		if err := putCounter(b, kOutBytes, total-freed); err != nil {
			return err
		}
		if failpoint.Enabled { // a closure inlined into its callers keeps its calls: leave none in the shipped build
			if err := failpoint.Inject(failpoint.OutboxTrim); err != nil {
				return err
			}
		}
		return putCounter(b, kOutCount, counter(b, kOutCount)-int64(len(drop)))
	})
	return dropped, err
}
