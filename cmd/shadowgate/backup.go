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
	if holder := heldBy(path); holder != nil {
		fmt.Fprintf(stderr, "shadowgate journal restore: %v; stop the gateway first (systemctl stop shadowgate)\n", holder)
		return exitRefused
	}
	if code := verifyCopy(from, stdout, stderr); code != exitOK {
		fmt.Fprintf(stderr, "shadowgate journal restore: %s does not verify; nothing was changed\n", from)
		return code
	}
	b, err := os.ReadFile(from)
	if err != nil {
		fmt.Fprintln(stderr, "shadowgate journal restore:", err)
		return exitUnavailable
	}
	tmp := path + ".restoring"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		fmt.Fprintln(stderr, "shadowgate journal restore:", err)
		return exitUnavailable
	}
	if _, err := os.Stat(path); err == nil {
		kept := path + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(path, kept); err != nil {
			_ = os.Remove(tmp)
			fmt.Fprintln(stderr, "shadowgate journal restore:", err)
			return exitUnavailable
		}
		fmt.Fprintf(stdout, "the journal it replaces is kept as %s\n", kept)
	}
	if err := os.Rename(tmp, path); err != nil {
		fmt.Fprintln(stderr, "shadowgate journal restore:", err)
		return exitUnavailable
	}
	fmt.Fprintf(stdout, "restored %s from %s\n", path, from)
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
