//go:build failpoints

package failpoint

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Enabled is whether failpoints are compiled in (the failpoints build tag).
const Enabled = true

// Error is what a point armed with error(message) returns.
type Error struct {
	Name, Message string
}

func (e *Error) Error() string { return "failpoint " + e.Name + ": " + e.Message }

// Kind is what an armed point does.
type Kind int

const (
	Panic Kind = iota + 1
	Exit
	Fail
	Sleep
)

// Action is one armed point.
type Action struct {
	Kind    Kind
	Message string        // Panic, Fail
	Code    int           // Exit
	Sleep   time.Duration // Sleep
	// Nth, if not 0, fires the action on that hit only (counted from 1).
	Nth int
	// Text is the action as written, for the line a firing prints.
	Text string
}

// Parse reads a specification: name=action terms separated by ";".
func Parse(spec string) (map[string]Action, error) {
	out := map[string]Action{}
	for term := range strings.SplitSeq(spec, ";") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		name, text, ok := strings.Cut(term, "=")
		if !ok {
			return nil, fmt.Errorf("failpoint term %q: want name=action", term)
		}
		name = strings.TrimSpace(name)
		if !slices.Contains(All, name) {
			return nil, fmt.Errorf("failpoint term %q: no failpoint %q", term, name)
		}
		a, err := parseAction(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("failpoint %s: %w", name, err)
		}
		out[name] = a
	}
	return out, nil
}

func parseAction(text string) (Action, error) {
	a := Action{Text: text}
	if at := strings.LastIndexByte(text, '@'); at >= 0 && !strings.Contains(text[at:], ")") {
		n, err := strconv.Atoi(text[at+1:])
		if err != nil || n < 1 {
			return a, fmt.Errorf("action %q: @ wants a hit number from 1", text)
		}
		a.Nth, text = n, text[:at]
	}
	verb, arg, paren := strings.Cut(text, "(")
	if paren {
		var ok bool
		if arg, ok = strings.CutSuffix(arg, ")"); !ok {
			return a, fmt.Errorf("action %q: unclosed parenthesis", text)
		}
	}
	switch verb {
	case "panic":
		a.Kind, a.Message = Panic, arg
		if a.Message == "" {
			a.Message = "failpoint"
		}
	case "exit":
		code, err := strconv.Atoi(arg)
		if err != nil || code < 0 || code > 125 {
			return a, fmt.Errorf("action %q: exit wants a code from 0 to 125", text)
		}
		a.Kind, a.Code = Exit, code
	case "error":
		if arg == "" {
			return a, fmt.Errorf("action %q: error wants a message", text)
		}
		a.Kind, a.Message = Fail, arg
	case "sleep":
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return a, fmt.Errorf("action %q: sleep wants a positive duration", text)
		}
		a.Kind, a.Sleep = Sleep, d
	default:
		return a, fmt.Errorf("action %q: want panic, exit(code), error(message) or sleep(duration)", text)
	}
	return a, nil
}

// armed is the process's failpoints, read from its environment once.
var armed = sync.OnceValue(func() *points {
	p := &points{hits: map[string]int{}, arm: os.Getenv(EnvArm)}
	acts, err := Parse(os.Getenv(EnvSpec))
	if err != nil {
		panic(EnvSpec + ": " + err.Error())
	}
	p.acts = acts
	return p
})

type points struct {
	acts map[string]Action // read only after the first use
	arm  string

	// mu guards hits and live.
	mu   sync.Mutex
	hits map[string]int
	live bool
}

// Inject passes the failpoint name. Armed, it counts the hit and, if the
// hit is the one its action waits for, panics, exits the process, returns
// a *Error or sleeps. It is safe for concurrent use.
func Inject(name string) error {
	p := armed()
	a, ok := p.acts[name]
	if !ok {
		return nil
	}
	p.mu.Lock()
	if !p.live && p.arm != "" {
		if _, err := os.Stat(p.arm); err != nil {
			p.mu.Unlock()
			return nil
		}
	}
	p.live = true
	p.hits[name]++
	hit := p.hits[name]
	p.mu.Unlock()
	if a.Nth != 0 && hit != a.Nth {
		return nil
	}
	// Written straight to the file: the process may end on the next line.
	fmt.Fprintf(os.Stderr, "failpoint %s fired: %s (hit %d)\n", name, a.Text, hit)
	switch a.Kind {
	case Panic:
		panic(errors.New("failpoint " + name + ": " + a.Message))
	case Exit:
		os.Exit(a.Code)
	case Fail:
		return &Error{Name: name, Message: a.Message}
	case Sleep:
		time.Sleep(a.Sleep)
	}
	return nil
}
