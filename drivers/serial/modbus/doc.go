// Package modbus speaks Modbus RTU to servers on a serial line (RS-485 or
// RS-232): the frames of the eight common function codes with their
// CRC-16, the typed errors of a response (noise, or an exception with its
// code), and the conversion of a capability's value to and from coils and
// registers ([Point]).
//
// The codec (crc.go, frame.go, point.go) is pure and does no I/O.
package modbus
