package mqtt

import (
	"context"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// offlineFlush bounds how long a stop waits for the subscribers of the
// status topic to be sent "offline".
const offlineFlush = 2 * time.Second

// offlineWatch follows the sending of "offline" on the status topic to
// the clients subscribed to it as the broker stops. Its methods are safe
// for concurrent use: sent runs in the clients' write goroutines.
type offlineWatch struct {
	topic string
	// mu guards waiting.
	mu      sync.Mutex
	waiting map[*mochi.Client]bool
	// done is closed once no client is waited for.
	done chan struct{}
}

// sent notes a packet written to a client: "offline" on the status topic
// (or on the alias a v5 client was given for it) is what the stop waits
// for.
func (w *offlineWatch) sent(cl *mochi.Client, pk packets.Packet) {
	if pk.FixedHeader.Type != packets.Publish || string(pk.Payload) != "offline" ||
		pk.TopicName != w.topic && pk.TopicName != "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(cl)
}

func (w *offlineWatch) forgetLocked(cl *mochi.Client) {
	if !w.waiting[cl] {
		return
	}
	delete(w.waiting, cl)
	if len(w.waiting) == 0 {
		close(w.done)
	}
}

// sayOffline publishes the retained "offline" on the status topic and
// waits, at most offlineFlush, until every client subscribed to it and
// allowed to read it has been sent it, or has gone. The connections are
// closed next, and mochi writes a client's messages from a queue that a
// close drops: without the wait, a subscriber would never hear it.
func (b *Broker) sayOffline() {
	topic := b.opts.Prefix + TopicStatus
	w := &offlineWatch{topic: topic, waiting: map[*mochi.Client]bool{}, done: make(chan struct{})}
	for id := range b.srv.Topics.Subscribers(topic).Subscriptions {
		cl, ok := b.srv.Clients.Get(id)
		if ok && !cl.Net.Inline && !cl.Closed() && b.allowed(cl, topic, false) {
			w.waiting[cl] = true
		}
	}
	if len(w.waiting) == 0 {
		close(w.done)
	}
	b.offline.Store(w)
	defer b.offline.Store(nil)
	if err := b.srv.Publish(topic, []byte("offline"), true, 1); err != nil {
		b.log.Warn("mqtt publish failed", "topic", TopicStatus, "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), offlineFlush)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-ctx.Done():
			w.mu.Lock()
			n := len(w.waiting)
			w.mu.Unlock()
			b.log.Warn("mqtt offline not sent to every subscriber before the stop", "clients", n)
			return
		case <-tick.C:
			// A client that went, or was dropped, is not waited for.
			w.mu.Lock()
			for cl := range w.waiting {
				if cl.Closed() {
					w.forgetLocked(cl)
				}
			}
			w.mu.Unlock()
		}
	}
}

// OnPacketSent tells retainOrder of a SUBACK, and a stop's offlineWatch
// what was written.
func (h *hook) OnPacketSent(cl *mochi.Client, pk packets.Packet, _ []byte) {
	h.retain.suback(cl, pk)
	if w := h.b.offline.Load(); w != nil {
		w.sent(cl, pk)
	}
}
