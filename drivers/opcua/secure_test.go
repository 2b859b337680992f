package opcua

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/value"
)

// nodeOPCUA finds node and the npm package node-opcua-server, which
// .ci/run installs ($SHADOWGATE_NODE_OPCUA names its node_modules). Without
// them the test is skipped, or fails under SHADOWGATE_E2E=1.
func nodeOPCUA(t *testing.T) (node, modules string) {
	t.Helper()
	modules = os.Getenv("SHADOWGATE_NODE_OPCUA")
	if modules == "" {
		modules, _ = filepath.Abs(filepath.Join("..", "..", ".ci", "npm", "node_modules"))
	}
	node, err := exec.LookPath("node")
	_, serr := os.Stat(filepath.Join(modules, "node-opcua-server", "package.json"))
	if err != nil || serr != nil {
		const why = "node or the npm package node-opcua-server is not installed (.ci/run installs it; SHADOWGATE_NODE_OPCUA=node_modules)"
		if os.Getenv("SHADOWGATE_E2E") == "1" {
			t.Fatal(why + ", and SHADOWGATE_E2E=1 needs the independent OPC-UA server to run")
		}
		t.Skip(why)
	}
	return node, modules
}

// independentPLC is node-opcua's server (testdata/nodeopcua/server.mjs)
// on a free port: another implementation than gopcua's, offering
// Basic256Sha256 with Sign and SignAndEncrypt, which the gopcua server
// of the fixture cannot.
type independentPLC struct {
	Endpoint   string `json:"endpoint"`
	Thumbprint string `json:"thumbprint"`
	// sessions are the channels of the sessions it activated, as it
	// tells them: "<policy URI> <mode>".
	sessions chan string
}

func startIndependentPLC(t *testing.T) independentPLC {
	t.Helper()
	node, modules := nodeOPCUA(t)
	// ESM resolves packages from the script's folder up: the script runs
	// beside a link to the packages.
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "nodeopcua", "server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server.mjs"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "server.mjs"), strconv.Itoa(freePort(t)), filepath.Join(dir, "pki"))
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe() // closing it stops the server
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		cancel()
	})
	found := make(chan independentPLC, 1)
	sessions := make(chan string, 64)
	go func() { // ends when the server's stdout closes, at its end
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var line struct {
				independentPLC
				Session *struct{ Policy, Mode string } `json:"session"`
			}
			if !strings.HasPrefix(sc.Text(), "{") || json.Unmarshal(sc.Bytes(), &line) != nil {
				continue // node-opcua's own notes
			}
			switch {
			case line.Endpoint != "":
				line.sessions = sessions
				found <- line.independentPLC
			case line.Session != nil:
				select {
				case sessions <- line.Session.Policy + " " + line.Session.Mode:
				default:
				}
			}
		}
	}()
	// A liveness bound: node-opcua makes its certificate at its first start.
	select {
	case p := <-found:
		return p
	case <-time.After(90 * time.Second):
		t.Fatalf("node-opcua's server did not start within 90s; stderr:\n%s", stderr.String())
		return independentPLC{}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestSecureChannelWithAnIndependentServer runs the driver's secure
// channel, Basic256Sha256 with SignAndEncrypt and with Sign, against
// another implementation's server, with its certificate pinned: a read,
// a write read back, and a wrong pin refused before anything is sent.
func TestSecureChannelWithAnIndependentServer(t *testing.T) {
	p := startIndependentPLC(t)
	devs := []devices.Device{
		{ID: "tank-1", Address: "plc-1", Capabilities: []devices.Capability{{Name: "level", Kind: devices.KindSensor, Type: value.TypeNumber}}},
		{ID: "pump-1", Address: "plc-1", Capabilities: []devices.Capability{{Name: "command", Kind: devices.KindActuator, Type: value.TypeBool, ReadBack: true}}},
	}
	config := func(mode, pin string) *Config {
		return &Config{URL: p.Endpoint, Timeout: "10s", ServerThumbprint: pin,
			Security: SecurityConfig{Policy: PolicyBasic256Sha256, Mode: mode},
			Nodes: map[string]map[string]NodeConfig{
				"tank-1": {"level": {Node: "ns=1;s=Tank.Level"}},
				"pump-1": {"command": {Node: "ns=1;s=Pump.Command", ReadBack: "ns=1;s=Pump.Running"}},
			}}
	}
	// trust tells the certificate a person pins, and the endpoints.
	sc, err := Trust(t.Context(), p.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Thumbprint != p.Thumbprint || !slices.Contains(sc.Endpoints, "Basic256Sha256/SignAndEncrypt") ||
		!slices.Contains(sc.Endpoints, "Basic256Sha256/Sign") {
		t.Fatalf("Trust = thumbprint %s, endpoints %v; want %s and both Basic256Sha256 modes", sc.Thumbprint, sc.Endpoints, p.Thumbprint)
	}
	for i, mode := range []string{"SignAndEncrypt", "Sign"} {
		t.Run(mode, func(t *testing.T) {
			for len(p.sessions) > 0 { // an earlier driver's, told late
				<-p.sessions
			}
			r := startDriverWith(t, config(mode, strings.ToUpper(p.Thumbprint)), devs)
			if err := r.d.Health(t.Context()); err != nil {
				t.Fatalf("Health over Basic256Sha256/%s = %v", mode, err)
			}
			select {
			case got := <-p.sessions:
				if got != "http://opcfoundation.org/UA/SecurityPolicy#Basic256Sha256 "+mode {
					t.Fatalf("the server saw a session on %q, want Basic256Sha256 %s", got, mode)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the server told of no session")
			}
			rd, err := r.d.Read(t.Context(), "tank-1", "level")
			if err != nil || rd.Quality != devices.QualityGood {
				t.Fatalf("Read(tank-1.level) over %s = %+v, %v", mode, rd, err)
			}
			want := i%2 == 0 // each mode changes the pump
			if err := r.d.Write(t.Context(), "pump-1", "command", value.Bool(want)); err != nil {
				t.Fatalf("Write(pump-1.command, %v) over %s = %v", want, mode, err)
			}
			rd, err = r.d.Read(t.Context(), "pump-1", "command")
			if err != nil || !rd.Value.Equal(value.Bool(want)) {
				t.Fatalf("pump-1.command read back over %s = %+v, %v; want %v", mode, rd, err, want)
			}
		})
	}
	t.Run("wrong pin", func(t *testing.T) {
		wrong := strings.Repeat("cd", 32)
		r := startDriverWith(t, config("SignAndEncrypt", wrong), devs)
		err := r.d.Health(t.Context())
		if !errors.Is(err, ErrThumbprintMismatch) || !strings.Contains(err.Error(), p.Thumbprint) {
			t.Fatalf("Health with a wrong pin = %v; want a mismatch naming %s", err, p.Thumbprint)
		}
		if werr := r.d.Write(t.Context(), "pump-1", "command", value.Bool(true)); devices.Classify(werr) != devices.OutcomeOffline {
			t.Errorf("Write to a server whose pin does not match = %v; want offline", werr)
		}
	})
}
