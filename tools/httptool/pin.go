package httptool

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
)

// ErrPinMismatch is the TLS handshake error of a pinned upstream whose
// certificate's public key matches none of the pins: the connection is
// refused before a byte of the request is written. (A tool's Call error
// names it in its message and wraps tools.ErrUpstreamUnreachable.)
var ErrPinMismatch = errors.New("upstream certificate public key matches no tls.pin_sha256")

// ParsePin reads one pin: the SHA-256 of a certificate's
// SubjectPublicKeyInfo (DER), as 64 hex digits or as standard base64 (44
// characters, what `openssl dgst -sha256 -binary | base64` prints).
func ParsePin(s string) ([]byte, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == sha256.Size {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == sha256.Size {
		return b, nil
	}
	return nil, fmt.Errorf("%q: want the SHA-256 of the certificate's SubjectPublicKeyInfo as 64 hex digits or 44 base64 characters", s)
}

// SPKIPin is the pin of a certificate's public key (what ParsePin reads).
func SPKIPin(rawSubjectPublicKeyInfo []byte) []byte {
	sum := sha256.Sum256(rawSubjectPublicKeyInfo)
	return sum[:]
}

// pinnedClient returns a client like base whose TLS connections are
// refused unless the server's leaf certificate's public key matches one
// of pins (after the usual chain and name verification). The check runs
// in the handshake (tls.Config.VerifyConnection), so a mismatched server
// never receives a request byte. The client has a connection pool of its
// own.
func pinnedClient(base *http.Client, pins [][]byte) (*http.Client, error) {
	bt, ok := base.Transport.(*http.Transport)
	if !ok {
		if base.Transport != nil {
			return nil, fmt.Errorf("tls.pin_sha256 needs an *http.Transport, the client has a %T", base.Transport)
		}
		bt = http.DefaultTransport.(*http.Transport)
	}
	t := bt.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return ErrPinMismatch
		}
		got := SPKIPin(cs.PeerCertificates[0].RawSubjectPublicKeyInfo)
		for _, p := range pins {
			if subtle.ConstantTimeCompare(got, p) == 1 {
				return nil
			}
		}
		return fmt.Errorf("%w (the server presented %s)", ErrPinMismatch, base64.StdEncoding.EncodeToString(got))
	}
	c := *base
	c.Transport = t
	return &c, nil
}
