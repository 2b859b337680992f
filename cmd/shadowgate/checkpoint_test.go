package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

// journal verify --checkpoint proves a copy of the journal extends a
// checkpoint taken earlier, and refuses one signed by another key or a copy
// changed since.
func TestJournalVerifyCheckpoint(t *testing.T) {
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "journal.key")
	signer, _, err := journal.CheckpointKey(keyPath, "shadowgate-test")
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(journal.Path(dir), journal.Options{Checkpoint: journal.CheckpointOptions{Signer: signer, Origin: "shadowgate/test", Every: 10}})
	if err != nil {
		t.Fatal(err)
	}
	var note string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; note == "" && ctx.Err() == nil; i++ {
		if _, err := j.Commit(ctx, runtime.Entry{Event: runtime.Event{Kind: runtime.KindObserved, Body: []byte(fmt.Sprintf(`{"i":%d}`, i))},
			Durability: runtime.Sync}); err != nil {
			t.Fatal(err)
		}
		evs, _ := j.Events(ctx, 0, 1000)
		for _, e := range evs {
			if e.Kind == runtime.KindCheckpoint {
				var b runtime.CheckpointBody
				if err := json.Unmarshal(e.Body, &b); err != nil {
					t.Fatal(err)
				}
				note = b.Note
			}
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	cpFile := filepath.Join(dir, "checkpoint.txt")
	if err := os.WriteFile(cpFile, []byte(note), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := shadowgate("journal", "verify", "--file", journal.Path(dir), "--checkpoint", cpFile, "--key", keyPath+".pub")
	if code != exitOK || !strings.Contains(out, ": extended") {
		t.Fatalf("verify --checkpoint = %d %q %q", code, out, errOut)
	}
	other := filepath.Join(t.TempDir(), "other.key")
	if _, _, err := journal.CheckpointKey(other, "shadowgate-test"); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = shadowgate("journal", "verify", "--file", journal.Path(dir), "--checkpoint", cpFile, "--key", other+".pub")
	if code != exitRefused || !strings.Contains(errOut, "signature") {
		t.Fatalf("verify with another key = %d %q", code, errOut)
	}
	code, _, errOut = shadowgate("journal", "verify", "--file", journal.Path(dir), "--checkpoint", cpFile)
	if code != exitUsage {
		t.Fatalf("verify --checkpoint without --key = %d %q", code, errOut)
	}
	code, out, errOut = shadowgate("journal", "verify", "--file", journal.Path(dir), "--key", keyPath+".pub")
	if code != exitOK || !strings.Contains(out, "each signed by the key") {
		t.Fatalf("verify --key = %d %q %q", code, out, errOut)
	}
	code, _, errOut = shadowgate("journal", "verify", "--file", journal.Path(dir), "--key", filepath.Join(dir, "no-such.pub"))
	if code != exitUsage || !strings.Contains(errOut, "no-such.pub") {
		t.Fatalf("verify with a missing key file = %d %q; want the file named", code, errOut)
	}
	// A file that never ends is not read to the end.
	code, _, errOut = shadowgate("journal", "verify", "--file", journal.Path(dir), "--checkpoint", "/dev/zero", "--key", keyPath+".pub")
	if code != exitRefused || !strings.Contains(errOut, "longer than") {
		t.Fatalf("verify --checkpoint /dev/zero = %d %q", code, errOut)
	}
}
