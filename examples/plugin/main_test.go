package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/gateway/gatewaycmd"
)

// TestCustomBinaryServesThePlugin runs this binary's gateway (the function
// main calls, with a config of its own) and calls open-ticket through it
// like an agent would: once, then again after a "crash" with the same step.
func TestCustomBinaryServesThePlugin(t *testing.T) {
	addr := freeAddr(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	err := os.WriteFile(config, []byte(fmt.Sprintf(`
listen: %s
store:
  path: gateway.db
tools:
  - name: open-ticket
    timeout: 5s
    lease_expiry: unknown
`, addr)), 0o600)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &lockedBuffer{}
	go func() {
		done <- gatewaycmd.Run(ctx, []string{"ticketgateway", "-config", config}, func(string) string { return "" }, logs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	waitHealthy(t, base, done)

	// Discovery lists the plugin next to the bundled tools.
	resp, err := http.Get(base + "/api/tools/v1")
	if err != nil {
		t.Fatal(err)
	}
	var catalog struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	err = json.NewDecoder(resp.Body).Decode(&catalog)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range catalog.Tools {
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "open-ticket") {
		t.Fatalf("discovery lists %v, want open-ticket", names)
	}

	session := agentclient.New(base).Session("ticket-e2e")
	args := map[string]any{"title": "Disk full on db-1", "priority": "urgent"}
	first, err := session.Call(context.Background(), 0, "open-ticket", args)
	if err != nil {
		t.Fatal(err)
	}
	again, err := session.Call(context.Background(), 0, "open-ticket", args)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != 201 || first.Replayed {
		t.Fatalf("first call: %d replayed=%v %s", first.Status, first.Replayed, first.Body)
	}
	if !again.Replayed || !bytes.Equal(again.Body, first.Body) || again.ExecutionID != first.ExecutionID {
		t.Fatalf("second call: replayed=%v body %s, want the first call's outcome replayed", again.Replayed, again.Body)
	}

	// Arguments the schema refuses never reach the tool.
	_, err = session.Call(context.Background(), 1, "open-ticket", map[string]any{"title": "x", "priority": "soon"})
	apiErr, ok := err.(*agentclient.Error)
	if !ok || apiErr.Status != 400 || apiErr.Code != "invalid_arguments" {
		t.Fatalf("invalid call: err = %v, want 400 invalid_arguments", err)
	}
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHealthy polls /healthz until the gateway answers, or fails the test
// if it exits first.
func waitHealthy(t *testing.T, base string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("gateway exited at start-up: %v", err)
		default:
		}
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("gateway did not become healthy")
}

// lockedBuffer collects the gateway's log lines, written from many
// goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
