package mqtt

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/crypto/bcrypt"

	"github.com/shadowgate/shadowgate/access"
)

// connectBenchPassword is the password of every user of connectBroker.
const connectBenchPassword = "device-password"

// connectBroker starts a broker whose users device-0 … device-<n-1> have
// hashes of the cost shadowgate hash-password gives (bcrypt's default),
// so that a password check costs what it costs in the field, and returns
// its TCP address.
func connectBroker(b *testing.B, n int) string {
	b.Helper()
	eng, _, j, _ := testEngine(b, "")
	h, err := bcrypt.GenerateFromPassword([]byte(connectBenchPassword), bcrypt.DefaultCost)
	if err != nil {
		b.Fatal(err)
	}
	accounts := make([]access.User, n)
	for i := range accounts {
		accounts[i] = access.User{Name: fmt.Sprintf("device-%d", i), Role: access.Operator, Hash: h}
	}
	users, err := access.NewUsers(accounts)
	if err != nil {
		b.Fatal(err)
	}
	br, err := New(eng, Options{Prefix: prefix, Listen: "127.0.0.1:0", Users: users})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Listen(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	engDone, brokerDone := make(chan error, 1), make(chan error, 1)
	go func() { engDone <- eng.Run(ctx) }()
	go func() { brokerDone <- br.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-brokerDone
		<-engDone
		_ = j.Close()
	})
	return br.Addr("tcp")
}

// connectOnce is one MQTT 3.1.1 client's visit: a TCP connect, a CONNECT
// as user with its client id, the CONNACK, a DISCONNECT, and the broker
// closing the connection.
func connectOnce(b *testing.B, addr, user string) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 4,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30, ClientIdentifier: user,
			UsernameFlag: true, Username: []byte(user), PasswordFlag: true, Password: []byte(connectBenchPassword)}}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		b.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(buf.Bytes()); err != nil {
		b.Fatal(err)
	}
	code, err := readConnack(bufio.NewReader(c))
	if err != nil || code != 0 {
		b.Fatalf("CONNACK of %s: code %#x, %v", user, code, err)
	}
	if _, err := c.Write([]byte{packets.Disconnect << 4, 0}); err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, c); err != nil {
		b.Fatalf("waiting for the broker to close: %v", err)
	}
}

// BenchmarkMQTTConnectRepeat is a client connecting again and again with
// its password, as in a reconnect storm: ns/op is one repeat connect. The
// baseline, measured in the same run, is the first connect of as many
// users (first-ns/connect), and first/repeat is how many times cheaper a
// repeat connect is.
func BenchmarkMQTTConnectRepeat(b *testing.B) {
	const firsts = 5
	addr := connectBroker(b, firsts)
	var first time.Duration
	for i := range firsts {
		start := time.Now()
		connectOnce(b, addr, fmt.Sprintf("device-%d", i))
		first += time.Since(start)
	}
	first /= firsts
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		connectOnce(b, addr, "device-0")
		n++
	}
	repeat := b.Elapsed() / time.Duration(n)
	b.ReportMetric(float64(first.Nanoseconds()), "first-ns/connect")
	b.ReportMetric(float64(first)/float64(repeat), "first/repeat")
}
