package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/devices"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/value"
)

// What a reply says of an engine's error: the client's own mistakes and
// plain facts in words, anything else as a public message with an id that
// the log has with the detail.
func TestFailureIsPublic(t *testing.T) {
	const secret = "open /var/lib/shadowgate/journal.db: input/output error"
	for _, tc := range []struct {
		err     error
		want    string
		errorID bool
	}{
		{fmt.Errorf("plan %q: %w", "nope", runtime.ErrUnknownPlan), `plan "nope": unknown plan`, false},
		{runtime.ErrStopped, "the gateway is stopping", false},
		{context.Canceled, "the gateway is stopping", false},
		{fmt.Errorf("waiting: %w", context.DeadlineExceeded), "no outcome in time", false},
		{errors.New(secret), "the command could not be carried out", true},
	} {
		var logged bytes.Buffer
		d := &Dispatcher{Log: slog.New(slog.NewTextHandler(&logged, nil))}
		why, id := d.failure(tc.err, "mqtt:alice", "c-1")
		if !strings.HasPrefix(why, tc.want) || (id != "") != tc.errorID || strings.Contains(why, "/var/lib") {
			t.Errorf("failure(%v) = %q, %q; want %q, error id %v", tc.err, why, id, tc.want, tc.errorID)
		}
		if tc.errorID && (!strings.Contains(logged.String(), id) || !strings.Contains(logged.String(), "input/output error")) {
			t.Errorf("failure(%v) logged %q; want the id %s and the detail", tc.err, logged.String(), id)
		}
	}
}

// A reply that cannot be encoded still tells the client its outcome, with
// an error id the log has.
func TestEncodeReplyThatCannotBeEncoded(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	r := Reply{ID: "c-1", Outcome: OutcomeCompleted, Device: "tank-1", Capability: "level",
		Reading: &devices.Reading{Value: value.Number(math.NaN())}}
	var got Reply
	if err := json.Unmarshal(EncodeReply(log, r), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "c-1" || got.Outcome != OutcomeCompleted || got.Device != "tank-1" || got.ErrorID == "" || got.Reading != nil {
		t.Errorf("EncodeReply of a NaN reading = %+v", got)
	}
	if !strings.Contains(logged.String(), got.ErrorID) || !strings.Contains(logged.String(), "finite") {
		t.Errorf("log %q lacks the id %s or the detail", logged.String(), got.ErrorID)
	}
	if p := EncodeReply(log, Reply{ID: "a<b", Outcome: OutcomeActed}); string(p) != `{"id":"a<b","outcome":"acted"}` {
		t.Errorf("EncodeReply = %s; want compact JSON without HTML escapes", p)
	}
}
