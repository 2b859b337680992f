package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/runtime"
)

// apiStream sends every journal event as a server-sent event whose id is
// the journal sequence, once the journal has written it. A client resumes
// after Last-Event-ID (or ?since=) with nothing lost or repeated. Each
// client reads the journal from its own position, so a slow one never
// holds up a step or another client.
//
// A reading or a failed read is also sent as soon as it is taken, before
// the journal writes it (with the next durable point, or at the flush
// interval), as a "reading" event without an id, so that what shows
// readings is current; the same event comes again, with its id and kind,
// once written.
func (s *Server) apiStream(c echo.Context) error {
	newest := s.eng.LastSeq()
	since := s.eng.FromNow() // a new client starts from now
	name, from := `header "Last-Event-ID"`, c.Request().Header.Get("Last-Event-ID")
	if n := len(c.Request().Header.Values("Last-Event-ID")); n > 1 {
		return problem(http.StatusBadRequest, fmt.Sprintf("%s: given %d times; give it once", name, n))
	}
	q, qerr := numParam(c, "since")
	if qerr != nil {
		return qerr
	}
	if from == "" {
		name, from = `query "since"`, q
	}
	if from != "" {
		n, err := seqParam(name, from, newest)
		if err != nil {
			return err
		}
		since = n
	}
	// A stream of a person's session ends with the session: at its
	// expiry, when it logs out, or when it is found gone.
	var (
		cookie    string
		expiry    <-chan time.Time
		loggedOut <-chan struct{}
	)
	if id := userOf(c); id != nil && !id.Token {
		if ck, err := c.Cookie(sessionCookie); err == nil {
			cookie = ck.Value
			sess, ok, err := s.opts.Sessions.Get(cookie, s.opts.Now())
			if err != nil {
				return s.internal(c, http.StatusServiceUnavailable, "sessions cannot be read", err)
			}
			if !ok {
				return problem(http.StatusUnauthorized, "the session has ended; log in again")
			}
			t := time.NewTimer(sess.Expires.Sub(s.opts.Now()))
			defer t.Stop()
			expiry = t.C
			var stop func()
			loggedOut, stop = s.watchSession(cookie)
			defer stop()
		}
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w.Writer).SetWriteDeadline(time.Time{})
	fmt.Fprint(w, "retry: 2000\n\n")
	w.Flush()
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	go func() {
		select {
		case <-s.bye:
			cancel()
		case <-ctx.Done():
		}
	}()
	// The journal is read by its own goroutine; this one writes, and
	// writes a comment now and then so that proxies keep the line open.
	evs := make(chan streamed, 64)
	subErr := make(chan error, 1)
	go func() {
		defer close(evs)
		subErr <- s.eng.Follow(ctx, since, func(ev runtime.Event) error {
			select {
			case evs <- streamed{ev: ev}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, func(ev runtime.Event) {
			if !isReading(ev) {
				return
			}
			select {
			case evs <- streamed{ev: ev, pending: true}:
			case <-ctx.Done():
			}
		})
	}()
	keepalive := time.NewTicker(20 * time.Second)
	defer keepalive.Stop()
	var err error
	ended := false
loop:
	for {
		select {
		case <-expiry:
			ended = true
			break loop
		case <-loggedOut:
			ended = true
			break loop
		case se, ok := <-evs:
			if !ok {
				err = <-subErr
				break loop
			}
			b, merr := json.Marshal(se.ev)
			if merr != nil {
				err = merr
				break loop
			}
			if se.pending {
				_, err = fmt.Fprintf(w, "event: reading\ndata: %s\n\n", b)
			} else {
				_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", se.ev.Seq, se.ev.Kind, b)
			}
			if err != nil {
				break loop
			}
			w.Flush()
			s.opts.Metrics.sentEvent()
		case <-keepalive.C:
			if cookie != "" {
				if _, ok, _ := s.opts.Sessions.Get(cookie, s.opts.Now()); !ok {
					ended = true
					break loop
				}
			}
			if _, err = fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				break loop
			}
			w.Flush()
		case <-ctx.Done():
			break loop
		}
	}
	cancel()
	for range evs { // let the reader finish
	}
	if ended {
		fmt.Fprint(w, "event: session_ended\ndata: the session has ended; log in again\n\n")
		w.Flush()
	}
	select {
	case <-s.bye:
		fmt.Fprint(w, "event: bye\ndata: the gateway is stopping\n\n")
		w.Flush()
	default:
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("event stream ended", "error", err)
	}
	return nil
}

// streamed is an event for the stream: written, or pending (see apiStream).
type streamed struct {
	ev      runtime.Event
	pending bool
}

// isReading reports whether an event is a reading or a read that failed:
// what the stream sends before the journal writes it.
func isReading(ev runtime.Event) bool {
	if ev.Kind == runtime.KindObserved {
		return true
	}
	if ev.Kind != runtime.KindFailed {
		return false
	}
	var fb runtime.FailedBody
	return ev.DecodeBody(&fb) == nil && fb.ReadFailed()
}
