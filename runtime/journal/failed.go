package journal

import (
	"context"

	"github.com/shadowgate/shadowgate/runtime"
)

// Failed returns a journal that cannot witness anything: every commit and
// read fails with err, and Err returns it. A gateway whose journal file is
// corrupt runs on it, so that sensors are still read and every actuation is
// refused, saying why.
func Failed(err error) runtime.Journal { return failed{err} }

type failed struct{ err error }

func (f failed) Commit(context.Context, runtime.Entry) (runtime.Event, error) {
	return runtime.Event{}, f.err
}

func (f failed) Events(context.Context, uint64, int) ([]runtime.Event, error) { return nil, f.err }

func (f failed) Attempt(context.Context, string) (runtime.Attempt, bool, error) {
	return runtime.Attempt{}, false, f.err
}

// Load returns an empty snapshot: there is nothing trustworthy to resume.
func (f failed) Load(context.Context) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }

func (f failed) Err() error   { return f.err }
func (f failed) Close() error { return nil }
