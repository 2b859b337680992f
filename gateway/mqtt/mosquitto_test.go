package mqtt

// The broker's defences, met by mosquitto's own command-line clients: a
// peer that shares no code with the gateway.

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// mosquittoTool returns the path of one of mosquitto's clients, skipping
// without it unless SHADOWGATE_E2E=1 demands it.
func mosquittoTool(t *testing.T, name string) string {
	t.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	if os.Getenv("SHADOWGATE_E2E") == "1" {
		t.Fatalf("%s is not installed, and SHADOWGATE_E2E=1 needs this test to run (apt-get install mosquitto-clients)", name)
	}
	t.Skipf("%s is not installed (apt-get install mosquitto-clients); skipping", name)
	return ""
}

func TestMosquittoClientsMeetTheDefences(t *testing.T) {
	sub := mosquittoTool(t, "mosquitto_sub")
	rr := mosquittoTool(t, "mosquitto_rr")
	gw := startGW(t, gwOptions{})
	host, port, _ := net.SplitHostPort(gw.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(bin string, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, bin, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		return string(out), err
	}
	live := collect(t, gw.mustClient("carl", "carl-password"), "#")

	// A will on the gateway's topics, or one that would command, is refused
	// at connect, for 3.1.1 and v5 alike.
	for _, version := range []string{"mqttv311", "mqttv5"} {
		for _, will := range []string{prefix + "state/valve-1/open", prefix + "approvals/a-1", prefix + "cmd/valve-1/open"} {
			out, err := run(sub, "-V", version, "-u", "carl", "-P", "carl-password", "-i", "will-"+version, "-t", "site/#",
				"--will-topic", will, "--will-payload", `{"value":true,"id":"FORGED"}`, "--will-retain", "--will-qos", "1", "-C", "1", "-W", "3")
			if err == nil || !strings.Contains(strings.ToLower(out), "not auth") {
				t.Errorf("mosquitto_sub %s with a will on %s: %v, %q; want refused as not authorised", version, will, err, out)
			}
		}
	}

	// Alice's persistent session cannot be taken, nor alice kicked off.
	holder := exec.CommandContext(ctx, sub, "-h", host, "-p", port, "-u", "alice", "-P", "alice-password", "-V", "mqttv311",
		"-i", "plant-7", "-c", "-q", "1", "-t", prefix+"reply/#")
	var held bytes.Buffer
	holder.Stdout, holder.Stderr = &held, &held
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- holder.Wait() }()
	t.Cleanup(func() { _ = holder.Process.Kill(); <-exited })
	time.Sleep(300 * time.Millisecond) // let it connect
	for _, version := range []string{"mqttv311", "mqttv5"} {
		out, err := run(sub, "-V", version, "-u", "victor", "-P", "victor-password", "-i", "plant-7", "-t", prefix+"reply/#", "-C", "1", "-W", "3")
		if err == nil || !strings.Contains(strings.ToLower(out), "identifier") {
			t.Errorf("victor with alice's client id over %s: %v, %q; want identifier rejected", version, err, out)
		}
	}
	select {
	case err := <-exited:
		t.Fatalf("alice's client was kicked off: %v, %s", err, held.String())
	case <-time.After(200 * time.Millisecond):
	}

	// mosquitto_rr: a response topic of the client's own gets the reply; a
	// command topic as the response topic gets nothing there, and nothing acts.
	out, err := run(rr, "-V", "mqttv5", "-u", "alice", "-P", "alice-password", "-t", prefix+"cmd/tank-1/level",
		"-e", prefix+"inbox/rr", "-m", `{"id": "rr-read"}`, "-W", "10")
	if err != nil || !strings.Contains(out, `"outcome":"completed"`) || !strings.Contains(out, `"id":"rr-read"`) {
		t.Fatalf("mosquitto_rr with its own response topic: %v\n%s", err, out)
	}
	out, err = run(rr, "-V", "mqttv5", "-u", "alice", "-P", "alice-password", "-t", prefix+"cmd/valve-1/open",
		"-e", prefix+"cmd/heater-1/on", "-m", `{"value": true, "id": "rr-cmd"}`, "-W", "2")
	if err == nil || strings.Contains(out, "outcome") {
		t.Fatalf("mosquitto_rr with a command topic as its response topic got: %v\n%s", err, out)
	}
	refusals := live.containing(`"id":"rr-cmd"`)
	if len(refusals) != 1 || !strings.HasPrefix(refusals[0], prefix+"reply/valve-1/open ") || !strings.Contains(refusals[0], `"outcome":"refused"`) {
		t.Fatalf("the refusal on the default reply topic: %q", refusals)
	}
	if n := gw.g.Count("write", "valve-1", "open"); n != 0 {
		t.Fatalf("the valve was written %d times", n)
	}
	if got := live.containing("FORGED"); len(got) > 0 {
		t.Fatalf("forged messages: %q", got)
	}
}
