package opcua

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gopcua/opcua/ua"
)

// Errors of connecting, for errors.Is.
var (
	// ErrThumbprintMismatch is returned when the server's certificate is
	// not the one pinned by server_thumbprint. Nothing is sent to such a
	// server but the request for its endpoints.
	ErrThumbprintMismatch = errors.New("the server certificate does not match the pinned thumbprint")
	// ErrNoEndpoint is returned when the server offers no endpoint with the
	// configured security policy and mode.
	ErrNoEndpoint = errors.New("the server offers no endpoint with the configured security")
)

// Thumbprint returns the SHA-256 thumbprint of a DER certificate in lower
// case hexadecimal, as server_thumbprint is written.
func Thumbprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// normalThumbprint checks a configured thumbprint and returns it in lower
// case without separators.
func normalThumbprint(s string) (string, error) {
	t := strings.ToLower(strings.NewReplacer(":", "", " ", "").Replace(s))
	if len(t) != 64 {
		if len(t) == 40 {
			return "", fmt.Errorf("%q has 40 digits, a SHA-1 thumbprint; the driver pins the SHA-256 (64 digits) that shadowgate opcua trust prints", s)
		}
		return "", fmt.Errorf("%q is not a SHA-256 thumbprint (64 hexadecimal digits, as shadowgate opcua trust prints)", s)
	}
	if _, err := hex.DecodeString(t); err != nil {
		return "", fmt.Errorf("%q is not a SHA-256 thumbprint (64 hexadecimal digits, as shadowgate opcua trust prints)", s)
	}
	return t, nil
}

// pickEndpoint selects the endpoint with policy and mode among eps and
// checks its certificate against the pinned thumbprint (if any). A
// mismatch names both thumbprints.
func pickEndpoint(eps []*ua.EndpointDescription, policy string, mode ua.MessageSecurityMode, pinned string) (*ua.EndpointDescription, error) {
	var ep *ua.EndpointDescription
	var offered []string
	for _, e := range eps {
		if e == nil {
			continue
		}
		offered = append(offered, policyName(e.SecurityPolicyURI)+"/"+modeName(e.SecurityMode))
		if e.SecurityPolicyURI == policy && e.SecurityMode == mode && (ep == nil || e.SecurityLevel > ep.SecurityLevel) {
			ep = e
		}
	}
	if ep == nil {
		return nil, fmt.Errorf("%w %s/%s (it offers %s)", ErrNoEndpoint, policyName(policy), modeName(mode), strings.Join(offered, ", "))
	}
	if pinned == "" {
		return ep, nil
	}
	if len(ep.ServerCertificate) == 0 {
		return nil, fmt.Errorf("%w: the endpoint has no certificate, the configuration pins %s", ErrThumbprintMismatch, pinned)
	}
	if got := Thumbprint(ep.ServerCertificate); got != pinned {
		return nil, fmt.Errorf("%w: the server presents %s, the configuration pins %s (if the PLC's certificate was renewed on purpose, check it with shadowgate opcua trust and paste the new line)", ErrThumbprintMismatch, got, pinned)
	}
	return ep, nil
}

// policyName is a policy URI's short name: "Basic256Sha256".
func policyName(uri string) string {
	if i := strings.LastIndexByte(uri, '#'); i >= 0 {
		return uri[i+1:]
	}
	return uri
}

// modeName is a security mode as the configuration writes it: "Sign".
func modeName(m ua.MessageSecurityMode) string {
	return strings.TrimPrefix(m.String(), "MessageSecurityMode")
}

// clientIdentity returns the client's certificate (DER) and key: loaded
// from certFile and keyFile, or, when those are empty, from the state
// directory, made there at first start. The application URI is the
// certificate's first URI SAN.
func clientIdentity(stateDir, name, certFile, keyFile string) (der []byte, key *rsa.PrivateKey, err error) {
	if certFile == "" {
		if stateDir == "" {
			return nil, nil, errors.New("no state directory to keep the client certificate in (configure certificate and key)")
		}
		base := "opcua-" + name
		certFile, keyFile = filepath.Join(stateDir, base+".der"), filepath.Join(stateDir, base+".key")
		if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
			if err := makeIdentity(certFile, keyFile, name); err != nil {
				return nil, nil, err
			}
		}
	}
	der, err = loadCert(certFile)
	if err != nil {
		return nil, nil, err
	}
	key, err = loadKey(keyFile)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("client certificate %s: %w", certFile, err)
	}
	if pub, ok := c.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil, fmt.Errorf("client certificate %s is not for the key %s", certFile, keyFile)
	}
	if len(c.URIs) == 0 {
		return nil, nil, fmt.Errorf("client certificate %s has no application URI (a URI in its subject alternative names), which OPC UA needs", certFile)
	}
	return der, key, nil
}

// makeIdentity writes a self-signed RSA 2048 certificate with an
// application URI and its key, each 0600.
func makeIdentity(certFile, keyFile, name string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("making the client key: %w", err)
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	uri := &url.URL{Scheme: "urn", Opaque: "shadowgate:" + host + ":" + name}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return fmt.Errorf("making the client certificate: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "shadowgate " + name, Organization: []string{"Shadowgate"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{uri},
		DNSNames:              []string{host},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("making the client certificate: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	// The key first: a certificate without its key would be taken for a
	// whole identity at the next start.
	if err := writeFile0600(keyFile, keyPEM); err != nil {
		return err
	}
	return writeFile0600(certFile, der)
}

// writeFile0600 writes b to path atomically, readable by the owner alone.
func writeFile0600(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// loadCert reads a certificate in DER or PEM.
func loadCert(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the client certificate: %w", err)
	}
	if blk, _ := pem.Decode(b); blk != nil {
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("client certificate %s holds a PEM %s, not a CERTIFICATE", path, blk.Type)
		}
		return blk.Bytes, nil
	}
	return b, nil
}

// loadKey reads an RSA key in PEM (PKCS#1 or PKCS#8) or DER.
func loadKey(path string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the client key: %w", err)
	}
	if blk, _ := pem.Decode(b); blk != nil {
		b = blk.Bytes
	}
	if k, err := x509.ParsePKCS1PrivateKey(b); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("client key %s is not an RSA key in PEM or DER", path)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("client key %s is a %T; OPC UA's Basic256Sha256 needs RSA", path, k)
	}
	return rk, nil
}
