// Package uplink connects the gateway to a site or fleet MQTT broker
// (Mosquitto, EMQX, HiveMQ) with paho. It forwards events, state,
// receipts, approvals and alarms through a durable outbox: in order, at
// QoS 1, deleted only once the broker acknowledged them, nothing lost while
// the link is down or across a restart. The outbox is bounded in bytes;
// when it is full the oldest telemetry is dropped and counted, never a
// receipt, an approval or an alarm.
//
// Commands published upstream on <prefix>cmd/<device>/<capability> and
// <prefix>run/<plan> take the same governed path as local ones, as the
// uplink's principal. Each must say how old it is ("expires" or "at");
// a stale one is refused, never executed late. The session is clean and
// retained messages are ignored, so nothing queued is replayed as a
// command after a reconnect. Topics, payloads and replies are those of
// package command, so that state/ upstream carries the same bytes as on
// the gateway's own broker.
package uplink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/store"
)

// Store is the durable outbox the uplink sends from.
type Store interface {
	Append(msgs []store.OutMessage, cursor uint64) error
	Push(msgs []store.OutMessage) error
	Cursor() (uint64, bool, error)
	Peek(after uint64, n int) ([]store.OutMessage, error)
	Delete(seqs []uint64) error
	Usage() (int, int64, error)
	Trim(maxBytes int64) (int, error)
}

// Forward says what goes upstream. Alarms are the retained alarms/<id>
// (an alarm's events go with Events).
type Forward struct {
	Events, State, Receipts, Approvals, Alarms bool
}

// Options configure the uplink. The zero value of each field means its
// default.
type Options struct {
	// URL is the upstream broker: tcp://, ssl://, ws:// or wss://.
	URL      string
	ClientID string
	Username string
	Password string
	TLS      *tls.Config
	// Prefix is the upstream topic prefix, ending in "/".
	Prefix  string
	Forward Forward
	// MaxBacklog bounds the outbox in bytes. Default 16 MiB.
	MaxBacklog int64
	// MaxCommandAge is how old an upstream command may be. Default 30s.
	MaxCommandAge time.Duration
	// ReconnectMax bounds the wait between attempts to reconnect. Default 30s.
	ReconnectMax time.Duration
	// Principal is whom upstream commands are attributed to. Default
	// "uplink:<client id>".
	Principal string
	Logger    *slog.Logger
	Now       func() time.Time
}

func (o *Options) setDefaults() {
	if o.MaxBacklog <= 0 {
		o.MaxBacklog = 16 << 20
	}
	if o.MaxCommandAge <= 0 {
		o.MaxCommandAge = 30 * time.Second
	}
	if o.ReconnectMax <= 0 {
		o.ReconnectMax = 30 * time.Second
	}
	if o.Principal == "" {
		o.Principal = "uplink:" + o.ClientID
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Stats describe the link.
type Stats struct {
	Connected    bool
	Backlog      int
	BacklogBytes int64
	// Dropped counts telemetry dropped because the outbox was full.
	Dropped  int64
	Sent     int64
	Commands int64
	// IgnoredRetained counts retained commands that were not carried out.
	IgnoredRetained int64
}

// Uplink is the link to the upstream broker.
type Uplink struct {
	opts  Options
	eng   *runtime.Engine
	store Store
	log   *slog.Logger
	disp  *command.Dispatcher
	c     paho.Client

	wake     chan struct{} // the sender has work, or the link came up
	commands chan paho.Message

	connected                       atomic.Bool
	dropped, sent, handled, ignored atomic.Int64

	// parked are the runs of upstream commands restored waiting for approval.
	parked []runtime.RunRecord

	// mu guards stopping and the drop reports; wg holds the watchers of
	// parked commands.
	mu         sync.Mutex
	stopping   bool
	unreported int
	reportedAt time.Time
	wg         sync.WaitGroup
}

// New checks the options and builds the uplink; Run connects.
func New(eng *runtime.Engine, store Store, opts Options) (*Uplink, error) {
	opts.setDefaults()
	switch {
	case opts.URL == "":
		return nil, errors.New("uplink needs a broker url")
	case !strings.HasSuffix(opts.Prefix, "/") || strings.ContainsAny(opts.Prefix, "#+"):
		return nil, fmt.Errorf("uplink prefix %q must end in / and hold no wildcard", opts.Prefix)
	case opts.ClientID == "":
		return nil, errors.New("uplink needs a client id")
	}
	u := &Uplink{opts: opts, eng: eng, store: store, log: opts.Logger, parked: eng.Parked("uplink"),
		wake: make(chan struct{}, 1), commands: make(chan paho.Message, 64)}
	u.disp = &command.Dispatcher{Engine: eng, Origin: "uplink", Log: opts.Logger}
	co := paho.NewClientOptions().AddBroker(opts.URL).SetClientID(opts.ClientID).
		SetUsername(opts.Username).SetPassword(opts.Password).
		// A clean session: nothing the broker queued while we were away is
		// handed to us as a command.
		SetCleanSession(true).SetAutoReconnect(true).SetConnectRetry(true).
		SetConnectRetryInterval(min(time.Second, opts.ReconnectMax)).SetMaxReconnectInterval(opts.ReconnectMax).
		SetKeepAlive(30 * time.Second).SetPingTimeout(10 * time.Second).SetConnectTimeout(10 * time.Second).
		SetWriteTimeout(10 * time.Second).SetStore(paho.NewOrderedMemoryStore()).
		// Commands are handled in the order they arrive; the handler only
		// queues them, so it never blocks paho.
		SetOrderMatters(true).
		SetOnConnectHandler(u.onConnect).
		SetConnectionLostHandler(func(_ paho.Client, err error) { u.onLost(err) })
	if opts.TLS != nil {
		co.SetTLSConfig(opts.TLS)
	}
	u.c = paho.NewClient(co)
	return u, nil
}

// Stats returns the link's state and counters.
func (u *Uplink) Stats() Stats {
	n, b, _ := u.store.Usage()
	return Stats{Connected: u.connected.Load(), Backlog: n, BacklogBytes: b, Dropped: u.dropped.Load(),
		Sent: u.sent.Load(), Commands: u.handled.Load(), IgnoredRetained: u.ignored.Load()}
}

// Run forwards and takes commands until ctx is done.
func (u *Uplink) Run(ctx context.Context) error {
	cursor, ok, err := u.store.Cursor()
	if err != nil {
		return fmt.Errorf("reading the outbox: %w", err)
	}
	if !ok {
		// A new uplink forwards what happens from now on, not the history,
		// but for the newest checkpoint and the alarms that stand, which
		// upstream should hold at once.
		cursor = u.eng.RestoredSeq()
		if body, found := command.NewestCheckpoint(ctx, u.eng, cursor); found && len(body) > 0 {
			if err := u.store.Push(u.outMessages(runtime.Event{}, []command.Message{command.CheckpointMessage(body)})); err != nil {
				u.log.Error("uplink checkpoint not queued", "error", err)
			}
		}
	}
	fold := command.NewFold(u.eng)
	if !ok {
		msgs, err := fold.AlarmSnapshot()
		if err != nil {
			u.log.Error("uplink alarms not queued in full", "error", err)
		}
		if out := u.outMessages(runtime.Event{}, msgs); len(out) > 0 {
			if err := u.store.Push(out); err != nil {
				u.log.Error("uplink alarms not queued", "error", err)
			}
		}
	}
	u.c.Connect() // retries in the background until ctx ends
	u.disp.Spawn = func(fn func(context.Context)) { u.spawn(func() { fn(ctx) }) }
	var wg sync.WaitGroup
	wg.Go(func() { u.enqueue(ctx, fold, cursor) })
	wg.Go(func() { u.send(ctx) })
	wg.Go(func() { u.serveCommands(ctx) })
	u.answerParked(ctx)
	<-ctx.Done()
	u.c.Disconnect(250)
	wg.Wait()
	u.mu.Lock()
	u.stopping = true
	u.mu.Unlock()
	u.wg.Wait()
	return nil
}

func (u *Uplink) poke() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

func (u *Uplink) onConnect(c paho.Client) {
	u.connected.Store(true)
	n, b, _ := u.store.Usage()
	u.log.Info("uplink connected", "broker", u.opts.URL, "backlog", n)
	u.note("connected", "", n, b)
	handler := func(_ paho.Client, m paho.Message) {
		select {
		case u.commands <- m:
		default:
			u.log.Warn("uplink command dropped: too many waiting", "topic", m.Topic())
		}
	}
	for _, rel := range command.CommandFilters {
		f := u.opts.Prefix + rel
		tok := c.Subscribe(f, 1, handler)
		// Waited for in a goroutine Run waits for: paho calls onConnect
		// in its own goroutine, which must not block.
		u.spawn(func() {
			if tok.WaitTimeout(10*time.Second) && tok.Error() != nil {
				u.log.Error("uplink subscribe failed", "filter", f, "error", tok.Error())
			}
		})
	}
	u.poke()
}

func (u *Uplink) onLost(err error) {
	u.connected.Store(false)
	n, b, _ := u.store.Usage()
	u.log.Warn("uplink lost its broker", "broker", u.opts.URL, "error", err, "backlog", n)
	u.note("disconnected", err.Error(), n, b) // the journal's record of the link, not a reply
}

// note journals a change of the link.
func (u *Uplink) note(state, why string, backlog int, bytes int64) {
	_, _ = u.eng.Note(context.Background(), runtime.KindLink, "", runtime.LinkBody{
		Link: "uplink", State: state, Broker: u.opts.URL, Why: why,
		Backlog: backlog, BacklogBytes: bytes, Dropped: u.dropped.Load(),
	})
}

// essential kinds are never dropped from the outbox.
func essential(k runtime.Kind) bool {
	switch k {
	case runtime.KindActed, runtime.KindApprovalRequested, runtime.KindApprovalAnswered, runtime.KindApprovalExpired,
		runtime.KindAlarm, runtime.KindRecovered, runtime.KindReconciled, runtime.KindSafeDrive, runtime.KindDrift:
		return true
	}
	return false
}

// messages returns what an event sends upstream: what the fold makes of
// it, as far as the configuration forwards it.
func (u *Uplink) messages(f *command.Fold, ev runtime.Event) []store.OutMessage {
	msgs, err := f.Apply(ev)
	if err != nil {
		u.log.Warn("uplink event not forwarded in full", "journal_seq", ev.Seq, "kind", ev.Kind, "error", err)
	}
	return u.outMessages(ev, msgs)
}

// outMessages keeps the messages the configuration forwards (checkpoints
// always: a copy off the device is what makes a checkpoint evidence), and
// marks the ones the outbox may never drop: receipts, approvals, alarms,
// and the events of essential kinds. A checkpoint is not essential: a newer one
// supersedes it, and the outbox drops the oldest first.
func (u *Uplink) outMessages(ev runtime.Event, msgs []command.Message) []store.OutMessage {
	fw := u.opts.Forward
	var out []store.OutMessage
	for _, m := range msgs {
		var send, ess bool
		switch m.Stream {
		case command.StreamEvents:
			send, ess = fw.Events, essential(ev.Kind)
		case command.StreamState:
			send = fw.State
		case command.StreamReceipts:
			send, ess = fw.Receipts, true
		case command.StreamApprovals:
			send, ess = fw.Approvals, true
		case command.StreamAlarms:
			send, ess = fw.Alarms, true
		case command.StreamCheckpoints:
			send = true
		}
		if send {
			out = append(out, store.OutMessage{Topic: u.opts.Prefix + m.Topic, Payload: m.Payload, Retain: m.Retain, Essential: ess})
		}
	}
	return out
}

// enqueue follows the journal from cursor and appends what is to be sent
// to the outbox, in batches of up to 100 ms, with the cursor in the same
// write: after a restart it goes on where it stopped, adding nothing twice.
func (u *Uplink) enqueue(ctx context.Context, f *command.Fold, cursor uint64) {
	evs := make(chan runtime.Event, 1024)
	go func() {
		defer close(evs)
		err := u.eng.Subscribe(ctx, cursor, func(ev runtime.Event) error {
			select {
			case evs <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil && ctx.Err() == nil {
			u.log.Error("uplink stopped following the journal", "error", err)
		}
	}()
	var batch []store.OutMessage
	last := cursor
	flush := func() {
		if last == cursor {
			return
		}
		if err := u.store.Append(batch, last); err != nil {
			// The events stay in the journal; the next start queues them.
			u.log.Error("uplink outbox not written", "error", err)
			return
		}
		cursor, batch = last, batch[:0]
		if n, err := u.store.Trim(u.opts.MaxBacklog); err == nil && n > 0 {
			u.dropped.Add(int64(n))
			u.reportDrops(n)
		}
		u.poke()
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				flush()
				return
			}
			batch = append(batch, u.messages(f, ev)...)
			last = ev.Seq
			if len(batch) >= 512 {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}

// reportDrops logs and journals dropped telemetry, at most once a minute
// with the count since the last report.
func (u *Uplink) reportDrops(n int) {
	u.mu.Lock()
	u.unreported += n
	now := u.opts.Now()
	if now.Sub(u.reportedAt) < time.Minute {
		u.mu.Unlock()
		return
	}
	count := u.unreported
	u.unreported, u.reportedAt = 0, now
	u.mu.Unlock()
	backlog, bytes, _ := u.store.Usage()
	u.log.Warn("uplink outbox full: oldest telemetry dropped", "dropped", count, "max_backlog", u.opts.MaxBacklog)
	u.note("dropping", fmt.Sprintf("the outbox is full (%d bytes allowed): %d telemetry messages dropped", u.opts.MaxBacklog, count), backlog, bytes)
}

// window is how many messages are in flight at once.
const window = 64

// send publishes the outbox in order while the link is up, deleting each
// message once the broker acknowledged it.
func (u *Uplink) send(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.wake:
		case <-tick.C:
		}
		for ctx.Err() == nil && u.c.IsConnectionOpen() {
			msgs, err := u.store.Peek(0, window)
			if err != nil {
				u.log.Error("uplink outbox not read", "error", err)
				break
			}
			if len(msgs) == 0 {
				break
			}
			toks := make([]paho.Token, len(msgs))
			for i, m := range msgs {
				toks[i] = u.c.Publish(m.Topic, 1, m.Retain, m.Payload)
			}
			var acked []uint64
			for i, tok := range toks {
				if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
					break // resent, in order, once the link is back
				}
				acked = append(acked, msgs[i].Seq)
			}
			if len(acked) > 0 {
				if err := u.store.Delete(acked); err != nil {
					u.log.Error("uplink outbox not trimmed", "error", err)
				}
				u.sent.Add(int64(len(acked)))
			}
			if len(acked) < len(msgs) {
				break
			}
		}
	}
}

// serveCommands carries out upstream commands one at a time, in order.
func (u *Uplink) serveCommands(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-u.commands:
			u.command(ctx, m)
		}
	}
}

func (u *Uplink) command(ctx context.Context, m paho.Message) {
	rel := strings.TrimPrefix(m.Topic(), u.opts.Prefix)
	r := command.ParseRoute(rel)
	reply := func(rep command.Reply) { u.reply(r, rep) }
	refuse := func(outcome, why string) {
		reply(command.Refusal(r, command.PeekID(m.Payload()), outcome, why))
		u.log.Info("uplink command not taken", "topic", m.Topic(), "outcome", outcome, "why", why)
	}
	if m.Retained() {
		// A retained command is an old one; it is never carried out.
		u.ignored.Add(1)
		u.log.Warn("uplink ignored a retained command", "topic", m.Topic())
		return
	}
	u.handled.Add(1)
	if r.Kind == "" {
		refuse(command.OutcomeRefused, "topic "+m.Topic()+" is not "+u.opts.Prefix+"cmd/<device>/<capability> or "+u.opts.Prefix+"run/<plan>")
		return
	}
	req, err := u.disp.Prepare(r, m.Payload())
	if err != nil {
		refuse(command.OutcomeFailed, err.Error()) // what upstream sent is wrong: the error says what
		return
	}
	if why := req.Stale(u.opts.Now(), u.opts.MaxCommandAge); why != "" {
		refuse(command.OutcomeRefused, why)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u.disp.Dispatch(cctx, u.opts.Principal, r.ReplyTopic(), r, req, reply)
}

// spawn runs fn in a goroutine Run waits for, unless it is stopping.
func (u *Uplink) spawn(fn func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.stopping {
		u.wg.Go(fn)
	}
}

// answerParked replies upstream to the commands that were waiting for
// approval when the gateway last stopped (as New found them), once they
// end, even if that was before the uplink started.
func (u *Uplink) answerParked(ctx context.Context) {
	for _, rec := range u.parked {
		if rec.ReplyTo == "" {
			continue
		}
		topic := rec.ReplyTo
		u.spawn(func() {
			u.disp.AnswerWhenDone(ctx, rec.ID, command.ParkedBase(rec), func(rep command.Reply) { u.push(topic, rep) })
		})
	}
}

// reply queues a reply upstream in the outbox, as an essential message.
func (u *Uplink) reply(r command.Route, rep command.Reply) { u.push(r.ReplyTopic(), rep) }

func (u *Uplink) push(rel string, rep command.Reply) {
	msg := []store.OutMessage{{Topic: u.opts.Prefix + rel, Payload: command.EncodeReply(u.log, rep), Essential: true}}
	if err := u.store.Push(msg); err != nil {
		u.log.Error("uplink reply not queued", "error", err)
		return
	}
	u.poke()
}
