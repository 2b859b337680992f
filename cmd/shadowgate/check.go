package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/shadowgate/shadowgate/gateway"
)

// check checks a configuration file and exits.
func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file")
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
	fmt.Fprintf(stdout, "%s: ok (%d devices, %d plans, mode %s)\n", cfg.File, len(cfg.Devices), len(cfg.Plans), cfg.Mode)
	return exitOK
}
