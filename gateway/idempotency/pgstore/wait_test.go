package pgstore_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// gatedTool runs until the test opens its gate, counting executions.
type gatedTool struct {
	started chan struct{}
	gate    chan struct{}
	runs    int
}

func (g *gatedTool) Spec() tools.Spec { return tools.Spec{Name: "slow"} }

func (g *gatedTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	g.runs++
	g.started <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return tools.JSON(201, map[string]string{"exec": req.ExecutionID})
}

// claimCounter counts the claims a gateway sends to its store.
type claimCounter struct {
	idempotency.Store
	claims atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, req)
}

// TestPreferWaitOnPostgres: a retry sent with Prefer: wait while the first
// attempt still runs waits (polling the store) and gets the first
// attempt's outcome as a replay; the tool runs once.
func TestPreferWaitOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	store, err := pgstore.Open(t.Context(), url, pgstore.Options{Schema: pgtest.Schema(t, url), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	tool := &gatedTool{started: make(chan struct{}, 1), gate: make(chan struct{})}
	registry, err := tools.NewRegistryOf(tool)
	if err != nil {
		t.Fatal(err)
	}
	counted := &claimCounter{Store: store}
	gw, err := gateway.NewServer(callpath.Options{Store: counted, Tools: registry})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gw)
	t.Cleanup(hs.Close)

	args := []byte(`{"n":1}`)
	key, err := keyderive.Key("waiter", 3, "slow", args)
	if err != nil {
		t.Fatal(err)
	}
	send := func(prefer string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/tools/v1/slow", bytes.NewReader(args))
		req.Header.Set("Content-Type", wire.MediaTypeJSON)
		req.Header.Set(wire.HeaderIdempotencyKey, key)
		req.Header.Set(wire.HeaderSessionID, "waiter")
		req.Header.Set(wire.HeaderStepIndex, "3")
		if prefer != "" {
			req.Header.Set(wire.HeaderPrefer, prefer)
		}
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}

	type answer struct {
		resp *http.Response
		body []byte
	}
	first := make(chan answer, 1)
	go func() { r, b := send(""); first <- answer{r, b} }()
	<-tool.started

	if r, _ := send(""); r == nil || r.StatusCode != http.StatusConflict {
		t.Fatalf("retry without Prefer while running: %v, want 409", r)
	}
	before := counted.claims.Load()
	waited := make(chan answer, 1)
	go func() { r, b := send("wait=10"); waited <- answer{r, b} }()
	// Open the gate only once the waiting request has claimed and polled
	// again at least once, so the test goes through the waiting path.
	for counted.claims.Load() < before+2 {
		time.Sleep(5 * time.Millisecond)
	}
	close(tool.gate)

	a, w := <-first, <-waited
	if a.resp == nil || w.resp == nil {
		t.Fatal("a request failed")
	}
	if a.resp.StatusCode != 201 || w.resp.StatusCode != 201 || !bytes.Equal(a.body, w.body) ||
		w.resp.Header.Get(wire.HeaderReplayed) != "true" || w.resp.Header.Get(wire.HeaderPreferenceApplied) != "wait=10" ||
		w.resp.Header.Get(wire.HeaderExecutionID) != a.resp.Header.Get(wire.HeaderExecutionID) {
		t.Fatalf("waited retry: %d replayed=%q %s; first: %d %s",
			w.resp.StatusCode, w.resp.Header.Get(wire.HeaderReplayed), w.body, a.resp.StatusCode, a.body)
	}
	if tool.runs != 1 {
		t.Fatalf("tool ran %d times, want 1", tool.runs)
	}
}
