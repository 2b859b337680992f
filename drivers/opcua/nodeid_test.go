package opcua

import (
	"strings"
	"testing"
)

var nodeIDCases = []struct {
	in, want, err string
}{
	{in: "ns=2;s=Tank.Level", want: "ns=2;s=Tank.Level"},
	{in: "s=Plain", want: "s=Plain"},
	{in: "ns=3;i=1001", want: "ns=3;i=1001"},
	{in: "i=85", want: "i=85"},
	{in: "ns=1;g=72962b91-fa75-4ae6-8d28-b404dc7daf63", want: "ns=1;g=72962B91-FA75-4AE6-8D28-B404DC7DAF63"},
	{in: "ns=4;b=AQID", want: "ns=4;b=AQID"},
	{in: "ns=2;s=a;b=c", want: "ns=2;s=a;b=c"},
	{in: "", err: "a node id is required"},
	{in: "Tank.Level", err: "has no identifier"},
	{in: "ns=2", err: "without the identifier"},
	{in: "ns=65536;i=1", err: `namespace index "65536"`},
	{in: "ns=02;i=1", err: `namespace index "02"`},
	{in: "ns=-1;i=1", err: `namespace index "-1"`},
	{in: "ns=2;i=4294967296", err: "numeric identifier"},
	{in: "ns=2;i=x", err: "numeric identifier"},
	{in: "ns=2;s=", err: "empty string identifier"},
	{in: "ns=2;g=1234", err: "GUID identifier"},
	{in: "ns=2;b=!!", err: "opaque identifier"},
	{in: "ns=2;b=", err: "opaque identifier"},
	{in: "nsu=urn:x;s=a", err: "by URI"},
	{in: "ns=2;x=1", err: `identifier type "x"`},
	{in: "ns=2;s=\xff", err: "not valid UTF-8"},
}

func TestParseNodeID(t *testing.T) {
	for _, tc := range nodeIDCases {
		n, err := parseNodeID(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseNodeID(%q) = %v, %v; want an error saying %q", tc.in, n, err, tc.err)
			}
		case err != nil:
			t.Errorf("parseNodeID(%q) = %v", tc.in, err)
		case n.String() != tc.want:
			t.Errorf("parseNodeID(%q) = %s, want %s", tc.in, n, tc.want)
		}
	}
}

func FuzzParseNodeID(f *testing.F) {
	for _, tc := range nodeIDCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseNodeID(s)
		if err != nil {
			return
		}
		// What parses is written back in a form that parses to the same id.
		again, err := parseNodeID(n.String())
		if err != nil {
			t.Fatalf("parseNodeID(%q) = %s, which does not parse again: %v", s, n, err)
		}
		if !again.Equal(n) || again.String() != n.String() {
			t.Fatalf("parseNodeID(%q) = %s, parsed again %s", s, n, again)
		}
	})
}
