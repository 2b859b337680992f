package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shadowgate/shadowgate/gateway"
	"github.com/shadowgate/shadowgate/runtime"
	"github.com/shadowgate/shadowgate/runtime/journal"
)

const journalUsage = `usage: shadowgate journal <verify|export|tail> [flags]

  verify [--state-dir D | --config F]                 walk the hash chain; exit 0 if ok, 3 if not
  export [--state-dir D | --config F] [--since N] [--kind K[,K]] [--device ID]
                                                      write events as JSON Lines
  tail   [--state-dir D | --config F] [-n N] [-f]     print the newest events; -f follows

The state directory defaults to /var/lib/shadowgate. The journal is read
while no gateway holds it; a running gateway's pid is named if it does.
`

func journalCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, journalUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("journal "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "", "state directory (default /var/lib/shadowgate)")
	configPath := fs.String("config", "", "take the state directory from this configuration")
	var since uint64
	var kinds, device string
	var n int
	var follow bool
	switch args[0] {
	case "verify":
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
	dir, code := resolveStateDir(*stateDir, *configPath, stderr)
	if code != exitOK {
		return code
	}
	path := journal.Path(dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "verify":
		return journalVerify(ctx, path, stdout, stderr)
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

func journalVerify(ctx context.Context, path string, stdout, stderr io.Writer) int {
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
		if !rep.OK {
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
