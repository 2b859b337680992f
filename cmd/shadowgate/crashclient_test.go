package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/shadowgate/shadowgate/runtime"
)

// upstream sends the command req-1 (valve-1.open true) through the site
// broker, once the uplink listens there, and waits for its reply. It
// returns the act the reply shows, and false if no reply came: the gateway
// went down.
func (c *matrixCell) upstream(ctx context.Context) ([]string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	const prefix = "shadowgate/matrix/"
	c.site.waitSubscribed(ctx, prefix+"cmd/valve-1/open")
	replies := make(chan matrixReply, 16)
	o := paho.NewClientOptions().AddBroker("tcp://" + c.site.addr).SetClientID("matrix-client").
		SetProtocolVersion(4).SetAutoReconnect(false)
	mc := paho.NewClient(o)
	if err := waitToken(ctx, mc.Connect()); err != nil {
		c.t.Fatalf("connecting to the site broker: %v", err)
	}
	defer mc.Disconnect(100)
	err := waitToken(ctx, mc.Subscribe(prefix+"reply/#", 1, func(_ paho.Client, msg paho.Message) {
		var r struct {
			matrixReply
			ID string `json:"id"`
		}
		if json.Unmarshal(msg.Payload(), &r) == nil && r.ID == "req-1" {
			select {
			case replies <- r.matrixReply:
			default:
			}
		}
	}))
	if err != nil {
		c.t.Fatalf("subscribing on the site broker: %v", err)
	}
	payload := fmt.Sprintf(`{"value":true,"id":"req-1","reason":"crash matrix","expires":%q}`, time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano))
	if err := waitToken(ctx, mc.Publish(prefix+"cmd/valve-1/open", 1, false, payload)); err != nil {
		c.t.Fatalf("publishing upstream: %v", err)
	}
	select {
	case r := <-replies:
		if id := r.acted(); id != "" {
			return []string{id}, true
		}
		return nil, true
	case <-c.p.done:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
}

// login logs user in through the console's form, as a browser does. It
// returns false if the gateway did not answer to the end.
func (c *matrixCell) login(ctx context.Context, user string) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	jar, err := cookiejar.New(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/login", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	page, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	m := feCSRFMeta.FindSubmatch(page)
	if err != nil || m == nil {
		return false
	}
	form := url.Values{"user": {user}, "password": {user + "-password"}, "_csrf": {string(m[1])}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return false
	}
	if resp.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("logging in as %s = %d %s, want 303", user, resp.StatusCode, body)
	}
	return true
}

// startPlan starts the plan "two" as request req-1 and returns its run,
// "" if a run of it has not ended, or false if the gateway did not answer.
func (c *matrixCell) startPlan(ctx context.Context) (string, bool) {
	status, body, err := c.post(ctx, "appr-ci", "/api/v1/plans/two/start", `{"id":"req-1","reason":"crash matrix"}`)
	if err != nil {
		return "", false
	}
	switch status {
	case http.StatusOK, http.StatusAccepted:
	case http.StatusConflict:
		return "", true
	default:
		c.t.Fatalf("starting plan two = %d %s", status, body)
	}
	var rec runtime.RunRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		c.t.Fatalf("starting plan two: %v: %s", err, body)
	}
	return rec.ID, true
}

// matrixReply is the API's answer to a command.
type matrixReply struct {
	Outcome  string            `json:"outcome"`
	Why      string            `json:"why"`
	Replayed bool              `json:"replayed"`
	Approval *runtime.Approval `json:"approval"`
	Receipt  *runtime.Receipt  `json:"receipt"`
}

// acted returns the attempt of an acted reply, or "".
func (r matrixReply) acted() string {
	if r.Outcome == "acted" && r.Receipt != nil {
		return r.Receipt.Attempt
	}
	return ""
}

// post sends a JSON body with a bearer token; an error means no answer.
func (c *matrixCell) post(ctx context.Context, token, path, body string) (int, []byte, error) {
	return c.do(ctx, http.MethodPost, token, path, body)
}

func (c *matrixCell) do(ctx context.Context, method, token, path, body string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token+"-test-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// command sends a command; an error means the gateway did not answer.
func (c *matrixCell) command(ctx context.Context, token, device, capability, value, id string) (matrixReply, error) {
	status, body, err := c.post(ctx, token, "/api/v1/commands",
		fmt.Sprintf(`{"device":%q,"capability":%q,"value":%s,"id":%q,"reason":"crash matrix"}`, device, capability, value, id))
	if err != nil {
		return matrixReply{}, err
	}
	var r matrixReply
	if status != http.StatusOK && status != http.StatusAccepted {
		return r, fmt.Errorf("POST /api/v1/commands = %d %s", status, body)
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("POST /api/v1/commands: %w: %s", err, body)
	}
	return r, nil
}

// awaitCommand sends a command until the gateway takes it: just after a
// start, its devices may not be registered yet.
func (c *matrixCell) awaitCommand(ctx context.Context, token, device, capability, value, id string) matrixReply {
	c.t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := c.command(ctx, token, device, capability, value, id)
		if err == nil {
			return r
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			c.t.Fatalf("%s.%s %s was never taken: %v", device, capability, id, err)
		}
	}
}

func (c *matrixCell) approvals(ctx context.Context) ([]runtime.Approval, error) {
	status, body, err := c.do(ctx, http.MethodGet, "carol-ci", "/api/v1/approvals", "")
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/approvals = %d %s", status, body)
	}
	var out []runtime.Approval
	return out, json.Unmarshal(body, &out)
}

func (c *matrixCell) pendingApprovals(ctx context.Context) []string {
	c.t.Helper()
	aps, err := c.approvals(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for _, a := range aps {
		if a.Status == runtime.ApprovalPending {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// awaitRun waits until a run has ended, as the API's events show it, and
// returns the attempts of its acted events. It returns false if the
// gateway stopped answering first.
func (c *matrixCell) awaitRun(ctx context.Context, run string) ([]string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		status, body, err := c.do(ctx, http.MethodGet, "carol-ci", "/api/v1/events?limit=1000", "")
		if err != nil {
			return nil, false
		}
		if status != http.StatusOK {
			c.t.Fatalf("GET /api/v1/events = %d %s", status, body)
		}
		var evs []runtime.Event
		if err := json.Unmarshal(body, &evs); err != nil {
			c.t.Fatalf("GET /api/v1/events: %v", err)
		}
		ended, acted := false, []string(nil)
		for _, ev := range evs {
			switch {
			case ev.Run != run:
			case ev.Kind == runtime.KindEnded:
				ended = true
			case ev.Kind == runtime.KindActed:
				var rc runtime.Receipt
				if json.Unmarshal(ev.Body, &rc) == nil {
					acted = append(acted, rc.Attempt)
				}
			}
		}
		if ended {
			return acted, true
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// proc is a running shadowgate serve. One goroutine owns it: it reads the
// log to its end, then waits for the process, then closes done.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	code int

	// mu guards all; grew is signalled (without blocking) on each line.
	mu   sync.Mutex
	all  []string
	grew chan struct{}
}

// startProc starts shadowgate serve with env added to its environment.
// The test's cleanup kills it if it still runs.
func startProc(ctx context.Context, t testing.TB, bin, config string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", config, "--log-level", "debug")
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), grew: make(chan struct{}, 1)}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.all = append(p.all, sc.Text())
			p.mu.Unlock()
			select {
			case p.grew <- struct{}{}:
			default:
			}
		}
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.all)
}

// wait waits for the process to end, at most 30s, and returns its exit
// code.
func (p *proc) wait(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case <-p.done:
		return p.code
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
		return -1
	}
}

// awaitSettled waits until every actuator the start found locked (an
// attempt of unknown outcome) was read back: reconciled, or left locked
// until an admin resolves it. A stop before then would cut the read-back
// short and leave the lock, rightly, but not what the matrix looks at.
func (p *proc) awaitSettled(ctx context.Context, t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	restored := regexp.MustCompile(`msg="restored from the journal".* locked_actuators=(\d+)`)
	for {
		ls := p.lines()
		locked, settled := -1, 0
		for _, l := range ls {
			if m := restored.FindStringSubmatch(l); m != nil {
				locked, _ = strconv.Atoi(m[1])
			}
			if strings.Contains(l, "msg=reconciled") || strings.Contains(l, `msg="actuator stays locked"`) {
				settled++
			}
		}
		if locked >= 0 && settled >= locked {
			return
		}
		select {
		case <-p.grew:
		case <-p.done:
			t.Fatalf("the gateway exited while it read back what it found locked; its log:\n%s", strings.Join(ls, "\n"))
		case <-ctx.Done():
			t.Fatalf("%d actuators locked at start, %d read back: %v; the log:\n%s", locked, settled, ctx.Err(), strings.Join(ls, "\n"))
		}
	}
}

// awaitLine waits for a log line that holds sub, at most 30s. It returns
// false if the process ended first.
func (p *proc) awaitLine(ctx context.Context, sub string) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if slices.ContainsFunc(p.lines(), func(l string) bool { return strings.Contains(l, sub) }) {
			return true
		}
		select {
		case <-p.grew:
		case <-p.done:
			return slices.ContainsFunc(p.lines(), func(l string) bool { return strings.Contains(l, sub) })
		case <-ctx.Done():
			return false
		}
	}
}

// consoleBase waits for the console to serve and returns its address.
func (p *proc) consoleBase(ctx context.Context, t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	re := regexp.MustCompile(`msg="console serving".* address=(\S+)`)
	for {
		for _, l := range p.lines() {
			if m := re.FindStringSubmatch(l); m != nil {
				return "http://" + m[1]
			}
		}
		select {
		case <-p.grew:
		case <-p.done:
			t.Fatalf("the gateway exited before its console served; its log:\n%s", strings.Join(p.lines(), "\n"))
		case <-ctx.Done():
			t.Fatalf("the console did not serve: %v; the log:\n%s", ctx.Err(), strings.Join(p.lines(), "\n"))
		}
	}
}
