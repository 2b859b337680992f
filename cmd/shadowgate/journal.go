package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shadowgate/shadowgate/gateway"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
	"github.com/shadowgate/shadowgate/store"
)

const journalUsage = `usage: shadowgate journal <verify|export|tail|backup|restore> [flags]

  verify [--state-dir D | --config F | --file DB] [--key PUB [--checkpoint NOTE]]
                                                      walk the hash chain and check every record
                                                      against it; with --key, check the journal's
                                                      own signed checkpoints; with --checkpoint,
                                                      prove the journal extends one kept
                                                      elsewhere; exit 0 if ok, 3 if not
  export [--state-dir D | --config F] [--since N] [--kind K[,K]] [--device ID]
                                                      write events as JSON Lines
  tail   [--state-dir D | --config F] [-n N] [-f]     print the newest events; -f follows
  backup [flags] FILE                                 a consistent, verified copy, taken while
                                                      the gateway runs or not
  restore [--state-dir D | --config F] FILE           put a verified copy in place; refused while
                                                      a gateway holds the state directory

The state directory defaults to /var/lib/shadowgate. The journal file is
read while no gateway holds it. While one does, the commands go through
its API at --url (default http://127.0.0.1:8080) with --token-file F (or
SHADOWGATE_TOKEN) or --user U (password from SHADOWGATE_PASSWORD or
standard input); without those they say which process holds the file.
`

func journalCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, journalUsage)
		return exitUsage
	}
	switch args[0] {
	case "backup":
		return journalBackup(args[1:], stdin, stdout, stderr)
	case "restore":
		return journalRestore(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("journal "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "", "state directory (default /var/lib/shadowgate)")
	configPath := fs.String("config", "", "take the state directory from this configuration")
	apiURL := fs.String("url", "http://127.0.0.1:8080", "a running gateway's console, used while it holds the file")
	tokenFile := fs.String("token-file", "", "a bearer token for the API")
	user := fs.String("user", "", "log in to the API as this user")
	var since uint64
	var kinds, device, file, checkpoint, key string
	var n int
	var follow bool
	switch args[0] {
	case "verify":
		fs.StringVar(&file, "file", "", "a copy of a journal file to verify instead of the state directory's")
		fs.StringVar(&checkpoint, "checkpoint", "", "a signed checkpoint (the note, or its event as JSON) the journal must extend")
		fs.StringVar(&key, "key", "", "the checkpoints' public key, or a file holding it (journal.key.pub in the state directory)")
	case "export":
		fs.Uint64Var(&since, "since", 0, "export events after this sequence")
		fs.StringVar(&kinds, "kind", "", "only these kinds, comma separated")
		fs.StringVar(&device, "device", "", "only events about this device")
	case "tail":
		fs.IntVar(&n, "n", 20, "how many of the newest events")
		fs.BoolVar(&follow, "f", false, "keep printing new events")
	case "help", "-h", "--help":
		fmt.Fprint(stdout, journalUsage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "shadowgate journal: unknown command %q\n\n%s", args[0], journalUsage)
		return exitUsage
	}
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return exitUsage
	}
	if checkpoint != "" && key == "" {
		fmt.Fprintln(stderr, "shadowgate journal verify: --checkpoint needs --key")
		return exitUsage
	}
	var path string
	if file != "" {
		if *stateDir != "" || *configPath != "" {
			fmt.Fprintln(stderr, "shadowgate journal verify: give --file or --state-dir/--config, not both")
			return exitUsage
		}
		path = file
	} else {
		dir, code := resolveStateDir(*stateDir, *configPath, stderr)
		if code != exitOK {
			return code
		}
		path = journal.Path(dir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if holder := heldBy(path); holder != nil {
		if key != "" {
			fmt.Fprintf(stderr, "shadowgate journal verify: %v; check checkpoints on a copy of the file (--file)\n", holder)
			return exitUnavailable
		}
		if *tokenFile == "" && *user == "" && os.Getenv("SHADOWGATE_TOKEN") == "" {
			fmt.Fprintf(stderr, "shadowgate journal: %v; to read it through the gateway's API, give --token-file or --user (and --url)\n", holder)
			return exitUnavailable
		}
		a, err := newAPIClient(*apiURL, *tokenFile, *user, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "shadowgate journal: %v, and its API at %s cannot be used: %v\n", holder, *apiURL, err)
			return exitCode(err)
		}
		return journalViaAPI(ctx, a, args[0], since, kinds, device, n, follow, stdout, stderr)
	}
	switch args[0] {
	case "verify":
		var cp *journal.Checkpoint
		var vkey string
		if key != "" {
			k, err := readKey(key)
			if err != nil {
				fmt.Fprintln(stderr, "shadowgate journal verify:", err)
				return exitUsage
			}
			vkey = k
		}
		if checkpoint != "" {
			c, err := readCheckpoint(checkpoint, vkey)
			if err != nil {
				fmt.Fprintln(stderr, "shadowgate journal verify:", err)
				return exitRefused
			}
			cp = &c
		}
		return journalVerify(ctx, path, cp, vkey, stdout, stderr)
	case "export":
		f := journal.Filter{Since: since, Device: device}
		if kinds != "" {
			f.Kinds = strings.Split(kinds, ",")
		}
		return withJournal(path, stderr, func(j *journal.DB) int {
			if _, _, err := journal.Export(ctx, j, stdout, f); err != nil {
				fmt.Fprintln(stderr, "shadowgate journal export:", err)
				return exitUnavailable
			}
			return exitOK
		})
	default:
		return journalTail(ctx, path, n, follow, stdout, stderr)
	}
}

// resolveStateDir picks the state directory from the flags.
func resolveStateDir(stateDir, configPath string, stderr io.Writer) (string, int) {
	switch {
	case stateDir != "" && configPath != "":
		fmt.Fprintln(stderr, "shadowgate journal: give --state-dir or --config, not both")
		return "", exitUsage
	case stateDir != "":
		return stateDir, exitOK
	case configPath != "":
		cfg, err := gateway.LoadFile(configPath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return "", exitConfiguration
		}
		return cfg.StateDir, exitOK
	}
	return "/var/lib/shadowgate", exitOK
}

// withJournal opens the journal read-only for fn, or says why it cannot.
func withJournal(path string, stderr io.Writer, fn func(*journal.DB) int) int {
	j, err := journal.Open(path, journal.Options{ReadOnly: true, LockTimeout: 300 * time.Millisecond})
	if err != nil {
		var le *journal.LockedError
		switch {
		case errors.As(err, &le):
			fmt.Fprintln(stderr, "shadowgate journal:", err)
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(stderr, "shadowgate journal: no journal at %s\n", path)
		default:
			fmt.Fprintln(stderr, "shadowgate journal:", err)
		}
		return exitUnavailable
	}
	defer j.Close()
	return fn(j)
}

// maxNoteFile bounds what is read of a checkpoint or key file.
const maxNoteFile = 64 << 10

// readSmall reads at most maxNoteFile bytes of a file, refusing a longer one.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxNoteFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxNoteFile {
		return nil, fmt.Errorf("%s is longer than %d bytes: not a checkpoint or a key", path, maxNoteFile)
	}
	return b, nil
}

// readKey returns the public key given as its text or as a file holding it
// (journal.key.pub in the state directory).
func readKey(key string) (string, error) {
	// A key's text is name+hash+base64; anything else is a file.
	if parts := strings.Split(key, "+"); len(parts) == 3 {
		if _, err := os.Stat(key); err != nil {
			return key, nil
		}
	}
	b, err := readSmall(key)
	if err != nil {
		return "", fmt.Errorf("the checkpoint key: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// readCheckpoint reads and checks a signed checkpoint against vkey.
func readCheckpoint(file, vkey string) (journal.Checkpoint, error) {
	note, err := readSmall(file)
	if err != nil {
		return journal.Checkpoint{}, fmt.Errorf("reading the checkpoint: %w", err)
	}
	c, err := journal.ParseCheckpoint(note, vkey)
	if err != nil {
		return c, fmt.Errorf("checkpoint %s: %w", file, err)
	}
	return c, nil
}

func journalVerify(ctx context.Context, path string, cp *journal.Checkpoint, vkey string, stdout, stderr io.Writer) int {
	return withJournal(path, stderr, func(j *journal.DB) int {
		rep, err := j.Verify(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "shadowgate journal verify:", err)
			return exitUnavailable
		}
		fmt.Fprintf(stdout, "%s: %s\n", path, rep)
		if snap, err := j.Load(ctx); err == nil {
			fmt.Fprintf(stdout, "pending approvals: %d\n", len(snap.Approvals))
			for _, a := range snap.Open {
				if a.State == runtime.AttemptUnknown {
					fmt.Fprintf(stdout, "locked: %s.%s by attempt %s (key %s): %s\n", a.Device, a.Capability, a.ID, a.Key, a.Why)
				}
			}
		}
		failed := false
		if vkey != "" {
			n, bad, err := j.CheckCheckpoints(ctx, vkey)
			if err != nil {
				fmt.Fprintln(stderr, "shadowgate journal verify:", err)
				return exitUnavailable
			}
			if len(bad) > 0 {
				fmt.Fprintf(stdout, "checkpoints in the journal: %d, %d BAD:\n  %s\n", n, len(bad), strings.Join(bad, "\n  "))
				failed = true
			} else {
				fmt.Fprintf(stdout, "checkpoints in the journal: %d, each signed by the key and matching its event\n", n)
			}
		}
		if cp != nil {
			ok, why, err := j.Extends(ctx, *cp)
			if err != nil {
				fmt.Fprintln(stderr, "shadowgate journal verify:", err)
				return exitUnavailable
			}
			if !ok {
				fmt.Fprintf(stdout, "checkpoint %s at seq %d: NOT extended: %s\n", cp.Origin, cp.Size, why)
				return exitRefused
			}
			fmt.Fprintf(stdout, "checkpoint %s at seq %d: extended (event %d has the signed hash)\n", cp.Origin, cp.Size, cp.Size)
		}
		if !rep.OK || failed {
			return exitRefused
		}
		return exitOK
	})
}

// journalTail prints the newest n events; with follow it reopens the file
// every second for new ones, holding it only for the moment of reading.
func journalTail(ctx context.Context, path string, n int, follow bool, stdout, stderr io.Writer) int {
	var since uint64
	code := withJournal(path, stderr, func(j *journal.DB) int {
		snap, err := j.Load(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "shadowgate journal tail:", err)
			return exitUnavailable
		}
		if snap.LastSeq > uint64(max(n, 0)) {
			since = snap.LastSeq - uint64(max(n, 0))
		}
		return exitOK
	})
	for code == exitOK {
		code = withJournal(path, stderr, func(j *journal.DB) int {
			_, last, err := journal.Export(ctx, j, stdout, journal.Filter{Since: since})
			if err != nil && ctx.Err() == nil {
				fmt.Fprintln(stderr, "shadowgate journal tail:", err)
				return exitUnavailable
			}
			since = last
			return exitOK
		})
		if !follow || code != exitOK {
			break
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(time.Second):
		}
	}
	return code
}

// heldBy returns the lock error when a gateway holds the journal file.
func heldBy(path string) error {
	j, err := journal.Open(path, journal.Options{ReadOnly: true, LockTimeout: 300 * time.Millisecond})
	var le *journal.LockedError
	if errors.As(err, &le) {
		return le
	}
	if err == nil {
		_ = j.Close()
	}
	return nil
}

// journalViaAPI does a journal command through a running gateway's API.
func journalViaAPI(ctx context.Context, a *apiClient, cmd string, since uint64, kinds, device string, n int, follow bool,
	stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "shadowgate journal:", err)
		return exitCode(err)
	}
	if cmd == "verify" {
		var rep store.Report
		if err := a.do("GET", "/api/v1/journal/verify", nil, &rep); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s (through %s): %s\n", "the running gateway's journal", a.base, rep)
		if !rep.OK {
			return exitRefused
		}
		return exitOK
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	q := url.Values{"limit": {"10000"}}
	if kinds != "" {
		q.Set("kind", kinds)
	}
	if device != "" {
		q.Set("device", device)
	}
	if cmd == "tail" {
		q.Set("tail", strconv.Itoa(max(n, 1)))
	}
	for {
		if cmd != "tail" {
			q.Set("since", strconv.FormatUint(since, 10))
		}
		var evs []runtime.Event
		if err := a.do("GET", "/api/v1/events?"+q.Encode(), nil, &evs); err != nil {
			return fail(err)
		}
		for i := range evs {
			_ = enc.Encode(&evs[i])
			since = evs[i].Seq
		}
		if cmd == "tail" || len(evs) == 0 {
			break
		}
	}
	if cmd != "tail" || !follow {
		return exitOK
	}
	// Follow the event stream from the last event printed.
	req, err := http.NewRequestWithContext(ctx, "GET", a.base+"/api/v1/events/stream", nil)
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Last-Event-ID", strconv.FormatUint(since, 10))
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	stream := &http.Client{Jar: a.c.Jar}
	resp, err := stream.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK
		}
		return fail(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.HasPrefix(data, "{") {
			fmt.Fprintln(stdout, data)
		}
	}
	return exitOK
}
