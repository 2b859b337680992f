package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// readmeBridge is the mosquitto bridge the README gives for Home
// Assistant on a broker of its own: the conf block that opens with
// "connection shadowgate".
func readmeBridge(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```conf\n(connection shadowgate\n.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no conf block opening with \"connection shadowgate\"")
	}
	return string(m[1])
}

// TestHomeAssistantThroughAMosquittoBridge runs examples/homeassistant.yaml
// with a real mosquitto bridged to it by the README's block, and plays
// Home Assistant on that mosquitto: every config, state and availability
// comes across, retained; a switch command goes to the gateway, waits
// for a person, and its confirmed state comes back; Home Assistant's
// birth is heard once.
func TestHomeAssistantThroughAMosquittoBridge(t *testing.T) {
	mosqBin := needTool(t, "mosquitto")
	bin := shadowgateBinary(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "homeassistant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gwPort := freePort(t)
	cfg := strings.NewReplacer(`listen: ":1883"`, `listen: "127.0.0.1:`+strconv.Itoa(gwPort)+`"`, `listen: ":8080"`, `listen: "127.0.0.1:0"`,
		"state_dir: /var/lib/shadowgate", "state_dir: "+filepath.Join(dir, "state")).Replace(string(b))
	if !strings.Contains(cfg, strconv.Itoa(gwPort)) {
		t.Fatal(`examples/homeassistant.yaml does not listen on ":1883" to move`)
	}
	file := filepath.Join(dir, "ha.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, file)
	ready := g.await(t, "the gateway ready", has(`msg="gateway ready"`))
	console := regexp.MustCompile(`console=(\S+)`).FindStringSubmatch(ready)
	if console == nil {
		t.Fatalf("no console address in %q", ready)
	}
	log := g.tail()

	bridge := strings.Replace(readmeBridge(t), "address greenhouse.local:1883", "address 127.0.0.1:"+strconv.Itoa(gwPort), 1)
	mdir := t.TempDir()
	m := &mosquitto{t: t, bin: mosqBin, dir: mdir, port: freePort(t), extra: bridge}
	m.start()
	t.Cleanup(m.stop)

	type msg struct {
		topic, payload string
		retained       bool
	}
	got := make(chan msg, 1024)
	o := paho.NewClientOptions().AddBroker("tcp://127.0.0.1:" + strconv.Itoa(m.port)).SetClientID("home-assistant").SetOrderMatters(true)
	ha := paho.NewClient(o)
	if tok := ha.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting to mosquitto: %v", tok.Error())
	}
	defer ha.Disconnect(0)
	// Home Assistant subscribes one filter at a time.
	for _, f := range []string{"homeassistant/#", "shadowgate/greenhouse/status", "shadowgate/greenhouse/ha/#"} {
		if tok := ha.Subscribe(f, 1, func(_ paho.Client, pm paho.Message) {
			got <- msg{pm.Topic(), string(pm.Payload()), pm.Retained()}
		}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("subscribing %s: %v", f, tok.Error())
		}
	}
	// wait reads messages until ok says so.
	wait := func(what string, ok func(msg) bool) {
		t.Helper()
		for deadline := time.After(30 * time.Second); ; {
			select {
			case mm := <-got:
				if ok(mm) {
					return
				}
			case <-deadline:
				t.Fatalf("through the bridge, no %s within 30s", what)
			}
		}
	}
	configs := map[string]bool{}
	wait("9 discovery configs", func(mm msg) bool {
		if strings.HasSuffix(mm.topic, "/config") && mm.payload != "" {
			configs[mm.topic] = true
		}
		return len(configs) == 9
	})
	wait("online status", func(mm msg) bool { return mm.topic == "shadowgate/greenhouse/status" && mm.payload == "online" })

	// Home Assistant's switch: the command crosses, asks, is approved.
	if tok := ha.Publish("shadowgate/greenhouse/cmd/pump-1/on", 1, false, "true"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publishing the command: %v", tok.Error())
	}
	var apr string
	wait("pending approval", func(mm msg) bool {
		if mm.topic != "shadowgate/greenhouse/ha/pump-1/on/outcome" {
			return false
		}
		apr = regexp.MustCompile(`pending approval (apr-[0-9a-f]+)`).FindString(mm.payload)
		return apr != ""
	})
	approve := exec.Command(bin, "approvals", "approve", strings.TrimPrefix(apr, "pending approval "), "--user", "grower", "--url", "http://"+console[1])
	approve.Stdin = strings.NewReader("greenhouse-demo\n")
	if out, err := approve.CombinedOutput(); err != nil {
		t.Fatalf("shadowgate approvals approve: %v\n%s", err, out)
	}
	wait("confirmed", func(mm msg) bool {
		return mm.topic == "shadowgate/greenhouse/ha/pump-1/on/outcome" && strings.Contains(mm.payload, `"outcome":"confirmed"`)
	})
	// The state is retained on Home Assistant's own broker: a new
	// subscriber (Home Assistant after a restart) reads ON.
	late := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://127.0.0.1:" + strconv.Itoa(m.port)).SetClientID("ha-restarted"))
	if tok := late.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting again: %v", tok.Error())
	}
	defer late.Disconnect(0)
	state := make(chan string, 4)
	if tok := late.Subscribe("shadowgate/greenhouse/ha/pump-1/on", 1, func(_ paho.Client, pm paho.Message) {
		state <- string(pm.Payload())
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribing again: %v", tok.Error())
	}
	select {
	case s := <-state:
		if s != "ON" {
			t.Fatalf("Home Assistant's broker retains pump-1 as %q after a confirmed ON", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Home Assistant's broker retains no state of pump-1")
	}

	// Home Assistant's birth crosses the bridge, and the gateway
	// announces itself again, once.
	if tok := ha.Publish("homeassistant/status", 1, false, "online"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publishing the birth: %v", tok.Error())
	}
	log.await(t, "the gateway to hear the birth", has("home assistant is online"))
	fresh := 0
	for window := time.After(3 * time.Second); ; {
		select {
		case mm := <-got:
			if strings.HasSuffix(mm.topic, "/config") {
				fresh++
			}
			continue
		case <-window:
		}
		break
	}
	if fresh != 9 {
		t.Errorf("%d configs came across after one birth, want 9: one announcement, no loop", fresh)
	}
}
