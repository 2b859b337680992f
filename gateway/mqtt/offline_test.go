package mqtt

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// TestOfflineReachesEverySubscriberAtStop: a client subscribed to the
// whole prefix at QoS 1, busy acknowledging the retained messages, reads
// "offline" before the broker's end of the stream, at every stop, not
// only a client of the status topic alone. The client is a plain MQTT
// 3.1.1 client on a socket, so that what it reads is what the broker
// sent, whatever a client library does with its last messages as its
// connection ends.
func TestOfflineReachesEverySubscriberAtStop(t *testing.T) {
	for round := range 20 {
		gw := startGW(t, gwOptions{ha: haOptions(greenhouse())})
		c, r := rawSubscriber(t, gw.addr, "hass", "hass-password", prefix+"#")
		online := false
		for !online { // the retained messages are handed over before the stop
			topic, payload := readPublish(t, c, r)
			online = topic == prefix+TopicStatus && payload == "online"
		}
		stopped := make(chan struct{})
		go func() { gw.stop(); close(stopped) }()
		for {
			topic, payload := readPublish(t, c, r)
			if topic == "" {
				t.Fatalf("round %d: the stream ended and the subscriber of %s# never read offline", round, prefix)
			}
			if topic == prefix+TopicStatus && payload == "offline" {
				break
			}
		}
		c.Close() // as a client hangs up at the end of the stream
		<-stopped
	}
}

// rawSubscriber connects to addr as user over MQTT 3.1.1 and subscribes
// to filter at QoS 1.
func rawSubscriber(t *testing.T, addr, user, password, filter string) (net.Conn, *bufio.Reader) {
	t.Helper()
	var buf bytes.Buffer
	connect := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 4,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30, ClientIdentifier: "raw-" + user,
			UsernameFlag: true, Username: []byte(user), PasswordFlag: true, Password: []byte(password)}}
	if err := connect.ConnectEncode(&buf); err != nil {
		t.Fatal(err)
	}
	sub := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, ProtocolVersion: 4, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: filter, Qos: 1}}}
	if err := sub.SubscribeEncode(&buf); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if code, err := readConnack(r); err != nil || code != 0 {
		t.Fatalf("CONNACK: code %#x, %v", code, err)
	}
	return c, r
}

// readPublish reads packets until a PUBLISH, acknowledging it at QoS 1,
// and returns its topic and payload; "" at the end of the stream.
func readPublish(t *testing.T, c net.Conn, r *bufio.Reader) (topic, payload string) {
	t.Helper()
	for {
		h, err := r.ReadByte()
		if err == io.EOF {
			return "", ""
		}
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		var n, shift int
		for {
			b, err := r.ReadByte()
			if err != nil {
				t.Fatalf("reading a length: %v", err)
			}
			n |= int(b&0x7f) << shift
			if b&0x80 == 0 {
				break
			}
			shift += 7
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatalf("reading a body: %v", err)
		}
		if h>>4 != packets.Publish {
			continue // the SUBACK
		}
		tl := int(binary.BigEndian.Uint16(body))
		topic, rest := string(body[2:2+tl]), body[2+tl:]
		if qos := h >> 1 & 3; qos > 0 {
			if _, err := c.Write([]byte{packets.Puback << 4, 2, rest[0], rest[1]}); err != nil && !isClosed(err) {
				t.Fatalf("PUBACK: %v", err)
			}
			rest = rest[2:]
		}
		return topic, string(rest)
	}
}

// isClosed reports whether err is the broker's end of the connection.
func isClosed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
