package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.yaml.in/yaml/v3"

	"github.com/shadowgate/shadowgate/examples"
	"github.com/shadowgate/shadowgate/gateway/command"
)

// Under emulation everything is several times slower than native: these
// bounds are generous on purpose.
const (
	qemuReadyWithin = 60 * time.Second
	qemuActWithin   = 60 * time.Second
	qemuStopWithin  = 30 * time.Second
)

// qemuTarget is one of the ARM builds the Makefile makes, and the
// emulator that runs it.
type qemuTarget struct {
	name   string // as in the Makefile's target
	goarch string
	goarm  string
	emu    string
	// cpu is the oldest Raspberry Pi core the build is meant for. qemu's
	// default core has every extension, so without it a GOARM=7 binary
	// would pass for armv6 (on an arm1176 it dies of SIGILL).
	cpu     string
	machine elf.Machine
}

var qemuTargets = []qemuTarget{
	// Pi 3, Pi Zero 2 W (and the Pi 4 and 5, whose cores are newer).
	{name: "arm64", goarch: "arm64", emu: "qemu-aarch64-static", cpu: "cortex-a53", machine: elf.EM_AARCH64},
	// Pi 2.
	{name: "armv7", goarch: "arm", goarm: "7", emu: "qemu-arm-static", cpu: "cortex-a7", machine: elf.EM_ARM},
	// Pi 1, Pi Zero, Pi Zero W.
	{name: "armv6", goarch: "arm", goarm: "6", emu: "qemu-arm-static", cpu: "arm1176", machine: elf.EM_ARM},
}

// needEmulator returns the path of a qemu user-mode emulator, skipping
// without it unless SHADOWGATE_E2E=1 demands it.
func needEmulator(t *testing.T, name string) string {
	t.Helper()
	return needToolFrom(t, name, "qemu-user-static", "/usr/libexec/qemu-binfmt")
}

// crossBuild builds shadowgate for a target as the Makefile does (static,
// trimmed, stripped), with its version stamped, into dir.
func crossBuild(t *testing.T, tg qemuTarget, version, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("SHADOWGATE_E2E") == "1" {
			t.Fatal("go is not on PATH, and SHADOWGATE_E2E=1 needs this test to run")
		}
		t.Skip("go is not on PATH")
	}
	bin := filepath.Join(dir, "shadowgate-linux-"+tg.name)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -X main.version="+version, "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+tg.goarch, "GOARM="+tg.goarm)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building for %s: %v\n%s", tg.name, err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %v: %d bytes", tg.name, time.Since(start).Round(time.Millisecond), fi.Size())
	// The binary is for the target's machine and needs no loader.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != tg.machine {
		t.Fatalf("%s is built for %v, want %v", bin, f.Machine, tg.machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("%s is dynamically linked (%v); the Pi build must be static", bin, p.Type)
		}
	}
	return bin
}

// qemuDemoConfig is the demo greenhouse on ports the system picks, with
// its state in dir, without its scheduled plan (its writes would ask at
// their own time), and with a rule that lets anyone switch the pump, so
// that an MQTT command acts without a person.
func qemuDemoConfig(t *testing.T, dir string) string {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(examples.Demo, &cfg); err != nil {
		t.Fatalf("examples/demo.yaml: %v", err)
	}
	section := func(name string) map[string]any {
		s, ok := cfg[name].(map[string]any)
		if !ok {
			t.Fatalf("examples/demo.yaml has no %s section", name)
		}
		return s
	}
	section("gateway")["state_dir"] = filepath.Join(dir, "state")
	section("mqtt")["listen"] = "127.0.0.1:0"
	section("web")["listen"] = "127.0.0.1:0"
	delete(cfg, "plans")
	rules, _ := cfg["rules"].([]any)
	cfg["rules"] = append(rules, map[string]any{
		"id": "qemu", "principal": "*", "device": "pump-1", "capability": "on", "decision": "allow",
	})
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "demo-qemu.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// emulated is a shadowgate serve under qemu, and its log so far.
type emulated struct {
	cmd  *exec.Cmd
	done chan error // the exit, once

	mu    sync.Mutex
	lines []string
}

func startEmulated(t *testing.T, emu, cpu, bin, config string) *emulated {
	t.Helper()
	pr, pw := io.Pipe()
	cmd := exec.Command(emu, "-cpu", cpu, bin, "serve", "--config", config)
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &emulated{cmd: cmd, done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			g.mu.Lock()
			g.lines = append(g.lines, sc.Text())
			g.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		err := cmd.Wait()
		_ = pw.Close()
		g.done <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		g.done <- <-g.done
	})
	return g
}

func (g *emulated) log() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.Join(g.lines, "\n")
}

// await waits for a log line that match accepts, failing after within or
// when the process ends first.
func (g *emulated) await(t *testing.T, what string, within time.Duration, match func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(within)
	seen := 0
	for {
		g.mu.Lock()
		lines := g.lines[seen:]
		seen = len(g.lines)
		g.mu.Unlock()
		for _, l := range lines {
			if match(l) {
				return l
			}
		}
		select {
		case err := <-g.done:
			g.done <- err
			time.Sleep(50 * time.Millisecond) // the last lines
			t.Fatalf("the gateway exited (%v) before %s; its log:\n%s", err, what, g.log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; the log so far:\n%s", what, within, g.log())
		}
	}
}

// TestQemu runs the arm64, armv7 and armv6 builds under qemu user-mode
// emulation, each on the oldest Pi core it is meant for: the version is the stamped one, the demo greenhouse answers
// /readyz, opens its valve on an MQTT command, and stops cleanly on
// SIGTERM. The targets run one after another: emulation is CPU-bound.
func TestQemu(t *testing.T) {
	for _, tg := range qemuTargets {
		t.Run(tg.name, func(t *testing.T) {
			emu := needEmulator(t, tg.emu)
			dir := t.TempDir()
			version := "qemu-test-" + tg.name
			bin := crossBuild(t, tg, version, dir)

			// version
			out, err := exec.Command(emu, "-cpu", tg.cpu, bin, "version").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "shadowgate "+version {
				t.Fatalf("%s -cpu %s %s version: %v\n%s\nwant %q", tg.emu, tg.cpu, filepath.Base(bin), err, out, "shadowgate "+version)
			}

			// serve
			start := time.Now()
			g := startEmulated(t, emu, tg.cpu, bin, qemuDemoConfig(t, dir))
			ready := g.await(t, "gateway ready", qemuReadyWithin, has(`msg="gateway ready"`))
			t.Logf("%s: READY %v after the start", tg.name, time.Since(start).Round(time.Millisecond))
			if !strings.Contains(ready, "version="+version) {
				t.Errorf("the ready line does not name version %s: %s", version, ready)
			}
			console := regexp.MustCompile(`console=(\S+)`).FindStringSubmatch(ready)
			broker := regexp.MustCompile(`mqtt=(\S+)`).FindStringSubmatch(ready)
			if console == nil || broker == nil {
				t.Fatalf("no console or MQTT address in %q", ready)
			}

			// /readyz says 200 once a device is online; poll for it.
			hc := &http.Client{Timeout: 10 * time.Second}
			deadline := time.Now().Add(qemuReadyWithin)
			for {
				code, body, err := qemuGet(hc, "http://"+console[1]+"/readyz")
				if err == nil && code == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/readyz: %d %v\n%s\nthe gateway's log:\n%s", code, err, body, g.log())
				}
				time.Sleep(200 * time.Millisecond)
			}

			// An MQTT command that the rule lets act.
			replies := make(chan command.Reply, 4)
			o := paho.NewClientOptions().AddBroker("tcp://" + broker[1]).SetClientID("qemu-" + tg.name).
				SetUsername(demoUser).SetPassword(demoPassword).SetProtocolVersion(4).
				SetConnectTimeout(30 * time.Second).SetWriteTimeout(30 * time.Second)
			mc := paho.NewClient(o)
			if tok := mc.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				t.Fatalf("mqtt connect to %s: %v\nthe gateway's log:\n%s", broker[1], tok.Error(), g.log())
			}
			defer mc.Disconnect(50)
			const p = "shadowgate/demo/"
			sub := mc.Subscribe(p+"reply/pump-1/on", 1, func(_ paho.Client, m paho.Message) {
				var r command.Reply
				if json.Unmarshal(m.Payload(), &r) == nil {
					replies <- r
				}
			})
			if !sub.WaitTimeout(30*time.Second) || sub.Error() != nil {
				t.Fatalf("mqtt subscribe: %v", sub.Error())
			}
			id := "qemu-" + tg.name + "-1"
			pub := mc.Publish(p+"cmd/pump-1/on", 1, false, fmt.Sprintf(`{"value": true, "id": %q, "reason": "qemu test"}`, id))
			if !pub.WaitTimeout(30*time.Second) || pub.Error() != nil {
				t.Fatalf("mqtt publish: %v", pub.Error())
			}
			select {
			case r := <-replies:
				if r.ID != id || r.Outcome != command.OutcomeActed || r.Receipt == nil || r.Receipt.Confirmation != "confirmed" {
					t.Fatalf("reply = %+v, want acted and confirmed\nthe gateway's log:\n%s", r, g.log())
				}
			case <-time.After(qemuActWithin):
				t.Fatalf("no MQTT reply within %v\nthe gateway's log:\n%s", qemuActWithin, g.log())
			}
			g.await(t, "the pump's act journaled", 10*time.Second, has("msg=acted", "device_id=pump-1"))
			mc.Disconnect(50)

			// SIGTERM stops it cleanly.
			if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			select {
			case err := <-g.done:
				g.done <- err
				if err != nil {
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						t.Fatalf("after SIGTERM the gateway exited with %v, want 0\nits log:\n%s", ee.ProcessState, g.log())
					}
					t.Fatal(err)
				}
			case <-time.After(qemuStopWithin):
				t.Fatalf("the gateway did not stop within %v of SIGTERM; its log:\n%s", qemuStopWithin, g.log())
			}
			t.Logf("%s: stopped %v after SIGTERM", tg.name, time.Since(stopped).Round(time.Millisecond))
		})
	}
}

func qemuGet(hc *http.Client, url string) (int, string, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b), err
}
