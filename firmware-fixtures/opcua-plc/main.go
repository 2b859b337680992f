// Command opcua-plc serves the simulated tank PLC of package plc over
// OPC-UA until it gets SIGINT or SIGTERM:
//
//	go run ./firmware-fixtures/opcua-plc -addr 127.0.0.1:4840
//
// It prints the endpoint URL, the namespace, the node id of every tag and
// the SHA-256 thumbprint of the server certificate, which a client can
// pin; with -identity FILE that certificate is kept, so the pin holds
// across restarts. Only -security none works (see package plc for why
// Basic256Sha256 does not).
package main

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shadowgate/shadowgate/firmware-fixtures/opcua-plc/plc"
)

func main() {
	os.Exit(run())
}

func run() int {
	addr := flag.String("addr", "127.0.0.1:4840", "host:port to listen on and advertise; port 0 picks a free one")
	security := flag.String("security", "none", "endpoint security: none, basic256sha256 (Sign and SignAndEncrypt; refused, see package plc)")
	tick := flag.Duration("tick", 100*time.Millisecond, "physics period")
	verbose := flag.Bool("v", false, "log the gopcua server's lines (debug level) and its standard-log output")
	identity := flag.String("identity", "", "keep the server's certificate and key in this PEM file (made at the first start), so a pinned thumbprint holds across restarts")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	} else {
		plc.Quiet()
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	opts := plc.Options{Addr: *addr, Tick: *tick, Logger: logger}
	switch *security {
	case "none":
		opts.Security = []plc.Security{plc.SecurityNone}
	case "basic256sha256":
		opts.Security = []plc.Security{plc.SecurityBasic256Sha256Sign, plc.SecurityBasic256Sha256SignAndEncrypt}
	default:
		fmt.Fprintf(os.Stderr, "opcua-plc: unknown -security %q (none or basic256sha256)\n", *security)
		return 1
	}

	if *identity != "" {
		der, key, err := loadOrMakeIdentity(*identity)
		if err != nil {
			fmt.Fprintf(os.Stderr, "opcua-plc: %v\n", err)
			return 1
		}
		opts.Certificate, opts.PrivateKey = der, key
	}
	p, err := plc.Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "opcua-plc: %v\n", err)
		return 1
	}
	fmt.Printf("url         %s\n", p.URL())
	fmt.Printf("namespace   %s (index %d)\n", p.Namespace(), plc.NamespaceIndex)
	fmt.Printf("thumbprint  %s (SHA-256 of the server certificate)\n", p.Thumbprint())
	for _, t := range plc.Tags() {
		fmt.Printf("node        %-22s %v\n", p.NodeID(t), p.Value(t))
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	s := <-sig
	logger.Info("stopping", "signal", s.String())
	if err := p.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "opcua-plc: %v\n", err)
		return 1
	}
	return 0
}

// loadOrMakeIdentity reads a certificate and its RSA key from one PEM file,
// or makes them and writes the file (0600) when it does not exist.
func loadOrMakeIdentity(path string) ([]byte, *rsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		der, key, err := plc.NewCertificate(plc.ApplicationURI)
		if err != nil {
			return nil, nil, err
		}
		out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})...)
		if err := os.WriteFile(path, out, 0o600); err != nil {
			return nil, nil, fmt.Errorf("writing the identity: %w", err)
		}
		return der, key, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the identity: %w", err)
	}
	var der []byte
	var key *rsa.PrivateKey
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			der = blk.Bytes
		case "RSA PRIVATE KEY":
			if key, err = x509.ParsePKCS1PrivateKey(blk.Bytes); err != nil {
				return nil, nil, fmt.Errorf("%s: the key: %w", path, err)
			}
		}
	}
	if der == nil || key == nil {
		return nil, nil, fmt.Errorf("%s holds no certificate and RSA key in PEM", path)
	}
	return der, key, nil
}
