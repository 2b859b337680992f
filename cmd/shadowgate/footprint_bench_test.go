package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// demoConfig is examples/demo.yaml listening on free loopback ports, with
// room for connections clients.
func demoConfig(b *testing.B, connections int) string {
	b.Helper()
	demo, err := os.ReadFile("../../examples/demo.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range [][2]string{
		{"listen: 127.0.0.1:1883", fmt.Sprintf("listen: 127.0.0.1:0\n  max_clients: %d", connections+10)},
		{"listen: 127.0.0.1:8080", `listen: "127.0.0.1:0"`},
	} {
		if !bytes.Contains(demo, []byte(r[0])) {
			b.Fatalf("examples/demo.yaml no longer has %q", r[0])
		}
		demo = bytes.Replace(demo, []byte(r[0]), []byte(r[1]), 1)
	}
	path := filepath.Join(b.TempDir(), "demo.yaml")
	if err := os.WriteFile(path, demo, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// memory is a process's resident memory in KiB: all of it, the anonymous
// part, and the part mapped from files (its binary, the journal).
type memory struct{ rss, anon, file float64 }

func memoryOf(b *testing.B, pid int) memory {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			m.rss = v
		case "RssAnon:":
			m.anon = v
		case "RssFile:":
			m.file = v
		}
	}
	return m
}

// BenchmarkIdleRSS measures the demo's resident memory after 60 seconds
// idle (one op is one such start): all of it, and its anonymous and
// file-mapped parts, in MiB.
func BenchmarkIdleRSS(b *testing.B) {
	bin := shadowgateBinary(b)
	config := demoConfig(b, 0)
	var sum memory
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		p := startProc(ctx, b, bin, config)
		if !p.awaitLine(ctx, `msg="gateway ready"`) {
			b.Fatalf("the demo did not start:\n%s", strings.Join(p.lines(), "\n"))
		}
		time.Sleep(60 * time.Second)
		m := memoryOf(b, p.cmd.Process.Pid)
		sum.rss, sum.anon, sum.file = sum.rss+m.rss, sum.anon+m.anon, sum.file+m.file
		_ = p.cmd.Process.Kill()
		p.wait(ctx)
		cancel()
	}
	n := float64(b.N) * 1024
	b.ReportMetric(sum.rss/n, "rss-MiB")
	b.ReportMetric(sum.anon/n, "anon-MiB")
	b.ReportMetric(sum.file/n, "file-MiB")
}

// BenchmarkIdleConnections measures what 1,000 idle MQTT connections (one
// user, a password each, MQTT 3.1.1 with no keep-alive) add to the demo's
// resident memory, per connection, in KiB. One op is one such start.
func BenchmarkIdleConnections(b *testing.B) {
	const conns = 1000
	bin := shadowgateBinary(b)
	config := demoConfig(b, conns)
	addrOf := regexp.MustCompile(`msg="mqtt broker serving".* tcp=(\S+)`)
	var perConn float64
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		p := startProc(ctx, b, bin, config)
		if !p.awaitLine(ctx, `msg="mqtt broker serving"`) {
			b.Fatalf("the demo did not start:\n%s", strings.Join(p.lines(), "\n"))
		}
		var addr string
		for _, l := range p.lines() {
			if m := addrOf.FindStringSubmatch(l); m != nil {
				addr = m[1]
			}
		}
		time.Sleep(2 * time.Second)
		before := memoryOf(b, p.cmd.Process.Pid)
		held := make([]net.Conn, 0, conns)
		for i := range conns {
			c, err := mqttConnect(ctx, addr, fmt.Sprintf("idle-%d", i), "demo", "greenhouse-demo")
			if err != nil {
				b.Fatalf("connection %d: %v", i, err)
			}
			held = append(held, c)
		}
		time.Sleep(2 * time.Second)
		after := memoryOf(b, p.cmd.Process.Pid)
		perConn += (after.rss - before.rss) / conns
		for _, c := range held {
			_ = c.Close()
		}
		_ = p.cmd.Process.Kill()
		p.wait(ctx)
		cancel()
	}
	b.ReportMetric(perConn/float64(b.N), "KiB/conn")
}

// mqttConnect opens an MQTT 3.1.1 connection with a password and no
// keep-alive, and returns it once the broker accepted it.
func mqttConnect(ctx context.Context, addr, clientID, user, password string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	str := func(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }
	body := append(str("MQTT"), 4, 0xC2, 0, 0) // level 4; user, password, clean session; keep-alive 0
	body = append(body, str(clientID)...)
	body = append(body, str(user)...)
	body = append(body, str(password)...)
	pkt := []byte{0x10}
	for n := len(body); ; {
		digit := byte(n % 128)
		if n /= 128; n > 0 {
			digit |= 0x80
		}
		pkt = append(pkt, digit)
		if n == 0 {
			break
		}
	}
	pkt = append(pkt, body...)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(pkt); err != nil {
		c.Close()
		return nil, err
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(c, ack); err != nil {
		c.Close()
		return nil, err
	}
	if ack[0] != 0x20 || ack[3] != 0 {
		c.Close()
		return nil, fmt.Errorf("CONNACK % x: refused", ack)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}
