package httptool

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/tools"
)

// selfSigned is a certificate for 127.0.0.1, its own CA.
func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, cert
}

// TestPinnedUpstreamWithASwappedCertificateGetsNoRequest: an https
// upstream pinned to certificate A serves a call; its certificate is
// swapped for B (trusted just as well: the same URL, a valid chain, only
// another key) and the next call is refused in the handshake: the
// handler counts no request, the error is an unreachable upstream (the
// gateway's 502 upstream_unreachable, released: the retry may run) and
// not an uncertain outcome. Both pin forms (hex, base64) are read.
func TestPinnedUpstreamWithASwappedCertificateGetsNoRequest(t *testing.T) {
	certA, parsedA := selfSigned(t, "upstream-a")
	certB, parsedB := selfSigned(t, "upstream-b")
	var served atomic.Pointer[tls.Certificate]
	served.Store(&certA)
	var requests atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	// A TLS listener of its own: httptest's StartTLS would put its own
	// certificate first.
	srv.Listener = tls.NewListener(srv.Listener, &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return served.Load(), nil }})
	srv.Start()
	t.Cleanup(srv.Close)
	srv.URL = "https" + srv.URL[len("http"):]

	roots := x509.NewCertPool()
	roots.AddCert(parsedA)
	roots.AddCert(parsedB)
	for name, pin := range map[string]string{
		"hex":    hex.EncodeToString(SPKIPin(parsedA.RawSubjectPublicKeyInfo)),
		"base64": base64.StdEncoding.EncodeToString(SPKIPin(parsedA.RawSubjectPublicKeyInfo)),
	} {
		t.Run(name, func(t *testing.T) {
			served.Store(&certA)
			requests.Store(0)
			base := NewClient()
			transport := base.Transport.(*http.Transport)
			transport.TLSClientConfig = &tls.Config{RootCAs: roots}
			transport.DisableKeepAlives = true // every call a new connection, as after a swap
			parsed, err := ParsePin(pin)
			if err != nil {
				t.Fatal(err)
			}
			tool := newTool(t, Config{Name: "pinned", URL: srv.URL, Client: base, PinSHA256: [][]byte{parsed}})
			call := func() error {
				_, err := tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{}`), IdempotencyKey: "k", Tenant: "t"})
				return err
			}
			if err := call(); err != nil {
				t.Fatalf("call to the pinned certificate: %v", err)
			}
			if n := requests.Load(); n != 1 {
				t.Fatalf("%d requests reached the upstream, want 1", n)
			}
			served.Store(&certB)
			err = call()
			if err == nil || !strings.Contains(err.Error(), ErrPinMismatch.Error()) || !errors.Is(err, tools.ErrUpstreamUnreachable) || errors.Is(err, tools.ErrOutcomeUncertain) {
				t.Fatalf("call after the swap: %v, want a pin mismatch, unreachable, not uncertain", err)
			}
			if n := requests.Load(); n != 1 {
				t.Fatalf("%d requests reached the upstream after the swap, want still 1", n)
			}
		})
	}
}

func TestPinConfigErrors(t *testing.T) {
	for _, bad := range []string{"", "abc", "sha256:" + hex.EncodeToString(make([]byte, 32)), hex.EncodeToString(make([]byte, 31))} {
		if _, err := ParsePin(bad); err == nil {
			t.Errorf("ParsePin(%q) accepted", bad)
		}
	}
	if _, err := New(Config{Name: "plain", URL: "http://127.0.0.1:1/x", PinSHA256: [][]byte{make([]byte, 32)}}); err == nil {
		t.Error("a pin on an http:// URL was accepted")
	}
}
