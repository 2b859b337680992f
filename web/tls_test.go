package web

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/shadowgate/shadowgate/runtime/runtimetest"
)

func TestConsoleOverTLS(t *testing.T) {
	s := newSite(t, siteOptions{})
	srvTLS, pool := runtimetest.SelfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(s.eng, Options{Listener: ln, Sessions: s.j.Sessions(),
		TLS: srvTLS})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// Console pages each hold an event stream; over HTTP/2 they share one
	// connection, so a browser's few connections per host never run out.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true}}
	resp, err := c.Get("https://" + ln.Addr().String() + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") == "" || len(body) == 0 {
		t.Fatalf("login page over TLS: %d, HSTS %q", resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("the console over TLS speaks %s, want HTTP/2", resp.Proto)
	}
	if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("secure headers missing: %v", resp.Header)
	}
}
