package modbusboard

import (
	"errors"
	"io"
	"log"
	"slices"
	"testing"
	"time"

	"github.com/simonvetter/modbus"
	"go.uber.org/goleak"
)

// An independent RTU client, simonvetter/modbus over goburrow/serial,
// speaks to the board: the board's framing is not only its own idea.
func TestBoardAgreesWithAnIndependentClient(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b := start(t, Config{Units: []byte{1, 9}})
	c, err := modbus.NewClient(&modbus.ClientConfiguration{URL: "rtu://" + b.Path(), Speed: 115200,
		StopBits: 1, Timeout: 300 * time.Millisecond, Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetUnitId(9); err != nil {
		t.Fatal(err)
	}
	b.SetTemperature(9, 21.5)
	b.SetHumidity(9, 55.5)
	b.SetFlow(9, 12.25)
	b.SetDiscrete(9, FloatSwitch, true)

	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("WriteCoil (5)", c.WriteCoil(0, true))
	must("WriteCoils (15)", c.WriteCoils(2, []bool{true, false, true}))
	coils, err := c.ReadCoils(0, 8) // 1
	must("ReadCoils (1)", err)
	if want := []bool{true, false, true, false, true, false, false, false}; !slices.Equal(coils, want) {
		t.Errorf("ReadCoils = %v, want %v", coils, want)
	}
	di, err := c.ReadDiscreteInputs(0, 9) // 2
	must("ReadDiscreteInputs (2)", err)
	if want := []bool{true, false, true, false, true, false, false, false, true}; !slices.Equal(di, want) {
		t.Errorf("ReadDiscreteInputs = %v, want the relays' feedback and the float switch %v", di, want)
	}
	in, err := c.ReadRegisters(0, 2, modbus.INPUT_REGISTER) // 4
	must("ReadRegisters input (4)", err)
	if !slices.Equal(in, []uint16{215, 555}) {
		t.Errorf("temperature and humidity = %v, want [215 555]", in)
	}
	must("SetEncoding high word first", c.SetEncoding(modbus.BIG_ENDIAN, modbus.HIGH_WORD_FIRST))
	if f, err := c.ReadFloat32(FlowRegBig, modbus.INPUT_REGISTER); err != nil || f != 12.25 {
		t.Errorf("ReadFloat32 high word first = %v, %v, want 12.25", f, err)
	}
	must("SetEncoding low word first", c.SetEncoding(modbus.BIG_ENDIAN, modbus.LOW_WORD_FIRST))
	if f, err := c.ReadFloat32(FlowRegLittle, modbus.INPUT_REGISTER); err != nil || f != 12.25 {
		t.Errorf("ReadFloat32 low word first = %v, %v, want 12.25", f, err)
	}
	must("WriteUint32 low word first (16)", c.WriteUint32(4, 0x00010002))
	must("SetEncoding high word first", c.SetEncoding(modbus.BIG_ENDIAN, modbus.HIGH_WORD_FIRST))
	must("WriteUint32 high word first (16)", c.WriteUint32(6, 0x00030004))
	must("WriteRegister (6)", c.WriteRegister(0, 0xBEEF))
	hr, err := c.ReadRegisters(0, 8, modbus.HOLDING_REGISTER) // 3
	must("ReadRegisters holding (3)", err)
	if want := []uint16{0xBEEF, 0, 0, 0, 2, 1, 3, 4}; !slices.Equal(hr, want) {
		t.Errorf("holding registers = %04X, want %04X", hr, want)
	}
	st, _ := b.State(9)
	if !slices.Equal(st.Holding[:8], hr) || b.Writes(9) != 5 {
		t.Errorf("the board holds %04X after %d writes; the client read %04X after 5", st.Holding[:8], b.Writes(9), hr)
	}
	if _, err := c.ReadRegisters(NumHolding, 1, modbus.HOLDING_REGISTER); !errors.Is(err, modbus.ErrIllegalDataAddress) {
		t.Errorf("a read past the holding registers = %v, want illegal data address", err)
	}
	b.SetFaults(Faults{Busy: 1})
	if err := c.WriteCoil(1, true); !errors.Is(err, modbus.ErrServerDeviceBusy) {
		t.Errorf("a write to a busy board = %v, want server device busy", err)
	}
	if st, _ := b.State(1); st.Coils[0] {
		t.Error("unit 1 moved: a write to unit 9 reached it")
	}
}
