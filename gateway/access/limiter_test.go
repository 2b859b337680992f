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

// Many addresses cost at most MaxAddresses summaries a window, plus one
// that sums the rest; an IPv6 client counts as its /64.
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
	if named != 100 || rest.Addresses != 51 || rest.Failures == 0 {
		t.Fatalf("%d named summaries and a rest of %+v; want 100 and the other 51 addresses summed", named, rest)
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
