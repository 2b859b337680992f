package mqtt

import (
	"context"

	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
)

// publishInitial publishes the retained state, pending approvals and
// standing alarms the fold starts from, and the newest checkpoint, before
// any client connects.
func (b *Broker) publishInitial(ctx context.Context, f *command.Fold) {
	msgs, err := f.Snapshot()
	if err != nil {
		b.log.Error("mqtt retained state not published in full", "error", err)
	}
	b.publishAll(msgs)
	if body, ok := command.NewestCheckpoint(ctx, b.eng, b.eng.RestoredSeq()); ok && len(body) > 0 {
		b.publishAll([]command.Message{command.CheckpointMessage(body)})
	}
}

// follow publishes every journal event after since on the events topic,
// and keeps the retained state, approvals and alarms up to date, and Home
// Assistant's state and outcomes when ha is not nil, until ctx ends. A
// reading is in the state as soon as it is taken; its event is on the
// events topic once the journal has written it (with the next durable
// point, or at the flush interval).
func (b *Broker) follow(ctx context.Context, f *command.Fold, ha *haFold, since uint64) {
	pending := func(ev runtime.Event) {
		msgs, err := f.Pending(ev)
		if err != nil {
			b.log.Warn("mqtt reading not published", "journal_seq", ev.Seq, "kind", ev.Kind, "error", err)
		}
		b.publishAll(msgs)
		if ha != nil {
			b.publishHA(ha.pending(ev))
		}
	}
	err := b.eng.Follow(ctx, since, func(ev runtime.Event) error {
		msgs, err := f.Apply(ev)
		if err != nil {
			b.log.Warn("mqtt event not published in full", "journal_seq", ev.Seq, "kind", ev.Kind, "error", err)
		}
		b.publishAll(msgs)
		if ha != nil {
			b.publishHA(ha.apply(ev))
		}
		b.followed.Store(ev.Seq)
		return nil
	}, pending)
	if err != nil && ctx.Err() == nil {
		b.log.Error("mqtt stopped following the journal", "error", err)
	}
}

// publishAll publishes messages from the gateway itself at QoS 1: every
// stream but receipts, which travel in replies and on the events topic.
func (b *Broker) publishAll(msgs []command.Message) {
	for _, m := range msgs {
		if m.Stream == command.StreamReceipts {
			continue
		}
		if err := b.srv.Publish(b.opts.Prefix+m.Topic, m.Payload, m.Retain, 1); err != nil {
			b.log.Warn("mqtt publish failed", "topic", m.Topic, "error", err)
		}
	}
}
