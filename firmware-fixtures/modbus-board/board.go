// Package modbusboard plays a common Modbus RTU relay-and-sensor board on a
// pseudo-terminal, so that the Modbus driver can be tested and demonstrated
// without a board or an RS-485 adapter. It speaks the protocol from the
// server side with its own CRC and framing and imports nothing of
// Shadowgate: it is the hardware, written apart from the code that talks
// to it.
//
// Each unit id the board answers has its own tables (a multi-drop line
// with several boards on it):
//
//	coils 0-7              relays 1-8
//	discrete inputs 0-7    relay feedback contacts: each follows its relay
//	discrete input 8       a float switch (SetDiscrete)
//	input register 0       temperature, int16, °C ×10
//	input register 1       relative humidity, uint16, % ×10
//	input registers 2-3    a float32 (flow, L/min), high word first
//	input registers 4-5    the same float32, low word first
//	holding registers 0-15 settings, read and written as they are
//
// It answers function codes 1, 2, 3, 4, 5, 6, 15 and 16, with exception
// 01 for another function, 02 for an address outside its tables and 03
// for a bad quantity, byte count or coil value. Like a real server it
// stays silent to a frame with a bad CRC or for another unit id.
//
// [Faults] make it misbehave as real boards and lines do. [Board.Unplug]
// and [Board.Replug] play a USB adapter pulled and plugged in again: a
// pseudo-terminal gets a new name when it is opened again, so a test that
// needs a stable path gives [Config.Link], a symbolic link the board keeps
// pointing at its terminal (as udev keeps /dev/serial/by-id) and removes
// while it is unplugged.
package modbusboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// Sizes of each unit's tables.
const (
	NumCoils    = 8
	NumDiscrete = 16
	NumInput    = 8
	NumHolding  = 16
)

// Addresses of the board's sensors.
const (
	FloatSwitch      = 8 // discrete input
	TemperatureReg   = 0 // input register, int16 ×10
	HumidityReg      = 1 // input register, uint16 ×10
	FlowRegBig       = 2 // input registers 2-3, float32 high word first
	FlowRegLittle    = 4 // input registers 4-5, float32 low word first
	feedbackDiscrete = 0 // discrete inputs 0-7 follow coils 0-7
)

// silence ends a frame whose length the board cannot tell from its bytes
// (noise, an unknown function): no byte for this long. A host writes a
// request in one go, so a known frame is taken as soon as it is complete.
const silence = 5 * time.Millisecond

// Config says what the board is.
type Config struct {
	// Units are the unit ids the board answers; nil means unit 1.
	Units []byte
	// Link, when set, is a symbolic link kept pointing at the terminal,
	// the stable path a host opens.
	Link string
}

// Faults make the board misbehave. The zero value behaves. Each count is
// the number of next replies it spoils; a reply is spoiled by at most one
// fault, the first that applies in this order.
type Faults struct {
	// Busy answers exception 06 (server device busy) without carrying the
	// request out.
	Busy int
	// Drop carries the request out and loses its reply (a lost response).
	Drop int
	// Garbage sends bytes of noise as long as the reply instead of it.
	Garbage int
	// BadCRC sends the reply with its CRC one off.
	BadCRC int
	// Short sends the reply without its last three bytes.
	Short int
	// WrongUnit sends the reply as from another unit id (the next one).
	WrongUnit int
	// Stuck lists coils that answer writes but do not move.
	Stuck []uint16
}

// Tables is what one unit holds.
type Tables struct {
	Coils    []bool
	Discrete []bool
	Input    []uint16
	Holding  []uint16
}

// unit is one server on the line.
type unit struct {
	Tables
	writes int // write requests received, carried out or not
}

// Board is the board on a pseudo-terminal. It is safe for concurrent use.
// It owns one goroutine that serves the terminal while plugged in; Unplug
// and Close stop it and wait for it.
type Board struct {
	link string

	// mu guards everything below and writes to master.
	mu            sync.Mutex
	master, slave *os.File
	done          chan struct{} // closed when the serving goroutine ends; nil when unplugged
	units         map[byte]*unit
	faults        Faults
	requests      int // frames read with a good CRC, for any unit
	closed        bool
}

// Start opens a pseudo-terminal and runs the board on it.
func Start(c Config) (*Board, error) {
	ids := c.Units
	if len(ids) == 0 {
		ids = []byte{1}
	}
	b := &Board{link: c.Link, units: map[byte]*unit{}}
	for _, id := range ids {
		if id < 1 || id > 247 {
			return nil, fmt.Errorf("unit id %d is outside 1..247", id)
		}
		b.units[id] = &unit{Tables: Tables{
			Coils: make([]bool, NumCoils), Discrete: make([]bool, NumDiscrete),
			Input: make([]uint16, NumInput), Holding: make([]uint16, NumHolding),
		}}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.plugLocked(); err != nil {
		return nil, err
	}
	return b, nil
}

// plugLocked opens a terminal, points the link at it and serves it.
func (b *Board) plugLocked() error {
	ptmx, slave, err := pty.Open()
	if err != nil {
		return fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	// pty leaves the master blocking, where neither Close nor a deadline
	// ends a read; a non-blocking copy is one the runtime can wake.
	master, err := pollable(ptmx)
	if err != nil {
		_ = slave.Close()
		return err
	}
	if b.link != "" {
		tmp := b.link + ".new"
		_ = os.Remove(tmp)
		if err := os.Symlink(slave.Name(), tmp); err != nil {
			return errors.Join(fmt.Errorf("linking %s: %w", b.link, err), master.Close(), slave.Close())
		}
		if err := os.Rename(tmp, b.link); err != nil {
			return errors.Join(fmt.Errorf("linking %s: %w", b.link, err), master.Close(), slave.Close())
		}
	}
	// The board keeps the slave open, so the master reads no EIO between
	// two opens by a host.
	b.master, b.slave, b.done = master, slave, make(chan struct{})
	go b.serve(master, b.done)
	return nil
}

// pollable returns a non-blocking duplicate of f and closes f.
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

// Path is the terminal the host opens now ("/dev/pts/3"), or the link
// when the board has one. It is "" while unplugged and no link is set.
func (b *Board) Path() string {
	if b.link != "" {
		return b.link
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.slave == nil {
		return ""
	}
	return b.slave.Name()
}

// Unplug closes the terminal as a pulled USB adapter does: a host's reads
// and writes fail, and the link (if any) is removed. It waits for the
// serving goroutine to end.
func (b *Board) Unplug() error {
	b.mu.Lock()
	master, slave, done := b.master, b.slave, b.done
	b.master, b.slave, b.done = nil, nil, nil
	b.mu.Unlock()
	if done == nil {
		return nil
	}
	var err error
	if b.link != "" {
		if e := os.Remove(b.link); e != nil && !errors.Is(e, os.ErrNotExist) {
			err = fmt.Errorf("removing %s: %w", b.link, e)
		}
	}
	err = errors.Join(err, master.Close(), slave.Close())
	<-done
	return err
}

// Replug opens a new terminal after Unplug, keeping the tables: the board
// was not powered off, only its adapter. Path may change (see the package
// doc).
func (b *Board) Replug() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("the board is closed")
	}
	if b.done != nil {
		return errors.New("the board is plugged in already")
	}
	return b.plugLocked()
}

// Close stops the board for good.
func (b *Board) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.Unplug()
}

// SetFaults replaces the faults.
func (b *Board) SetFaults(f Faults) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f.Stuck = slices.Clone(f.Stuck)
	b.faults = f
}

// Faults returns the faults left: counts go down as replies are spoiled.
func (b *Board) Faults() Faults {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.faults
	f.Stuck = slices.Clone(f.Stuck)
	return f
}

// State returns a copy of what a unit holds; ok is false for a unit the
// board does not answer.
func (b *Board) State(id byte) (t Tables, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.units[id]
	if !ok {
		return Tables{}, false
	}
	return Tables{Coils: slices.Clone(u.Coils), Discrete: slices.Clone(u.Discrete),
		Input: slices.Clone(u.Input), Holding: slices.Clone(u.Holding)}, true
}

// Writes returns how many write requests a unit received with a good CRC,
// whether it carried them out, refused them, or lost the reply.
func (b *Board) Writes(id byte) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u, ok := b.units[id]; ok {
		return u.writes
	}
	return 0
}

// Requests returns how many frames with a good CRC the board read, for any
// unit id.
func (b *Board) Requests() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}

// with runs f on a unit's tables; it does nothing for a unit the board
// does not answer or an address outside the table.
func (b *Board) with(id byte, f func(u *unit)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u, ok := b.units[id]; ok {
		f(u)
	}
}

// SetCoil sets a relay by hand (and its feedback contact).
func (b *Board) SetCoil(id byte, addr int, on bool) {
	b.with(id, func(u *unit) {
		if addr >= 0 && addr < NumCoils {
			u.Coils[addr] = on
			u.Discrete[feedbackDiscrete+addr] = on
		}
	})
}

// SetDiscrete sets a discrete input: the float switch, or a feedback
// contact that disagrees with its relay (a welded contact).
func (b *Board) SetDiscrete(id byte, addr int, on bool) {
	b.with(id, func(u *unit) {
		if addr >= 0 && addr < NumDiscrete {
			u.Discrete[addr] = on
		}
	})
}

// SetInput sets an input register to a raw value.
func (b *Board) SetInput(id byte, addr int, v uint16) {
	b.with(id, func(u *unit) {
		if addr >= 0 && addr < NumInput {
			u.Input[addr] = v
		}
	})
}

// SetHolding sets a holding register to a raw value.
func (b *Board) SetHolding(id byte, addr int, v uint16) {
	b.with(id, func(u *unit) {
		if addr >= 0 && addr < NumHolding {
			u.Holding[addr] = v
		}
	})
}

// SetTemperature sets the temperature sensor, in °C (rounded to 0.1).
func (b *Board) SetTemperature(id byte, c float64) {
	b.SetInput(id, TemperatureReg, uint16(int16(math.Round(c*10))))
}

// SetHumidity sets the humidity sensor, in % (rounded to 0.1).
func (b *Board) SetHumidity(id byte, pct float64) {
	b.SetInput(id, HumidityReg, uint16(math.Round(pct*10)))
}

// SetFlow sets the float32 flow sensor, in both word orders.
func (b *Board) SetFlow(id byte, f float32) {
	v := math.Float32bits(f)
	b.with(id, func(u *unit) {
		u.Input[FlowRegBig], u.Input[FlowRegBig+1] = uint16(v>>16), uint16(v)
		u.Input[FlowRegLittle], u.Input[FlowRegLittle+1] = uint16(v), uint16(v>>16)
	})
}

// serve reads frames from the terminal until it closes.
func (b *Board) serve(master *os.File, done chan struct{}) {
	defer close(done)
	var buf []byte
	chunk := make([]byte, 512)
	for {
		if len(buf) == 0 {
			_ = master.SetReadDeadline(time.Time{})
		} else {
			_ = master.SetReadDeadline(time.Now().Add(silence))
		}
		n, err := master.Read(chunk)
		buf = append(buf, chunk[:n]...)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The line fell silent: what is there is one frame, whole or not.
			b.frame(master, buf)
			buf = buf[:0]
			continue
		case err != nil:
			return // closed, or the terminal hung up
		}
		for {
			k := frameLen(buf)
			if k == 0 || len(buf) < k {
				break
			}
			if !checkCRC(buf[:k]) {
				break // noise: wait for silence and drop it all
			}
			b.frame(master, buf[:k])
			buf = append(buf[:0], buf[k:]...)
		}
		if len(buf) > 512 {
			buf = buf[:0] // no request is that long: a babbling line
		}
	}
}

// frameLen is the length of the request starting buf, or 0 when its bytes
// do not tell (yet).
func frameLen(buf []byte) int {
	if len(buf) < 2 {
		return 0
	}
	switch buf[1] {
	case 1, 2, 3, 4, 5, 6:
		return 8
	case 15, 16:
		if len(buf) < 7 {
			return 0
		}
		return 9 + int(buf[6])
	}
	return 0
}

// frame answers one frame, as the faults allow.
func (b *Board) frame(master *os.File, f []byte) {
	if len(f) < 4 || !checkCRC(f) {
		return // a server cannot answer what it could not read
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests++
	u, ok := b.units[f[0]]
	if !ok {
		return // another server's
	}
	fn := f[1]
	if fn == 5 || fn == 6 || fn == 15 || fn == 16 {
		u.writes++
	}
	if b.faults.Busy > 0 {
		b.faults.Busy--
		b.sendLocked(master, exception(f[0], fn, 0x06))
		return
	}
	reply := b.answerLocked(u, f)
	switch {
	case b.faults.Drop > 0:
		b.faults.Drop--
		return
	case b.faults.Garbage > 0:
		b.faults.Garbage--
		g := make([]byte, len(reply))
		for i := range g {
			g[i] = byte(0xA5 ^ i*0x3B)
		}
		reply = g
	case b.faults.BadCRC > 0:
		b.faults.BadCRC--
		reply[len(reply)-1]++
	case b.faults.Short > 0:
		b.faults.Short--
		reply = reply[:max(len(reply)-3, 1)]
	case b.faults.WrongUnit > 0:
		b.faults.WrongUnit--
		reply[0]++
		reply = withCRC(reply[:len(reply)-2])
	}
	b.sendLocked(master, reply)
}

func (b *Board) sendLocked(master *os.File, reply []byte) { _, _ = master.Write(reply) }

// answerLocked carries out the request f to u and returns the reply frame.
func (b *Board) answerLocked(u *unit, f []byte) []byte {
	id, fn := f[0], f[1]
	if frameLen(f) != len(f) {
		if fn < 1 || (fn > 6 && fn != 15 && fn != 16) {
			return exception(id, fn, 0x01)
		}
		return exception(id, fn, 0x03) // a length that disagrees with its function
	}
	addr, q := int(binary.BigEndian.Uint16(f[2:])), int(binary.BigEndian.Uint16(f[4:]))
	switch fn {
	case 1, 2:
		bits := u.Coils
		if fn == 2 {
			bits = u.Discrete
		}
		if q < 1 || q > 2000 {
			return exception(id, fn, 0x03)
		}
		if addr+q > len(bits) {
			return exception(id, fn, 0x02)
		}
		out := []byte{id, fn, byte((q + 7) / 8)}
		out = append(out, pack(bits[addr:addr+q])...)
		return withCRC(out)
	case 3, 4:
		regs := u.Holding
		if fn == 4 {
			regs = u.Input
		}
		if q < 1 || q > 125 {
			return exception(id, fn, 0x03)
		}
		if addr+q > len(regs) {
			return exception(id, fn, 0x02)
		}
		out := []byte{id, fn, byte(2 * q)}
		for _, v := range regs[addr : addr+q] {
			out = binary.BigEndian.AppendUint16(out, v)
		}
		return withCRC(out)
	case 5:
		if q != 0xFF00 && q != 0 {
			return exception(id, fn, 0x03)
		}
		if addr >= NumCoils {
			return exception(id, fn, 0x02)
		}
		b.setCoilLocked(u, addr, q == 0xFF00)
		return withCRC(slices.Clone(f[:6]))
	case 6:
		if addr >= NumHolding {
			return exception(id, fn, 0x02)
		}
		u.Holding[addr] = uint16(q)
		return withCRC(slices.Clone(f[:6]))
	case 15:
		if q < 1 || q > 1968 || int(f[6]) != (q+7)/8 {
			return exception(id, fn, 0x03)
		}
		if addr+q > NumCoils {
			return exception(id, fn, 0x02)
		}
		for i := range q {
			b.setCoilLocked(u, addr+i, f[7+i/8]&(1<<(i%8)) != 0)
		}
		return withCRC(slices.Clone(f[:6]))
	case 16:
		if q < 1 || q > 123 || int(f[6]) != 2*q {
			return exception(id, fn, 0x03)
		}
		if addr+q > NumHolding {
			return exception(id, fn, 0x02)
		}
		for i := range q {
			u.Holding[addr+i] = binary.BigEndian.Uint16(f[7+2*i:])
		}
		return withCRC(slices.Clone(f[:6]))
	}
	return exception(id, fn, 0x01)
}

// setCoilLocked moves a relay and its feedback contact, unless it is stuck.
func (b *Board) setCoilLocked(u *unit, addr int, on bool) {
	if slices.Contains(b.faults.Stuck, uint16(addr)) {
		return
	}
	u.Coils[addr] = on
	u.Discrete[feedbackDiscrete+addr] = on
}

func exception(id, fn, code byte) []byte { return withCRC([]byte{id, fn | 0x80, code}) }

// pack packs bits, the first in bit 0 of the first byte.
func pack(bits []bool) []byte {
	out := make([]byte, (len(bits)+7)/8)
	for i, on := range bits {
		if on {
			out[i/8] |= 1 << (i % 8)
		}
	}
	return out
}

// crc16 is CRC-16/MODBUS, bit by bit, as a small firmware computes it.
func crc16(b []byte) uint16 {
	c := uint16(0xFFFF)
	for _, x := range b {
		c ^= uint16(x)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xA001
			} else {
				c >>= 1
			}
		}
	}
	return c
}

func withCRC(b []byte) []byte {
	c := crc16(b)
	return append(b, byte(c), byte(c>>8))
}

func checkCRC(f []byte) bool {
	n := len(f)
	return n >= 4 && crc16(f[:n-2]) == uint16(f[n-2])|uint16(f[n-1])<<8
}
