package gatewaycmd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
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
	switch {
	case !t.enabled():
		return nil
	case t.CertFile == "":
		return errors.New("tls.cert_file: required with tls.key_file (give both or neither)")
	case t.KeyFile == "":
		return errors.New("tls.key_file: required with tls.cert_file (give both or neither)")
	}
	if _, err := tls.LoadX509KeyPair(path(t.CertFile), path(t.KeyFile)); err != nil {
		return fmt.Errorf("tls: cert_file %s, key_file %s: %w", path(t.CertFile), path(t.KeyFile), err)
	}
	return nil
}

// serve serves srv on ln, with TLS (http.Server.ServeTLS: HTTP/2 offered
// by ALPN, Go's default TLS versions and cipher suites) when configured.
func (t TLSConfig) serve(srv *http.Server, ln net.Listener, path func(string) string) error {
	if !t.enabled() {
		return srv.Serve(ln)
	}
	return srv.ServeTLS(ln, path(t.CertFile), path(t.KeyFile))
}
