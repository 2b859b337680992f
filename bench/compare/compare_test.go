package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shadowgate/shadowgate/bench/load/loadgen"
)

func TestParseVmRSS(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         int64
		err          string
	}{
		{"a status", "Name:\tshadowgate\nVmPeak:\t  900 kB\nVmRSS:\t   25812 kB\nRssAnon:\t 1 kB\n", 25812 << 10, ""},
		{"no line", "Name:\tx\n", 0, "no VmRSS line"},
		{"another unit", "VmRSS:\t 3 MB\n", 0, "want <n> kB"},
		{"not a number", "VmRSS:\t x kB\n", 0, "invalid syntax"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseVmRSS(strings.NewReader(tc.status))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("parseVmRSS = %d, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseVmRSS = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want spread
	}{
		{nil, spread{}},
		{[]float64{3}, spread{3, 3, 3}},
		{[]float64{3, 1, 2}, spread{2, 1, 3}},
		{[]float64{4, 1, 2, 3}, spread{2, 1, 4}}, // the lower middle
	} {
		if got := spreadOf(tc.xs); got != tc.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", tc.xs, got, tc.want)
		}
	}
	if got, want := (spread{2, 1, 3}).format("%.1f"), "2.0 (1.0–3.0)"; got != want {
		t.Errorf("format = %q, want %q", got, want)
	}
}

func TestRatiosPairRounds(t *testing.T) {
	s := newSamples()
	gw, mo := key{"gateway", 0}, key{"mochi", 0}
	for i, pair := range [][2]float64{{90, 100}, {50, 40}, {10, 0}} {
		s.add(gw, i, loadgen.Result{RecvRate: pair[0]})
		s.add(mo, i, loadgen.Result{RecvRate: pair[1]})
	}
	got := s.ratios(gw, mo, recvRate)
	want := []float64{0.9, 1.25} // a round where mochi delivered nothing has no ratio
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ratios = %v, want %v", got, want)
	}
}

func TestMosquittoConfigIsFair(t *testing.T) {
	conf, err := mosquittoConfig("127.0.0.1:18830")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"listener 18830 127.0.0.1", "allow_anonymous true", "set_tcp_nodelay true", "max_queued_messages 0"} {
		if !strings.Contains(conf, line+"\n") {
			t.Errorf("mosquitto's configuration lacks %q:\n%s", line, conf)
		}
	}
	if _, err := mosquittoConfig("no-port"); err == nil {
		t.Error("mosquittoConfig(no-port) = nil error")
	}
}

func TestGatewayConfigAllowsTheLoad(t *testing.T) {
	conf := gatewayConfig("/tmp/x", "127.0.0.1:1", "127.0.0.1:2", "$2a$04$hash", 1100)
	for _, want := range []string{
		`listen: "127.0.0.1:1"`, "max_clients: 1100", `principal: "mqtt:bench"`, "decision: allow",
		`publish: ["bench/#", "shadowgate/bench/cmd/#"]`, "state_dir: /tmp/x/state",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("the gateway's configuration lacks %q:\n%s", want, conf)
		}
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-repeat", "0"}, {"stray"}, {"-pubs", "0"}, {"-nope"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 1 {
			t.Errorf("run(%q) = %d, want 1; stderr %s", args, code, errb.String())
		}
	}
}
