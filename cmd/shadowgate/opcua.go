//go:build !shadowgate_omit_opcua

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shadowgate/shadowgate/drivers/opcua"
)

const opcuaUsage = `usage:
  shadowgate opcua trust [--timeout D] URL   the server's certificate, and the line to pin it
  shadowgate opcua browse [flags] URL [NODE] the nodes under NODE (default the Objects folder),
                                             with security None and anonymously
flags of browse:
  --thumbprint HEX   refuse a server whose endpoints present another certificate (with security
                     None this catches a wrong server, not an impostor)
  --timeout D        bound each request (default 2s)
`

// opcuaCmd is the tools for writing an OPC-UA driver's configuration: what
// a server's certificate is, and what its address space holds. They talk
// to the server directly: no gateway needs to run.
func opcuaCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, opcuaUsage)
		return exitUsage
	}
	switch args[0] {
	case "trust":
		return opcuaTrust(args[1:], stdout, stderr)
	case "browse":
		return opcuaBrowse(args[1:], stdout, stderr)
	case "help", "--help", "-h":
		fmt.Fprint(stdout, opcuaUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "shadowgate opcua: unknown command %q\n\n%s", args[0], opcuaUsage)
	return exitUsage
}

func opcuaTrust(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("opcua trust", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 10*time.Second, "bound the whole exchange")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, "shadowgate opcua trust: give the server's URL (opc.tcp://host:port)\n")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cert, err := opcua.Trust(ctx, fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "shadowgate opcua trust:", err)
		return exitUnavailable
	}
	printCert(stdout, cert, "")
	for _, o := range cert.Others {
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "Another certificate, presented by other endpoints:")
		printCert(stdout, o, "  ")
	}
	fmt.Fprintf(stdout, "\nCompare the thumbprint with the one the server shows (its own screen or its\n"+
		"administrator), then paste this line into the driver's opcua options:\n\n  %s\n", cert.YAML)
	return exitOK
}

// printCert writes what a person needs to recognise a certificate.
func printCert(w io.Writer, c opcua.ServerCert, indent string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s%s\t%s\n", indent, k, v)
		}
	}
	row("Subject", c.Subject)
	row("Issuer", c.Issuer)
	if c.SelfSigned {
		row("", "(self-signed)")
	}
	row("Valid", c.NotBefore.UTC().Format(time.RFC3339)+" to "+c.NotAfter.UTC().Format(time.RFC3339))
	row("Application URI", strings.Join(c.URIs, ", "))
	row("DNS names", strings.Join(c.DNSNames, ", "))
	row("IP addresses", strings.Join(c.IPs, ", "))
	row("Endpoints", strings.Join(c.Endpoints, ", "))
	row("SHA-256", c.Thumbprint)
	_ = tw.Flush()
}

func opcuaBrowse(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("opcua browse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	thumb := fs.String("thumbprint", "", "refuse a server whose certificate is not this one")
	timeout := fs.Duration("timeout", 2*time.Second, "bound each request")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprint(stderr, "shadowgate opcua browse: give the server's URL and, optionally, a node (ns=2;s=Plant)\n")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*(*timeout))
	defer cancel()
	entries, err := opcua.Browse(ctx, fs.Arg(0), fs.Arg(1), opcua.BrowseOptions{Thumbprint: *thumb, Timeout: *timeout})
	if err != nil {
		fmt.Fprintln(stderr, "shadowgate opcua browse:", err)
		return exitUnavailable
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNAME\tCLASS\tTYPE\tACCESS")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.NodeID, e.BrowseName, e.NodeClass, dash(e.DataType), dash(e.Access))
	}
	_ = tw.Flush()
	return exitOK
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
