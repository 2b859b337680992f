package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

func TestApprovalsCommand(t *testing.T) {
	parts, base := startDemo(t)
	ask := func(id string) string {
		t.Helper()
		obs, err := parts.Engine.Do(context.Background(), runtime.Command{Principal: "mqtt:demo", Origin: "test", RequestID: id,
			Device: "valve-1", Capability: "open", Value: value.Bool(id == "a")})
		if err != nil || obs.Kind != runtime.ApprovalRequest {
			t.Fatalf("command: %+v %v", obs, err)
		}
		return obs.Approval.ID
	}
	cli := func(stdin string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(args, strings.NewReader(stdin), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	id := ask("a")
	code, out, errOut := cli("greenhouse-demo\n", "approvals", "list", "--url", base, "--user", "demo")
	if code != exitOK || !strings.Contains(out, id) || !strings.Contains(out, "valve-1.open = true") || !strings.Contains(out, "mqtt:demo via test") {
		t.Fatalf("list = %d %q %q", code, out, errOut)
	}
	if code, _, errOut := cli("greenhouse-demo\n", "approvals", "deny", id, "--url", base, "--user", "demo"); code != exitUsage || !strings.Contains(errOut, "--reason") {
		t.Fatalf("deny without a reason = %d %q", code, errOut)
	}
	code, out, errOut = cli("greenhouse-demo\n", "approvals", "approve", id, "--url", base, "--user", "demo")
	if code != exitOK || !strings.Contains(out, id+" (valve-1.open = true): approved") {
		t.Fatalf("approve = %d %q %q", code, out, errOut)
	}
	if code, _, errOut := cli("greenhouse-demo\n", "approvals", "approve", id, "--url", base, "--user", "demo"); code != exitRefused || !strings.Contains(errOut, "not pending") {
		t.Fatalf("approving twice = %d %q", code, errOut)
	}
	if code, _, errOut := cli("wrong\n", "approvals", "list", "--url", base, "--user", "demo"); code != exitUnavailable || !strings.Contains(errOut, "refused") {
		t.Fatalf("a wrong password = %d %q", code, errOut)
	}
	if code, _, _ := cli("", "approvals", "list", "--url", base); code == exitOK {
		t.Fatal("listing without credentials worked")
	}

	code, out, _ = cli("correct horse battery\n", "hash-password")
	if code != exitOK || bcrypt.CompareHashAndPassword([]byte(strings.TrimSpace(out)), []byte("correct horse battery")) != nil {
		t.Fatalf("hash-password = %d %q", code, out)
	}
	if code, _, errOut := cli("short\n", "hash-password"); code != exitUsage || !strings.Contains(errOut, "at least 8") {
		t.Fatalf("hash-password of a short one = %d %q", code, errOut)
	}
	if code, out, _ := cli("", "hash-token"); code != exitOK || !strings.Contains(out, "token_hash: ") {
		t.Fatalf("hash-token = %d %q", code, out)
	}
}

// TestJournalCommandsThroughTheAPI reads the journal of a running gateway,
// which holds its file, through the gateway's API.
func TestJournalCommandsThroughTheAPI(t *testing.T) {
	dir := t.TempDir()
	parts, base := startDemoAt(t, dir)
	if _, err := parts.Engine.Read(context.Background(), "test", "tank-1", "level"); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run([]string{"journal", "verify", "--state-dir", dir}, strings.NewReader(""), &out, &errOut)
	if code != exitUnavailable || !strings.Contains(errOut.String(), "in use by process") || !strings.Contains(errOut.String(), "--token-file or --user") {
		t.Fatalf("verify of a held journal without credentials = %d %q", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	code = run([]string{"journal", "verify", "--state-dir", dir, "--url", base, "--user", "demo"}, strings.NewReader("greenhouse-demo\n"), &out, &errOut)
	if code != exitOK || !strings.Contains(out.String(), "through "+base) || !strings.Contains(out.String(), ": ok") {
		t.Fatalf("verify through the API = %d %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	code = run([]string{"journal", "tail", "-n", "3", "--state-dir", dir, "--url", base, "--user", "demo"}, strings.NewReader("greenhouse-demo\n"), &out, &errOut)
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); code != exitOK || len(lines) != 3 || !strings.Contains(lines[0], `"seq":`) {
		t.Fatalf("tail through the API = %d %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	code = run([]string{"journal", "export", "--kind", "observed", "--device", "tank-1", "--state-dir", dir, "--url", base, "--user", "demo"},
		strings.NewReader("greenhouse-demo\n"), &out, &errOut)
	if code != exitOK || !strings.Contains(out.String(), `"kind":"observed"`) || strings.Contains(out.String(), `"kind":"device_online"`) {
		t.Fatalf("export through the API = %d %q %q", code, out.String(), errOut.String())
	}
}
