package journal

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/runtime"
)

// TestBackupDoesNotHoldUpTheWriter: a backup whose reader stops reading
// does not keep a read transaction open, so commits that grow the file go
// on meanwhile; the copy, once read, opens and verifies.
func TestBackupDoesNotHoldUpTheWriter(t *testing.T) {
	j := open(t, tempPath(t), Options{})
	big := `{"pad":"` + strings.Repeat("x", 4000) + `"}`
	for range 20 {
		commit(t, j, runtime.Sync, ev(runtime.KindObserved, big), nil)
	}
	pr, pw := io.Pipe()
	backed := make(chan error, 1)
	var copied strings.Builder
	go func() {
		_, err := j.Backup(pw)
		pw.CloseWithError(err)
		backed <- err
	}()
	// The reader takes a few bytes and stops.
	buf := make([]byte, 100)
	if _, err := io.ReadFull(pr, buf); err != nil {
		t.Fatal(err)
	}
	copied.Write(buf)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			commit(t, j, runtime.Sync, ev(runtime.KindObserved, big), nil)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("commits that grow the file were held up by a stalled backup")
	}
	rest, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	copied.Write(rest)
	if err := <-backed; err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(path, []byte(copied.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c := open(t, path, Options{ReadOnly: true})
	rep, err := c.Verify(context.Background())
	if err != nil || !rep.OK || rep.Count < 20 {
		t.Fatalf("the copy verifies as %+v, %v; want at least the 20 events committed before the backup", rep, err)
	}
}

// TestWedgedWriterIsNotHealthy: what waits for the writer longer than a
// disk should take makes Err report the journal stalled.
func TestWedgedWriterIsNotHealthy(t *testing.T) {
	j := open(t, tempPath(t), Options{})
	if err := j.Err(); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	j.queue = append(j.queue, item{})
	j.queueFrom = time.Now().Add(-time.Minute)
	j.mu.Unlock()
	err := j.Err()
	j.mu.Lock()
	j.queue = j.queue[:0] // nothing to write at Close
	j.mu.Unlock()
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("Err with an item waiting a minute = %v, want ErrStalled", err)
	}
}
