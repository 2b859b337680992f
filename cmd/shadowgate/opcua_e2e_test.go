package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/firmware-fixtures/opcua-plc/plc"
)

// startPLC runs the OPC-UA PLC simulator on a free port until the test
// ends.
func startPLC(t *testing.T) *plc.PLC {
	t.Helper()
	plc.Quiet()
	p, err := plc.Start(plc.Options{})
	if err != nil {
		t.Fatalf("starting the PLC simulator: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestPLCExampleEndToEnd serves examples/plc-opcua.yaml with the binary
// against the PLC simulator, changed only in where it listens, keeps its
// state and finds the PLC. mosquitto_rr, logged in as the admin the first
// start makes, asks to open the valve and to start the pump; in mode
// supervised each waits for a person; the admin approves them with
// `shadowgate approvals`, and the simulator's valve opens and its pump
// runs, confirmed by its feedback.
func TestPLCExampleEndToEnd(t *testing.T) {
	rr := needTool(t, "mosquitto_rr")
	bin := shadowgateBinary(t)
	p := startPLC(t)
	dir := t.TempDir()
	example, err := os.ReadFile("../../examples/plc-opcua.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mqttPort := freePort(t)
	for _, r := range [][2]string{
		{"state_dir: /var/lib/shadowgate", "state_dir: " + filepath.Join(dir, "state")},
		{"listen: 127.0.0.1:1883", fmt.Sprintf("listen: 127.0.0.1:%d", mqttPort)},
		{"listen: 127.0.0.1:8080", `listen: "127.0.0.1:0"`},
		{"url: opc.tcp://127.0.0.1:4840", "url: " + p.URL()},
	} {
		if !bytes.Contains(example, []byte(r[0])) {
			t.Fatalf("examples/plc-opcua.yaml no longer has %q", r[0])
		}
		example = bytes.Replace(example, []byte(r[0]), []byte(r[1]), 1)
	}
	config := filepath.Join(dir, "plc.yaml")
	if err := os.WriteFile(config, example, 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, bin, config)
	line := g.await(t, "the first admin's password", has("password: "))
	password := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "password:"))
	ready := g.await(t, "the gateway ready", has(`msg="gateway ready"`))
	console := regexp.MustCompile(`console=(\S+)`).FindStringSubmatch(ready)
	if console == nil {
		t.Fatalf("no console address in %q", ready)
	}
	g.awaitEver(t, "the valve online", has("msg=device_online", "device_id=valve-1"))
	// ask sends one command with mosquitto_rr, expects it to wait for a
	// person, and approves it as the admin.
	ask := func(device, capability, value, id string) {
		t.Helper()
		out, err := exec.Command(rr, "-h", "127.0.0.1", "-p", fmt.Sprint(mqttPort), "-u", "admin", "-P", password,
			"-t", "shadowgate/tank-plc/cmd/"+device+"/"+capability, "-e", "shadowgate/tank-plc/inbox/rr",
			"-m", `{"value": `+value+`, "id": "`+id+`"}`, "-W", "15").CombinedOutput()
		apr := regexp.MustCompile(`"approval":\{"id":"(apr-[0-9a-f]+)"`).FindSubmatch(out)
		if err != nil || apr == nil || !strings.Contains(string(out), `"outcome":"pending_approval"`) {
			t.Fatalf("mosquitto_rr %s.%s: %v\n%s\nwant pending approval (mode supervised)\nthe gateway's log:\n%s", device, capability, err, out, strings.Join(g.all, "\n"))
		}
		approve := exec.Command(bin, "approvals", "approve", string(apr[1]), "--user", "admin", "--url", "http://"+console[1])
		approve.Stdin = strings.NewReader(password + "\n")
		if out, err := approve.CombinedOutput(); err != nil {
			t.Fatalf("shadowgate approvals approve: %v\n%s", err, out)
		}
	}
	ask("valve-1", "open", "true", "rr-plc-1")
	g.await(t, "the valve's act confirmed", has("msg=acted", "device_id=valve-1", `\"confirmation\":\"confirmed\"`))
	if !p.Valve() {
		t.Fatal("the gateway journaled the act confirmed, yet the simulator's valve is closed")
	}
	// The pump: its interlock needs the tank level, which the subscription
	// brings; its confirmation is the PLC's running feedback.
	ask("pump-1", "on", "true", "rr-plc-2")
	g.await(t, "the pump's act confirmed", has("msg=acted", "device_id=pump-1", `\"confirmation\":\"confirmed\"`))
	if !p.PumpRunning() {
		t.Fatal("the gateway journaled the pump confirmed, yet the simulator's pump is not running")
	}
}

// TestOPCUATools runs `shadowgate opcua trust` and `browse` against the
// PLC simulator: the thumbprint printed and the line to paste are the
// server's; browse lists its tags with their types and access; a pinned
// thumbprint that does not match is refused with both.
func TestOPCUATools(t *testing.T) {
	p := startPLC(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"opcua", "trust", p.URL()}, nil, &out, &errOut); code != exitOK {
		t.Fatalf("opcua trust = %d\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `server_thumbprint: "`+p.Thumbprint()+`"`) || !strings.Contains(out.String(), plc.ApplicationURI) {
		t.Fatalf("opcua trust printed\n%s\nwant the thumbprint %s and the application URI", out.String(), p.Thumbprint())
	}
	out.Reset()
	if code := run([]string{"opcua", "browse", p.URL(), "ns=1;i=85"}, nil, &out, &errOut); code != exitOK {
		t.Fatalf("opcua browse = %d\n%s", code, errOut.String())
	}
	for _, want := range []string{`ns=1;s=Tank.Level    1:Tank.Level    Variable  Double   read`, `ns=1;s=Valve.Open    1:Valve.Open    Variable  Boolean  read/write`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("opcua browse printed\n%s\nwant a line %q", out.String(), want)
		}
	}
	errOut.Reset()
	wrong := strings.Repeat("ab", 32)
	if code := run([]string{"opcua", "browse", "--thumbprint", wrong, p.URL()}, nil, &out, &errOut); code != exitUnavailable ||
		!strings.Contains(errOut.String(), wrong) || !strings.Contains(errOut.String(), p.Thumbprint()) {
		t.Fatalf("browse with a wrong thumbprint = %d\n%s\nwant refused, naming both thumbprints", code, errOut.String())
	}
	if code := run([]string{"opcua", "trust"}, nil, &out, &errOut); code != exitUsage {
		t.Fatalf("opcua trust without a URL = %d", code)
	}
}
