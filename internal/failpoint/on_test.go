//go:build failpoints

package failpoint_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/internal/failpoint"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       map[string]failpoint.Action
		wantErr    bool
	}{
		{name: "empty", spec: "", want: map[string]failpoint.Action{}},
		{name: "exit", spec: "act:after-executing=exit(86)",
			want: map[string]failpoint.Action{failpoint.ActAfterExecuting: {Kind: failpoint.Exit, Code: 86, Text: "exit(86)"}}},
		{name: "two, the second on its third hit", spec: " act:after-driver = panic ; journal:commit:before-write=error(disk on fire @ night)@3",
			want: map[string]failpoint.Action{
				failpoint.ActAfterDriver:     {Kind: failpoint.Panic, Message: "failpoint", Text: "panic"},
				failpoint.JournalBeforeWrite: {Kind: failpoint.Fail, Message: "disk on fire @ night", Nth: 3, Text: "error(disk on fire @ night)@3"},
			}},
		{name: "sleep", spec: "outbox:ack=sleep(250ms)",
			want: map[string]failpoint.Action{failpoint.OutboxAck: {Kind: failpoint.Sleep, Sleep: 250 * time.Millisecond, Text: "sleep(250ms)"}}},
		{name: "unknown name", spec: "act:before-the-act=exit(1)", wantErr: true},
		{name: "no action", spec: "act:after-driver", wantErr: true},
		{name: "unknown verb", spec: "act:after-driver=explode", wantErr: true},
		{name: "exit without a code", spec: "act:after-driver=exit", wantErr: true},
		{name: "exit code out of range", spec: "act:after-driver=exit(200)", wantErr: true},
		{name: "error without a message", spec: "act:after-driver=error()", wantErr: true},
		{name: "bad duration", spec: "act:after-driver=sleep(soon)", wantErr: true},
		{name: "hit zero", spec: "act:after-driver=panic@0", wantErr: true},
		{name: "unclosed", spec: "act:after-driver=error(x", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := failpoint.Parse(tc.spec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse(%q) error = %v, want error %v", tc.spec, err, tc.wantErr)
			}
			if err == nil {
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("Parse(%q) = %+v, want %+v", tc.spec, got, tc.want)
				}
			}
		})
	}
}

// TestInjectUnarmed: a process whose environment arms nothing passes every
// point. (Armed points are exercised through the binary, by the crash
// matrix in cmd/shadowgate.)
func TestInjectUnarmed(t *testing.T) {
	for _, name := range failpoint.All {
		if err := failpoint.Inject(name); err != nil {
			var fe *failpoint.Error
			if errors.As(err, &fe) {
				t.Skipf("the environment arms %s", fe.Name)
			}
			t.Errorf("Inject(%s) = %v, want nil", name, err)
		}
	}
}
