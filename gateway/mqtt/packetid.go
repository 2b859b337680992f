package mqtt

import (
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// OnPacketRead keeps a client's packet identifiers apart from the
// broker's. MQTT gives each direction its own: a client may send a
// SUBSCRIBE, an UNSUBSCRIBE or a PUBLISH at QoS 1 or 2 under an identifier
// that the broker uses for a PUBLISH it sent that client and has not had
// acknowledged. The broker's library keeps both in one table, so it
// refuses such a subscription ("packet identifier in use": to an MQTT 3
// client, a plain failure, and its retained messages never come) and
// takes such a publish as the acknowledgement of its own. Both client and
// broker count up from 1, so a client that subscribes one filter at a time
// while the retained messages of the first are in flight meets it.
//
// Before the library sees the packet, the broker's unacknowledged PUBLISH
// is moved to a free identifier and sent again: the client gets it twice,
// which QoS 1 and 2 allow, and never loses it. A QoS 2 exchange past its
// PUBREC keeps its identifier, as the protocol needs; a client that reuses
// that one meets the library's refusal still.
func (h *hook) OnPacketRead(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	switch pk.FixedHeader.Type {
	case packets.Subscribe, packets.Unsubscribe:
	case packets.Publish:
		if pk.FixedHeader.Qos == 0 {
			return pk, nil
		}
	default:
		return pk, nil
	}
	if cl.Net.Inline {
		return pk, nil
	}
	held, ok := cl.State.Inflight.Get(pk.PacketID)
	if !ok || held.FixedHeader.Type != packets.Publish {
		return pk, nil // free, or the client's own QoS 2 exchange
	}
	id, err := cl.NextPacketID() // not pk.PacketID: it is held
	if err != nil {
		return pk, nil // no identifier free: the library refuses, as before
	}
	moved := held.Copy(true)
	moved.PacketID = uint16(id)
	moved.FixedHeader.Dup = false // a new identifier is a new packet
	cl.State.Inflight.Set(moved)
	cl.State.Inflight.Delete(pk.PacketID)
	if held.Expiry < 0 {
		return pk, nil // never sent, waiting for the client's quota: it waits on
	}
	if err := cl.WritePacket(moved); err != nil {
		h.b.log.Debug("mqtt publish moved to a free packet id not sent; it is sent again at reconnect", "client", cl.ID, "error", err)
	}
	return pk, nil
}
