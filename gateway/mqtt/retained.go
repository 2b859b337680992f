package mqtt

import (
	"sync"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// retainOrder keeps a SUBSCRIBE's search for retained messages apart from
// a publish that retains one. The broker library (mochi v2.7.9) marks a
// topic as holding a retained message under its topic tree's locks, but
// reads that mark without them as it searches the tree for a new
// subscription: a subscriber arriving while the gateway retains its state
// is a data race on a string, which can be read torn.
//
// The hook takes mu for writing from the end of OnPublish (or OnWill, for
// a will sent at once) when the message will be retained, to
// OnRetainMessage, which the library calls as soon as it has retained it;
// and for reading from the SUBACK, which the library writes just before
// the search, to the end of the SUBSCRIBE's processing. Neither span
// holds any I/O: a subscriber that does not read cannot stall a publish,
// nor a publish a subscriber.
//
// Two retains the library makes on its own pass no hook first and are not
// ordered: its $SYS topics, every SysTopicResendInterval, which set each
// mark to the constant name it held; and the retained will of an MQTT 5
// client that asked for it to be delayed, which may set a mark or clear
// it, and so still races with a search as the library does. Both spans
// balance only because this is the broker's one hook: another that
// rejected a publish or changed a will after it would leave mu held.
type retainOrder struct {
	mu sync.RWMutex
	// writing and searching hold the clients whose publish or SUBSCRIBE
	// holds mu. writing has at most one entry, set and deleted by whoever
	// holds mu for writing; a client's SUBSCRIBEs are processed one at a
	// time, on its own goroutine.
	writing, searching sync.Map // *mochi.Client -> struct{}
}

// retaining begins a write span for a message cl's publish or will is
// about to retain. available is the broker's RetainAvailable: when it is
// off, OnRetainMessage never comes.
func (o *retainOrder) retaining(cl *mochi.Client, retain, available bool) {
	if retain && available {
		o.mu.Lock()
		o.writing.Store(cl, struct{}{})
	}
}

// retained ends the write span cl began, if it began one.
func (o *retainOrder) retained(cl *mochi.Client) {
	if _, ok := o.writing.LoadAndDelete(cl); ok {
		o.mu.Unlock()
	}
}

// suback notes a SUBACK written: the search follows it.
func (o *retainOrder) suback(cl *mochi.Client, pk packets.Packet) {
	if pk.FixedHeader.Type != packets.Suback || cl.Net.Inline {
		return
	}
	o.mu.RLock()
	o.searching.Store(cl, struct{}{})
}

// processed ends a SUBSCRIBE's span, if its SUBACK began one.
func (o *retainOrder) processed(cl *mochi.Client, pk packets.Packet) {
	if pk.FixedHeader.Type != packets.Subscribe {
		return
	}
	if _, ok := o.searching.LoadAndDelete(cl); ok {
		o.mu.RUnlock()
	}
}

func (h *hook) retainAvailable() bool {
	return h.b.srv.Options.Capabilities.RetainAvailable != 0
}

// OnWill begins a write span for a retained will the library sends now.
func (h *hook) OnWill(cl *mochi.Client, will mochi.Will) (mochi.Will, error) {
	h.retain.retaining(cl, will.Retain && will.WillDelayInterval == 0, h.retainAvailable())
	return will, nil
}

func (h *hook) OnRetainMessage(cl *mochi.Client, _ packets.Packet, _ int64) {
	h.retain.retained(cl)
}

func (h *hook) OnPacketProcessed(cl *mochi.Client, pk packets.Packet, _ error) {
	h.retain.processed(cl, pk)
}
