package gatewaycmd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/keyderive"
)

// writeSelfSigned writes a fresh ECDSA P-256 certificate for 127.0.0.1 and
// its key as PEM files in dir and returns the certificate.
func writeSelfSigned(t *testing.T, dir, certName, keyName string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "toolgateway test"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, certName), "CERTIFICATE", der)
	writePEM(t, filepath.Join(dir, keyName), "PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLSServesHTTPS starts the program with tls.cert_file/key_file given
// relative to the config file, and calls a tool over HTTPS with a client
// that trusts only the generated certificate.
func TestTLSServesHTTPS(t *testing.T) {
	dir := t.TempDir()
	cert := writeSelfSigned(t, dir, "tls/cert.pem", "tls/key.pem")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body) // echoes the arguments
	}))
	defer upstream.Close()
	config := filepath.Join(dir, "gateway.yaml")
	text := "listen: 127.0.0.1:0\nstore:\n  path: gw.db\ntls:\n  cert_file: tls/cert.pem\n  key_file: tls/key.pem\n" +
		"tools:\n  - name: tls-echo\n    http:\n      url: " + upstream.URL + "\n"
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	// Started from another directory, so only config-relative paths work.
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testutil.LockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"gateway", "-config", config}, func(string) string { return "" }, logs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var addr string
	waitFor(t, func() bool {
		for _, l := range logs.JSONLines() {
			if l["msg"] == "gateway listening" {
				if l["tls"] != true {
					t.Fatalf("listening line says tls=%v", l["tls"])
				}
				addr, _ = l["addr"].(string)
			}
		}
		return addr != ""
	})

	roots := x509.NewCertPool()
	roots.AddCert(cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	defer client.CloseIdleConnections()
	args := `{"text":"over tls"}`
	key, _ := keyderive.Key("tls-session", 0, "tls-echo", []byte(args))
	req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/api/tools/v1/tls-echo", strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", "tls-session")
	req.Header.Set("Agent-Step-Index", "0")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("HTTPS call: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "over tls") || resp.TLS == nil {
		t.Fatalf("HTTPS call: %d %s (tls state %v)", resp.StatusCode, body, resp.TLS != nil)
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("want HTTP/2 offered by ALPN as ListenAndServeTLS does, got %s", resp.Proto)
	}

	// A client that does not trust the certificate is refused by its own
	// verification; plain HTTP on the TLS port gets no answer of the gateway.
	if _, err := http.Get("https://" + addr + "/healthz"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusting client: %v", err)
	}
	plain, err := http.Get("http://" + addr + "/healthz")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP on the TLS port: %d", plain.StatusCode)
		}
	}

	// The health subcommand probes it: verifying against the system roots
	// fails, -insecure (the local probe of a self-signed gateway) passes.
	var out strings.Builder
	if err := RunIO(ctx, []string{"gateway", "health", "-url", "https://" + addr + "/healthz"}, os.Getenv, strings.NewReader(""), &out); err == nil {
		t.Fatal("health verified a self-signed certificate against the system roots")
	}
	if err := RunIO(ctx, []string{"gateway", "health", "-insecure", "-url", "https://" + addr + "/readyz"}, os.Getenv, strings.NewReader(""), &out); err != nil {
		t.Fatalf("health -insecure: %v", err)
	}
}

// TestTLSConfigErrors: half a TLS section, missing files and a key that
// does not match the certificate stop the gateway before it listens.
func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	writeSelfSigned(t, dir, "a.pem", "a.key")
	writeSelfSigned(t, dir, "b.pem", "b.key")
	cases := map[string]struct{ tls, message string }{
		"cert only":    {"  cert_file: a.pem\n", "tls.key_file: required with tls.cert_file"},
		"key only":     {"  key_file: a.key\n", "tls.cert_file: required with tls.key_file"},
		"missing file": {"  cert_file: nope.pem\n  key_file: a.key\n", "nope.pem"},
		"wrong key":    {"  cert_file: a.pem\n  key_file: b.key\n", "private key does not match public key"},
		"key as cert":  {"  cert_file: a.key\n  key_file: a.key\n", "tls: cert_file"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			config := filepath.Join(dir, name+".yaml")
			text := "listen: 127.0.0.1:0\nstore:\n  path: gw.db\ntls:\n" + c.tls
			if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs strings.Builder
			err := Run(context.Background(), []string{"gateway", "-config", config}, func(string) string { return "" }, &logs)
			if err == nil || !strings.Contains(err.Error(), c.message) {
				t.Fatalf("error %v, want one containing %q", err, c.message)
			}
			if strings.Contains(logs.String(), "gateway listening") {
				t.Fatal("listened with a broken TLS config")
			}
		})
	}
}
