package mqtt

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"
)

// TestRetainingWhileClientsSubscribe: a client updates retained messages,
// the gateway its own, as it does its state, and clients that drop leave
// retained wills, while other clients subscribe and unsubscribe over and
// over. Under the race detector this
// is the library's unguarded read of a topic's retained mark
// (retainOrder); here it must also end, with every subscription
// acknowledged, and a late subscriber must get the last value of every
// topic.
func TestRetainingWhileClientsSubscribe(t *testing.T) {
	gw := startGW(t, gwOptions{})
	const n, topics = 200, 5
	carl := gw.mustClient("carl", "carl-password")
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			if tok := carl.Publish(fmt.Sprintf("plant/a/%d", i%topics), 1, true, fmt.Sprint(i)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Errorf("carl's retained publish %d: %v", i, tok.Error())
				return
			}
		}
	})
	wg.Go(func() {
		for i := range n {
			if err := gw.b.srv.Publish(fmt.Sprintf("plant/b/%d", i%topics), []byte(fmt.Sprint(i)), true, 0); err != nil {
				t.Errorf("the gateway's retained publish %d: %v", i, err)
				return
			}
		}
	})
	wg.Go(func() {
		for i := range n / 10 {
			if err := dropWithWill(gw, fmt.Sprintf("plant/w/%d", i%topics), fmt.Sprint(i)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for w := range 2 {
		c := gw.mustClient("carl", "carl-password")
		wg.Go(func() {
			for i := range 50 {
				tok := c.Subscribe("plant/#", 1, func(paho.Client, paho.Message) {})
				if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
					t.Errorf("subscriber %d, subscription %d: not acknowledged: %v", w, i, tok.Error())
					return
				}
				if tok := c.Unsubscribe("plant/#"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
					t.Errorf("subscriber %d, unsubscription %d: %v", w, i, tok.Error())
					return
				}
			}
		})
	}
	wg.Wait()

	late := gw.mustClient("carl", "carl-password")
	got := map[string]string{}
	msgs := subscribe(t, late, "plant/#")
	deadline := time.After(30 * time.Second)
	for len(got) < 3*topics {
		select {
		case m := <-msgs:
			if !m.Retained() {
				t.Fatalf("%s came to the late subscriber not retained", m.Topic())
			}
			got[m.Topic()] = string(m.Payload())
		case <-deadline:
			t.Fatalf("the late subscriber got %d of the %d retained messages", len(got), 3*topics)
		}
	}
	for side, last := range map[string]int{"a": n, "b": n, "w": n / 10} {
		for k := range topics {
			topic, want := fmt.Sprintf("plant/%s/%d", side, k), fmt.Sprint(last-topics+k)
			if got[topic] != want {
				t.Errorf("%s retains %q, want the last value %q", topic, got[topic], want)
			}
		}
	}
}

// dropWithWill connects as carl with a retained will on topic and drops
// the connection without a DISCONNECT, so that the broker sends the will,
// and waits until the broker retains it. It runs on a goroutine of its
// own, so it says what failed rather than stopping the test.
func dropWithWill(gw *testGW, topic, payload string) error {
	var buf bytes.Buffer
	connect := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 4,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30, ClientIdentifier: "will-" + payload,
			UsernameFlag: true, Username: []byte("carl"), PasswordFlag: true, Password: []byte("carl-password"),
			WillFlag: true, WillRetain: true, WillTopic: topic, WillPayload: []byte(payload)}}
	if err := connect.ConnectEncode(&buf); err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", gw.addr, 5*time.Second)
	if err != nil {
		return err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = c.Write(buf.Bytes())
	if err == nil {
		var code byte
		code, err = readConnack(bufio.NewReader(c))
		if err == nil && code != 0 {
			err = fmt.Errorf("CONNACK code %#x", code)
		}
	}
	c.Close()
	if err != nil {
		return fmt.Errorf("connecting with a will on %s: %w", topic, err)
	}
	for range 3000 {
		if pk, ok := gw.b.srv.Topics.Retained.Get(topic); ok && string(pk.Payload) == payload {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the will %q on %s was not retained", payload, topic)
}
