// Package linefirmware plays the reference line firmware (a relay, a
// button and an analog temperature sensor, as line-firmware.ino) on a
// pseudo-terminal, so that the serial driver can be tested and demonstrated
// without a board. It speaks PROTOCOL.md from the device side and imports
// nothing of Shadowgate: it is the hardware, written apart from the code
// that talks to it. Faults make it misbehave as real boards and real lines
// do: garbage on the line, replies lost or out of order, a reset in the
// middle of a session, a relay that does not move.
package linefirmware

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/creack/pty"
)

// Version is the firmware version the board reports.
const Version = "1.0.0"

// Faults make the board misbehave. The zero value behaves.
type Faults struct {
	// Garbage sends a line of noise (no valid CRC) before every reply.
	Garbage bool
	// Drop loses this many of the next replies: the request is carried
	// out, its answer never arrives.
	Drop int
	// Reorder holds each reply back and sends it after the next one.
	Reorder bool
	// Stuck keeps the relay where it is, while answering OK to a SET.
	Stuck bool
	// BadCRC sends every reply with a CRC one off.
	BadCRC bool
}

// State is what the board holds.
type State struct {
	Relay       bool
	Button      bool
	Temperature float64
}

// Board is the firmware on a pseudo-terminal. It is safe for concurrent
// use; Close stops it.
type Board struct {
	master, slave *os.File
	done          chan struct{}

	// mu guards everything below and writes to master.
	mu     sync.Mutex
	state  State
	faults Faults
	held   []byte // a reply held back by Reorder
	got    int    // requests received
}

// Start opens a pseudo-terminal and runs the board on it. Path names the
// terminal the host opens.
func Start(initial State) (*Board, error) {
	ptmx, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	// pty leaves the master in blocking mode, where Close does not end a
	// read in progress; a non-blocking copy is one the runtime can wake.
	master, err := pollable(ptmx)
	if err != nil {
		_ = slave.Close()
		return nil, err
	}
	b := &Board{master: master, slave: slave, done: make(chan struct{}), state: initial}
	go b.serve()
	return b, nil
}

// pollable returns a non-blocking duplicate of f, which Close can wake
// from a read, and closes f.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("duplicating the pseudo-terminal: %w", err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("making the pseudo-terminal non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// Path is the terminal the host opens: "/dev/pts/3".
func (b *Board) Path() string { return b.slave.Name() }

// Close stops the board and closes the terminal; the host's reads end.
func (b *Board) Close() error {
	err := errors.Join(b.master.Close(), b.slave.Close())
	<-b.done
	return err
}

// SetFaults replaces the faults.
func (b *Board) SetFaults(f Faults) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults = f
}

// State returns what the board holds now.
func (b *Board) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Requests returns how many request lines the board has read.
func (b *Board) Requests() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got
}

// Press sets the button and says so with an event.
func (b *Board) Press(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state.Button = down
	b.sendLocked("EVT button " + strconv.FormatBool(down))
}

// SetTemperature sets what the sensor reads.
func (b *Board) SetTemperature(c float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state.Temperature = c
}

// Reset restarts the board, as a watchdog or a power dip would: the relay
// drops, a reply held back is lost, and it says it booted.
func (b *Board) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state.Relay, b.held = false, nil
	b.sendLocked("EVT boot " + Version)
}

// serve reads request lines until the terminal closes.
func (b *Board) serve() {
	defer close(b.done)
	r := bufio.NewReaderSize(b.master, 512)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // the terminal closed
		}
		b.mu.Lock()
		b.got++
		if reply, ok := b.answerLocked(strings.TrimRight(line, "\r\n")); ok {
			b.replyLocked(reply)
		}
		b.mu.Unlock()
	}
}

// answerLocked is the firmware's reply to one request line, if it has one.
func (b *Board) answerLocked(line string) (string, bool) {
	body, ok := checked(line)
	if !ok {
		return "", false // noise: a board cannot answer what it could not read
	}
	f := strings.Split(body, " ")
	id := f[0]
	if !plainID(id) || len(f) < 2 {
		return "", false // noise: a reply could not name it
	}
	switch {
	case f[1] == "PING" && len(f) == 2:
		return "OK " + id, true
	case f[1] == "INFO" && len(f) == 2:
		return "OK " + id + " line-firmware " + Version + " relay:bool:actuator button:bool:sensor temperature:number:sensor:C", true
	case f[1] == "GET" && len(f) == 3:
		switch f[2] {
		case "relay":
			return "OK " + id + " " + strconv.FormatBool(b.state.Relay), true
		case "button":
			return "OK " + id + " " + strconv.FormatBool(b.state.Button), true
		case "temperature":
			return "OK " + id + " " + strconv.FormatFloat(math.Round(b.state.Temperature*10)/10, 'f', -1, 64), true
		}
		return "ERR " + id + " E_UNKNOWN no capability " + f[2], true
	case f[1] == "SET" && len(f) == 4:
		switch f[2] {
		case "relay":
			v, err := strconv.ParseBool(f[3])
			if err != nil || (f[3] != "true" && f[3] != "false") {
				return "ERR " + id + " E_VALUE relay takes true or false", true
			}
			if !b.faults.Stuck {
				b.state.Relay = v
			}
			return "OK " + id, true
		case "button", "temperature":
			return "ERR " + id + " E_READONLY " + f[2] + " is a sensor", true
		}
		return "ERR " + id + " E_UNKNOWN no capability " + f[2], true
	}
	return "ERR " + id + " E_SYNTAX cannot read the request", true
}

// replyLocked sends a reply as the faults allow.
func (b *Board) replyLocked(body string) {
	if b.faults.Garbage {
		_, _ = b.master.Write([]byte("#~garbage~ 8N1 *ZZ\n"))
	}
	if b.faults.Drop > 0 {
		b.faults.Drop--
		return
	}
	line := b.line(body)
	if b.faults.Reorder {
		held := b.held
		b.held = line
		if held == nil {
			return
		}
		_, _ = b.master.Write(line)
		_, _ = b.master.Write(held)
		b.held = nil
		return
	}
	_, _ = b.master.Write(line)
}

// sendLocked sends an unsolicited line.
func (b *Board) sendLocked(body string) { _, _ = b.master.Write(b.line(body)) }

// plainID reports whether s is an id as a host writes it: 1 to 65535 in
// plain digits, no sign, no leading zero.
func plainID(s string) bool {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	n, _ := strconv.Atoi(s)
	return n <= 65535
}

// maxBody is where a reply's body is cut, so that it fits in a line.
const maxBody = 250

// line is body with its CRC and end; a body over maxBody bytes is cut.
func (b *Board) line(body string) []byte {
	if len(body) > maxBody {
		body = body[:maxBody]
	}
	c := crc8(body)
	if b.faults.BadCRC {
		c++
	}
	return fmt.Appendf(nil, "%s *%02X\n", body, c)
}

// checked returns the body of a line whose CRC holds.
func checked(line string) (string, bool) {
	i := strings.LastIndex(line, " *")
	if i < 0 || len(line)-i != 4 {
		return "", false
	}
	want, err := strconv.ParseUint(line[i+2:], 16, 8)
	if err != nil || strings.ToUpper(line[i+2:]) != line[i+2:] {
		return "", false
	}
	body := line[:i]
	return body, crc8(body) == byte(want)
}

// crc8 is CRC-8/SMBUS: polynomial 0x07, initial value 0, bit by bit, as the
// sketch computes it.
func crc8(s string) byte {
	var c byte
	for i := 0; i < len(s); i++ {
		c ^= s[i]
		for range 8 {
			if c&0x80 != 0 {
				c = c<<1 ^ 0x07
			} else {
				c <<= 1
			}
		}
	}
	return c
}
