package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/shadowgate/shadowgate/runtime/journal"
)

const backupUsage = `usage:
  shadowgate journal backup [flags] FILE    a consistent copy of the journal, taken while the
                                            gateway runs (through its API, as an admin) or not;
                                            the copy is verified before it is kept
  shadowgate journal restore [flags] FILE   put a verified copy in place of the journal; refused
                                            while a gateway holds the state directory
flags: --state-dir D | --config F, and for a backup while a gateway runs
       --url U --token-file F | --user U (password from SHADOWGATE_PASSWORD or standard input)
`

// journalBackup writes a consistent copy of the journal to a file, and
// keeps it only once it verifies.
func journalBackup(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("journal backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "", "state directory (default /var/lib/shadowgate)")
	configPath := fs.String("config", "", "take the state directory from this configuration")
	apiURL := fs.String("url", "http://127.0.0.1:8080", "a running gateway's console")
	tokenFile := fs.String("token-file", "", "an admin's bearer token for the API")
	user := fs.String("user", "", "log in to the API as this admin")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, backupUsage)
		return exitUsage
	}
	out := fs.Arg(0)
	dir, code := resolveStateDir(*stateDir, *configPath, stderr)
	if code != exitOK {
		return code
	}
	path := journal.Path(dir)
	tmp, err := os.CreateTemp(filepath.Dir(out), ".shadowgate-backup-*")
	if err != nil {
		fmt.Fprintln(stderr, "shadowgate journal backup:", err)
		return exitUnavailable
	}
	defer os.Remove(tmp.Name()) // gone once renamed
	var n int64
	if holder := heldBy(path); holder != nil {
		if *tokenFile == "" && *user == "" && os.Getenv("SHADOWGATE_TOKEN") == "" {
			tmp.Close()
			fmt.Fprintf(stderr, "shadowgate journal backup: %v; to copy it through the gateway's API, give --token-file or --user (and --url)\n", holder)
			return exitUnavailable
		}
		a, err := newAPIClient(*apiURL, *tokenFile, *user, stdin)
		if err != nil {
			tmp.Close()
			fmt.Fprintf(stderr, "shadowgate journal backup: %v, and its API at %s cannot be used: %v\n", holder, *apiURL, err)
			return exitCode(err)
		}
		n, err = a.download("/api/v1/journal/backup", tmp)
		if err != nil {
			tmp.Close()
			fmt.Fprintln(stderr, "shadowgate journal backup:", err)
			return exitUnavailable
		}
	} else {
		code := withJournal(path, stderr, func(j *journal.DB) int {
			var err error
			if n, err = j.Backup(tmp); err != nil {
				fmt.Fprintln(stderr, "shadowgate journal backup:", err)
				return exitUnavailable
			}
			return exitOK
		})
		if code != exitOK {
			tmp.Close()
			return code
		}
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		fmt.Fprintln(stderr, "shadowgate journal backup:", err)
		return exitUnavailable
	}
	// A copy is kept only once it verifies.
	if code := verifyCopy(tmp.Name(), stdout, stderr); code != exitOK {
		fmt.Fprintln(stderr, "shadowgate journal backup: the copy does not verify; nothing was kept")
		return code
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		fmt.Fprintln(stderr, "shadowgate journal backup:", err)
		return exitUnavailable
	}
	fmt.Fprintf(stdout, "backed up %d bytes of %s to %s\n", n, path, out)
	return exitOK
}

// journalRestore puts a verified copy in place of the journal, keeping the
// journal it replaces beside it. A running gateway's journal is never
// replaced.
func journalRestore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("journal restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "", "state directory (default /var/lib/shadowgate)")
	configPath := fs.String("config", "", "take the state directory from this configuration")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, backupUsage)
		return exitUsage
	}
	from := fs.Arg(0)
	dir, code := resolveStateDir(*stateDir, *configPath, stderr)
	if code != exitOK {
		return code
	}
	path := journal.Path(dir)
	// The state directory is held for the whole restore: a gateway that
	// starts meanwhile (systemd restarting it) waits, or fails, and never
	// opens the journal being replaced.
	var lock *journal.DB
	var err error
	if _, serr := os.Stat(path); serr == nil {
		lock, err = journal.Open(path, journal.Options{ReadOnly: true, LockTimeout: 300 * time.Millisecond})
	}
	var le *journal.LockedError
	switch {
	case errors.As(err, &le):
		fmt.Fprintf(stderr, "shadowgate journal restore: %v (systemctl stop shadowgate)\n", le)
		return exitRefused
	case err != nil && !errors.Is(err, os.ErrNotExist):
		fmt.Fprintln(stderr, "shadowgate journal restore:", err)
		return exitUnavailable
	}
	if code := verifyCopy(from, stdout, stderr); code != exitOK {
		if lock != nil {
			_ = lock.Close()
		}
		fmt.Fprintf(stderr, "shadowgate journal restore: %s does not verify; nothing was changed\n", from)
		return code
	}
	code = replaceJournal(path, from, lock, stdout, stderr)
	return code
}

// replaceJournal copies from to path, owned as the state directory is (a
// restore run as root must leave a file the service user can open), synced
// before it replaces anything, and keeps the journal it replaces beside
// it. lock, if not nil, is the replaced journal held open, closed only
// once the new one is in place.
func replaceJournal(path, from string, lock *journal.DB, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		if lock != nil {
			_ = lock.Close()
		}
		fmt.Fprintln(stderr, "shadowgate journal restore:", err)
		return exitUnavailable
	}
	src, err := os.Open(from)
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	tmp := path + ".restoring"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail(err)
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = chownLike(dst, filepath.Dir(path))
	}
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fail(err)
	}
	stamp := ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
	if _, err := os.Stat(path); err == nil {
		kept := path + stamp
		if err := os.Rename(path, kept); err != nil {
			_ = os.Remove(tmp)
			return fail(err)
		}
		fmt.Fprintf(stdout, "the journal it replaces is kept as %s\n", kept)
	}
	// The replaced journal's log goes with it: the copy's store does not
	// continue it, and a start would find them disagree.
	if logDir := journal.LogDir(path); dirExists(logDir) {
		kept := logDir + stamp
		if err := os.Rename(logDir, kept); err != nil {
			_ = os.Remove(tmp)
			return fail(err)
		}
		fmt.Fprintf(stdout, "its log is kept as %s\n", kept)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // the renames themselves survive a power cut
		_ = d.Close()
	}
	if lock != nil {
		_ = lock.Close()
	}
	fmt.Fprintf(stdout, "restored %s from %s\n", path, from)
	fmt.Fprintln(stdout, "what was journaled after the copy was taken (acts, approvals, rules, locks) is not in it;",
		"the signing key journal.key and the first admin's hash stay as they are in the state directory")
	return exitOK
}

// verifyCopy verifies a journal file that no gateway holds.
func verifyCopy(path string, stdout, stderr io.Writer) int {
	return journalVerify(context.Background(), path, nil, "", stdout, stderr)
}

// download GETs path into w, an admin's request.
func (a *apiClient) download(path string, w io.Writer) (int64, error) {
	req, err := http.NewRequest(http.MethodGet, a.base+path, nil)
	if err != nil {
		return 0, err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	c := *a.c
	c.Timeout = 0 // a large journal takes its time; the server bounds nothing here
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("the gateway answered %s: %s", resp.Status, body)
	}
	return io.Copy(w, resp.Body)
}

// chownLike gives f the owner and group of dir, when they differ from its
// own (a restore run as root in a directory the service user owns).
func chownLike(f *os.File, dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := f.Chown(int(sys.Uid), int(sys.Gid)); err != nil && !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("giving the restored journal the state directory's owner: %w", err)
	}
	return nil
}

func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
