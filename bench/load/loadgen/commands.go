package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// reply is what a command's reply says that the load reads.
type reply struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
}

// waiting holds the commands sent and not yet answered, by id.
type waiting struct {
	// mu guards m.
	mu sync.Mutex
	m  map[string]chan reply
}

func (w *waiting) add(id string) chan reply {
	ch := make(chan reply, 1)
	w.mu.Lock()
	w.m[id] = ch
	w.mu.Unlock()
	return ch
}

func (w *waiting) forget(id string) {
	w.mu.Lock()
	delete(w.m, id)
	w.mu.Unlock()
}

// answer hands a reply to the command waiting for it, if any.
func (w *waiting) answer(r reply) {
	w.mu.Lock()
	ch, ok := w.m[r.ID]
	delete(w.m, r.ID)
	w.mu.Unlock()
	if ok {
		ch <- r
	}
}

// commandPayload is a command's body.
func commandPayload(value, id string) []byte {
	b, _ := json.Marshal(struct {
		Value json.RawMessage `json:"value"`
		ID    string          `json:"id"`
	}{json.RawMessage(value), id})
	return b
}

// commands sends governed commands and times each reply.
func (l *load) commands(ctx context.Context) (Result, error) {
	c := l.c
	cmdTopic := c.Prefix + "cmd/" + c.Device + "/" + c.Capability
	replyTopic := c.Prefix + "reply/" + c.Device + "/" + c.Capability
	var clients []paho.Client
	defer func() { disconnectAll(clients) }()
	if c.Echo {
		e, err := l.echo(ctx)
		if err != nil {
			return Result{}, err
		}
		clients = append(clients, e)
	}
	w := &waiting{m: map[string]chan reply{}}
	senders := make([]paho.Client, c.Pubs)
	for i := range senders {
		s, err := l.dial(ctx, "cmd-"+strconv.Itoa(i), true)
		if err != nil {
			return Result{}, err
		}
		clients = append(clients, s)
		senders[i] = s
		tok := s.Subscribe(replyTopic, c.QoS, func(_ paho.Client, m paho.Message) {
			var r reply
			if json.Unmarshal(m.Payload(), &r) == nil {
				w.answer(r)
			}
		})
		if err := wait(ctx, tok); err != nil {
			return Result{}, fmt.Errorf("subscribing to %s: %w", replyTopic, err)
		}
	}
	if c.OnReady != nil {
		c.OnReady()
	}
	loadCtx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	var rec recorder
	var sent, answered atomic.Int64
	var omu sync.Mutex
	outcomes := map[string]int64{}
	start := time.Now()
	var wg sync.WaitGroup
	for i, s := range senders {
		wg.Go(func() {
			t0 := time.Now()
			for k := int64(0); pace(loadCtx, t0, k, c.Rate); k++ {
				id := fmt.Sprintf("load-%s-%d-%d", l.run, i, k)
				value := c.Value
				if value == "" || value == "toggle" {
					value = strconv.FormatBool(k%2 == 0)
				}
				ch := w.add(id)
				began := time.Now()
				tok := s.Publish(cmdTopic, c.QoS, false, commandPayload(value, id))
				if err := wait(ctx, tok); err != nil {
					w.forget(id)
					l.errs.add(fmt.Errorf("publishing on %s: %w", cmdTopic, err))
					continue
				}
				sent.Add(1)
				timeout := time.NewTimer(c.Timeout)
				select {
				case r := <-ch:
					rec.add(time.Since(began))
					answered.Add(1)
					omu.Lock()
					outcomes[r.Outcome]++
					omu.Unlock()
				case <-timeout.C:
					w.forget(id)
				case <-ctx.Done():
					w.forget(id)
				}
				timeout.Stop()
			}
		})
	}
	wg.Wait()
	r := Result{Mode: "commands", Sent: sent.Load(), Received: answered.Load(), Elapsed: time.Since(start), Outcomes: outcomes}
	if c.Echo {
		r.Mode = "echo"
	}
	r.Expected = r.Sent
	if s := r.Elapsed.Seconds(); s > 0 {
		r.SendRate, r.RecvRate = float64(r.Sent)/s, float64(r.Received)/s
	}
	r.Latency = Summarize(rec.take())
	l.errs.into(&r)
	return r, nil
}

// echo connects the client that answers every command under the prefix
// on its reply topic, at the load's QoS, with the command's id.
func (l *load) echo(ctx context.Context) (paho.Client, error) {
	c := l.c
	// Not in order: a handler that publishes must not hold paho's router.
	e, err := l.dial(ctx, "echo", false)
	if err != nil {
		return nil, err
	}
	filter := c.Prefix + "cmd/+/+"
	tok := e.Subscribe(filter, c.QoS, func(cl paho.Client, m paho.Message) {
		rest, ok := strings.CutPrefix(m.Topic(), c.Prefix+"cmd/")
		if !ok {
			return
		}
		var in reply
		_ = json.Unmarshal(m.Payload(), &in)
		out, _ := json.Marshal(reply{ID: in.ID, Outcome: "echo"})
		cl.Publish(c.Prefix+"reply/"+rest, c.QoS, false, out)
	})
	if err := wait(ctx, tok); err != nil {
		e.Disconnect(0)
		return nil, fmt.Errorf("subscribing the echo to %s: %w", filter, err)
	}
	return e, nil
}
