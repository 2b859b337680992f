// Package line reads and writes the lines of the line protocol that the
// serial driver speaks to a microcontroller (firmware-fixtures/line-firmware
// /PROTOCOL.md): requests with an id, replies, refusals with a code, and
// unsolicited events, each line guarded by a CRC-8.
package line

import (
	"errors"
	"fmt"
	"strconv"
)

// MaxLine bounds a line with its CRC and its end, in bytes.
const MaxLine = 256

// CRC8 is CRC-8/SMBUS (polynomial 0x07, initial 0, no reflection, no final
// XOR) of b.
func CRC8(b []byte) byte {
	var c byte
	for _, x := range b {
		c = crcTable[c^x]
	}
	return c
}

var crcTable = func() (t [256]byte) {
	for i := range t {
		c := byte(i)
		for range 8 {
			if c&0x80 != 0 {
				c = c<<1 ^ 0x07
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

const hexDigits = "0123456789ABCDEF"

// AppendRequest appends the line of a request: id, verb and arguments,
// with its CRC and a newline. The caller gives tokens the protocol allows
// (see ValidName and ValidValue).
func AppendRequest(dst []byte, id uint16, verb string, args ...string) []byte {
	start := len(dst)
	dst = strconv.AppendUint(dst, uint64(id), 10)
	dst = append(dst, ' ')
	dst = append(dst, verb...)
	for _, a := range args {
		dst = append(dst, ' ')
		dst = append(dst, a...)
	}
	c := CRC8(dst[start:])
	return append(dst, ' ', '*', hexDigits[c>>4], hexDigits[c&15], '\n')
}

// Kind is what a device's line is.
type Kind uint8

// The kinds of line a device sends.
const (
	// OK is a reply: the request was carried out.
	OK Kind = iota + 1
	// Err is a reply: the request was refused, with a code.
	Err
	// Event is an unsolicited line: a sensor changed, or the device booted.
	Event
)

// Message is one line from a device.
type Message struct {
	Kind Kind
	// ID is the request an OK or Err answers.
	ID uint16
	// Fields are an OK's tokens after the id: a value read, or the
	// firmware, version and capabilities of INFO.
	Fields []string
	// Code and Text are an Err's code and words.
	Code, Text string
	// Name and Value are an Event's.
	Name, Value string
}

// ErrNoise is wrapped by every error of Parse: the line is to be discarded
// and counted, never acted on.
var ErrNoise = errors.New("line noise")

// Parse reads one line from a device, without or with its line end. It
// checks the CRC, the characters and the shape of the line.
func Parse(b []byte) (Message, error) {
	n := len(b)
	if n > 0 && b[n-1] == '\n' {
		n--
	}
	if n > 0 && b[n-1] == '\r' {
		n--
	}
	b = b[:n]
	if n > MaxLine-1 {
		return Message{}, noise("a line of %d bytes is over the limit of %d", n, MaxLine)
	}
	if n < 5 || b[n-4] != ' ' || b[n-3] != '*' {
		return Message{}, noise("no CRC at the end of the line")
	}
	want, ok := unhex(b[n-2], b[n-1])
	if !ok {
		return Message{}, noise("the CRC %q is not two upper-case hex digits", b[n-2:])
	}
	body := b[:n-4]
	for _, c := range body {
		if c < 0x20 || c > 0x7e {
			return Message{}, noise("a byte 0x%02x that is not printable ASCII", c)
		}
	}
	if got := CRC8(body); got != want {
		return Message{}, noise("the CRC is %02X, the line says %02X", got, want)
	}
	return parseBody(string(body))
}

func parseBody(s string) (Message, error) {
	verb, rest, _ := cut(s)
	switch verb {
	case "OK":
		idTok, rest, _ := cut(rest)
		id, err := parseID(idTok)
		if err != nil {
			return Message{}, err
		}
		m := Message{Kind: OK, ID: id}
		for rest != "" {
			var tok string
			tok, rest, _ = cut(rest)
			if tok == "" || !validToken(tok) {
				return Message{}, noise("OK %d: a field %q that is not a name or a value", id, tok)
			}
			m.Fields = append(m.Fields, tok)
		}
		return m, nil
	case "ERR":
		idTok, rest, _ := cut(rest)
		id, err := parseID(idTok)
		if err != nil {
			return Message{}, err
		}
		code, text, _ := cut(rest)
		if !ValidName(code) {
			return Message{}, noise("ERR %d: no code", id)
		}
		return Message{Kind: Err, ID: id, Code: code, Text: text}, nil
	case "EVT":
		name, rest, _ := cut(rest)
		val, extra, _ := cut(rest)
		if !ValidName(name) || !ValidValue(val) || extra != "" {
			return Message{}, noise("EVT: want a name and a value, got %q", rest)
		}
		return Message{Kind: Event, Name: name, Value: val}, nil
	}
	return Message{}, noise("a line that is neither OK, ERR nor EVT")
}

// cut splits s at its first space.
func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func parseID(s string) (uint16, error) {
	if len(s) == 0 || len(s) > 5 || s[0] == '0' {
		return 0, noise("the id %q is not a number from 1 to 65535", s)
	}
	var v uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, noise("the id %q is not a number from 1 to 65535", s)
		}
		v = v*10 + uint32(c-'0')
	}
	if v > 65535 {
		return 0, noise("the id %q is not a number from 1 to 65535", s)
	}
	return uint16(v), nil
}

func unhex(a, b byte) (byte, bool) {
	h, ok1 := nibble(a)
	l, ok2 := nibble(b)
	return h<<4 | l, ok1 && ok2
}

func nibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ValidName reports whether s is a name of the protocol: 1 to 32 of
// A-Z a-z 0-9 _ -.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

// ValidValue reports whether s is a value of the protocol: 1 to 64 of
// A-Z a-z 0-9 _ - . + (true, false, a number or an enum member).
func ValidValue(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !nameByte(c) && c != '.' && c != '+' {
			return false
		}
	}
	return true
}

// validToken is a field of an OK: a value, or an INFO capability
// (name:type:kind[:unit], an enum's type enum=a|b).
func validToken(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case nameByte(c), c == '.', c == '+', c == ':', c == '=', c == '|', c == '%', c == '/':
		default:
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func noise(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNoise}, args...)...)
}
