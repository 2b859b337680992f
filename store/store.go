// Package store holds the types the surfaces need from storage: a console
// session, a message waiting for the uplink, and the report of a journal
// check. The journal implements the stores; the surfaces see only these
// types and the small interfaces they declare, so no surface links the
// database.
package store

import (
	"fmt"
	"strings"
	"time"
)

// Session is a console login. The file keeps it under the SHA-256 of its
// cookie, so reading the file does not give a usable cookie.
type Session struct {
	User    string    `json:"user"`
	Role    string    `json:"role"`
	Remote  string    `json:"remote"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// OutMessage is one message waiting for the uplink.
type OutMessage struct {
	Seq     uint64
	Topic   string
	Payload []byte
	Retain  bool
	// Essential messages (receipts, approvals) are never dropped to make
	// room; telemetry is, oldest first.
	Essential bool
}

// Report is the result of walking the chain.
type Report struct {
	// Count is the number of events checked; First and Last their range.
	Count uint64 `json:"count"`
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Anchor is the sequence of the last pruned event, or 0.
	Anchor uint64 `json:"anchor,omitempty"`
	OK     bool   `json:"ok"`
	// BadSeq is the first sequence that fails, and Reason says how.
	BadSeq uint64 `json:"bad_seq,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Records is the number of records checked against the events, and
	// BadRecords names every one that disagrees with them.
	Records    int      `json:"records"`
	BadRecords []string `json:"bad_records,omitempty"`
}

// Headline is the one-line summary: counts, and ok or what is wrong.
func (r Report) Headline() string {
	s := fmt.Sprintf("%d events", r.Count)
	if r.Count > 0 {
		s += fmt.Sprintf(", seq %d to %d", r.First, r.Last)
	}
	if r.Anchor > 0 {
		s += fmt.Sprintf(", anchored after pruned event %d", r.Anchor)
	}
	s += fmt.Sprintf(", %d records", r.Records)
	if r.OK {
		return s + ": ok"
	}
	if r.Reason != "" {
		s += fmt.Sprintf(": BAD at seq %d: %s", r.BadSeq, r.Reason)
	}
	if len(r.BadRecords) > 0 {
		s += fmt.Sprintf(": %d BAD record(s)", len(r.BadRecords))
	}
	return s
}

// String is what the CLI prints: the headline, then each bad record on a
// line of its own.
func (r Report) String() string {
	if len(r.BadRecords) == 0 {
		return r.Headline()
	}
	return r.Headline() + ":\n  " + strings.Join(r.BadRecords, "\n  ")
}
