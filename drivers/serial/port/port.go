// Package port opens the serial port a serial driver talks through, with
// the line settings its configuration gives, and says plainly why a port
// cannot be opened: the path that is missing and the ports there are, the
// group a service user needs. Both serial protocols (the line protocol and
// Modbus RTU) use it.
package port

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.bug.st/serial"

	"github.com/shadowgate/shadowgate/devices"
)

// Config is a serial port as a driver's options write it; a driver embeds
// it inline:
//
//	port: /dev/ttyUSB0
//	baud: 9600
//	parity: even     # none (default), even or odd
//	data_bits: 8     # 7 or 8 (default 8)
//	stop_bits: 1     # 1 (default) or 2
type Config struct {
	Port     string `yaml:"port"`
	Baud     int    `yaml:"baud"`
	DataBits int    `yaml:"data_bits"`
	Parity   string `yaml:"parity"`
	StopBits int    `yaml:"stop_bits"`
}

// Parity is a serial line's parity.
type Parity uint8

// The parities a port may have.
const (
	NoParity Parity = iota
	EvenParity
	OddParity
)

// Settings are a port's path and line settings, checked.
type Settings struct {
	Path     string
	Baud     int
	DataBits int
	Parity   Parity
	StopBits int
}

// Check checks c, reporting every problem at its place under at, and
// returns the settings with defaults filled in (defaultBaud, 8 data bits,
// no parity, 1 stop bit).
func (c *Config) Check(at devices.Place, defaultBaud int) (Settings, bool) {
	s := Settings{Path: c.Port, Baud: c.Baud, DataBits: c.DataBits, StopBits: c.StopBits}
	ok := true
	if s.Path == "" {
		at.At("port").Errorf("a port is required (the serial device, like /dev/ttyUSB0 or /dev/ttyACM0)")
		ok = false
	}
	if s.Baud == 0 {
		s.Baud = defaultBaud
	}
	if s.Baud < 50 || s.Baud > 4000000 {
		at.At("baud").Errorf("baud %d is not a serial line speed (common ones are 9600, 19200, 38400, 57600 and 115200)", c.Baud)
		ok = false
	}
	if s.DataBits == 0 {
		s.DataBits = 8
	}
	if s.DataBits != 7 && s.DataBits != 8 {
		at.At("data_bits").Errorf("data_bits %d: want 7 or 8", c.DataBits)
		ok = false
	}
	switch c.Parity {
	case "", "none":
		s.Parity = NoParity
	case "even":
		s.Parity = EvenParity
	case "odd":
		s.Parity = OddParity
	default:
		at.At("parity").Errorf("parity %q: want none, even or odd", c.Parity)
		ok = false
	}
	if s.StopBits == 0 {
		s.StopBits = 1
	}
	if s.StopBits != 1 && s.StopBits != 2 {
		at.At("stop_bits").Errorf("stop_bits %d: want 1 or 2", c.StopBits)
		ok = false
	}
	return s, ok
}

// CharTime is how long one character takes on the line: a start bit, the
// data bits, the parity bit if any and the stop bits.
func (s Settings) CharTime() time.Duration {
	bits := 1 + s.DataBits + s.StopBits
	if s.Parity != NoParity {
		bits++
	}
	baud := max(s.Baud, 1)
	return time.Duration(bits) * time.Second / time.Duration(baud)
}

// String writes the settings the way serial people do: "/dev/ttyUSB0
// 9600 8E1".
func (s Settings) String() string {
	p := "N"
	switch s.Parity {
	case EvenParity:
		p = "E"
	case OddParity:
		p = "O"
	}
	return s.Path + " " + strconv.Itoa(s.Baud) + " " + strconv.Itoa(s.DataBits) + p + strconv.Itoa(s.StopBits)
}

// Port is an open serial port.
type Port interface {
	io.ReadWriteCloser
	// SetReadTimeout bounds each Read. A Read that times out returns 0 and
	// no error, not an error.
	SetReadTimeout(d time.Duration) error
	// ResetInputBuffer drops what was received and not read yet.
	ResetInputBuffer() error
}

// listPorts is serial.GetPortsList, replaced in tests.
var listPorts = serial.GetPortsList

// Open opens the port with its settings. An error says what is wrong in
// the words of someone wiring it up: the path that does not exist and the
// ports that do, the dialout group for a permission error, another program
// holding the port.
func Open(s Settings) (Port, error) {
	mode := &serial.Mode{BaudRate: s.Baud, DataBits: s.DataBits, StopBits: serial.OneStopBit}
	if s.StopBits == 2 {
		mode.StopBits = serial.TwoStopBits
	}
	switch s.Parity {
	case EvenParity:
		mode.Parity = serial.EvenParity
	case OddParity:
		mode.Parity = serial.OddParity
	}
	p, err := serial.Open(s.Path, mode)
	if err != nil {
		return nil, explain(s.Path, err)
	}
	return p, nil
}

// ErrHeld is wrapped by OpenAs's error for a port another driver of this
// process has opened: one port is reached by one driver.
var ErrHeld = errors.New("the port is another driver's")

// Owner is one driver's hold on the ports it opens. A device node it has
// opened once stays its own until Release, through every close and reopen
// (an adapter unplugged and back): a second driver that names the same
// node under another name (a link under /dev/serial/by-id/) never reaches
// it, not even while the first has it closed.
type Owner struct {
	name string
}

// NewOwner returns the hold of the driver named name.
func NewOwner(name string) *Owner { return &Owner{name: name} }

// Release gives back every port o opened. The driver calls it when it
// closes.
func (o *Owner) Release() {
	held.mu.Lock()
	defer held.mu.Unlock()
	for k, w := range held.m {
		if w == o {
			delete(held.m, k)
		}
	}
}

// held are the device nodes the drivers of this process have opened, by
// resolved path, and whose they are.
var held = struct {
	// mu guards m.
	mu sync.Mutex
	m  map[string]*Owner
}{m: map[string]*Owner{}}

// OpenAs opens the port for o, unless another driver has opened its
// device node (under any name that resolves to it).
func OpenAs(s Settings, o *Owner) (Port, error) {
	key := filepath.Clean(s.Path)
	if real, err := filepath.EvalSymlinks(s.Path); err == nil {
		key = real
	}
	held.mu.Lock()
	w := held.m[key]
	if w != nil && w != o {
		held.mu.Unlock()
		return nil, fmt.Errorf("serial port %s (%s) is driver %s's: one port, one driver: %w", s.Path, key, w.name, ErrHeld)
	}
	held.m[key] = o // reserved while it opens, so no other driver slips in
	held.mu.Unlock()
	p, err := Open(s)
	if err != nil && w == nil {
		held.mu.Lock()
		delete(held.m, key)
		held.mu.Unlock()
	}
	return p, err
}

// explain turns an open error into one that says what to do.
func explain(path string, err error) error {
	var pe *serial.PortError
	if errors.As(err, &pe) {
		switch pe.Code() {
		case serial.PermissionDenied:
			return fmt.Errorf("serial port %s: permission denied: add the service user to the dialout group (and, for a hand-made device node, check its group): %w", path, err)
		case serial.PortBusy:
			return fmt.Errorf("serial port %s is held by another program (a modem manager, a serial console, another gateway): %w", path, err)
		case serial.PortNotFound:
			return fmt.Errorf("serial port %s is not there; %s: %w", path, present(), err)
		}
		return fmt.Errorf("serial port %s: %w", path, err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("serial port %s is not there (unplugged, or another name); %s: %w", path, present(), err)
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("serial port %s: permission denied: add the service user to the dialout group: %w", path, err)
	}
	return fmt.Errorf("serial port %s: %w", path, err)
}

// present says which serial ports this machine has.
func present() string {
	list, err := listPorts()
	if err != nil {
		return "the serial ports could not be listed (" + err.Error() + ")"
	}
	if len(list) == 0 {
		return "this machine has no serial ports now"
	}
	slices.Sort(list)
	const most = 12
	more := ""
	if len(list) > most {
		more = fmt.Sprintf(" and %d more", len(list)-most)
		list = list[:most]
	}
	return "the serial ports here are " + strings.Join(list, ", ") + more
}

// Backoff spaces out attempts to reach something that failed: Min, then
// doubling up to Max. The zero value waits 100ms doubling to 10s.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Next returns how long to wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi < lo {
		hi = max(lo, 10*time.Second)
	}
	if b.next < lo {
		b.next = lo
	}
	d := b.next
	b.next = min(b.next*2, hi)
	return d
}

// Reset starts the backoff again from Min, after a success.
func (b *Backoff) Reset() { b.next = 0 }
