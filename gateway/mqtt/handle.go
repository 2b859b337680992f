package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/gateway/command"
)

// dest is where a reply goes: a topic and, for a v5 request, its
// correlation data.
type dest struct {
	topic       string
	correlation []byte
}

// replyDest picks the reply topic: the v5 Response Topic when it is
// allowed, else the default. It says why a Response Topic was refused.
func (b *Broker) replyDest(u *access.User, pk packets.Packet, defaultRel string) (dest, string) {
	d := dest{topic: b.opts.Prefix + defaultRel, correlation: pk.Properties.CorrelationData}
	rt := pk.Properties.ResponseTopic
	if rt == "" {
		return d, ""
	}
	if why := b.judgeResponseTopic(u, rt); why != "" {
		return d, why
	}
	d.topic = rt
	return d, ""
}

// judgeResponseTopic says why a v5 Response Topic may not carry a reply,
// or "". The gateway publishes a reply with its own client, past the ACL,
// so a response topic must be one the user may read, and never one of the
// gateway's output topics (a reply there would forge state, another
// device's reply, an approval, ...) nor a command topic.
func (b *Broker) judgeResponseTopic(u *access.User, rt string) string {
	if why := topicName(rt); why != "" {
		return "response topic " + quote(rt) + " is not a topic name: " + why
	}
	if rel, under := strings.CutPrefix(rt, b.opts.Prefix); under {
		switch {
		case command.IsOutput(rel):
			return "response topic " + rt + " is the gateway's own output topic; use one of your own, such as " +
				b.opts.Prefix + "inbox/<client>"
		case command.IsCommand(rel):
			return "response topic " + rt + " is a command topic"
		}
	}
	if b.haOwned(rt) {
		return "response topic " + rt + " is one of the gateway's Home Assistant discovery topics"
	}
	if !b.userMay(u, rt, false) {
		return "response topic " + rt + " is not a topic you may read"
	}
	return ""
}

// sendReply publishes a reply at QoS 1, with the correlation data if any.
func (b *Broker) sendReply(d dest, r command.Reply) {
	payload := command.EncodeReply(b.log, r)
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
		TopicName:   d.topic,
		Payload:     payload,
		PacketID:    1, // not used for an inline publish, but must be valid
		Properties:  packets.Properties{CorrelationData: d.correlation, ContentType: "application/json"},
	}
	if err := b.srv.InjectPacket(b.replier, pk); err != nil {
		b.log.Warn("mqtt reply not sent", "topic", d.topic, "error", err)
	}
}

// handle carries out one publish under the prefix from a client.
func (b *Broker) handle(cl *mochi.Client, pk packets.Packet, rel string) {
	b.commands.Add(1)
	u, ok := b.clientUser(cl)
	if !ok {
		return // the ACL let no such client publish; nothing to answer
	}
	principal := "mqtt:" + u.Name
	r := command.ParseRoute(rel)
	d, whyDest := b.replyDest(u, pk, r.ReplyTopic())
	reply := func(rep command.Reply) { b.sendReply(d, rep) }
	refuse := func(outcome, why string) {
		reply(command.Refusal(r, command.PeekID(pk.Payload), outcome, why))
		b.log.Info("mqtt command not taken", "principal", principal, "topic", pk.TopicName, "outcome", outcome, "why", why)
		b.sayNotTaken(r, principal, outcome, why)
	}
	switch {
	case r.Kind == "":
		refuse(command.OutcomeRefused, "topic "+pk.TopicName+" is not "+b.opts.Prefix+"cmd/<device>/<capability> or "+b.opts.Prefix+"run/<plan>")
		return
	case whyDest != "":
		refuse(command.OutcomeRefused, whyDest)
		return
	case len(pk.Payload) > b.opts.MaxPayload:
		refuse(command.OutcomeFailed, fmt.Sprintf("the payload of %d bytes is over the limit of %d", len(pk.Payload), b.opts.MaxPayload))
		return
	case pk.FixedHeader.Retain:
		refuse(command.OutcomeRefused, "a command cannot be retained: publish it without the retain flag")
		return
	case !b.rate.allow(principal):
		b.rateLimited.Add(1)
		refuse(command.OutcomeRefused, fmt.Sprintf("rate limit: %s may send %d commands a minute (bursts of %d)",
			principal, b.opts.CommandsPerMinute, b.opts.CommandBurst))
		return
	}
	req, err := b.disp.Prepare(r, pk.Payload)
	if err != nil {
		refuse(command.OutcomeFailed, err.Error()) // what the client sent is wrong: the error says what
		return
	}
	if why := req.Stale(b.opts.Now(), 0); why != "" {
		refuse(command.OutcomeRefused, why)
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CommandTimeout)
	defer cancel()
	replyTo, _ := json.Marshal(replyTo{Topic: d.topic, Correlation: d.correlation})
	b.disp.Dispatch(ctx, principal, string(replyTo), r, req, reply)
}

// sayNotTaken publishes a command the broker did not take (over the rate,
// malformed, for a device offline, retained, stale) on the outcome topic
// of the actuator it names, if Home Assistant was told of it: Home
// Assistant reads no replies, and its user would otherwise never learn
// why the switch did not move. One message for each such command, and no
// more of them than a principal may send commands (its own bucket): a
// flood of refused commands is not multiplied onto every subscriber of
// the outcome.
func (b *Broker) sayNotTaken(r command.Route, principal, outcome, why string) {
	if r.Kind != "cmd" || !b.haActuators[r.Device+"/"+r.Capability] || !b.haSaid.allow(principal) {
		return
	}
	b.publishHA(outcomeMessage(r.Device, r.Capability, haOutcome{Outcome: outcome + ": " + why, By: principal, At: b.opts.Now()}))
}

// replyTo is where an MQTT command's outcome goes, kept with its run.
type replyTo struct {
	Topic       string `json:"topic"`
	Correlation []byte `json:"correlation,omitempty"`
}

// answerParked sends the second reply of the commands that were waiting
// for approval when the gateway last stopped (as New found them), once
// they end, even if that was before the broker started.
func (b *Broker) answerParked() {
	for _, rec := range b.parked {
		var rt replyTo
		if json.Unmarshal([]byte(rec.ReplyTo), &rt) != nil || rt.Topic == "" {
			continue
		}
		d := dest{topic: rt.Topic, correlation: rt.Correlation}
		b.spawn(func() {
			b.disp.AnswerWhenDone(b.ctx, rec.ID, command.ParkedBase(rec), func(rep command.Reply) { b.sendReply(d, rep) })
		})
	}
}

// rates is a token bucket per principal.
type rates struct {
	perSec, burst float64
	now           func() time.Time

	// mu guards m.
	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRates(perMinute, burst int, now func() time.Time) *rates {
	return &rates{perSec: float64(perMinute) / 60, burst: float64(burst), now: now, m: map[string]*bucket{}}
}

// allow takes a token of key, or reports that none is left.
func (r *rates) allow(key string) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	bk, ok := r.m[key]
	if !ok {
		bk = &bucket{tokens: r.burst, at: now}
		r.m[key] = bk
	}
	bk.tokens = min(r.burst, bk.tokens+now.Sub(bk.at).Seconds()*r.perSec)
	bk.at = now
	if bk.tokens < 1 {
		return false
	}
	bk.tokens--
	return true
}
