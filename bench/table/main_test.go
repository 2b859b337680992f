package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/shadowgate/shadowgate/governance
BenchmarkJudge/read-2 	 1877319	 192.3 ns/op	 0 B/op	 0 allocs/op
BenchmarkJudge/ask-2 	 435247	 754.0 ns/op	 112 B/op	 3 allocs/op
BenchmarkJudge/ask-2 	 435247	 854.0 ns/op	 112 B/op	 3 allocs/op
BenchmarkJudge/allow-2 	 1000000	 404.8 ns/op	 0 B/op	 0 allocs/op
BenchmarkJudge/rule-2 	 1700604	 303.3 ns/op	 0 B/op	 0 allocs/op
pkg: github.com/shadowgate/shadowgate/gateway/mqtt
BenchmarkFanIn/bare/qos=0-2 	 10000	 57993 ns/op	 100.0 %delivered	 10.0 cpu-µs/msg	 17244 msgs/s
BenchmarkFanIn/shadowgate/qos=0-2 	 10000	 32958 ns/op	 100.0 %delivered	 11.0 cpu-µs/msg	 16000 msgs/s
    bench_test.go:1: a log line that is not a result
`

func TestParseAveragesRunsAndKnowsPackages(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := r.get("governance BenchmarkJudge/ask", "ns/op"); !ok || v != 804 {
		t.Fatalf("the mean of two runs = %v, %v; want 804", v, ok)
	}
	if v, ok := r.get("BenchmarkFanIn/shadowgate/qos=0", "msgs/s"); !ok || v != 16000 {
		t.Fatalf("a metric by bare name = %v, %v", v, ok)
	}
}

func TestParseNamesABadNumber(t *testing.T) {
	_, err := parse(strings.NewReader("BenchmarkX-2 10 abc ns/op 5 B/op\n"))
	if err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "abc") {
		t.Fatalf("parse = %v; want the line and the value named", err)
	}
}

func TestRenderSaysWhatIsMetAndWhatIsMissing(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	missing := render(&out, r, figures)
	text := out.String()
	// Counted on a card, a figure that needs root says so instead, as
	// measured and not met.
	if cards := strings.Count(text, "not counted: it needs root"); missing != len(figures)-2-cards || cards != 3 {
		t.Errorf("%d figures not measured and %d not counted on a card, want all but the judge and QoS 0 throughput, 3 of them on a card:\n%s", missing, cards, text)
	}
	for _, want := range []string{"judge", "804 ns", "yes", "16000 msgs/s", "CPU 1.10×", "not measured"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table has no %q:\n%s", want, text)
		}
	}
	// QoS 0 at 1.10× bare mochi's CPU a message is not met.
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, "QoS 0") && !strings.HasSuffix(strings.TrimSpace(l), "no") {
			t.Errorf("QoS 0 at 1.10× the CPU is said to be met: %s", l)
		}
	}
}
