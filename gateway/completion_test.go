package gateway_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/tools"
)

// privateStore is a store on a private server the test may kill.
type privateStore struct {
	store   idempotency.Store
	kill    func()
	restart func() error
}

func privatePostgres(t *testing.T) privateStore {
	srv := pgtest.Start(t)
	s, err := pgstore.New(t.Context(), srv.Pool(t), pgstore.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return privateStore{store: s, kill: srv.Kill, restart: srv.Restart}
}

func privateRedis(t *testing.T) privateStore {
	srv := redistest.Start(t, redistest.WithAOF()) // fsync always: a kill loses nothing acknowledged
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = client.Close() })
	return privateStore{store: redisstore.New(client, redisstore.Options{Prefix: "gw:"}), kill: srv.Kill, restart: srv.Restart}
}

// TestCompletionOutlivesAStoreOutage: the store is killed while a tool
// runs and stays down well past lock_ttl and past the completion's first
// window; the client gets the tool's answer meanwhile, and once the store
// is back the completion lands: the record is COMPLETED with the bytes the
// client saw, a retry replays them, and the tool ran once.
func TestCompletionOutlivesAStoreOutage(t *testing.T) {
	for name, open := range map[string]func(*testing.T) privateStore{"postgres": privatePostgres, "redis": privateRedis} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ps := open(t)
			tool := newTestTool("provision")
			tool.started = make(chan *tools.Request, 1)
			release := make(chan struct{})
			tool.behave = func(_ context.Context, req *tools.Request) (*tools.Response, error) {
				<-release // finishes whatever happens to its lease meanwhile
				return tools.JSON(200, map[string]any{"ok": true, "execution_id": req.ExecutionID})
			}
			const lockTTL = time.Second
			h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withStore(ps.store), withLockTTL(lockTTL))
			call := callSpec{tool: "provision", session: "outage", step: 1, args: `{}`}
			answered := make(chan response, 1)
			go func() { answered <- h.do(call) }()
			<-tool.started

			ps.kill()
			down := time.Now()
			close(release)
			first := <-answered // after the completion's first window
			if first.status != http.StatusOK {
				t.Fatalf("the client's answer during the outage: %d %s", first.status, first.body)
			}
			// Down for longer than lock_ttl after the client was answered:
			// the completion can only land from the background retry.
			time.Sleep(time.Until(down.Add(5*time.Second + 3*lockTTL)))
			if err := ps.restart(); err != nil {
				t.Fatal(err)
			}
			t.Logf("store down %v", time.Since(down).Round(100*time.Millisecond))

			scope := idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "provision", Key: derivedKey(t, "outage", 1, "provision", `{}`)}
			var rec idempotency.Record
			eventually(t, 30*time.Second, "the completion to land after the restart", func() bool {
				var err error
				rec, err = ps.store.Get(context.Background(), scope)
				return err == nil && rec.State == idempotency.StateCompleted
			})
			if rec.Response == nil || !bytes.Equal(rec.Response.Body, first.body) || rec.ExecutionID != first.header.Get("Tool-Execution-Id") {
				t.Fatalf("record %+v does not hold the answer the client got (%s)", rec, first.body)
			}
			again := h.do(call)
			if again.status != http.StatusOK || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
				t.Fatalf("retry after the outage: %d replayed=%q %s, want the replay of %s", again.status, again.header.Get("Idempotent-Replayed"), again.body, first.body)
			}
			if n := tool.total.Load(); n != 1 {
				t.Fatalf("the tool ran %d times, want 1", n)
			}
		})
	}
}

// ownerBlockedStore fails the completions and pings made on behalf of the
// request that first failed to complete (its own path and its background
// retry, which carry its request id) while blocked, and lets every other
// request's through: only a claim of the same record can land the pending
// completion.
type ownerBlockedStore struct {
	idempotency.Store
	blocked atomic.Bool
	mu      sync.Mutex
	owner   string // request id of the blocked completion
}

func (s *ownerBlockedStore) isOwner(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := callpath.RequestIDFrom(ctx)
	if s.owner == "" {
		s.owner = id
	}
	return id == s.owner
}

func (s *ownerBlockedStore) Complete(ctx context.Context, l idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) error {
	if s.blocked.Load() && s.isOwner(ctx) {
		return errStoreDown
	}
	return s.Store.Complete(ctx, l, resp, ttl)
}

func (s *ownerBlockedStore) Ping(ctx context.Context) error {
	if s.blocked.Load() && s.isOwner(ctx) {
		return errStoreDown
	}
	return s.Store.Ping(ctx)
}

// TestRetryOnTheOwnerLandsItsPendingCompletion: a completion still pending
// when its lease has expired is landed by the next claim of the same record
// on the same gateway, so that retry replays the answer instead of taking
// the lease over and running the tool again.
func TestRetryOnTheOwnerLandsItsPendingCompletion(t *testing.T) {
	tool := newTestTool("provision")
	hs := &ownerBlockedStore{Store: newStore(t, storeEmbedded)}
	hs.blocked.Store(true)
	const lockTTL = 300 * time.Millisecond
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withStore(hs), withLockTTL(lockTTL))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = h.gw.Drain(ctx) // ends the background retry
	})
	call := callSpec{tool: "provision", session: "pending", step: 1, args: `{}`}
	first := h.do(call) // answered after the completion's first window
	if first.status != http.StatusOK {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	time.Sleep(2 * lockTTL) // the lease has expired; the completion is pending
	again := h.do(call)
	if again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
		t.Fatalf("retry on the owner: %d replayed=%q %s, want the replay of %s", again.status, again.header.Get("Idempotent-Replayed"), again.body, first.body)
	}
	if n := tool.total.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}
