package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shadowgate/shadowgate/gateway/command"
)

// Every number a client sends is checked here, where it enters, against
// the range it may take; what passes cannot overflow in the engine or the
// journal. A failure is a 400 naming the parameter and the range.

// seqParam reads a journal sequence number: plain decimal digits, from 0 to newest,
// the newest sequence the journal holds. A client only ever learns
// sequences up to the newest, so one beyond it is a mistake (an id from
// another journal, say) and is refused rather than answered with nothing.
func seqParam(name, v string, newest uint64) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if !digits(v) || err != nil || n > newest {
		return 0, problem(http.StatusBadRequest, name+": "+command.QuoteShort(v)+" is not a sequence number from 0 to "+
			strconv.FormatUint(newest, 10)+" (the newest in the journal)")
	}
	return n, nil
}

// countParam reads a whole number from lo to hi, in plain decimal digits.
func countParam(name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if !digits(v) || err != nil || n < lo || n > hi {
		return 0, problem(http.StatusBadRequest, name+": "+command.QuoteShort(v)+" is not a whole number from "+
			strconv.Itoa(lo)+" to "+strconv.Itoa(hi))
	}
	return n, nil
}

// durationParam reads a duration like 30m or 2h from lo to hi.
func durationParam(name, v string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		return 0, problem(http.StatusBadRequest, name+": "+command.QuoteShort(v)+" is not a duration from "+lo.String()+" to "+
			hi.String()+" (like 30m or 2h)")
	}
	return d, nil
}

// safeNext keeps a redirect after login on this site: only a path of
// this site (with its query) passes, parsed and written out again; all
// else is "/". A scheme, a host, a user, "//" or a backslash anywhere
// (browsers read "/\x" as "//x"), a control character (browsers drop tabs
// and newlines, so "/\t/x" is "//x") or a path that does not start with
// one "/" is refused, in raw and in decoded form.
func safeNext(n string) string {
	if n == "" || len(n) > 2048 || !strings.HasPrefix(n, "/") || strings.HasPrefix(n, "//") || unsafeInPath(n) {
		return "/"
	}
	u, err := url.Parse(n)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || u.Fragment != "" {
		return "/"
	}
	if !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || unsafeInPath(u.Path) {
		return "/"
	}
	if q, err := url.QueryUnescape(u.RawQuery); err != nil || unsafeInPath(q) {
		return "/"
	}
	out := (&url.URL{Path: u.Path, RawQuery: u.RawQuery}).String()
	if !strings.HasPrefix(out, "/") || strings.HasPrefix(out, "//") || unsafeInPath(out) {
		return "/"
	}
	return out
}

// unsafeInPath reports a backslash, a control character or an invalid
// UTF-8 sequence.
func unsafeInPath(s string) bool {
	for _, r := range s {
		if r == '\\' || r < 0x20 || r == 0x7f || r == 0xfffd || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}
