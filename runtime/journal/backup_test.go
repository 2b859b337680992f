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
// disk should take past when its write was due makes Err report the
// journal stalled; readings waiting out the flush interval do not.
func TestWedgedWriterIsNotHealthy(t *testing.T) {
	j := open(t, tempPath(t), Options{FlushInterval: time.Minute})
	if err := j.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		readingsFor time.Duration // how long the oldest reading has waited
		syncFor     time.Duration // how long a sync commit has waited; 0: none
		wantStalled bool
	}{
		{"readings within the interval", 50 * time.Second, 0, false},
		{"readings a little past it", time.Minute + 10*time.Second, 0, false},
		{"readings long past it", time.Minute + stallAfter + 5*time.Second, 0, true},
		{"a sync commit past the bound", 10 * time.Second, stallAfter + 5*time.Second, true},
		{"a sync commit within it", 50 * time.Second, 5 * time.Second, false},
	} {
		j.mu.Lock()
		j.queue = append(j.queue, item{})
		j.queueFrom = time.Now().Add(-c.readingsFor)
		if c.syncFor > 0 {
			j.syncs, j.urgentFrom = 1, time.Now().Add(-c.syncFor)
		}
		j.mu.Unlock()
		err := j.Err()
		j.mu.Lock()
		j.queue, j.syncs = j.queue[:0], 0 // nothing to write at Close
		j.mu.Unlock()
		if errors.Is(err, ErrStalled) != c.wantStalled {
			t.Errorf("%s: Err = %v, want stalled %v", c.name, err, c.wantStalled)
		}
	}
}
