package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shadowgate/shadowgate/bench/load/loadgen"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want loadgen.Config
		err  string
	}{
		{"defaults", nil, loadgen.Config{Broker: "127.0.0.1:1883", Pubs: 1, Subs: 1, Size: 64, Inflight: 16,
			Duration: 10 * time.Second, Topic: "bench", Prefix: "shadowgate/demo/", Device: "valve-1", Capability: "open",
			Value: "toggle", Timeout: 10 * time.Second}, ""},
		{"a fan-in", []string{"-broker", "10.0.0.2:1884", "-user", "u", "-password", "p", "-pubs", "4", "-subs", "2",
			"-qos", "1", "-size", "256", "-rate", "1000", "-duration", "3s", "-topic", "load"},
			loadgen.Config{Broker: "10.0.0.2:1884", User: "u", Password: "p", Pubs: 4, Subs: 2, QoS: 1, Size: 256, Rate: 1000,
				Inflight: 16, Duration: 3 * time.Second, Topic: "load", Prefix: "shadowgate/demo/", Device: "valve-1",
				Capability: "open", Value: "toggle", Timeout: 10 * time.Second}, ""},
		{"qos out of range", []string{"-qos", "3"}, loadgen.Config{}, "-qos 3: want 0, 1 or 2"},
		{"small payload", []string{"-size", "4"}, loadgen.Config{}, "size 4"},
		{"stray argument", []string{"fast"}, loadgen.Config{}, "unexpected arguments"},
		{"unknown flag", []string{"-speed", "9"}, loadgen.Config{}, "flag provided but not defined: -speed"},
		{"bad value", []string{"-commands", "-value", "on"}, loadgen.Config{}, `value "on" is not JSON`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			got, err := parseArgs(tc.args, &stderr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("parseArgs(%q) = %v, want an error saying %q", tc.args, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseArgs(%q) = %v", tc.args, err)
			}
			// go-cmp is not a dependency of the module; the Config is flat.
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseArgs(%q) =\n%+v\nwant\n%+v", tc.args, got, tc.want)
			}
		})
	}
}

func TestRunExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-qos", "9"}, &out, &errb); code != 1 {
		t.Errorf("run(-qos 9) = %d, want 1 (usage); stderr %s", code, errb.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"-broker", "127.0.0.1:1", "-duration", "1s"}, &out, &errb); code != 5 {
		t.Errorf("run against a closed port = %d, want 5; stderr %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "127.0.0.1:1") {
		t.Errorf("stderr %q does not name the broker", errb.String())
	}
}
