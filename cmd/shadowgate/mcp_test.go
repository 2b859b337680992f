package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestMCPEndpoint(t *testing.T) {
	for _, tc := range []struct{ flag, env, want, err string }{
		{"", "", defaultMCPURL, ""},
		{"", "https://gw.local:8080/mcp", "https://gw.local:8080/mcp", ""},
		{"http://10.0.0.2:8080/mcp", "https://gw.local:8080/mcp", "http://10.0.0.2:8080/mcp", ""},
		{"gw.local:8080", "", "", `--url: "gw.local:8080" is not an http:// or https:// address`},
		{"ftp://gw/mcp", "", "", "is not an http:// or https:// address"},
		{"http://agent:secret@gw/mcp", "", "", "put no credentials in the address"},
	} {
		got, err := mcpEndpoint(tc.flag, tc.env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("mcpEndpoint(%q, %q) = %q, %v; want an error with %q", tc.flag, tc.env, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("mcpEndpoint(%q, %q) = %q, %v; want %q", tc.flag, tc.env, got, err, tc.want)
		}
	}
}

func TestMCPToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-the-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, env, want, err string }{
		{"", "from-the-env", "from-the-env", ""},
		{file, "from-the-env", "from-the-file", ""},
		{"", "  \n", "", "no token: set $SHADOWGATE_MCP_TOKEN or give --token-file"},
		{"", "two words", "", "the token holds white space"},
		{filepath.Join(dir, "missing"), "", "", "--token-file: open"},
	} {
		got, err := mcpToken(tc.file, tc.env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("mcpToken(%q, %q) = %q, %v; want an error with %q", tc.file, tc.env, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("mcpToken(%q, %q) = %q, %v; want %q", tc.file, tc.env, got, err, tc.want)
		}
	}
}

func TestMCPProgressToken(t *testing.T) {
	for _, tc := range []struct {
		in, want any
	}{{"tok-1", "tok-1"}, {4, 4}, {float64(4), 4}, {4.5, nil}, {nil, nil}, {true, nil}, {float64(1 << 60), nil}} {
		if got := progressToken(tc.in); got != tc.want {
			t.Errorf("progressToken(%#v) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestMCPUsage(t *testing.T) {
	t.Setenv(envMCPToken, "")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mcp", "--token", "abc"}, exitUsage, "flag provided but not defined: -token"},
		{[]string{"mcp", "abc"}, exitUsage, `unexpected argument "abc" (the token goes in $SHADOWGATE_MCP_TOKEN or --token-file)`},
		{[]string{"mcp"}, exitUsage, "no token"},
		{[]string{"mcp", "--log-level", "loud"}, exitUsage, "--log-level"},
		{[]string{"mcp", "--help"}, exitOK, "usage: shadowgate mcp"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, strings.NewReader(""), &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q) = %d, %q; want %d with %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

func TestMCPGatewayNotRunning(t *testing.T) {
	t.Setenv(envMCPToken, "sg-demo-agent-token")
	url := "http://127.0.0.1:" + strconv.Itoa(freePort(t)) + "/mcp"
	var stdout, stderr bytes.Buffer
	if code := run([]string{"mcp", "--url", url}, strings.NewReader(""), &stdout, &stderr); code != exitUnavailable ||
		!strings.Contains(stderr.String(), "is `shadowgate serve` running, with mcp.enabled?") || stdout.Len() != 0 {
		t.Errorf("shadowgate mcp with no gateway = %d, %q, stdout %q; want %d saying why, and nothing on stdout", code, stderr.String(),
			stdout.String(), exitUnavailable)
	}
}
