package gatewaycmd

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
)

// TLSConfig makes the gateway serve HTTPS itself, for direct exposure
// without a TLS-terminating proxy in front. Both files or neither.
type TLSConfig struct {
	// CertFile is the PEM certificate chain, leaf first (relative to the
	// config file).
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of the leaf certificate (relative to
	// the config file).
	KeyFile string `yaml:"key_file"`
}

// enabled reports whether the gateway serves HTTPS.
func (t TLSConfig) enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// check refuses half a TLS configuration and loads the pair once, so a
// wrong path or a key that does not match the certificate stops the
// gateway before it listens, with the field named.
func (t TLSConfig) check(path func(string) string) error {
	_, err := t.load(path)
	return err
}

// load reads the key pair; nil without TLS.
func (t TLSConfig) load(path func(string) string) (*tls.Certificate, error) {
	switch {
	case !t.enabled():
		return nil, nil
	case t.CertFile == "":
		return nil, errors.New("tls.cert_file: required with tls.key_file (give both or neither)")
	case t.KeyFile == "":
		return nil, errors.New("tls.key_file: required with tls.cert_file (give both or neither)")
	}
	pair, err := tls.LoadX509KeyPair(path(t.CertFile), path(t.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("tls: cert_file %s, key_file %s: %w", path(t.CertFile), path(t.KeyFile), err)
	}
	return &pair, nil
}

// servedCert is the key pair the gateway serves. A reload re-reads the
// files and swaps it: new handshakes get the new certificate, established
// connections keep theirs.
type servedCert struct {
	pair atomic.Pointer[tls.Certificate]
}

// swap installs pair and reports whether it is another certificate than
// the one served so far.
func (c *servedCert) swap(pair *tls.Certificate) (changed bool) {
	old := c.pair.Swap(pair)
	return old == nil || len(old.Certificate) == 0 || len(pair.Certificate) == 0 ||
		!bytes.Equal(old.Certificate[0], pair.Certificate[0])
}

// serveMaybeTLS serves srv on ln, with TLS when cert is not nil
// (http.Server.ServeTLS: HTTP/2 offered by ALPN, Go's default TLS
// versions and cipher suites), each handshake taking cert's current pair.
func serveMaybeTLS(srv *http.Server, ln net.Listener, cert *servedCert) error {
	if cert == nil {
		return srv.Serve(ln)
	}
	srv.TLSConfig = &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return cert.pair.Load(), nil
	}}
	return srv.ServeTLS(ln, "", "")
}
