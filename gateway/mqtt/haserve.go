package mqtt

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// haBirthSubscription is the inline subscription id of Home Assistant's
// birth topic.
const haBirthSubscription = 7001

// haAnnouncer announces the gateway to Home Assistant and removes what it
// announced before and no longer has. Its goroutine (announce) is owned by
// the broker's wait group and ends with the broker's context.
type haAnnouncer struct {
	b *Broker
	// configs are the discovery configs by topic, in order.
	topics  []string
	configs map[string][]byte
	// gone are the topics announced by an earlier start that nothing
	// announces now: each birth of Home Assistant clears them again, since
	// the Home Assistant that saw them may not have been connected when
	// they were first cleared.
	gone []string
	// births wakes announce when Home Assistant says it is online.
	births chan struct{}
}

// newHAAnnouncer builds the discovery configs and reads what an earlier
// start announced. It returns nil when there is nothing to do: the
// integration is off and nothing was ever announced.
func (b *Broker) newHAAnnouncer() *haAnnouncer {
	a := &haAnnouncer{b: b, configs: map[string][]byte{}, births: make(chan struct{}, 1)}
	if ha := b.opts.HomeAssistant; ha != nil {
		for _, e := range b.haEntities() {
			payload, err := json.Marshal(e.config)
			if err != nil {
				b.log.Error("home assistant config not encoded", "entity", e.id, "error", err)
				continue
			}
			t := e.topic(ha.Prefix)
			a.topics = append(a.topics, t)
			a.configs[t] = payload
		}
	}
	recorded, err := readHARecord(b.opts.HomeAssistantRecord)
	if err != nil {
		b.log.Warn("home assistant record unreadable; entities of removed devices stay in home assistant", "error", err)
	}
	for _, t := range recorded {
		if _, ok := a.configs[t]; !ok {
			a.gone = append(a.gone, t)
		}
	}
	if len(a.topics) == 0 && len(a.gone) == 0 {
		return nil
	}
	keep := append(slices.Clone(a.topics), a.gone...)
	if len(keep) > maxRecorded {
		keep = keep[:maxRecorded]
	}
	if !slices.Equal(keep, recorded) {
		if err := writeHARecord(b.opts.HomeAssistantRecord, keep); err != nil {
			b.log.Warn("home assistant record not written", "error", err)
		}
	}
	return a
}

// births are the topics Home Assistant announces itself on: its prefix's
// status, for the prefix in force and those of removed entities.
func (a *haAnnouncer) birthTopics() []string {
	var out []string
	add := func(config string) {
		// <prefix>/<component>/<object id>/config
		parts := strings.Split(config, "/")
		if len(parts) < 4 {
			return
		}
		t := strings.Join(parts[:len(parts)-3], "/") + "/status"
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if ha := a.b.opts.HomeAssistant; ha != nil {
		out = append(out, ha.Prefix+"/status")
	}
	for _, t := range a.gone {
		add(t)
	}
	return out
}

// publish publishes every config, retained, and clears the removed ones.
func (a *haAnnouncer) publish() {
	for _, t := range a.topics {
		if err := a.b.srv.Publish(t, a.configs[t], true, 1); err != nil {
			a.b.log.Warn("home assistant config not published", "topic", t, "error", err)
		}
	}
	for _, t := range a.gone {
		if err := a.b.srv.Publish(t, nil, true, 1); err != nil {
			a.b.log.Warn("home assistant removal not published", "topic", t, "error", err)
		}
	}
}

// listen subscribes to Home Assistant's birth topics: on "online", the
// configs are published again, as Home Assistant asks of an integration
// whose entities it may have lost.
func (a *haAnnouncer) listen() {
	for _, t := range a.birthTopics() {
		err := a.b.srv.Subscribe(t, haBirthSubscription, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
			if string(pk.Payload) != "online" {
				return
			}
			select { // runs in the publisher's goroutine: never block it
			case a.births <- struct{}{}:
			default:
			}
		})
		if err != nil {
			a.b.log.Warn("home assistant birth topic not followed", "topic", t, "error", err)
		}
	}
}

// haAnnounceGap is the least time between two announcements. Births
// that come closer together are answered once, at the end of the gap: a
// client that floods Home Assistant's status with "online" would
// otherwise have every config sent to every subscriber at each message.
var haAnnounceGap = 5 * time.Second

// announce publishes the configs again on every birth of Home Assistant
// until ctx ends, at most once a haAnnounceGap. It runs in the broker's
// wait group.
func (a *haAnnouncer) announce(ctx context.Context) {
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.births:
		}
		select { // the births during the gap are one
		case <-ctx.Done():
			return
		case <-gap.C:
		}
		a.b.log.Info("home assistant is online; announcing the gateway again", "entities", len(a.topics), "removed", len(a.gone))
		a.publish()
		gap.Reset(haAnnounceGap)
	}
}

// haOwned reports whether topic is one of the discovery topics the gateway
// owns while the integration is on: every topic under Home Assistant's
// prefix but its status (Home Assistant's own birth and will). No client
// may publish there: a config a client forged could point Home Assistant's
// switch at a topic the judge never sees.
func (b *Broker) haOwned(topic string) bool {
	ha := b.opts.HomeAssistant
	if ha == nil {
		return false
	}
	// Under "<prefix>/" but not "<prefix>/status", without building
	// either: this runs for every publish.
	rest, ok := strings.CutPrefix(topic, ha.Prefix)
	return ok && strings.HasPrefix(rest, "/") && rest != "/status"
}

// publishHA publishes the integration's retained messages.
func (b *Broker) publishHA(msgs []haMessage) {
	for _, m := range msgs {
		if err := b.srv.Publish(b.opts.Prefix+m.topic, m.payload, true, 1); err != nil {
			b.log.Warn("mqtt publish failed", "topic", m.topic, "error", err)
		}
	}
}

// startHA announces the gateway to Home Assistant and publishes the state
// and outcomes it starts from: the engine's state, then the journal's
// newest events up to since, from which the follower goes on. It returns the fold that the journal's
// follower keeps up to date, or nil when the integration is off.
func (b *Broker) startHA(since uint64) *haFold {
	a := b.newHAAnnouncer()
	if a != nil {
		b.log.Info("home assistant discovery announced", "entities", len(a.topics), "removed", len(a.gone))
		a.publish()
		a.listen()
		b.spawn(func() { a.announce(b.ctx) })
	}
	if b.opts.HomeAssistant == nil {
		return nil
	}
	f := b.newHAFold()
	m := b.eng.Mode(b.ctx)
	msgs := modeMessage(haMode{Mode: m.Name, Since: m.Since, By: m.By, Expires: m.Expires})
	online := map[string]bool{}
	for _, d := range b.eng.Devices() {
		online[d.ID] = true
	}
	for _, d := range b.opts.HomeAssistant.Devices {
		msgs = append(msgs, f.reachable(d.ID, online[d.ID])...)
	}
	msgs = append(msgs, f.snapshot(b.eng)...)
	msgs = append(msgs, b.haReplay(f, since)...)
	b.publishHA(newestOnly(msgs))
	return f
}

// newHAFold is the fold of the announced devices, with the ranges their
// numbers were announced with and which actuators are read back.
func (b *Broker) newHAFold() *haFold {
	f := newHAFold(b.opts.HomeAssistant.Devices)
	for _, d := range b.opts.HomeAssistant.Devices {
		for _, c := range d.Capabilities {
			if c.Kind != devices.KindActuator {
				continue
			}
			key := d.ID + "/" + c.Name
			if c.Type == value.TypeNumber {
				f.ranges[key], _, _ = b.haNumberRange(d.ID, c.Name)
			}
			var pol *runtime.CapPolicy
			if p, ok := b.eng.Policy(d.ID, c.Name); ok {
				pol = &p
			}
			f.ownReadBack[key] = runtime.ObservesItself(&c, pol)
		}
	}
	return f
}

// haReplayWindow bounds the journal's events a start reads again.
const haReplayWindow = 4096

// haReplay folds the journal's newest events up to since (at most
// haReplayWindow of them) after the snapshot, so that a start says the
// outcome the live fold last said (a refusal, a denial, a failure, which
// the engine's state does not keep) rather than an older receipt's. Only
// state and outcome messages are kept: the mode and the devices'
// reachability come from the engine as they are now.
func (b *Broker) haReplay(f *haFold, since uint64) []haMessage {
	var out []haMessage
	for from := since - min(since, haReplayWindow); from < since; {
		evs, err := b.eng.Events(b.ctx, from, min(1024, int(since-from)))
		if err != nil {
			b.log.Warn("home assistant outcomes not read from the journal", "error", err)
			return out
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.Seq > since {
				return out
			}
			for _, m := range f.apply(ev) {
				if m.topic != HAModeTopic && !strings.HasPrefix(m.topic, HADeviceTopic("")) {
					out = append(out, m)
				}
			}
		}
		from = evs[len(evs)-1].Seq
	}
	return out
}

// newestOnly keeps the last message of each topic, where it stands among
// the others.
func newestOnly(msgs []haMessage) []haMessage {
	last := map[string]int{}
	for i, m := range msgs {
		last[m.topic] = i
	}
	out := msgs[:0:0]
	for i, m := range msgs {
		if last[m.topic] == i {
			out = append(out, m)
		}
	}
	return out
}
