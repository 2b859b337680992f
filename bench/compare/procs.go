package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"golang.org/x/crypto/bcrypt"
)

// broker is one broker under test, in a process of its own.
type broker struct {
	name   string // "gateway", "mochi" or "mosquitto"
	addr   string // host:port of its MQTT listener
	user   string
	pw     string
	prefix string // the topic prefix its commands go to
	cmd    *exec.Cmd
	log    string // the file its output goes to
	exited chan struct{}
}

// pid is the broker's process id.
func (b *broker) pid() int { return b.cmd.Process.Pid }

// stop ends the broker with SIGTERM, or SIGKILL after 10 s.
func (b *broker) stop() {
	if b == nil || b.cmd == nil || b.cmd.Process == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

// freePort returns a loopback address with a port nothing listens on now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs cmd with its output to logPath and waits until addr takes
// connections.
func start(ctx context.Context, b *broker, cmd *exec.Cmd, logPath string) error {
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", b.name, err)
	}
	b.cmd, b.log, b.exited = cmd, logPath, make(chan struct{})
	go func() { // owned by b: stop waits for it
		_ = cmd.Wait()
		f.Close()
		close(b.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-b.exited:
			return fmt.Errorf("%s exited before it listened on %s; its log is %s", b.name, b.addr, logPath)
		case <-ctx.Done():
			b.stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.stop()
			return fmt.Errorf("%s did not listen on %s within 30s; its log is %s", b.name, b.addr, logPath)
		}
	}
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run bench/compare inside the shadowgate module")
	}
	return filepath.Dir(mod), nil
}

// buildGateway builds the gateway binary as the Makefile does, into dir.
func buildGateway(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "shadowgate")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/shadowgate")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/shadowgate: %w\n%s", err, out)
	}
	return bin, nil
}

// benchUser and benchPassword log in to every broker (mochi and mosquitto
// let anyone in).
const (
	benchUser     = "bench"
	benchPassword = "bench-password"
	gatewayPrefix = "shadowgate/bench/"
)

// gatewayConfig is a gateway with the sim valve, which the bench user may
// command without asking anyone, and a broker that takes maxClients.
func gatewayConfig(dir, mqttAddr, webAddr, hash string, maxClients int) string {
	return `gateway:
  id: bench
  state_dir: ` + filepath.Join(dir, "state") + `
mode: supervised
users:
  - name: ` + benchUser + `
    role: operator
    password_hash: "` + hash + `"
    mqtt:
      publish: ["bench/#", "` + gatewayPrefix + `cmd/#"]
      subscribe: ["bench/#", "` + gatewayPrefix + `#"]
mqtt:
  listen: "` + mqttAddr + `"
  max_clients: ` + strconv.Itoa(maxClients) + `
  commands: {per_minute: 100000000, burst: 1000000}
web: {listen: "` + webAddr + `"}
drivers:
  - name: sim
    type: sim
devices:
  - id: valve-1
    driver: sim
    address: valve
    capabilities:
      - name: open
        kind: actuator
        type: bool
        read_back: true
        effects: {reversible: true, contained: true}
        confirm: {read_back: true, within: 2s}
rules:
  - {id: bench, principal: "mqtt:` + benchUser + `", device: valve-1, capability: open, decision: allow}
`
}

// startGateway builds and starts the gateway with its state in dir.
func startGateway(ctx context.Context, dir string, maxClients int) (*broker, error) {
	bin, err := buildGateway(dir)
	if err != nil {
		return nil, err
	}
	mqttAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	webAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	// The lowest cost: a connection's login is not what is measured.
	hash, err := bcrypt.GenerateFromPassword([]byte(benchPassword), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(gatewayConfig(dir, mqttAddr, webAddr, string(hash), maxClients)), 0o600); err != nil {
		return nil, err
	}
	b := &broker{name: "gateway", addr: mqttAddr, user: benchUser, pw: benchPassword, prefix: gatewayPrefix}
	return b, start(ctx, b, exec.Command(bin, "serve", "--config", cfg), filepath.Join(dir, "gateway.log"))
}

// startMochi starts this program again as a bare mochi broker.
func startMochi(ctx context.Context, dir string) (*broker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &broker{name: "mochi", addr: addr, prefix: gatewayPrefix}
	return b, start(ctx, b, exec.Command(self, "-serve-mochi", addr), filepath.Join(dir, "mochi.log"))
}

// mosquittoConfig is a fair anchor: no Nagle delay, and no queue limit
// (mochi has none either).
func mosquittoConfig(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	return "listener " + port + " " + host + "\n" +
		"allow_anonymous true\n" +
		"set_tcp_nodelay true\n" +
		"max_queued_messages 0\n" +
		"persistence false\n" +
		"log_dest stderr\n" +
		"log_type error\n" +
		"log_type warning\n", nil
}

// startMosquitto starts mosquitto at path, or returns nil when it is not
// installed.
func startMosquitto(ctx context.Context, dir, path string) (*broker, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	conf, err := mosquittoConfig(addr)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	b := &broker{name: "mosquitto", addr: addr, prefix: gatewayPrefix}
	return b, start(ctx, b, exec.Command(path, "-c", cfg), filepath.Join(dir, "mosquitto.log"))
}

// serveMochi is the -serve-mochi mode: a bare mochi broker with mochi's
// defaults and an allow-all auth hook, until SIGTERM or SIGINT.
func serveMochi(addr string) error {
	s := mochi.New(&mochi.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err := s.AddHook(new(auth.AllowHook), nil); err != nil {
		return err
	}
	if err := s.AddListener(listeners.NewTCP(listeners.Config{ID: "tcp", Address: addr})); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := s.Serve(); err != nil {
		return err
	}
	<-ctx.Done()
	return s.Close()
}

// vmRSS reads a process's resident set size from /proc, in bytes.
func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmRSS(f)
}

// parseVmRSS reads the VmRSS line of a /proc/<pid>/status.
func parseVmRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q: want <n> kB", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS line %q: %w", sc.Text(), err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line")
}
