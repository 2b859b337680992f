package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/shadowgate/shadowgate/gateway"
	"github.com/shadowgate/shadowgate/gateway/command"
)

// TestConsoleApprovalInABrowser drives the console in Debian's Chromium:
// it runs the demo gateway on free ports, logs in, sends an MQTT command
// that needs approval, sees the request appear without a reload, approves
// it, and sees the confirmed receipt appear live, on a desk-sized window
// and then at phone size.
func TestConsoleApprovalInABrowser(t *testing.T) {
	chromium := needTool(t, "chromium")
	var err error
	parts, base := startDemo(t)
	// An MQTT client that sends the commands and collects the replies.
	replies := make(chan command.Reply, 8)
	o := paho.NewClientOptions().AddBroker("tcp://" + parts.MQTT.Addr("tcp")).SetClientID("browser-test").
		SetUsername(demoUser).SetPassword(demoPassword).SetProtocolVersion(4)
	mc := paho.NewClient(o)
	if tok := mc.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt connect: %v", tok.Error())
	}
	defer mc.Disconnect(50)
	const p = "shadowgate/demo/"
	mc.Subscribe(p+"reply/#", 1, func(_ paho.Client, m paho.Message) {
		var r command.Reply
		if json.Unmarshal(m.Payload(), &r) == nil {
			replies <- r
		}
	}).Wait()
	reply := func(what string) command.Reply {
		t.Helper()
		select {
		case r := <-replies:
			return r
		case <-time.After(15 * time.Second):
			t.Fatalf("no MQTT reply: %s", what)
		}
		return command.Reply{}
	}

	shots, err := os.MkdirTemp("", "shadowgate-console-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelB := chromedp.NewContext(allocCtx)
	defer cancelB()
	bctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	defer cancelT()
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(shots, name+".png")
		if err := os.WriteFile(path, png, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	poll := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			shot("failed-" + strings.ReplaceAll(what, " ", "-"))
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href`))
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}

	err = chromedp.Do(bctx, chromedp.Navigate(base+"/approvals"), chromedp.WaitVisible(chromedp.ID("user")),
		chromedp.SendKeys(chromedp.ID("user"), demoUser), chromedp.SendKeys(chromedp.ID("password"), demoPassword),
		chromedp.Submit(chromedp.ID("password")), chromedp.WaitVisible(chromedp.ID("live")))
	if err != nil {
		shot("login")
		t.Fatalf("logging in: %v", err)
	}
	poll("the live link", `document.getElementById("link").textContent === "live"`)

	for round, size := range [][2]int64{{1280, 900}, {390, 844}} {
		name := fmt.Sprintf("%dx%d", size[0], size[1])
		if err := chromedp.Do(bctx, chromedp.EmulateViewport(size[0], size[1])); err != nil {
			t.Fatal(err)
		}
		// The pump is switched on (its read-back confirms it), then the
		// valve closed (the flow, none, confirms it).
		target, topic, value := "pump-1.on", "pump-1/on", true
		if round == 1 {
			target, topic, value = "valve-1.open", "valve-1/open", false
		}
		id := "browser-" + name
		mc.Publish(p+"cmd/"+topic, 1, false, fmt.Sprintf(`{"value": %v, "id": %q, "reason": "browser test"}`, value, id)).Wait()
		if r := reply("the first reply"); r.Outcome != command.OutcomePendingApproval || r.Approval == nil {
			t.Fatalf("first reply = %+v", r)
		}
		// The request appears without a reload.
		poll("the request", `!!document.querySelector("article.approval button.approve")`)
		// The live part may be redrawn at any moment, so the page is read
		// and clicked with single scripts, never through a held node.
		text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("article.approval").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{target, "demo, over MQTT", "browser test", "Why it asks", "Expires", "Approve", "Deny"} {
			if !strings.Contains(text, want) {
				shot("request-" + name)
				t.Fatalf("the request at %s does not show %q:\n%s", name, want, text)
			}
		}
		shot("request-" + name)
		before := location()
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector("article.approval button.approve").click(), true`)); err != nil {
			t.Fatal(err)
		}
		// The receipt appears in place, live, once the act is done.
		poll("the receipt", `Array.from(document.querySelectorAll("article.answered")).some(a => a.textContent.includes("The act: acted and confirmed"))`)
		shot("receipt-" + name)
		if after := location(); after != before {
			t.Fatalf("approving left the page: %s, then %s", before, after)
		}
		if r := reply("the second reply"); r.ID != id || r.Outcome != command.OutcomeActed || r.Receipt == nil || r.Receipt.Confirmation != "confirmed" {
			t.Fatalf("second MQTT reply = %+v", r)
		}
		if got := parts.Engine.Approvals(); len(got) != 0 {
			t.Fatalf("approvals left pending: %+v", got)
		}
		// Nothing on the page overflows a phone's width.
		if w, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth`)); err != nil || w > float64(size[0])+1 {
			shot("overflow-" + name)
			t.Fatalf("the page is %v px wide at a %d px viewport (%v)", w, size[0], err)
		}
	}
	// Every page renders, at phone size too.
	for _, page := range []string{"/", "/devices", "/runs", "/journal?verify=1", "/policy"} {
		if err := chromedp.Do(bctx, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		text, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil || strings.Contains(text, "Internal Server Error") {
			t.Fatalf("%s: %v\n%s", page, err, text)
		}
		if page == "/journal?verify=1" && !strings.Contains(text, ": ok") {
			t.Fatalf("the journal page does not show the chain check:\n%s", text)
		}
		shot("page" + strings.NewReplacer("/", "-", "?", "-", "=", "-").Replace(page))
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/approvals"), chromedp.WaitVisible(chromedp.ID("live"))); err != nil {
		t.Fatal(err)
	}
	// Every control on the approvals page has a name a screen reader reads.
	unlabelled, err := chromedp.Run(bctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("input:not([type=hidden]), select")).filter(
		e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label")).length`))
	if err != nil || unlabelled != 0 {
		t.Fatalf("%d controls without a label (%v)", unlabelled, err)
	}
}

// startDemo runs the demo gateway in this process on free ports, without
// its scheduled plan, and returns its parts and the console's URL.
func startDemo(t *testing.T) (gateway.Parts, string) {
	t.Helper()
	return startDemoAt(t, "")
}

// startDemoAt runs the demo with its state in stateDir ("" for a
// temporary one removed at the end).
func startDemoAt(t *testing.T, stateDir string) (gateway.Parts, string) {
	t.Helper()
	cfg, _, err := load("", "sim")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MQTT.Listen = "127.0.0.1:0"
	cfg.Plans = nil // the demo's scheduled plan would ask too, at its own time
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan gateway.Parts, 1)
	done := make(chan error, 1)
	go func() {
		cfg.StateDir = stateDir
		done <- gateway.Run(ctx, gateway.Options{Config: cfg, Demo: stateDir == "", WebListener: ln,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
			Ready:  func(p gateway.Parts) { ready <- p }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	select {
	case parts := <-ready:
		return parts, "http://" + ln.Addr().String()
	case err := <-done:
		t.Fatalf("the gateway did not start: %v", err)
	}
	return gateway.Parts{}, ""
}
