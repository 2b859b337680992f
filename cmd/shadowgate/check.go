package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/shadowgate/shadowgate/gateway"
)

// check checks a configuration file and exits. With --explain it then
// prints the effect profile every capability is judged with.
func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file")
	explain := fs.Bool("explain", false, "print each capability's effect profile and where its wider fields come from")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *configPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "shadowgate check: give --config F")
		return exitUsage
	}
	cfg, err := gateway.LoadFile(*configPath)
	if err != nil {
		var ce *gateway.ConfigError
		if errors.As(err, &ce) || !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(stderr, err)
			return exitConfiguration
		}
		fmt.Fprintln(stderr, err)
		return exitConfiguration
	}
	fmt.Fprintf(stdout, "%s: ok (%s, %s, mode %s)\n", cfg.File, count(len(cfg.Devices), "device"), count(len(cfg.Plans), "plan"), cfg.Mode)
	if *explain {
		writeEffects(stdout, cfg.Effects())
	}
	return exitOK
}

// writeEffects prints effect profiles for a person to read: one block per
// capability, a line per field, and for a field wider than the safest
// where its value came from.
func writeEffects(w io.Writer, effects []gateway.Effect) {
	var b bytes.Buffer
	fmt.Fprintln(&b, "\nEffect profiles: what a step on each capability is judged as. A field wider than the safest says where it came from.")
	for _, e := range effects {
		fmt.Fprintf(&b, "\n%s.%s: %s on driver %s\n", e.Device, e.Capability, e.Kind, e.Driver)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, f := range e.Fields {
			fmt.Fprintf(tw, "  %s\t%s\t", f.Name, f.Value)
			if len(f.From) > 0 {
				fmt.Fprint(tw, "from "+strings.Join(f.From, "; "))
			}
			fmt.Fprintln(tw)
		}
		_ = tw.Flush() // a bytes.Buffer does not fail
	}
	// The columns pad every value; a line ends with its last word.
	for line := range strings.Lines(b.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
}

// count says n things: "1 plan", "0 plans".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}
