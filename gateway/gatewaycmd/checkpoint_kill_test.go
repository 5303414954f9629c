package gatewaycmd

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/internal/tsatest"
)

// TestCheckpointingSurvivesKill9 runs the real gateway program with a
// signing key and an anchor, and SIGKILLs it in the middle of a
// checkpoint: its request to the TSA (a real one, OpenSSL's, behind a
// gate that holds the first request) is in flight. Nothing of that
// checkpoint is stored; a gateway started again on the same Redis
// signs and anchors the chain's head at its next receipt, and `receipts
// verify -dial` passes the chain with its checkpoint and anchor.
func TestCheckpointingSurvivesKill9(t *testing.T) {
	bin := buildGateway(t)
	tsa := tsatest.Start(t, "kill test CA")
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var held atomic.Bool
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, _ := io.ReadAll(r.Body)
		if held.CompareAndSwap(false, true) { // the first request waits for the kill
			entered <- struct{}{}
			<-release
			return
		}
		resp, err := http.Post(tsa.URL, "application/timestamp-query", bytes.NewReader(query))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(gate.Close)
	t.Cleanup(func() { close(release) })

	dir := t.TempDir()
	key := filepath.Join(dir, "receipts-key.pem")
	if out, err := exec.Command("openssl", "genpkey", "-algorithm", "ed25519", "-out", key).CombinedOutput(); err != nil {
		t.Fatalf("openssl genpkey: %v\n%s", err, out)
	}
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	prefix := redistest.Prefix("gwcheckpointkill")
	t.Cleanup(func() {
		redistest.CleanPrefix(context.Background(), client, prefix)
		_ = client.Close()
	})
	addr := freeAddr(t)
	configText := "listen: " + addr + "\nreceipts:\n  signing_key: " + key + "\n  checkpoint_every: {receipts: 1, interval: 1h}\n" +
		"  anchor:\n    tsa_url: " + gate.URL + "\n    tsa_roots: " + tsa.RootsFile + "\n" +
		"store:\n  redis_url: redis://" + redistest.Addr(t) + "/0\n  key_prefix: \"" + prefix + "\"\n" +
		strings.Replace(echoUpstream(t), "name: echo", "name: notes", 1) // the program compiles a plugin named echo in
	config := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(config, []byte(configText), 0o600); err != nil {
		t.Fatal(err)
	}
	store := redisreceipts.New(client, prefix, nil)

	first := startReplica(t, bin, config, addr)
	resp := call(t, addr, "sess", 0, "notes", `{"n":0}`)
	resp.Body.Close()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatalf("no checkpoint reached the TSA:\n%s", first.output())
	}
	first.kill() // mid-checkpoint: signed, waiting for its anchor
	if signed, err := store.Checkpoints(t.Context(), "anonymous"); err != nil || len(signed) != 0 {
		t.Fatalf("checkpoints after the kill: %+v %v, want none", signed, err)
	}

	startReplica(t, bin, config, addr)
	resp = call(t, addr, "sess", 1, "notes", `{"n":1}`)
	resp.Body.Close()
	var signed []receipts.Checkpoint
	for deadline := time.Now().Add(30 * time.Second); len(signed) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted gateway signed no checkpoint")
		}
		var err error
		if signed, err = store.Checkpoints(t.Context(), "anonymous"); err != nil {
			t.Fatal(err)
		}
	}
	if signed[0].Seq != 2 || signed[0].Anchor == "" {
		t.Fatalf("checkpoint after the restart: %+v, want seq 2, anchored", signed[0])
	}
	out, err := runCommand(t, "receipts", "verify", "-dial", "-config", config)
	if err != nil || !strings.Contains(out, "ok   anonymous: 2 receipts") || !strings.Contains(out, "1 anchored") {
		t.Fatalf("verify -dial: %v\n%s", err, out)
	}
}
