package access

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Limiter slows down password and token guessing: after MaxFailures
// failures from one address within Window, that address is refused without
// a check until Window has passed since its last attempt.
//
// A good login does not wipe an address's failures: they still count
// until Window has passed since the last of them, so a client that holds
// one account of its own cannot use it to reset the count between guesses
// at another's password.
//
// It also sums failures up instead of reporting each one: for every
// address it reports at most one [Summary] per Window (to Summarize, and to
// the log), with the count of failures and of attempts refused while the
// address was locked out, so that a flood of wrong passwords costs the
// journal one record per address per minute, not one per guess. At most
// MaxAddresses addresses a window are reported one by one; the rest are
// summed into one Summary whose Remote is "*".
//
// An IPv6 address counts as its /64, which one client usually holds whole.
// A limiter remembers at most 50,000 addresses with failures; while that
// table is full, every address not in it counts under one shared key, and
// when the shared key is locked out so are all of them (a flood from more
// addresses than that locks out the addresses it does not know, rather
// than letting them guess freely: security first).
//
// A Limiter is safe for concurrent use. The exported fields must be set
// before its first use. The zero value is not usable; use NewLimiter.
type Limiter struct {
	// MaxFailures is how many failures lock an address out. Default 5.
	MaxFailures int
	// Window is how long failures are counted and an address stays locked
	// out after its last attempt; also the span of one summary. Default 1m.
	Window time.Duration
	// MaxAddresses bounds the summaries of one window that name their
	// address; the others are summed as one, so a window costs at most
	// MaxAddresses+1 summaries. Default 10.
	MaxAddresses int
	// Summarize, if set, receives every summary, from the goroutine that
	// called Failed, Succeeded, Blocked or Flush, without a lock held; it
	// must be safe for concurrent use and should not block for long.
	Summarize func(Summary)

	log *slog.Logger
	now func() time.Time

	// mu guards every field below it.
	mu sync.Mutex
	by map[string]*failures
	// shared counts the addresses that found the table full, under one
	// key; nil when none did within Window.
	shared    *failures
	nextSweep time.Time
	// reported counts the summaries naming their address since
	// reportedSince; overflow sums the rest of that window.
	reported      int
	reportedSince time.Time
	overflow      *Summary
}

// Summary is what a Limiter saw of one address's failed logins in one
// window. It never holds a password or a token.
type Summary struct {
	// Remote is the address (an IPv6 one as its /64), or "*" for the
	// addresses summed beyond MaxAddresses.
	Remote string
	// Addresses is how many addresses the summary covers: 1, or more
	// when Remote is "*". Attempts from addresses beyond the limiter's
	// table are not told apart: each of them counts as one address.
	Addresses int
	// Surfaces are the surfaces the attempts came through ("api",
	// "console", "mqtt"), sorted.
	Surfaces []string
	// Failures counts the attempts checked and found wrong.
	Failures int
	// Refused counts the attempts refused unchecked while locked out.
	Refused int
	// Users are the distinct user names tried, at most 5, in the order
	// first tried; OtherUsers counts the attempts that named someone else.
	Users      []string
	OtherUsers int
	// Why is the reason of the last failure.
	Why string
	// First and Last are the times of the first and the last attempt.
	First, Last time.Time
	// LockedOut is true when the address was locked out in the window.
	LockedOut bool
}

// maxUsers bounds the names a summary keeps.
const maxUsers = 5

// maxTracked bounds the addresses a limiter remembers. Beyond it a new
// address counts under the shared key, and is locked out with the others
// that do.
const maxTracked = 50000

// sharedKey is the Remote of the shared key's summary.
const sharedKey = "*"

type failures struct {
	// count and last drive the lockout: count failures less than
	// Window apart, last the newest attempt.
	count int
	last  time.Time
	// sum is the summary of the current window, nil when nothing is
	// waiting to be reported.
	sum *Summary
}

// NewLimiter returns a limiter allowing 5 failures a minute per address
// and naming at most 10 addresses in a minute's summaries, logging to log (nil means discard); now is its clock (nil means
// time.Now).
func NewLimiter(log *slog.Logger, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Limiter{MaxFailures: 5, Window: time.Minute, MaxAddresses: 10, log: log, now: now, by: map[string]*failures{}}
}

// key is the address a client is counted under: its host without the
// port, an IPv6 host as its /64.
func key(addr string) string {
	h := addr
	if hh, _, err := net.SplitHostPort(addr); err == nil {
		h = hh
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return strings.ToValidUTF8(h, "?")
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.WithZone("").Prefix(64)
	if err != nil {
		return ip.String()
	}
	return p.String()
}

// entryLocked returns the failures k counts under: its own, the shared
// key's when k has none and the table is full, or nil. l.mu must be held.
func (l *Limiter) entryLocked(k string) *failures {
	if f := l.by[k]; f != nil || len(l.by) < maxTracked {
		return f
	}
	return l.shared
}

// blockedLocked reports whether f's address is locked out at now. l.mu
// must be held.
func (l *Limiter) blockedLocked(f *failures, now time.Time) bool {
	return f != nil && f.count >= l.MaxFailures && now.Sub(f.last) < l.Window
}

// Blocked reports whether addr must wait before trying again.
func (l *Limiter) Blocked(addr string) bool {
	now := l.now()
	var out []Summary
	blocked := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		out = l.sweepLocked(now, false)
		return l.blockedLocked(l.entryLocked(key(addr)), now)
	}()
	l.report(out)
	return blocked
}

// Failed records a failed login of user from addr on surface ("console",
// "api", "mqtt") and why. An attempt made while addr is locked out counts
// as refused, and keeps it locked out. Nothing is reported at once beyond
// one log line for the first failure of a window: the summary follows when
// the window ends. The password is never seen here.
func (l *Limiter) Failed(surface, addr, user, why string) {
	now := l.now()
	k := key(addr)
	out, first, refused := l.failedLocked(k, surface, user, why, now)
	if first {
		l.log.Warn("login failed", "surface", surface, "remote", k, "user", strings.ToValidUTF8(user, "?"), "why", why,
			"locked_out", refused)
	}
	l.report(out)
}

// failedLocked counts one failure under l.mu, released however it returns,
// and returns the summaries due, whether this is the first failure of the
// address's window, and whether it came while locked out.
func (l *Limiter) failedLocked(k, surface, user, why string, now time.Time) (out []Summary, first, refused bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out = l.sweepLocked(now, false)
	f := l.by[k]
	if f != nil && f.sum != nil && now.Sub(f.sum.First) >= l.Window {
		out = l.closeLocked(out, f, now)
	}
	switch {
	case f == nil && len(l.by) >= maxTracked:
		// Too many addresses to tell apart: count this one with the rest
		// under the shared key, which locks out as one address does.
		if l.shared == nil {
			l.shared = &failures{}
		}
		f = l.shared
		if f.sum != nil && now.Sub(f.sum.First) >= l.Window {
			out = l.closeLocked(out, f, now)
		}
		k = sharedKey
	case f == nil:
		f = &failures{}
		l.by[k] = f
	}
	refused = l.blockedLocked(f, now)
	if !refused && now.Sub(f.last) >= l.Window {
		f.count = 0 // the last failure is a window old: start counting again
	}
	if !refused {
		f.count++
	}
	f.last = now
	first = f.sum == nil
	if first {
		f.sum = &Summary{Remote: k, First: now}
	}
	if f == l.shared {
		f.sum.Addresses++
	}
	note(f.sum, surface, user, why, now, refused)
	f.sum.LockedOut = f.sum.LockedOut || refused || f.count >= l.MaxFailures
	return out, first, refused
}

// note adds one attempt to s.
func note(s *Summary, surface, user, why string, now time.Time, refused bool) {
	if refused {
		s.Refused++
	} else {
		s.Failures++
		s.Why = why
	}
	s.Last = now
	if !slices.Contains(s.Surfaces, surface) {
		s.Surfaces = append(s.Surfaces, surface)
		slices.Sort(s.Surfaces)
	}
	user = strings.ToValidUTF8(user, "?")
	if len(user) > 64 {
		user = user[:64]
	}
	switch {
	case user == "" || slices.Contains(s.Users, user):
	case len(s.Users) < maxUsers:
		s.Users = append(s.Users, user)
	default:
		s.OtherUsers++
	}
}

// Succeeded reports the summary of addr's failures so far, if any, at
// once. It does not forget them: they keep counting towards a lockout
// until Window has passed since the last, as if the success had not been,
// so one good login of an attacker's own cannot reset his count between
// guesses at another account.
func (l *Limiter) Succeeded(addr string) {
	now := l.now()
	k := key(addr)
	var out []Summary
	func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if f := l.by[k]; f != nil {
			out = l.closeLocked(out, f, now)
		}
	}()
	l.report(out)
}

// Flush reports the summaries whose window has ended. A limiter also
// flushes when it is used; an owner with a ticker calls Flush so that the
// last summary of a quiet address is not late.
func (l *Limiter) Flush() {
	now := l.now()
	var out []Summary
	func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		out = l.sweepLocked(now, true)
	}()
	l.report(out)
}

// sweepLocked closes the windows that have ended and forgets addresses
// that are neither locked out nor waiting to be reported, at most every
// Window/6 unless forced. l.mu must be held.
func (l *Limiter) sweepLocked(now time.Time, force bool) []Summary {
	if !force && now.Before(l.nextSweep) {
		return nil
	}
	l.nextSweep = now.Add(l.Window / 6)
	var out []Summary
	for k, f := range l.by {
		if f.sum != nil && now.Sub(f.sum.First) >= l.Window {
			out = l.closeLocked(out, f, now)
		}
		if f.sum == nil && now.Sub(f.last) >= l.Window {
			delete(l.by, k)
		}
	}
	if f := l.shared; f != nil {
		if f.sum != nil && now.Sub(f.sum.First) >= l.Window {
			out = l.closeLocked(out, f, now)
		}
		if f.sum == nil && now.Sub(f.last) >= l.Window {
			l.shared = nil
		}
	}
	if l.overflow != nil && now.Sub(l.reportedSince) >= l.Window {
		out = append(out, *l.overflow)
		l.overflow = nil
	}
	return out
}

// closeLocked ends f's summary window. l.mu must be held.
func (l *Limiter) closeLocked(out []Summary, f *failures, now time.Time) []Summary {
	if f.sum == nil {
		return out
	}
	s := f.sum
	f.sum = nil
	return l.emitLocked(out, s, now)
}

// emitLocked reports s by its address while fewer than MaxAddresses have
// been this window, and sums it into the "*" summary otherwise; the shared
// key's summary always goes into the "*" one. l.mu must be held.
func (l *Limiter) emitLocked(out []Summary, s *Summary, now time.Time) []Summary {
	if now.Sub(l.reportedSince) >= l.Window {
		if l.overflow != nil {
			out = append(out, *l.overflow)
			l.overflow = nil
		}
		l.reported, l.reportedSince = 0, now
	}
	if s.Remote != sharedKey {
		s.Addresses = 1
		if l.reported < l.MaxAddresses {
			l.reported++
			return append(out, *s)
		}
	}
	o := l.overflow
	if o == nil {
		o = &Summary{Remote: sharedKey, First: s.First}
		l.overflow = o
	}
	if s.First.Before(o.First) {
		o.First = s.First
	}
	o.Addresses += s.Addresses
	o.Failures += s.Failures
	o.Refused += s.Refused
	if s.Last.After(o.Last) {
		o.Last = s.Last
	}
	o.Why = s.Why
	o.LockedOut = o.LockedOut || s.LockedOut
	for _, sf := range s.Surfaces {
		if !slices.Contains(o.Surfaces, sf) {
			o.Surfaces = append(o.Surfaces, sf)
			slices.Sort(o.Surfaces)
		}
	}
	return out
}

// report hands summaries on, without l.mu held.
func (l *Limiter) report(out []Summary) {
	for _, s := range out {
		l.log.Warn("login failures summarised", "surface", strings.Join(s.Surfaces, ","), "remote", s.Remote,
			"addresses", s.Addresses, "failures", s.Failures, "refused", s.Refused, "locked_out", s.LockedOut)
		if l.Summarize != nil {
			l.Summarize(s)
		}
	}
}
