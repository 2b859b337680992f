package opcua

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gopcua/opcua/ua"
)

// maxNodeIDLen bounds a node id as written in the configuration, in bytes.
const maxNodeIDLen = 4096

// parseNodeID parses a node id as OPC UA's text form writes it:
// an optional namespace index ("ns=2;") followed by a numeric ("i=1001"),
// string ("s=Tank.Level"), GUID ("g=72962B91-FA75-4AE6-8D28-B404DC7DAF63")
// or opaque ("b=" and standard base64) identifier. Unlike ua.ParseNodeID it
// takes no shorthand (a bare string in namespace 0) and no namespace URI
// ("nsu="), and it says what is wrong in the terms of the text.
func parseNodeID(s string) (*ua.NodeID, error) {
	if s == "" {
		return nil, errors.New("a node id is required (write it like ns=2;s=Tank.Level or ns=3;i=1001)")
	}
	if len(s) > maxNodeIDLen {
		return nil, fmt.Errorf("a node id of %d bytes is longer than the limit of %d", len(s), maxNodeIDLen)
	}
	if !utf8.ValidString(s) {
		return nil, errors.New("the node id is not valid UTF-8")
	}
	rest := s
	var ns uint16
	if strings.HasPrefix(rest, "nsu=") {
		return nil, fmt.Errorf("%q names its namespace by URI (nsu=); write the namespace index instead, like ns=2;s=Tank.Level (shadowgate opcua browse shows it)", s)
	}
	if strings.HasPrefix(rest, "ns=") {
		idx, after, found := strings.Cut(rest[len("ns="):], ";")
		if !found {
			return nil, fmt.Errorf("%q has a namespace without the identifier after it (write it like ns=2;s=Tank.Level)", s)
		}
		n, err := strconv.ParseUint(idx, 10, 16)
		if err != nil || (len(idx) > 1 && idx[0] == '0') {
			return nil, fmt.Errorf("%q: namespace index %q is not a whole number from 0 to 65535", s, idx)
		}
		ns, rest = uint16(n), after
	}
	if len(rest) < 2 || rest[1] != '=' {
		return nil, fmt.Errorf("%q has no identifier (want i=, s=, g= or b= after the namespace, like ns=2;s=Tank.Level)", s)
	}
	kind, id := rest[0], rest[2:]
	switch kind {
	case 'i':
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil || (len(id) > 1 && id[0] == '0') {
			return nil, fmt.Errorf("%q: numeric identifier %q is not a whole number from 0 to 4294967295", s, id)
		}
		return ua.NewNumericNodeID(ns, uint32(n)), nil
	case 's':
		if id == "" {
			return nil, fmt.Errorf("%q has an empty string identifier", s)
		}
		return ua.NewStringNodeID(ns, id), nil
	case 'g':
		if !validGUID(id) {
			return nil, fmt.Errorf("%q: GUID identifier %q is not written as 8-4-4-4-12 hexadecimal digits", s, id)
		}
		return ua.NewGUIDNodeID(ns, id), nil
	case 'b':
		b, err := base64.StdEncoding.Strict().DecodeString(id)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%q: opaque identifier %q is not standard base64 of at least one byte", s, id)
		}
		return ua.NewByteStringNodeID(ns, b), nil
	}
	return nil, fmt.Errorf("%q: identifier type %q is not one of i (numeric), s (string), g (GUID) or b (opaque)", s, string(kind))
}

// validGUID reports whether s is 8-4-4-4-12 hexadecimal digits.
func validGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range []byte(s) {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
