package web

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Listen binds before Run serves: a port in use is an error naming it,
// and a bound port accepts connections before Run starts.
func TestListenBindsBeforeRunServes(t *testing.T) {
	s := newSite(t, siteOptions{})
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy, err := New(s.eng, Options{Listen: taken.Addr().String(), Sessions: s.j.Sessions()})
	if err != nil {
		t.Fatal(err)
	}
	err = busy.Listen()
	if err == nil || !strings.HasPrefix(err.Error(), "console: listen tcp "+taken.Addr().String()) {
		t.Fatalf("Listen on a port in use = %v, want an error naming %s", err, taken.Addr())
	}

	srv, err := New(s.eng, Options{Listen: "127.0.0.1:0", Sessions: s.j.Sessions()})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != "" {
		t.Fatalf("Addr before Listen = %q", srv.Addr())
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("the bound console does not accept a connection before Run: %v", err)
	}
	c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz on the bound address = %v, %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close after Run = %v", err)
	}
}

// Close releases what Listen bound when Run never served it.
func TestCloseReleasesAnUnservedListener(t *testing.T) {
	s := newSite(t, siteOptions{})
	srv, err := New(s.eng, Options{Listen: "127.0.0.1:0", Sessions: s.j.Sessions()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address is still held after Close: %v", err)
	}
	again.Close()
	if err := srv.Run(t.Context()); err == nil {
		t.Fatal("Run after Close served")
	}
}
