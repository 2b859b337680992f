package modbus

// These tests hold the codec against an independent implementation,
// simonvetter/modbus: the bytes its client puts on the wire, and the
// responses its server builds. They prove the framing is not only the
// codec agreeing with itself.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"math"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	svmodbus "github.com/simonvetter/modbus"
	"go.uber.org/goleak"
)

var quiet = log.New(io.Discard, "", 0)

// wire listens as an RTU-over-TCP server and records each request frame
// its one client sends, answering each with exception 04 so the client
// returns at once. Its goroutine is owned by the test and ends when the
// client closes the connection.
type wire struct {
	mu     sync.Mutex
	frames [][]byte
	done   chan struct{}
}

func listenWire(t *testing.T) (*wire, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		conn, err := ln.Accept()
		_ = ln.Close()
		if err != nil {
			return
		}
		defer conn.Close()
		var buf []byte
		chunk := make([]byte, 300)
		for {
			n, err := conn.Read(chunk)
			if err != nil {
				return
			}
			buf = append(buf, chunk[:n]...)
			for len(buf) >= 8 {
				k := 8
				if buf[1] == 15 || buf[1] == 16 {
					k = 9 + int(buf[6])
				}
				if len(buf) < k {
					break
				}
				w.mu.Lock()
				w.frames = append(w.frames, slices.Clone(buf[:k]))
				w.mu.Unlock()
				if _, err := conn.Write(appendCRC([]byte{buf[0], buf[1] | 0x80, ServerDeviceFailure})); err != nil {
					return
				}
				buf = buf[k:]
			}
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-w.done })
	return w, ln.Addr().String()
}

func (w *wire) last(t *testing.T) []byte {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.frames) == 0 {
		t.Fatal("the client sent nothing")
	}
	return w.frames[len(w.frames)-1]
}

// Our encoder writes, byte for byte, what the independent client writes
// for the same request: every function code, and 32-bit values in both
// word orders.
func TestEncoderAgreesWithAnIndependentClient(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	w, addr := listenWire(t)
	c, err := svmodbus.NewClient(&svmodbus.ClientConfiguration{URL: "rtuovertcp://" + addr, Speed: 1000000,
		Timeout: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetUnitId(17); err != nil {
		t.Fatal(err)
	}
	point := func(order WordOrder, typ DataType, v float64) Request {
		r, err := (Point{Table: Holding, Address: 40, Type: typ, Order: order}).WriteNumber(17, v)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		name string
		call func() error
		want Request
	}{
		{"read coils", func() error { _, err := c.ReadCoils(19, 37); return err },
			Request{Unit: 17, Function: ReadCoils, Address: 19, Quantity: 37}},
		{"read discrete inputs", func() error { _, err := c.ReadDiscreteInputs(196, 22); return err },
			Request{Unit: 17, Function: ReadDiscreteInputs, Address: 196, Quantity: 22}},
		{"read holding registers", func() error { _, err := c.ReadRegisters(107, 3, svmodbus.HOLDING_REGISTER); return err },
			Request{Unit: 17, Function: ReadHoldingRegisters, Address: 107, Quantity: 3}},
		{"read input registers", func() error { _, err := c.ReadRegisters(8, 125, svmodbus.INPUT_REGISTER); return err },
			Request{Unit: 17, Function: ReadInputRegisters, Address: 8, Quantity: 125}},
		{"write coil on", func() error { return c.WriteCoil(172, true) },
			Request{Unit: 17, Function: WriteSingleCoil, Address: 172, Bits: []bool{true}}},
		{"write coil off", func() error { return c.WriteCoil(65535, false) },
			Request{Unit: 17, Function: WriteSingleCoil, Address: 65535, Bits: []bool{false}}},
		{"write register", func() error { return c.WriteRegister(1, 0xBEEF) },
			Request{Unit: 17, Function: WriteSingleRegister, Address: 1, Registers: []uint16{0xBEEF}}},
		{"write coils", func() error { return c.WriteCoils(19, bits(0xCD, 0x01)[:10]) },
			Request{Unit: 17, Function: WriteMultipleCoils, Address: 19, Bits: bits(0xCD, 0x01)[:10]}},
		{"write registers", func() error { return c.WriteRegisters(1, []uint16{10, 258}) },
			Request{Unit: 17, Function: WriteMultipleRegisters, Address: 1, Registers: []uint16{10, 258}}},
		{"write float32 high word first", func() error {
			_ = c.SetEncoding(svmodbus.BIG_ENDIAN, svmodbus.HIGH_WORD_FIRST)
			return c.WriteFloat32(40, 21.3)
		}, point(BigWords, Float32, 21.3)},
		{"write float32 low word first", func() error {
			_ = c.SetEncoding(svmodbus.BIG_ENDIAN, svmodbus.LOW_WORD_FIRST)
			return c.WriteFloat32(40, -0.5)
		}, point(LittleWords, Float32, -0.5)},
		{"write uint32 low word first", func() error {
			_ = c.SetEncoding(svmodbus.BIG_ENDIAN, svmodbus.LOW_WORD_FIRST)
			return c.WriteUint32(40, 0x12345678)
		}, point(LittleWords, Uint32, 0x12345678)},
		{"write uint32 high word first", func() error {
			_ = c.SetEncoding(svmodbus.BIG_ENDIAN, svmodbus.HIGH_WORD_FIRST)
			return c.WriteUint32(40, 0x12345678)
		}, point(BigWords, Uint32, 0x12345678)},
	} {
		if err := c.call(); !errors.Is(err, svmodbus.ErrServerDeviceFailure) {
			t.Fatalf("%s: the client's call = %v, want the wire's exception 04", c.name, err)
		}
		want, err := AppendRequest(nil, c.want)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.last(t); !bytes.Equal(got, want) {
			t.Errorf("%s: the client sent % X, our encoder % X", c.name, got, want)
		}
	}
}

// tables is the independent server's data, by its handler interface.
type tables struct {
	mu                sync.Mutex
	coils, discrete   []bool
	holding, input    []uint16
	coilWrites, wrote int
}

func span[T any](s []T, addr, q uint16) ([]T, error) {
	if int(addr)+int(q) > len(s) {
		return nil, svmodbus.ErrIllegalDataAddress
	}
	return s[addr : int(addr)+int(q)], nil
}

func (h *tables) HandleCoils(r *svmodbus.CoilsRequest) ([]bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, err := span(h.coils, r.Addr, r.Quantity)
	if err != nil {
		return nil, err
	}
	if r.IsWrite {
		copy(s, r.Args)
		h.coilWrites++
	}
	return slices.Clone(s), nil
}

func (h *tables) HandleDiscreteInputs(r *svmodbus.DiscreteInputsRequest) ([]bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, err := span(h.discrete, r.Addr, r.Quantity)
	return slices.Clone(s), err
}

func (h *tables) HandleHoldingRegisters(r *svmodbus.HoldingRegistersRequest) ([]uint16, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, err := span(h.holding, r.Addr, r.Quantity)
	if err != nil {
		return nil, err
	}
	if r.IsWrite {
		copy(s, r.Args)
		h.wrote++
	}
	return slices.Clone(s), nil
}

func (h *tables) HandleInputRegisters(r *svmodbus.InputRegistersRequest) ([]uint16, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Addr == 999 {
		return nil, svmodbus.ErrServerDeviceBusy
	}
	s, err := span(h.input, r.Addr, r.Quantity)
	return slices.Clone(s), err
}

// tcpExchange sends req's PDU to a Modbus TCP server and returns the
// response PDU framed for RTU: unit id, PDU, CRC.
func tcpExchange(t *testing.T, conn net.Conn, txid uint16, req Request) []byte {
	t.Helper()
	frame, err := AppendRequest(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	pdu := frame[1 : len(frame)-2]
	mbap := binary.BigEndian.AppendUint16(nil, txid)
	mbap = binary.BigEndian.AppendUint16(mbap, 0) // protocol id
	mbap = binary.BigEndian.AppendUint16(mbap, uint16(len(pdu)+1))
	mbap = append(mbap, req.Unit)
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write(append(mbap, pdu...)); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 7)
	if _, err := io.ReadFull(conn, head); err != nil {
		t.Fatalf("reading the MBAP header: %v", err)
	}
	if id := binary.BigEndian.Uint16(head); id != txid {
		t.Fatalf("transaction %d answered as %d", txid, id)
	}
	body := make([]byte, int(binary.BigEndian.Uint16(head[4:]))-1)
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatalf("reading the response PDU: %v", err)
	}
	return appendCRC(append([]byte{head[6]}, body...))
}

// Our decoder reads what the independent server answers, the data its
// handler gave and its exceptions.
func TestDecoderAgreesWithAnIndependentServer(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // the server has no Addr(): take a free port, with a small race
	h := &tables{coils: bits(0xCD, 0x6B, 0xB2), discrete: bits(0xAC, 0xDB, 0x35),
		holding: []uint16{0xAE41, 0x5652, 0x4340, 0, 0, 0, 0, 0}, input: []uint16{215, 0xFFF6, 0x41AA, 0x6666, 0x6666, 0x41AA}}
	srv, err := svmodbus.NewServer(&svmodbus.ServerConfiguration{URL: "tcp://" + addr, Timeout: 5 * time.Second,
		MaxClients: 2, Logger: quiet}, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	for i, c := range []struct {
		req  Request
		want Response
	}{
		{Request{Unit: 5, Function: ReadCoils, Address: 3, Quantity: 19}, Response{Bits: h.coils[3:22]}},
		{Request{Unit: 5, Function: ReadDiscreteInputs, Address: 0, Quantity: 24}, Response{Bits: h.discrete}},
		{Request{Unit: 5, Function: ReadHoldingRegisters, Address: 0, Quantity: 3}, Response{Registers: h.holding[:3]}},
		{Request{Unit: 5, Function: ReadInputRegisters, Address: 0, Quantity: 6}, Response{Registers: h.input}},
		{Request{Unit: 5, Function: WriteSingleCoil, Address: 1, Bits: []bool{true}}, Response{}},
		{Request{Unit: 5, Function: WriteMultipleCoils, Address: 8, Bits: []bool{true, true, false}}, Response{}},
		{Request{Unit: 5, Function: WriteSingleRegister, Address: 3, Registers: []uint16{0x1234}}, Response{}},
		{Request{Unit: 5, Function: WriteMultipleRegisters, Address: 4, Registers: []uint16{1, 2, 3}}, Response{}},
	} {
		got, err := Decode(c.req, tcpExchange(t, conn, uint16(i+1), c.req))
		if err != nil {
			t.Fatalf("%v: Decode: %v", c.req.Function, err)
		}
		if !slices.Equal(got.Bits, c.want.Bits) || !slices.Equal(got.Registers, c.want.Registers) {
			t.Errorf("%v: Decode = %+v, the handler gave %+v", c.req.Function, got, c.want)
		}
	}
	h.mu.Lock()
	if !h.coils[1] || !slices.Equal(h.coils[8:11], []bool{true, true, false}) || !slices.Equal(h.holding[3:7], []uint16{0x1234, 1, 2, 3}) {
		t.Errorf("after the writes the server holds coils %v, registers %04X", h.coils, h.holding)
	}
	h.mu.Unlock()

	// Numbers of each type and word order, from the registers it served.
	regs, err := Decode(Request{Unit: 5, Function: ReadInputRegisters, Address: 0, Quantity: 6},
		tcpExchange(t, conn, 20, Request{Unit: 5, Function: ReadInputRegisters, Address: 0, Quantity: 6}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    Point
		at   int
		want float64
	}{
		{Point{Table: Input, Type: Int16, Scale: 0.1}, 0, 21.5},
		{Point{Table: Input, Type: Int16, Scale: 0.1}, 1, -1},
		{Point{Table: Input, Type: Float32}, 2, 21.3},
		{Point{Table: Input, Type: Float32, Order: LittleWords}, 4, 21.3},
	} {
		v, err := c.p.Number(Response{Registers: regs.Registers[c.at:]})
		if err != nil || v != c.want {
			t.Errorf("%s at %d = %v, %v, want %v", c.p.Type, c.at, v, err, c.want)
		}
	}
	if f := math.Float32frombits(uint32(regs.Registers[2])<<16 | uint32(regs.Registers[3])); f != 21.3 {
		t.Errorf("the fixture's float32 is %v, want 21.3", f)
	}

	// The exception path: an address past the table, and a busy server.
	for i, c := range []struct {
		req  Request
		code byte
	}{
		{Request{Unit: 5, Function: ReadHoldingRegisters, Address: 7, Quantity: 2}, IllegalDataAddress},
		{Request{Unit: 5, Function: WriteSingleCoil, Address: 500, Bits: []bool{true}}, IllegalDataAddress},
		{Request{Unit: 5, Function: ReadInputRegisters, Address: 999, Quantity: 1}, ServerDeviceBusy},
	} {
		_, err := Decode(c.req, tcpExchange(t, conn, uint16(100+i), c.req))
		var ex *ExceptionError
		if !errors.As(err, &ex) || ex.Code != c.code || ex.Function != c.req.Function {
			t.Errorf("%v at %d: Decode = %v, want exception 0x%02X", c.req.Function, c.req.Address, err, c.code)
		}
	}
}
