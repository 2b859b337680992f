package mqtt

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/gateway/command"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/runtimetest"
)

// failingDo is an engine whose commands fail with err, as a journal that
// cannot be written would make them.
type failingDo struct {
	command.Engine
	err error
}

func (f failingDo) Do(context.Context, runtime.Command) (runtime.Observation, error) {
	return runtime.Observation{}, f.err
}

// A failure that is not the client's doing reaches it as a public message
// with an error id; the log has the id and the detail, the reply does not
// have the detail.
func TestInternalFailureRepliesWithAnErrorIDAndLogsTheDetail(t *testing.T) {
	const detail = "committing event 41: write /var/lib/shadowgate/journal.db: input/output error"
	var logs runtimetest.LogBuffer
	gw := startGW(t, gwOptions{logger: slog.New(slog.NewTextHandler(&logs, nil)),
		wrap: func(e command.Engine) command.Engine { return failingDo{e, errors.New(detail)} }})
	alice := gw.mustClient("alice", "alice-password")
	replies := subscribe(t, alice, prefix+"reply/valve-1/open")
	publish(t, alice, prefix+"cmd/valve-1/open", 1, `{"value": true, "id": "int-1"}`)
	m := next(t, replies, "the reply")
	for _, secret := range []string{"/var/lib", "input/output", "committing event"} {
		if strings.Contains(string(m.Payload()), secret) {
			t.Errorf("the reply carries the internal detail %q: %s", secret, m.Payload())
		}
	}
	var r command.Reply
	if err := json.Unmarshal(m.Payload(), &r); err != nil {
		t.Fatal(err)
	}
	if r.ID != "int-1" || r.Outcome != command.OutcomeFailed || r.Why != "the command could not be carried out" ||
		!regexp.MustCompile(`^err-[0-9a-f]{12}$`).MatchString(r.ErrorID) {
		t.Fatalf("reply = %s; want failed with a public why and an error id", m.Payload())
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, r.ErrorID) {
			line = l
		}
	}
	if !strings.Contains(line, "input/output error") || !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "mqtt:alice") {
		t.Errorf("no error line with id %s, the detail and the principal; log:\n%s", r.ErrorID, logs.String())
	}
	if n := gw.g.Count("write", "valve-1", "open"); n != 0 {
		t.Errorf("the valve was written %d times", n)
	}
}
