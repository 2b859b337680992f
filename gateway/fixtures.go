package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"periph.io/x/conn/v3/gpio"

	gpioboard "github.com/shadowgate/shadowgate/firmware-fixtures/gpio-board"
	linefirmware "github.com/shadowgate/shadowgate/firmware-fixtures/line-firmware"
	modbusboard "github.com/shadowgate/shadowgate/firmware-fixtures/modbus-board"
)

// Fixtures are the firmware simulators of the fixtures demo, running in
// this process: the line firmware and a Modbus RTU board, each on a
// pseudo-terminal, and a GPIO board on periph's test pins. The gateway
// reaches them through its real serial and GPIO drivers, as it would reach
// hardware.
type Fixtures struct {
	Line   *linefirmware.Board
	Modbus *modbusboard.Board
	GPIO   *gpioboard.Board
}

// The GPIO board's pin names: names no real board has, so that the demo
// run on a Raspberry Pi does not take its lines.
const (
	fixtureRelay    = "DEMO_RELAY"
	fixtureFeedback = "DEMO_FEEDBACK"
	fixtureFloat    = "DEMO_FLOAT"
)

// StartFixtures starts the simulators with the greenhouse's readings. Close
// stops them.
func StartFixtures() (*Fixtures, error) {
	f := &Fixtures{}
	var err error
	if f.Line, err = linefirmware.Start(linefirmware.State{Temperature: 19.4}); err != nil {
		return nil, fmt.Errorf("starting the line firmware: %w", err)
	}
	if f.Modbus, err = modbusboard.Start(modbusboard.Config{Units: []byte{1}}); err != nil {
		return nil, errors.Join(fmt.Errorf("starting the Modbus board: %w", err), f.Close())
	}
	f.Modbus.SetTemperature(1, 21.5)
	f.Modbus.SetHumidity(1, 64)
	f.Modbus.SetDiscrete(1, modbusboard.FloatSwitch, true) // the tank has water
	if f.GPIO, err = gpioboard.New(gpioboard.Options{Relay: fixtureRelay, Feedback: fixtureFeedback, Float: fixtureFloat,
		Delay: gpioDelay}); err != nil {
		return nil, errors.Join(fmt.Errorf("starting the GPIO board: %w", err), f.Close())
	}
	f.GPIO.SetFloat(gpio.High)
	return f, nil
}

// gpioDelay is how long the demo valve's feedback contact takes to
// follow, as a small relay's contact does.
const gpioDelay = 150 * time.Millisecond

// Configure fills the ports of the fixtures demo's configuration in:
// ${LINE_PORT} and ${MODBUS_PORT}.
func (f *Fixtures) Configure(yaml []byte) []byte {
	yaml = bytes.ReplaceAll(yaml, []byte("${LINE_PORT}"), []byte(f.Line.Path()))
	return bytes.ReplaceAll(yaml, []byte("${MODBUS_PORT}"), []byte(f.Modbus.Path()))
}

// Close stops every simulator that started.
func (f *Fixtures) Close() error {
	var err error
	if f.GPIO != nil {
		err = errors.Join(err, f.GPIO.Close())
	}
	if f.Modbus != nil {
		err = errors.Join(err, f.Modbus.Close())
	}
	if f.Line != nil {
		err = errors.Join(err, f.Line.Close())
	}
	return err
}
