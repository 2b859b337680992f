package loadgen

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// Run runs the load c describes and returns what it measured. It returns
// early, with what it measured so far, when ctx ends. It returns an error
// when c is invalid or a client could not connect or subscribe; errors
// during the load (a publish that failed, a connection lost) are counted
// in the Result. Every goroutine and client Run starts has stopped when it
// returns.
func Run(ctx context.Context, c Config) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	c = c.withDefaults()
	l := &load{c: c, base: time.Now(), run: strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36)}
	switch {
	case c.Idle > 0:
		return l.idle(ctx)
	case c.Commands:
		return l.commands(ctx)
	default:
		return l.pubsub(ctx)
	}
}

// load is one run of a Config.
type load struct {
	c    Config
	base time.Time // the stamps' zero: latency is read on the monotonic clock
	run  string    // sets this run's client ids and command ids apart
	errs errCount
}

// since is the stamp of now.
func (l *load) since() time.Duration { return time.Since(l.base) }

// connectTimeout bounds one client's CONNECT.
const connectTimeout = 10 * time.Second

// dial connects one client. A handler of a client with orderMatters runs
// in paho's router goroutine and must not block; otherwise paho runs each
// in a goroutine of its own.
func (l *load) dial(ctx context.Context, name string, orderMatters bool) (paho.Client, error) {
	id := "load-" + l.run + "-" + name
	o := paho.NewClientOptions().AddBroker("tcp://" + l.c.Broker).SetClientID(id).
		SetUsername(l.c.User).SetPassword(l.c.Password).SetProtocolVersion(4).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectRetry(false).SetOrderMatters(orderMatters).
		SetKeepAlive(60 * time.Second).SetConnectTimeout(connectTimeout).SetWriteTimeout(connectTimeout).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			l.errs.add(fmt.Errorf("client %s lost its connection: %w", id, err))
		})
	cl := paho.NewClient(o)
	tok := cl.Connect()
	if err := wait(ctx, tok); err != nil {
		// paho gives up by itself within its connect timeout; wait for
		// it, so that no client outlives Run.
		tok.WaitTimeout(connectTimeout + time.Second)
		cl.Disconnect(0)
		return nil, fmt.Errorf("connecting %s to %s: %w", id, l.c.Broker, err)
	}
	return cl, nil
}

// wait waits for a token, or for ctx. A token already complete wins over
// a ctx already done.
func wait(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	default:
	}
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// disconnectAll disconnects clients, several at a time.
func disconnectAll(cls []paho.Client) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, cl := range cls {
		if cl == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cl.Disconnect(20)
		})
	}
	wg.Wait()
}

// pace returns when the k-th send of a publisher that started at start
// is due at rate a second (now, for rate 0), or false once ctx ends. A
// publisher that falls behind sends at once until it catches up, so that
// a slow broker is measured at the load asked of it.
func pace(ctx context.Context, start time.Time, k int64, rate float64) bool {
	if rate <= 0 {
		return ctx.Err() == nil
	}
	due := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// pubsub runs publishers and subscribers.
func (l *load) pubsub(ctx context.Context) (Result, error) {
	c := l.c
	var rec recorder
	var received, lastRecv atomic.Int64
	var clients []paho.Client
	defer func() { disconnectAll(clients) }()
	for i := range c.Subs {
		sub, err := l.dial(ctx, "sub-"+strconv.Itoa(i), true)
		if err != nil {
			return Result{}, err
		}
		clients = append(clients, sub)
		tok := sub.Subscribe(c.Topic+"/#", c.QoS, func(_ paho.Client, m paho.Message) {
			now := l.since()
			if sent, _, err := Parse(m.Payload()); err == nil {
				rec.add(now - sent)
			}
			received.Add(1)
			lastRecv.Store(int64(now))
		})
		if err := wait(ctx, tok); err != nil {
			return Result{}, fmt.Errorf("subscribing to %s/#: %w", c.Topic, err)
		}
		if sa, ok := tok.(*paho.SubscribeToken); ok && sa.Result()[c.Topic+"/#"] == 0x80 {
			return Result{}, fmt.Errorf("subscribing to %s/#: the broker refused it (ACL?)", c.Topic)
		}
	}
	pubs := make([]paho.Client, c.Pubs)
	for i := range pubs {
		p, err := l.dial(ctx, "pub-"+strconv.Itoa(i), true)
		if err != nil {
			return Result{}, err
		}
		pubs[i] = p
		clients = append(clients, p)
	}
	if c.OnReady != nil {
		c.OnReady()
	}
	loadCtx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	var sent atomic.Int64
	start := l.since()
	var wg sync.WaitGroup
	for i, p := range pubs {
		wg.Go(func() { sent.Add(l.publish(loadCtx, p, i)) })
	}
	wg.Wait()
	end := l.since()
	r := Result{Mode: "pubsub", Sent: sent.Load(), Elapsed: end - start}
	r.Expected = r.Sent * int64(c.Subs)
	l.drain(ctx, &received, r.Expected)
	r.Received = received.Load()
	if r.Elapsed > 0 {
		r.SendRate = float64(r.Sent) / r.Elapsed.Seconds()
		if last := time.Duration(lastRecv.Load()); last > start {
			r.RecvRate = float64(r.Received) / (last - start).Seconds()
		}
	}
	r.Latency = Summarize(rec.take())
	l.errs.into(&r)
	return r, nil
}

// publish publishes on the publisher's topic until ctx ends, with at most
// Inflight publishes not complete, and returns how many completed
// without error.
func (l *load) publish(ctx context.Context, p paho.Client, i int) int64 {
	c := l.c
	topic := c.Topic + "/" + strconv.Itoa(i)
	template := newPayload(c.Size)
	window := make([]paho.Token, c.Inflight)
	var ok int64
	settle := func(tok paho.Token, within context.Context) {
		if err := wait(within, tok); err != nil {
			l.errs.add(fmt.Errorf("publishing on %s: %w", topic, err))
			return
		}
		ok++
	}
	start := time.Now()
	for k := int64(0); pace(ctx, start, k, c.Rate); k++ {
		slot := int(k % int64(len(window)))
		if tok := window[slot]; tok != nil {
			select {
			case <-tok.Done():
			case <-ctx.Done():
				// The load is over; the tail below settles what is
				// still in flight.
				continue
			}
			settle(tok, ctx)
			window[slot] = nil
		}
		// paho keeps the payload until it is written: one per publish.
		payload := append([]byte(nil), template...)
		Stamp(payload, l.since(), uint64(i)<<40|uint64(k))
		window[slot] = p.Publish(topic, c.QoS, false, payload)
	}
	// What is still in flight has a while to complete.
	tail, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tok := range window {
		if tok != nil {
			settle(tok, tail)
		}
	}
	return ok
}

// drain waits until want deliveries arrived, or none came for a second
// (10 s at most), or ctx ends.
func (l *load) drain(ctx context.Context, got *atomic.Int64, want int64) {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	prev, still := got.Load(), time.Now()
	for got.Load() < want && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if n := got.Load(); n != prev {
			prev, still = n, time.Now()
		} else if time.Since(still) > time.Second {
			return
		}
	}
}

// idle opens Idle connections and holds them for Duration.
func (l *load) idle(ctx context.Context) (Result, error) {
	c := l.c
	clients := make([]paho.Client, c.Idle)
	defer func() { disconnectAll(clients) }()
	start := time.Now()
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	sem := make(chan struct{}, 16)
	for i := range clients {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cl, err := l.dial(ctx, "idle-"+strconv.Itoa(i), true)
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
				return
			}
			clients[i] = cl
		})
	}
	wg.Wait()
	r := Result{Mode: "idle", ConnectTime: time.Since(start)}
	if p := firstErr.Load(); p != nil {
		return r, *p
	}
	r.Connected = len(clients)
	if c.OnReady != nil {
		c.OnReady()
	}
	held := time.Now()
	t := time.NewTimer(c.Duration)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	r.Elapsed = time.Since(held)
	for _, cl := range clients {
		if !cl.IsConnectionOpen() {
			r.Connected--
		}
	}
	l.errs.into(&r)
	return r, nil
}
