package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

func shadowgate(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// writeJournal leaves a closed journal of n events in dir.
func writeJournal(t *testing.T, dir string, n int) {
	t.Helper()
	j, err := journal.Open(journal.Path(dir), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		dev := "tank-1"
		kind := runtime.KindObserved
		if i%3 == 0 {
			dev, kind = "valve-1", runtime.KindActed
		}
		_, err := j.Commit(context.Background(), runtime.Entry{Event: runtime.Event{Kind: kind, Device: dev,
			Body: []byte(fmt.Sprintf(`{"i":%d}`, i))}, Durability: runtime.Sync})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestJournalCommands(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, 12)

	code, out, errOut := shadowgate("journal", "verify", "--state-dir", dir)
	if code != exitOK || !strings.Contains(out, "12 events, seq 1 to 12, 0 records: ok") || !strings.Contains(out, "pending approvals: 0") {
		t.Fatalf("verify = %d %q %q", code, out, errOut)
	}

	code, out, _ = shadowgate("journal", "export", "--state-dir", dir, "--since", "3", "--kind", "acted", "--device", "valve-1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 3 {
		t.Fatalf("export = %d, %d lines:\n%s", code, len(lines), out)
	}
	var ev runtime.Event
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil || ev.Seq != 4 || ev.Kind != runtime.KindActed || ev.Hash == "" || string(ev.Body) != `{"i":3}` {
		t.Fatalf("first exported line %s = %+v, %v", lines[0], ev, err)
	}

	code, out, _ = shadowgate("journal", "tail", "--state-dir", dir, "-n", "2")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != exitOK || len(lines) != 2 || !strings.Contains(lines[1], `"seq":12`) {
		t.Fatalf("tail -n 2 = %d:\n%s", code, out)
	}

	// A running gateway holds the file: the commands say so, naming it.
	j, err := journal.Open(journal.Path(dir), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut = shadowgate("journal", "verify", "--state-dir", dir)
	if code != exitUnavailable || !strings.Contains(errOut, fmt.Sprintf("in use by process %d", os.Getpid())) {
		t.Fatalf("verify of a held journal = %d %q", code, errOut)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// Someone deletes the oldest events (the store keeps them in blocks,
	// under the first's sequence; here one block holds them all): verify
	// names the first missing one and exits 3.
	db, err := bolt.Open(journal.Path(dir), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("journal")).Delete(binary.BigEndian.AppendUint64(nil, 1))
	})
	_ = db.Close()
	code, out, _ = shadowgate("journal", "verify", "--state-dir", dir)
	if code != exitRefused || !strings.Contains(out, "BAD at seq 1: the head names event") {
		t.Fatalf("verify of a journal missing its oldest events = %d %q", code, out)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"journal"}, exitUsage, "usage: shadowgate journal"},
		{[]string{"journal", "shred"}, exitUsage, `unknown command "shred"`},
		{[]string{"journal", "verify", "--state-dir", t.TempDir()}, exitUnavailable, "no journal at"},
		{[]string{"journal", "verify", "--state-dir", dir, "--config", "x.yaml"}, exitUsage, "not both"},
	} {
		code, out, errOut := shadowgate(tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("shadowgate %q = %d %q %q; want %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}
