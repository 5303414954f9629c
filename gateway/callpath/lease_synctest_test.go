package callpath_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// The lease keeper's timing, on testing/synctest's fake clock: the engine
// runs in the bubble on the embedded store (whose clock is the process's),
// called directly, with no socket, so a lease of one second is waited out
// exactly and in no real time. The same behaviour through the doors and on
// every store is gateway/lease_test.go's, on the real clock.

const leaseTestTTL = time.Second

// heldTool runs until the test releases it or its context ends, and says
// when it started and when its context ended.
type heldTool struct {
	runs      atomic.Int32
	started   chan time.Time
	cancelled chan time.Time
	release   chan struct{}
}

func newHeldTool() *heldTool {
	return &heldTool{started: make(chan time.Time, 1), cancelled: make(chan time.Time, 1), release: make(chan struct{})}
}

func (h *heldTool) Spec() tools.Spec { return tools.Spec{Name: "held"} }

func (h *heldTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	h.runs.Add(1)
	h.started <- time.Now()
	select {
	case <-h.release:
		return tools.JSON(200, map[string]any{"done": true})
	case <-ctx.Done():
		h.cancelled <- time.Now()
		return nil, ctx.Err()
	}
}

// renewFailing fails every renewal as an unreachable store does (not a
// lost lease), while failing is set.
type renewFailing struct {
	idempotency.Store
	failing atomic.Bool
}

func (s *renewFailing) Renew(ctx context.Context, l idempotency.Lease, ttl time.Duration) error {
	if s.failing.Load() {
		return errors.New("renewfailing: connection refused")
	}
	return s.Store.Renew(ctx, l, ttl)
}

// newLeaseEngine opens an embedded store and an engine on it with lock TTL
// leaseTestTTL, inside the bubble; both are drained and closed when the
// test ends. wrap, when set, wraps the store the engine uses.
func newLeaseEngine(t *testing.T, tool tools.Tool, wrap func(idempotency.Store) idempotency.Store) (*callpath.Engine, idempotency.Store) {
	t.Helper()
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "gw.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	registry, err := tools.NewRegistryOf(tool)
	if err != nil {
		t.Fatal(err)
	}
	var engineStore idempotency.Store = store
	if wrap != nil {
		engineStore = wrap(store)
	}
	reg := prometheus.NewRegistry()
	e, err := callpath.New(callpath.Options{Store: engineStore, Tools: registry, LockTTL: leaseTestTTL, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Drain(context.Background()) })
	return e, store
}

// restCall is the REST call of tool held at session step 1 with arguments
// {}, its identity read as the REST door reads it.
func restCall(t *testing.T, e *callpath.Engine) (*callpath.Call, idempotency.Scope) {
	t.Helper()
	entry, ok := e.Tools().Lookup("held")
	if !ok {
		t.Fatal("no tool held")
	}
	args := []byte(`{}`)
	key, _, err := keyderive.Derive("session", 1, "held", args)
	if err != nil {
		t.Fatal(err)
	}
	c := &callpath.Call{API: callpath.APIREST, Tenant: callpath.AnonymousTenant, Entry: entry, Arguments: args}
	header := http.Header{}
	header.Set(wire.HeaderIdempotencyKey, strconv.Quote(key))
	header.Set(wire.HeaderSessionID, "session")
	header.Set(wire.HeaderStepIndex, "1")
	callpath.ReadIdentity(c, callpath.IdentitySource{API: callpath.APIREST, Header: header}, callpath.KeyModeDerived)
	if c.IdentityProblem != nil {
		t.Fatalf("identity: %s", c.IdentityProblem.Detail)
	}
	return c, idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "held", Key: key}
}

// TestLeaseKeptOverTenLockTTLs: a tool that runs ten lock TTLs keeps its
// lease (renewed every third of one); a duplicate then finds it in
// progress, and the tool runs once, its answer replayed afterwards.
func TestLeaseKeptOverTenLockTTLs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tool := newHeldTool()
		e, _ := newLeaseEngine(t, tool, nil)
		first := make(chan callpath.Result, 1)
		go func() {
			c, _ := restCall(t, e)
			first <- e.Call(context.Background(), c)
		}()
		<-tool.started
		time.Sleep(10 * leaseTestTTL)
		c, _ := restCall(t, e)
		if r := e.Call(context.Background(), c); r.Kind != callpath.ResultInProgress {
			t.Fatalf("duplicate ten lock TTLs in: %v %+v, want in progress", r.Kind, r.Problem)
		}
		close(tool.release)
		if r := <-first; r.Kind != callpath.ResultExecuted || r.Status != 200 {
			t.Fatalf("the held call: %v %d %+v", r.Kind, r.Status, r.Problem)
		}
		if r := e.Call(context.Background(), c); r.Kind != callpath.ResultReplayed {
			t.Fatalf("after completion: %v, want a replay", r.Kind)
		}
		if n := tool.runs.Load(); n != 1 {
			t.Fatalf("the tool ran %d times, want once", n)
		}
	})
}

// TestLeaseLostOneLockTTLAfterTheLastRenewal: when no renewal lands (the
// store does not answer), the keeper retries and gives the lease up when
// it runs out — one lock TTL after the claim, at most a millisecond later
// — cancelling the tool; the owner that lost it records no outcome.
func TestLeaseLostOneLockTTLAfterTheLastRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tool := newHeldTool()
		var failing *renewFailing
		e, store := newLeaseEngine(t, tool, func(s idempotency.Store) idempotency.Store {
			failing = &renewFailing{Store: s}
			failing.failing.Store(true)
			return failing
		})
		c, scope := restCall(t, e)
		done := make(chan callpath.Result, 1)
		go func() { done <- e.Call(context.Background(), c) }()
		started := <-tool.started
		cancelled := <-tool.cancelled
		if lost := cancelled.Sub(started); lost < leaseTestTTL || lost > leaseTestTTL+time.Millisecond {
			t.Fatalf("tool cancelled %v after it started, want one lock TTL (%v) after its claim", lost, leaseTestTTL)
		}
		if r := <-done; r.Kind == callpath.ResultExecuted || r.Kind == callpath.ResultReplayed {
			t.Fatalf("a call whose lease was lost answered %v", r.Kind)
		}
		// No outcome from the owner that lost the lease: the record is
		// released (the rerun policy: a retry runs the tool again), never
		// completed.
		if rec, err := store.Get(context.Background(), scope); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("record after the lost lease: %s %v; want it released", rec.State, err)
		}
		if n := tool.runs.Load(); n != 1 {
			t.Fatalf("the tool ran %d times, want once", n)
		}
	})
}
