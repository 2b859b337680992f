package access

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for a limiter.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// summaries collects what a limiter reports.
type summaries struct {
	mu  sync.Mutex
	got []Summary
}

func (s *summaries) add(x Summary) {
	s.mu.Lock()
	s.got = append(s.got, x)
	s.mu.Unlock()
}

func (s *summaries) take() []Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	return out
}

func newTestLimiter(t *testing.T) (*Limiter, *clock, *summaries) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewLimiter(slog.New(slog.NewTextHandler(t.Output(), nil)), c.now)
	s := &summaries{}
	l.Summarize = s.add
	return l, c, s
}

// A thousand guesses in a minute from one address, most of them while it
// is locked out, are one summary with the counts, reported when the
// window ends: not one record per guess.
func TestLimiterSumsAWindowUp(t *testing.T) {
	l, c, s := newTestLimiter(t)
	start := c.now()
	for i := range 1000 {
		if l.Blocked("10.0.0.1:5000") != (i >= 5) {
			t.Fatalf("attempt %d: Blocked = %v", i, !(i >= 5))
		}
		l.Failed("console", "10.0.0.1:5000", fmt.Sprintf("user-%d", i%7), "wrong user or password")
		c.add(50 * time.Millisecond)
	}
	if got := s.take(); len(got) != 0 {
		t.Fatalf("summaries before the window ended: %+v", got)
	}
	last := c.now().Add(-50 * time.Millisecond)
	c.add(time.Minute)
	l.Flush()
	want := []Summary{{Remote: "10.0.0.1", Addresses: 1, Surfaces: []string{"console"}, Failures: 5, Refused: 995,
		Users: []string{"user-0", "user-1", "user-2", "user-3", "user-4"}, OtherUsers: 1000 * 2 / 7, Why: "wrong user or password",
		First: start, Last: last, LockedOut: true}}
	if got := s.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("summaries =\n%+v\nwant\n%+v", got, want)
	}
	l.Flush()
	if got := s.take(); len(got) != 0 {
		t.Fatalf("a window reported twice: %+v", got)
	}
}

// A window is one minute from its first failure: a slow guesser gets one
// summary a minute, each with its own count.
func TestLimiterOneSummaryPerWindow(t *testing.T) {
	l, c, s := newTestLimiter(t)
	for range 180 {
		l.Failed("mqtt", "10.0.0.2:1", "ann", "wrong user or password")
		c.add(time.Second)
	}
	c.add(time.Minute)
	l.Flush()
	got := s.take()
	if len(got) != 3 {
		t.Fatalf("%d summaries for three minutes of guessing, want 3: %+v", len(got), got)
	}
	total := 0
	for _, x := range got {
		total += x.Failures + x.Refused
	}
	if total != 180 {
		t.Fatalf("the summaries count %d attempts, want 180", total)
	}
}

// A success reports what came before it at once, and unlocks.
func TestLimiterSuccessReportsTheFailuresFirst(t *testing.T) {
	l, c, s := newTestLimiter(t)
	l.Failed("console", "10.0.0.3:1", "ann", "wrong user or password")
	l.Failed("api", "10.0.0.3:2", "", "unknown bearer token")
	c.add(time.Second)
	l.Succeeded("10.0.0.3:1")
	got := s.take()
	if len(got) != 1 || got[0].Failures != 2 || !slices.Equal(got[0].Surfaces, []string{"api", "console"}) {
		t.Fatalf("summaries on success = %+v", got)
	}
	if l.Blocked("10.0.0.3:1") {
		t.Fatal("blocked after a success")
	}
}

// Many addresses cost at most MaxAddresses (10) summaries a window, plus
// one that sums the rest; an IPv6 client counts as its /64.
func TestLimiterBoundsTheSummaries(t *testing.T) {
	l, c, s := newTestLimiter(t)
	for i := range 150 {
		l.Failed("mqtt", fmt.Sprintf("10.1.%d.%d:1883", i/250, i%250), "x", "wrong user or password")
	}
	for i := range 10 {
		l.Failed("console", fmt.Sprintf("[2001:db8::%x]:443", i+1), "x", "wrong user or password")
	}
	c.add(time.Minute)
	l.Flush()
	c.add(time.Minute)
	l.Flush()
	got := s.take()
	named, rest := 0, Summary{}
	for _, x := range got {
		if x.Remote == "*" {
			rest = x
			continue
		}
		named++
		if x.Remote == "2001:db8::/64" && (x.Failures != 5 || x.Refused != 5 || !x.LockedOut) {
			t.Errorf("the /64 summary = %+v, want 5 failures, then locked out and 5 refused", x)
		}
	}
	if named != 10 || rest.Addresses != 141 || rest.Failures == 0 {
		t.Fatalf("%d named summaries and a rest of %+v; want 10 and the other 141 addresses summed", named, rest)
	}
	if l.Blocked("[2001:db8::ffff]:1") {
		t.Fatal("blocked after the window")
	}
}

// Concurrent use is safe (run with -race) and loses no count.
func TestLimiterConcurrent(t *testing.T) {
	l, c, s := newTestLimiter(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				addr := fmt.Sprintf("10.2.0.%d:1", (g+i)%4)
				_ = l.Blocked(addr)
				l.Failed("mqtt", addr, "u", "wrong")
			}
		})
	}
	wg.Wait()
	c.add(time.Minute)
	l.Flush()
	total := 0
	for _, x := range s.take() {
		total += x.Failures + x.Refused
	}
	if total != 1600 {
		t.Fatalf("the summaries count %d attempts, want 1600", total)
	}
}

// An attacker with an account of his own alternates four wrong guesses at
// another's password with one good login of his own: the good logins do
// not reset his count, so the fifth wrong guess locks him out, good
// password or not, until a window has passed since his last failure.
func TestAdversarialLimiterSuccessDoesNotResetTheCount(t *testing.T) {
	l, c, s := newTestLimiter(t)
	const addr = "10.0.0.9:4000"
	wrong := 0
	for round := range 20 {
		for range 4 {
			if l.Blocked(addr) {
				if wrong < 5 {
					t.Fatalf("blocked after %d wrong guesses", wrong)
				}
				goto locked
			}
			l.Failed("console", addr, "adam", "wrong user or password")
			wrong++
			c.add(10 * time.Millisecond)
		}
		if l.Blocked(addr) {
			goto locked
		}
		l.Succeeded(addr) // his own viewer account
		if round == 0 {
			if got := s.take(); len(got) != 1 || got[0].Failures != 4 {
				t.Fatalf("a success did not report the failures before it: %+v", got)
			}
		}
	}
	t.Fatalf("%d wrong guesses between good logins and never locked out", wrong)
locked:
	if wrong != 5 {
		t.Fatalf("locked out after %d wrong guesses, want 5", wrong)
	}
	c.add(59 * time.Second)
	if !l.Blocked(addr) {
		t.Fatal("the lockout ended before the window")
	}
	c.add(2 * time.Second)
	if l.Blocked(addr) {
		t.Fatal("still locked out a window after the last failure")
	}
	// The count aged out with the window: four more wrong guesses do not
	// lock out.
	for range 4 {
		l.Failed("console", addr, "adam", "wrong user or password")
	}
	if l.Blocked(addr) {
		t.Fatal("an old window's failures still counted")
	}
}

// Once the limiter's table of addresses is full, a new address is not free
// to guess: the addresses it does not know count under one shared key,
// which locks out after MaxFailures like one address, and for a window
// only. Each of 50,000 addresses fails once; then 5 new addresses fail
// once each, and a sixth new address is blocked. The addresses in the
// table are still judged by their own count.
func TestAdversarialLimiterFullTableLocksOutNewAddresses(t *testing.T) {
	l, c, s := newTestLimiter(t)
	l.log = slog.New(slog.DiscardHandler)
	for i := range maxTracked {
		l.Failed("mqtt", fmt.Sprintf("[2001:db8:%x:%x::1]:1883", i>>16, i&0xffff), "u", "wrong user or password")
	}
	for i := range 5 {
		addr := fmt.Sprintf("[2001:db9:0:%x::1]:1883", i)
		if l.Blocked(addr) {
			t.Fatalf("new address %d blocked before the shared key had 5 failures", i)
		}
		l.Failed("mqtt", addr, "u", "wrong user or password")
	}
	if !l.Blocked("[2001:dba::1]:1883") {
		t.Fatal("a new address was not blocked once the shared key had 5 failures: the table's overflow guesses freely")
	}
	if l.Blocked("[2001:db8::1]:1883") {
		t.Fatal("an address in the table with one failure was blocked")
	}
	c.add(61 * time.Second)
	if l.Blocked("[2001:dba::1]:1883") {
		t.Fatal("the shared key was still locked out a window later")
	}
	l.Flush()
	c.add(time.Minute)
	l.Flush()
	named, rest := 0, Summary{}
	for _, x := range s.take() {
		if x.Remote == "*" {
			rest.Addresses += x.Addresses
			rest.Failures += x.Failures
			continue
		}
		named++
	}
	if named > 10 || rest.Failures != maxTracked+5-named {
		t.Fatalf("%d named summaries and %d failures summed; want at most 10 named and the other %d summed", named, rest.Failures,
			maxTracked+5-named)
	}
}

// A flood from many addresses costs the journal at most 10 summaries a
// minute plus the one that sums the rest, window after window.
func TestAdversarialLimiterFloodCostsElevenSummariesAMinute(t *testing.T) {
	l, c, s := newTestLimiter(t)
	l.log = slog.New(slog.DiscardHandler)
	for minute := range 3 {
		for i := range 2000 {
			l.Failed("api", fmt.Sprintf("10.%d.%d.%d:1", minute, i/250, i%250), "", "unknown bearer token")
		}
		c.add(time.Minute)
		l.Flush()
	}
	c.add(time.Minute)
	l.Flush()
	got := s.take()
	if len(got) > 3*11 {
		t.Fatalf("%d summaries for 3 minutes of flooding, want at most 33", len(got))
	}
	total := 0
	for _, x := range got {
		total += x.Failures
	}
	if total != 6000 {
		t.Fatalf("the summaries count %d failures, want 6000", total)
	}
}
