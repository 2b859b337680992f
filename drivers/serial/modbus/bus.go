package modbus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shadowgate/shadowgate/drivers/serial/port"
)

// Errors of a transaction on the line.
var (
	// errNoAnswer is returned when a request was sent and no frame came
	// back within the timeout.
	errNoAnswer = errors.New("no answer")
	// errNotOpen is returned when the port is not open: nothing was sent.
	errNotOpen = errors.New("the serial port is not open")
	// errPortFailed is wrapped when the port failed during a request; the
	// driver closes it and reopens it.
	errPortFailed = errors.New("the serial port failed")
)

// bus is one serial line: one request at a time, whoever asks. Holding the
// token of sem is owning the line; every field below it is used only by
// its holder.
type bus struct {
	settings port.Settings
	timeout  time.Duration
	// silent is the quiet time the protocol wants between two frames:
	// 3.5 character times, or 1.75 ms above 19200 baud.
	silent time.Duration

	sem    chan struct{}
	p      port.Port // nil while closed
	lastIO time.Time // when the line was last busy
	// unsettled is set after a request had no answer or a garbled one:
	// its answer may still be on its way, and must not be taken for the
	// next request's (in RTU, two reads of one unit look alike).
	unsettled bool
	buf       [MaxFrame]byte
	out       []byte
}

func newBus(s port.Settings, timeout time.Duration) *bus {
	silent := 1750 * time.Microsecond
	if s.Baud <= 19200 {
		silent = s.CharTime() * 7 / 2
	}
	return &bus{settings: s, timeout: timeout, silent: silent, sem: make(chan struct{}, 1), out: make([]byte, 0, MaxFrame)}
}

// acquire takes the line, or returns ctx's error.
func (b *bus) acquire(ctx context.Context) error {
	select {
	case b.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *bus) release() { <-b.sem }

// exchange is one request and its answer on the line; the caller holds it.
// sent says whether any byte of the request may have left: false means
// nothing reached a device. An error wrapping errPortFailed means the port
// was closed and must be reopened.
func (b *bus) exchange(ctx context.Context, req Request) (resp Response, sent bool, err error) {
	if b.p == nil {
		return Response{}, false, errNotOpen
	}
	b.out, err = AppendRequest(b.out[:0], req)
	if err != nil {
		return Response{}, false, err
	}
	// The line must be quiet before a frame starts, and stale bytes (a
	// late answer to an earlier request) must not be taken for this one's.
	if wait := time.Until(b.lastIO.Add(b.silent)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Response{}, false, ctx.Err()
		}
	}
	if b.unsettled {
		if err := b.settle(ctx); err != nil {
			return Response{}, false, err
		}
	}
	if err := b.p.ResetInputBuffer(); err != nil {
		return Response{}, false, b.fail(fmt.Errorf("flushing input: %w", err))
	}
	n, err := b.p.Write(b.out)
	b.lastIO = time.Now()
	if err != nil {
		return Response{}, n > 0, b.fail(fmt.Errorf("sending %v: %w", req.Function, err))
	}
	// The request takes its time on the wire before the answer can start.
	deadline := b.lastIO.Add(time.Duration(len(b.out))*b.settings.CharTime() + b.timeout)
	got := 0
	for got < len(b.buf) && (got == 0 || got < req.FrameLen(b.buf[:got])) {
		if err := ctx.Err(); err != nil {
			b.unsettled = true
			return Response{}, true, err
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			if got == 0 {
				b.unsettled = true
				return Response{}, true, fmt.Errorf("%w from unit %d to %v within %v", errNoAnswer, req.Unit, req.Function, b.timeout)
			}
			break // what came is all there is: the decoder says what is wrong
		}
		// A read wakes at least every 50 ms to look at ctx.
		if err := b.p.SetReadTimeout(min(wait, 50*time.Millisecond)); err != nil {
			return Response{}, true, b.fail(fmt.Errorf("setting the read timeout: %w", err))
		}
		k, err := b.p.Read(b.buf[got:])
		if err != nil {
			return Response{}, true, b.fail(fmt.Errorf("reading the answer to %v: %w", req.Function, err))
		}
		got += k // a timeout is no bytes and no error
		if k > 0 {
			b.lastIO = time.Now()
		}
	}
	resp, err = Decode(req, b.buf[:got])
	b.unsettled = err != nil && IsNoise(err)
	return resp, true, err
}

// settle waits, after a request that had no answer or a garbled one, until
// the line has been quiet for half a timeout (and at least 20 character
// times), throwing away whatever arrives: a late answer that would
// otherwise be taken for the next request's. An answer later still (more
// than about one and a half timeouts after its request) cannot be told
// from the next one's in RTU, which has no request ids: set the timeout
// above the slowest unit's answer time.
func (b *bus) settle(ctx context.Context) error {
	quiet := max(b.timeout/2, 20*b.settings.CharTime())
	since := time.Now()
	for time.Since(since) < quiet {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.p.SetReadTimeout(min(quiet-time.Since(since), 50*time.Millisecond) + time.Millisecond); err != nil {
			return b.fail(fmt.Errorf("setting the read timeout: %w", err))
		}
		k, err := b.p.Read(b.buf[:])
		if err != nil {
			return b.fail(fmt.Errorf("draining the line: %w", err))
		}
		if k > 0 {
			since = time.Now() // something came: wait for quiet again
		}
	}
	b.unsettled = false
	b.lastIO = time.Now()
	return nil
}

// fail closes the port after an I/O error, which usually means the
// adapter is gone, and returns err marked as a port failure.
func (b *bus) fail(err error) error {
	_ = b.p.Close()
	b.p = nil
	return fmt.Errorf("%w: %w", errPortFailed, err)
}
