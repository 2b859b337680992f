package modbus

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/shadowgate/shadowgate/drivers/serial/port"
)

// TestLateAnswerIsNotTakenForTheNext: an answer that comes after its
// request was given up on must not be taken for the next request's, which
// in RTU looks just like it (two reads of one unit).
func TestLateAnswerIsNotTakenForTheNext(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer master.Close()
	s := port.Settings{Path: slave.Name(), Baud: 115200, DataBits: 8, StopBits: 1}
	p, err := port.Open(s)
	slave.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The server answers every read of one register with the register's
	// address as its value: the first answer 250 ms late, the others at
	// once. The bus gives up on an answer after 200 ms and then waits for
	// 100 ms of quiet, so the late answer comes 50 ms after the first
	// request was given up on and 50 ms before the wait could end: the
	// middle of the window the wait is for, with room for a busy machine
	// on both sides (an answer later than the wait cannot be told from
	// the next one's, RTU having no request ids).
	go func() {
		buf := make([]byte, 8)
		for n := 0; ; n++ {
			// A request is 8 bytes; a busy machine hands them over in
			// pieces.
			if _, err := io.ReadFull(master, buf); err != nil {
				return
			}
			addr := binary.BigEndian.Uint16(buf[2:4])
			if n == 0 {
				time.Sleep(250 * time.Millisecond)
			}
			reply := []byte{buf[0], buf[1], 2, byte(addr >> 8), byte(addr)}
			c := CRC16(reply)
			reply = append(reply, byte(c), byte(c>>8))
			if _, err := master.Write(reply); err != nil {
				return
			}
		}
	}()
	b := newBus(s, 200*time.Millisecond)
	b.p = p
	if _, _, err := b.exchange(t.Context(), Request{Unit: 1, Function: ReadInputRegisters, Address: 7, Quantity: 1}); err == nil {
		t.Fatal("the late answer came in time; the test proves nothing")
	}
	resp, _, err := b.exchange(t.Context(), Request{Unit: 1, Function: ReadInputRegisters, Address: 9, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Registers[0]; got != 9 {
		t.Fatalf("the read of register 9 got %d: the late answer to register 7 was taken for it", got)
	}
}
