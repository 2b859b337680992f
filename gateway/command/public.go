package command

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
)

// PublicError is what a client is told of a failure that is not its own
// doing (the journal cannot be read, an encoder failed): a message that
// gives nothing of the gateway's inside away, and an id that the log line
// with the detail also carries, so that an operator can find it.
type PublicError struct {
	// Message is safe to show to any client.
	Message string `json:"error"`
	// ID names the log line with the detail: "err-" and 12 hex digits.
	ID string `json:"error_id"`
}

func (e *PublicError) Error() string { return e.Message + " (error id " + e.ID + ")" }

// Internal logs err with a new error id, at error level, and returns the
// public error to give the client in its place. public says what failed
// in words a client can act on ("the journal cannot be read"); it must not
// quote err.
func Internal(log *slog.Logger, public string, err error, attrs ...any) *PublicError {
	id := NewErrorID()
	if log != nil {
		log.Error(public, append([]any{"error_id", id, "error", err}, attrs...)...)
	}
	return &PublicError{Message: public, ID: id}
}

// NewErrorID returns a fresh error id: "err-" and 12 hex digits.
func NewErrorID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "err-" + hex.EncodeToString(b[:])
}
