package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/shadowgate/shadowgate/access"
	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
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
		case reserved(rel):
			return "response topic " + rt + " is the gateway's own output topic; use one of your own, such as " +
				b.opts.Prefix + "inbox/<client>"
		case inbound(rel):
			return "response topic " + rt + " is a command topic"
		}
	}
	if !b.userMay(u, rt, false) {
		return "response topic " + rt + " is not a topic you may read"
	}
	return ""
}

// sendReply publishes a reply at QoS 1, with the correlation data if any.
func (b *Broker) sendReply(d dest, r Reply) {
	payload, err := marshal(r)
	if err != nil {
		b.log.Error("mqtt reply not encoded", "topic", d.topic, "error", err)
		return
	}
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
	r := ParseRoute(rel)
	d, whyDest := b.replyDest(u, pk, r.ReplyTopic())
	reply := func(rep Reply) { b.sendReply(d, rep) }
	refuse := func(outcome, why string) {
		reply(Refusal(r, PeekID(pk.Payload), outcome, why))
		b.log.Info("mqtt command not taken", "principal", principal, "topic", pk.TopicName, "outcome", outcome, "why", why)
	}
	switch {
	case r.Kind == "":
		refuse(OutcomeRefused, "topic "+pk.TopicName+" is not "+b.opts.Prefix+"cmd/<device>/<capability> or "+b.opts.Prefix+"run/<plan>")
		return
	case whyDest != "":
		refuse(OutcomeRefused, whyDest)
		return
	case len(pk.Payload) > b.opts.MaxPayload:
		refuse(OutcomeFailed, fmt.Sprintf("the payload of %d bytes is over the limit of %d", len(pk.Payload), b.opts.MaxPayload))
		return
	case pk.FixedHeader.Retain:
		refuse(OutcomeRefused, "a command cannot be retained: publish it without the retain flag")
		return
	case !b.rate.allow(principal):
		b.rateLimited.Add(1)
		refuse(OutcomeRefused, fmt.Sprintf("rate limit: %s may send %d commands a minute (bursts of %d)",
			principal, b.opts.CommandsPerMinute, b.opts.CommandBurst))
		return
	}
	req, err := Prepare(b.eng, r, pk.Payload)
	if err != nil {
		refuse(OutcomeFailed, err.Error())
		return
	}
	if why := req.Stale(b.opts.Now(), 0); why != "" {
		refuse(OutcomeRefused, why)
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CommandTimeout)
	defer cancel()
	replyTo, _ := json.Marshal(replyTo{Topic: d.topic, Correlation: d.correlation})
	Dispatch(ctx, b.eng, principal, "mqtt", string(replyTo), r, req, reply, func(fn func(context.Context)) { b.spawn(func() { fn(b.ctx) }) })
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
		base := Reply{ID: rec.RequestID}
		if rec.Plan != "command" {
			base.Plan = rec.Plan
		}
		d := dest{topic: rt.Topic, correlation: rt.Correlation}
		b.spawn(func() { AnswerWhenDone(b.ctx, b.eng, rec.ID, base, func(rep Reply) { b.sendReply(d, rep) }) })
	}
}

// Refusal is the reply to a command that was not taken; id is the
// command's id as far as it could be read (see PeekID), or "".
func Refusal(r Route, id, outcome, why string) Reply {
	return Reply{ID: id, Device: r.Device, Capability: r.Capability, Plan: r.Plan, Outcome: outcome, Why: why}
}

// Prepare checks a command's payload against its route: the device and
// capability must be online, the value of their type.
func Prepare(eng *runtime.Engine, r Route, payload []byte) (Request, error) {
	var req Request
	var err error
	if r.Kind == "cmd" {
		_, c, ok := eng.Capability(r.Device, r.Capability)
		if !ok {
			return req, fmt.Errorf("device %s is not online or has no capability %s", r.Device, r.Capability)
		}
		req, err = ParseCommand(payload, c.Type, c.Enum)
	} else {
		req, err = ParseRun(payload)
	}
	if err != nil {
		return req, fmt.Errorf("payload: %w", err)
	}
	return req, nil
}

// Dispatch runs a prepared command through the engine and answers it with
// reply. A command that parks, and a plan run, get a second answer when
// they end: spawn runs the goroutine that waits for it, giving it a context
// that ends when its owner stops.
func Dispatch(ctx context.Context, eng *runtime.Engine, principal, origin, replyTo string, r Route, req Request,
	reply func(Reply), spawn func(func(context.Context))) {
	base := Reply{ID: req.ID, Device: r.Device, Capability: r.Capability, Plan: r.Plan}
	if base.ID == "" {
		base.ID, base.IDGenerated = newID(), true
	}
	if r.Kind == "run" {
		rec, err := eng.StartPlan(ctx, runtime.StartPlan{Plan: r.Plan, Principal: principal, Origin: origin, RequestID: base.ID,
			Reason: req.Reason, ReplyTo: replyTo})
		rep := base
		if err != nil {
			rep.Outcome, rep.Why = OutcomeFailed, err.Error()
			reply(rep)
			return
		}
		rep.Outcome, rep.Run = OutcomeStarted, rec.ID
		reply(rep)
		spawn(func(life context.Context) { AnswerWhenDone(life, eng, rec.ID, base, reply) })
		return
	}
	obs, err := eng.Do(ctx, runtime.Command{Principal: principal, Origin: origin, RequestID: base.ID, Reason: req.Reason,
		Device: r.Device, Capability: r.Capability, Value: req.Value, ReplyTo: replyTo})
	if err != nil {
		rep := base
		rep.Outcome, rep.Why = OutcomeFailed, err.Error()
		reply(rep)
		return
	}
	rep := replyFor(obs)
	rep.ID, rep.IDGenerated = base.ID, base.IDGenerated
	reply(rep)
	if obs.Kind == runtime.ApprovalRequest && !obs.Replayed {
		spawn(func(life context.Context) { AnswerWhenDone(life, eng, obs.Run, base, reply) })
	}
}

// AnswerWhenDone sends the second reply of a run once it has ended. If
// ctx ends first (the gateway stops), the run stays parked and no reply is
// sent; its outcome appears on the events topic after the next start.
func AnswerWhenDone(ctx context.Context, eng *runtime.Engine, run string, base Reply, reply func(Reply)) {
	obs, rec, err := eng.Outcome(ctx, run)
	if err != nil {
		return
	}
	var rep Reply
	if rec.Plan == "command" {
		rep = replyFor(obs)
	} else {
		rep = Reply{Plan: base.Plan, Outcome: OutcomeCompleted}
		switch rec.End {
		case runtime.EndCompleted:
		case runtime.EndRefused, runtime.EndLeaseExhausted:
			rep.Outcome, rep.Why = OutcomeRefused, rec.Why
		default:
			rep.Outcome, rep.Why = OutcomeFailed, rec.Why
		}
	}
	rep.ID, rep.IDGenerated, rep.Run = base.ID, base.IDGenerated, run
	reply(rep)
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "mqtt-" + hex.EncodeToString(b[:])
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

// state is the payload of state/<device>/<capability>.
type state struct {
	Device     string       `json:"device"`
	Capability string       `json:"capability"`
	Value      *value.Value `json:"value,omitempty"`
	At         time.Time    `json:"at,omitzero"`
	Quality    string       `json:"quality,omitempty"`
	// Confirmation is what the last actuation's read-back found.
	Confirmation runtime.Confirmation `json:"confirmation,omitempty"`
	Attempt      string               `json:"attempt,omitempty"`
}

// publishInitial publishes the retained state and pending approvals the
// journal holds, before any client connects.
func (b *Broker) publishInitial() {
	for _, st := range b.eng.States() {
		s := state{Device: st.Device, Capability: st.Capability}
		if rd := st.Reading; rd != nil {
			v := rd.Value
			s.Value, s.At, s.Quality = &v, rd.At, rd.Quality.String()
		}
		if rc := st.Receipt; rc != nil {
			s.Confirmation, s.Attempt = rc.Confirmation, rc.Attempt
		}
		b.publish("state/"+st.Device+"/"+st.Capability, s, true)
	}
	for _, ap := range b.eng.Approvals() {
		b.publish("approvals/"+ap.ID, ap, true)
	}
	if body, ok := NewestCheckpoint(context.Background(), b.eng, b.eng.RestoredSeq()); ok && len(body) > 0 {
		b.publishRaw("checkpoints", body, true)
	}
}

// checkpointLookback bounds how far back NewestCheckpoint looks, so that
// a start never reads more than this much of a long history.
const checkpointLookback = 64 << 10

// NewestCheckpoint returns the body of the newest checkpoint event at or
// before seq, looking back through at most the last 65,536 events (a
// checkpoint is made every thousand events or every minute, so the newest
// is near the end).
func NewestCheckpoint(ctx context.Context, eng *runtime.Engine, seq uint64) (json.RawMessage, bool) {
	const window = 1024
	for end, looked := seq, 0; end > 0 && looked < checkpointLookback; looked += window {
		start := end - min(end, window)
		evs, err := eng.Events(ctx, start, window)
		if err != nil || len(evs) == 0 {
			return nil, false
		}
		var found json.RawMessage
		for _, ev := range evs {
			if ev.Seq <= end && ev.Kind == runtime.KindCheckpoint {
				found = json.RawMessage(ev.Body)
			}
		}
		if found != nil {
			return found, true
		}
		if evs[0].Seq > start+1 {
			return nil, false // what is older was pruned
		}
		end = start
	}
	return nil, false
}

// follow publishes every journal event after since on the events topic,
// and keeps the retained state and approvals up to date, until ctx ends.
func (b *Broker) follow(ctx context.Context, since uint64) {
	states := map[string]*state{}
	get := func(device, capability string) *state {
		k := device + "/" + capability
		s, ok := states[k]
		if !ok {
			s = &state{Device: device, Capability: capability}
			for _, st := range b.eng.States() {
				if st.Device == device && st.Capability == capability && st.Receipt != nil {
					s.Confirmation, s.Attempt = st.Receipt.Confirmation, st.Receipt.Attempt
				}
			}
			states[k] = s
		}
		return s
	}
	err := b.eng.Subscribe(ctx, since, func(ev runtime.Event) error {
		b.publish("events", ev, false)
		switch ev.Kind {
		case runtime.KindObserved:
			var o struct {
				Device, Capability string
				Value              value.Value
				Quality            string
				At                 time.Time
			}
			if json.Unmarshal(ev.Body, &o) == nil && o.Device != "" {
				s := get(o.Device, o.Capability)
				v := o.Value
				s.Value, s.At, s.Quality = &v, o.At, o.Quality
				b.publish("state/"+o.Device+"/"+o.Capability, s, true)
			}
		case runtime.KindActed:
			var rc runtime.Receipt
			if json.Unmarshal(ev.Body, &rc) == nil && rc.Device != "" {
				s := get(rc.Device, rc.Capability)
				s.Confirmation, s.Attempt = rc.Confirmation, rc.Attempt
				if rc.Observed != nil {
					v := *rc.Observed
					s.Value, s.At, s.Quality = &v, rc.At, devices.QualityGood.String()
				}
				b.publish("state/"+rc.Device+"/"+rc.Capability, s, true)
			}
		case runtime.KindApprovalRequested:
			var ap struct{ ID string }
			if json.Unmarshal(ev.Body, &ap) == nil && ap.ID != "" {
				b.publishRaw("approvals/"+ap.ID, ev.Body, true)
			}
		case runtime.KindCheckpoint:
			if len(ev.Body) > 0 { // an empty retained message would clear the last one
				b.publishRaw("checkpoints", ev.Body, true)
			}
		case runtime.KindApprovalAnswered, runtime.KindApprovalExpired:
			var ans struct {
				Approval string
				Status   runtime.ApprovalStatus
			}
			if json.Unmarshal(ev.Body, &ans) != nil || ans.Approval == "" {
				break
			}
			if ap, ok := b.eng.Approval(ans.Approval); ok && ap.Status == runtime.ApprovalPending {
				b.publish("approvals/"+ap.ID, ap, true)
			} else {
				b.publishRaw("approvals/"+ans.Approval, nil, true) // clears the retained request
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		b.log.Error("mqtt stopped following the journal", "error", err)
	}
}

// publishRaw publishes bytes as they are.
func (b *Broker) publishRaw(rel string, payload []byte, retain bool) {
	if err := b.srv.Publish(b.opts.Prefix+rel, payload, retain, 1); err != nil {
		b.log.Warn("mqtt publish failed", "topic", rel, "error", err)
	}
}
