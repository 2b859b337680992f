// Package modbus speaks Modbus RTU to servers on a serial line (RS-485 or
// RS-232): the frames of the eight common function codes with their
// CRC-16, the typed errors of a response (noise, or an exception with its
// code), and the conversion of a capability's value to and from coils and
// registers ([Point]).
//
// The codec (crc.go, frame.go, point.go) is pure and does no I/O. The
// driver built on it (driver.go, bus.go) registers the driver type
// "modbus" (config.go): one request at a time on the line, the silent
// interval before each, reads tried again after noise, writes never; an
// exception is a refusal with its code, a write without a valid answer an
// unknown outcome. Units that stop answering are lost and probed until
// they answer again; a port that fails is opened again.
package modbus
