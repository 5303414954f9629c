// Package tsatest runs a real RFC 3161 time-stamping authority for tests:
// OpenSSL's `ts -reply` behind a small HTTP handler, with a CA and a TSA
// certificate the test generates with openssl in a temporary directory.
// No token is ever written by hand.
package tsatest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TSA is a running time-stamping authority.
type TSA struct {
	// URL takes RFC 3161 requests (POST application/timestamp-query).
	URL string
	// RootsFile is the PEM of the CA that issued the TSA's certificate:
	// what a verifier trusts.
	RootsFile string
	mu        sync.Mutex
	requests  int // answered
}

// config is the openssl TSA's configuration (paths relative to its dir).
const config = `[ tsa_ext ]
basicConstraints = critical,CA:false
keyUsage = critical,digitalSignature
extendedKeyUsage = critical,timeStamping
[ tsa ]
serial = serial
signer_cert = tsa.crt
certs = ca.crt
signer_key = tsa.key
signer_digest = sha256
default_policy = 1.2.3.4.1
digests = sha256
accuracy = secs:1
ordering = no
tsa_name = no
ess_cert_id_chain = no
ess_cert_id_alg = sha256
`

// Start generates a CA and a TSA certificate (name is the CA's common
// name, so two TSAs of one test do not trust each other) and serves the
// TSA until the test ends.
func Start(t testing.TB, name string) *TSA {
	t.Helper()
	dir := t.TempDir()
	run := func(stdin io.Reader, args ...string) []byte {
		cmd := exec.Command("openssl", args...)
		cmd.Dir, cmd.Stdin = dir, stdin
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("openssl %v: %v", args, err)
		}
		return out
	}
	if err := os.WriteFile(filepath.Join(dir, "ts.cnf"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "serial"), []byte("01\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ec := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"}
	run(nil, append(append([]string{"req", "-x509"}, ec...), "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN="+name, "-days", "2",
		"-addext", "basicConstraints=critical,CA:true", "-addext", "keyUsage=critical,keyCertSign")...)
	run(nil, append(append([]string{"req"}, ec...), "-keyout", "tsa.key", "-out", "tsa.csr", "-subj", "/CN="+name+" TSA")...)
	run(nil, "x509", "-req", "-in", "tsa.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "tsa.crt",
		"-days", "2", "-extfile", "ts.cnf", "-extensions", "tsa_ext")
	tsa := &TSA{RootsFile: filepath.Join(dir, "ca.crt")}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/timestamp-query" {
			http.Error(w, "want POST application/timestamp-query", http.StatusBadRequest)
			return
		}
		tsa.mu.Lock() // openssl's serial file is read and written per reply
		defer tsa.mu.Unlock()
		if err := os.WriteFile(filepath.Join(dir, "req.tsq"), query, 0o600); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		cmd := exec.Command("openssl", "ts", "-reply", "-config", "ts.cnf", "-section", "tsa", "-queryfile", "req.tsq", "-out", "resp.tsr")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			http.Error(w, "openssl ts -reply: "+err.Error()+": "+string(out), http.StatusInternalServerError)
			return
		}
		reply, err := os.ReadFile(filepath.Join(dir, "resp.tsr"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		tsa.requests++
		w.Header().Set("Content-Type", "application/timestamp-reply")
		_, _ = w.Write(reply)
	}))
	t.Cleanup(srv.Close)
	tsa.URL = srv.URL
	return tsa
}

// Answered is how many requests the TSA answered.
func (t *TSA) Answered() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.requests
}
