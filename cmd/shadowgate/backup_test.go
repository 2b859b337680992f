package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/crypto/bcrypt"
)

// TestHotBackupWhileCommandsRun takes a backup through the API while 1,000
// commands act on the gateway; the copy verifies. A restore is refused
// while the gateway holds the state directory, and works once it stopped.
func TestHotBackupWhileCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := shadowgateBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	mqttPort, webPort := freePort(t), freePort(t)
	h, _ := bcrypt.GenerateFromPassword([]byte("backup-password"), bcrypt.MinCost)
	config := filepath.Join(dir, "gw.yaml")
	err := os.WriteFile(config, []byte(fmt.Sprintf(`gateway: {id: backup, state_dir: %s}
mode: supervised
users:
  - {name: root, role: admin, password_hash: "%s"}
mqtt: {listen: "127.0.0.1:%d", commands: {per_minute: 1000000, burst: 100000}}
web: {listen: "127.0.0.1:%d"}
rules:
  - {id: valve, principal: "mqtt:root", device: valve-1, capability: open, decision: allow}
drivers: [{name: sim, type: sim}]
devices:
  - id: valve-1
    driver: sim
    address: valve
    capabilities:
      - {name: open, kind: actuator, type: bool, read_back: true, effects: {reversible: true, contained: true}, confirm: {read_back: true, within: 2s}}
`, state, h, mqttPort, webPort)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, config)
	g.await(t, "the gateway ready", has(`msg="gateway ready"`))
	// From here its log is read as it comes (a full pipe would hold the
	// gateway up), and looked at once it stopped.
	var rest []string
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for l := range g.lines {
			rest = append(rest, l)
		}
	}()

	// 1,000 commands, each waiting for its reply, while the backup runs.
	o := paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", mqttPort)).SetClientID("backup-load").
		SetUsername("root").SetPassword("backup-password")
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	replies := make(chan string, 16)
	c.Subscribe("shadowgate/backup/reply/valve-1/open", 1, func(_ paho.Client, m paho.Message) { replies <- string(m.Payload()) }).Wait()
	var wg sync.WaitGroup
	acted := 0
	wg.Go(func() {
		for i := range 1000 {
			c.Publish("shadowgate/backup/cmd/valve-1/open", 1, false, fmt.Sprintf(`{"value": %v, "id": "load-%d"}`, i%2 == 0, i))
			select {
			case r := <-replies:
				if strings.Contains(r, `"outcome":"acted"`) {
					acted++
				}
			case <-time.After(15 * time.Second):
				return
			}
		}
	})
	time.Sleep(300 * time.Millisecond) // commands are flowing
	copyFile := filepath.Join(dir, "copy.db")
	backup := exec.Command(bin, "journal", "backup", "--state-dir", state, "--user", "root", "--url", fmt.Sprintf("http://127.0.0.1:%d", webPort), copyFile)
	backup.Stdin = strings.NewReader("backup-password\n")
	out, err := backup.CombinedOutput()
	wg.Wait()
	if err != nil || !bytes.Contains(out, []byte("backed up")) || !bytes.Contains(out, []byte("records: ok")) {
		t.Fatalf("journal backup while commands ran: %v\n%s", err, out)
	}
	if acted != 1000 {
		t.Fatalf("%d of 1000 commands acted", acted)
	}
	// The copy verifies on its own too.
	if out, err := exec.Command(bin, "journal", "verify", "--file", copyFile).CombinedOutput(); err != nil {
		t.Fatalf("journal verify of the copy: %v\n%s", err, out)
	}
	// A restore is refused while the gateway holds the state directory.
	restore := exec.Command(bin, "journal", "restore", "--state-dir", state, copyFile)
	if out, err := restore.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("stop it first (systemctl stop shadowgate)")) {
		t.Fatalf("journal restore while the gateway runs: %v\n%s", err, out)
	}
	if err := g.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// Its log is read to the end before Wait, which closes the pipe and
	// may leave the last lines unread.
	<-drained
	if err := g.cmd.Wait(); err != nil {
		t.Fatalf("the gateway stopped with %v", err)
	}
	if !slices.ContainsFunc(rest, has(`msg="gateway stopped"`)) {
		t.Fatalf("the gateway did not log a clean stop; its last lines:\n%s", strings.Join(rest[max(0, len(rest)-20):], "\n"))
	}
	if out, err := exec.Command(bin, "journal", "restore", "--state-dir", state, copyFile).CombinedOutput(); err != nil || !bytes.Contains(out, []byte("restored")) {
		t.Fatalf("journal restore once stopped: %v\n%s", err, out)
	}
}
