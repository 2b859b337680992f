package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/crypto/bcrypt"
)

// TestSIGTERMDrivesToSafeBeforeExit: serve with the pump running, send
// SIGTERM, and the pump is off in the simulator's state file (the
// hardware) by the time the process has exited, the drive journaled as
// the gateway's own.
func TestSIGTERMDrivesToSafeBeforeExit(t *testing.T) {
	bin := shadowgateBinary(t)
	// The pump runs when the gateway starts, as hardware left on would.
	config, worldFile := stopSite(t, `{"state":{"level":60,"temperature":14,"pump":true,"heater":true},"received":{}}`, `devices:
  - id: pump-1
    driver: sim
    address: pump
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true, effects: {reversible: true}, safe: false}
  - id: heater-1
    driver: sim
    address: heater
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true, effects: {reversible: true}, safe: false, on_stop: keep}
`)
	g := startGateway(t, bin, config)
	g.await(t, "the gateway to be ready", has("gateway ready"))
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	g.await(t, "the drive to safe", has("driving to safe", "pump-1", "trigger=stop"))
	g.await(t, "the gateway to stop", has("gateway stopped"))
	for range g.lines {
	}
	done := make(chan error, 1)
	go func() { done <- g.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	b, err := os.ReadFile(worldFile)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		State struct{ Pump, Heater bool } `json:"state"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	if w.State.Pump {
		t.Fatalf("the pump still runs after the gateway stopped: %s", b)
	}
	if !w.State.Heater {
		t.Fatalf("the heater (on_stop: keep) was switched off: %s", b)
	}
}

// TestSIGTERMPublishesTheSafeStateBeforeOffline: at a clean stop the
// state of the pump driven off reaches MQTT (its state/ topic and its
// Home Assistant state, both retained) before the gateway says offline:
// a retained ON would outlive the gateway, and Home Assistant would show
// the pump ON while the gateway is away.
func TestSIGTERMPublishesTheSafeStateBeforeOffline(t *testing.T) {
	bin := shadowgateBinary(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("hass-password-1"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	config, _ := stopSite(t, `{"state":{"level":60,"temperature":14,"pump":true},"received":{}}`, `users:
  - {name: hass, role: viewer, password_hash: "`+string(hash)+`"}
integrations:
  homeassistant: {enabled: true}
devices:
  - id: pump-1
    driver: sim
    address: pump
    capabilities:
      - {name: "on", kind: actuator, type: bool, read_back: true, poll: 1s, effects: {reversible: true}, safe: false, confirm: {read_back: true}}
`)
	g := startGateway(t, bin, config)
	line := g.await(t, "the broker", has(`msg="mqtt broker serving"`))
	addr := regexp.MustCompile(` tcp=(\S+)`).FindStringSubmatch(line)
	if addr == nil {
		t.Fatalf("no address in %q", line)
	}
	g.awaitEver(t, "the gateway to be ready", has("gateway ready"))
	log := g.tail()
	type msg struct{ topic, payload string }
	msgs := make(chan msg, 1024)
	lost := make(chan struct{})
	o := paho.NewClientOptions().AddBroker("tcp://" + addr[1]).SetClientID("hass").SetUsername("hass").SetPassword("hass-password-1").
		SetOrderMatters(true).SetAutoReconnect(false).SetConnectionLostHandler(func(paho.Client, error) { close(lost) })
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting as hass: %v", tok.Error())
	}
	defer c.Disconnect(0)
	if tok := c.Subscribe("shadowgate/stop/#", 1, func(_ paho.Client, m paho.Message) {
		msgs <- msg{m.Topic(), string(m.Payload())}
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribing: %v", tok.Error())
	}
	// The pump is seen ON before the stop.
	haState := "shadowgate/stop/ha/pump-1/on"
	for deadline := time.After(30 * time.Second); ; {
		select {
		case m := <-msgs:
			if m.topic == haState && m.payload == "ON" {
				goto on
			}
		case <-deadline:
			t.Fatal("Home Assistant's state of pump-1 never said ON")
		}
	}
on:
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// What Home Assistant holds of the pump when the gateway says offline,
	// or, should the client drop that last message as its connection
	// ends, when the connection ends, must be OFF.
	last := "ON"
	see := func(m msg) bool {
		t.Logf("after SIGTERM: %s %s", m.topic, m.payload)
		if m.topic == haState {
			last = m.payload
		}
		return m.topic == "shadowgate/stop/status" && m.payload == "offline"
	}
	for deadline := time.After(30 * time.Second); ; {
		select {
		case m := <-msgs:
			if !see(m) {
				continue
			}
		case <-lost:
			for drained := time.After(500 * time.Millisecond); ; {
				select {
				case m := <-msgs:
					see(m)
					continue
				case <-drained:
				}
				break
			}
		case <-deadline:
			t.Fatalf("neither offline nor the end of the connection within 30s of SIGTERM; the gateway's log:\n%s", log)
		}
		if last != "OFF" {
			t.Fatalf("the gateway went offline while Home Assistant's state of pump-1, driven to safe, said %s", last)
		}
		return
	}
}

// stopSite writes a state directory whose simulated world starts as
// world says (hardware left on), and a configuration of the gateway
// "stop" in observe mode with rest after its listeners (users, devices),
// and returns the configuration's path and the world's file.
func stopSite(t *testing.T, world, rest string) (config, worldFile string) {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	worldFile = filepath.Join(state, "world.json")
	if err := os.WriteFile(worldFile, []byte(world), 0o600); err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(config, []byte(`gateway: {id: stop, state_dir: `+state+`}
mode: observe
mqtt: {listen: "127.0.0.1:0"}
web: {listen: "127.0.0.1:0"}
drivers:
  - {name: sim, type: sim, sim: {state_file: world.json}}
`+rest), 0o600); err != nil {
		t.Fatal(err)
	}
	return config, worldFile
}
