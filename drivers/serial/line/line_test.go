package line

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// device returns the line a device sends for body, with its CRC.
func device(body string) []byte {
	c := CRC8([]byte(body))
	return fmt.Appendf(nil, "%s *%02X\n", body, c)
}

func TestCRC8CheckValue(t *testing.T) {
	if got := CRC8([]byte("123456789")); got != 0xF4 {
		t.Fatalf("CRC8(123456789) = %02X, want F4 (CRC-8/SMBUS)", got)
	}
}

func TestAppendRequest(t *testing.T) {
	got := string(AppendRequest(nil, 7, "SET", "relay", "true"))
	want := fmt.Sprintf("7 SET relay true *%02X\n", CRC8([]byte("7 SET relay true")))
	if got != want {
		t.Fatalf("AppendRequest = %q, want %q", got, want)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		line string
		want Message
	}{
		{"OK 7", Message{Kind: OK, ID: 7}},
		{"OK 65535 21.5", Message{Kind: OK, ID: 65535, Fields: []string{"21.5"}}},
		{"OK 2 line-firmware 1.2.0 relay:bool:actuator temp:number:sensor:C mode:enum=auto|manual:actuator",
			Message{Kind: OK, ID: 2, Fields: []string{"line-firmware", "1.2.0", "relay:bool:actuator", "temp:number:sensor:C", "mode:enum=auto|manual:actuator"}}},
		{"ERR 9 E_VALUE 300 is above the maximum 255", Message{Kind: Err, ID: 9, Code: "E_VALUE", Text: "300 is above the maximum 255"}},
		{"ERR 9 E_BUSY", Message{Kind: Err, ID: 9, Code: "E_BUSY"}},
		{"EVT button true", Message{Kind: Event, Name: "button", Value: "true"}},
		{"EVT boot 1.2.0", Message{Kind: Event, Name: "boot", Value: "1.2.0"}},
	} {
		for _, end := range []string{"", "\r"} {
			l := device(c.line)
			if end != "" {
				l = append(l[:len(l)-1], '\r', '\n')
			}
			got, err := Parse(l)
			if err != nil {
				t.Fatalf("Parse(%q): %v", l, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Parse(%q) = %+v, want %+v", l, got, c.want)
			}
		}
	}
}

// Every malformed line is noise: discarded, never acted on, never a panic.
func TestParseRefusesNoise(t *testing.T) {
	good := device("OK 7 true")
	flipped := append([]byte(nil), good...)
	flipped[3] = '8' // OK 8 true, with 7's CRC
	for name, l := range map[string][]byte{
		"empty":             nil,
		"no crc":            []byte("OK 7 true\n"),
		"bad crc":           flipped,
		"lower-case crc":    []byte(strings.ToLower(string(good))),
		"crc not hex":       []byte("OK 7 true *G1\n"),
		"not ascii":         device("OK 7 tr\xc3\xbce"),
		"control byte":      device("OK 7 tr\x01ue"),
		"too long":          device("OK 7 " + strings.Repeat("x", 300)),
		"unknown kind":      device("HELLO 7"),
		"request echoed":    device("7 GET relay"),
		"id zero":           device("OK 0"),
		"id leading zero":   device("OK 07"),
		"id too big":        device("OK 65536"),
		"id not a number":   device("OK seven"),
		"err without code":  device("ERR 7"),
		"err bad code":      device("ERR 7 E?X text"),
		"evt without value": device("EVT button"),
		"evt extra field":   device("EVT button true now"),
		"double space":      device("OK 7  true"),
		"bad field":         device("OK 7 tr\"ue"),
	} {
		m, err := Parse(l)
		if err == nil || !errors.Is(err, ErrNoise) {
			t.Errorf("%s: Parse(%q) = %+v, %v; want line noise", name, l, m, err)
		}
	}
}

// FuzzParse: no line panics the parser, and a line it accepts says the
// same once written again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"OK 7", "OK 1 21.5", "ERR 3 E_VALUE too high", "EVT button true",
		"OK 2 line-firmware 1.2.0 relay:bool:actuator temp:number:sensor:C", "OK 7 true *00"} {
		f.Add(device(s))
	}
	f.Add([]byte("OK 7 true *XX\r\n"))
	f.Add([]byte(" *00\n"))
	f.Add(device("ERR 7 E_X  two spaces of text "))
	f.Add(device("OK 7 "))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrNoise) {
				t.Fatalf("Parse(%q) = %v, not line noise", b, err)
			}
			return
		}
		again, err := Parse(device(body(m)))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("Parse(%q) = %+v; written again it parses as %+v, %v", b, m, again, err)
		}
	})
}

// body writes m as a device would.
func body(m Message) string {
	switch m.Kind {
	case OK:
		return strings.TrimSpace(fmt.Sprintf("OK %d %s", m.ID, strings.Join(m.Fields, " ")))
	case Err:
		if m.Text == "" {
			return fmt.Sprintf("ERR %d %s", m.ID, m.Code)
		}
		return fmt.Sprintf("ERR %d %s %s", m.ID, m.Code, m.Text)
	}
	return "EVT " + m.Name + " " + m.Value
}

// BenchmarkParse reads reply lines as a busy device sends them.
func BenchmarkParse(b *testing.B) {
	lines := [][]byte{device("OK 4711 21.5"), device("EVT button true"), device("ERR 12 E_VALUE 300 is above the maximum 255")}
	b.ReportAllocs()
	for i := range b.N {
		if _, err := Parse(lines[i%len(lines)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}
