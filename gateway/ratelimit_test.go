package gateway_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// limitedTenant is the tenant the rate-limit tests configure.
const (
	limitedTenant = "acme"
	limitedToken  = "tok-acme"
)

// withTenantLimits sets the limits of a tenant added by withTenants before it.
func withTenantLimits(name string, l callpath.TenantLimits) harnessOption {
	return func(o *callpath.Options) {
		for i := range o.Tenants {
			if o.Tenants[i].Name == name {
				o.Tenants[i].Limits = l
			}
		}
	}
}

func withLimiter(b ratelimit.Backend) harnessOption {
	return func(o *callpath.Options) { o.Limiter = b }
}

// replicas builds gateways that share one store and one limiter, as the
// replicas of a deployment do: two on Redis (limits in Redis), two on
// PostgreSQL (each its own pool on one schema, limits in its tables), one
// on the embedded store (limits in process).
func replicas(t *testing.T, kind storeKind, toolset []tools.Tool, limits callpath.TenantLimits) []*harness {
	t.Helper()
	opts := []harnessOption{withTenants(map[string]string{limitedTenant: limitedToken}), withTenantLimits(limitedTenant, limits)}
	switch kind {
	case storeEmbedded:
		return []*harness{newHarness(t, kind, toolset, opts...)}
	case storePostgres:
		url := pgtest.URL(t)
		schema := pgtest.Schema(t, url)
		var hs []*harness
		for range 2 {
			s := openPostgres(t, url, schema)
			hs = append(hs, newHarness(t, kind, toolset, append(opts, withStore(s), withLimiter(s.Limiter()))...))
		}
		return hs
	}
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	prefix := redistest.Prefix("gwrl")
	limiter := ratelimit.NewRedis(client, prefix)
	t.Cleanup(func() {
		ctx := context.Background()
		redistest.CleanPrefix(ctx, client, prefix)
		client.Del(ctx, limiter.RateKey(limitedTenant))
		_ = client.Close()
	})
	store := redisstore.New(client, redisstore.Options{Prefix: prefix})
	opts = append(opts, withStore(store), withLimiter(limiter))
	return []*harness{newHarness(t, kind, toolset, opts...), newHarness(t, kind, toolset, opts...)}
}

// rateLimitedCount sums gateway_requests_total{outcome="rate_limited"} over replicas.
func rateLimitedCount(hs []*harness, tool string) float64 {
	var n float64
	for _, h := range hs {
		n += h.counter(tool, "rate_limited")
	}
	return n
}

// wantRateLimited checks a 429 and its Retry-After (whole seconds ≥ 1).
func wantRateLimited(t *testing.T, r response) int {
	t.Helper()
	p := wantProblem(t, r, http.StatusTooManyRequests, wire.CodeRateLimited)
	if p["retryable"] != true {
		t.Fatalf("rate_limited must be retryable: %s", r.body)
	}
	if r.header.Get(wire.HeaderExecutionID) != "" || r.header.Get(wire.HeaderReplayed) != "" {
		t.Fatalf("a refused call has no execution: %v", r.header)
	}
	ra, err := strconv.Atoi(r.header.Get(wire.HeaderRetryAfter))
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q: want whole seconds >= 1", r.header.Get(wire.HeaderRetryAfter))
	}
	return ra
}

// TestRateLimitIsSharedByReplicas fires more concurrent calls than the
// tenant's burst at the replicas and counts: exactly the burst runs (a
// rate of N per hour adds no token within a test), every other call is
// 429 with a Retry-After, nothing of a refused call is stored, and the
// metrics count the refusals.
func TestRateLimitIsSharedByReplicas(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		const burst, calls = 7, 30
		tool := newTestTool("provision")
		limits := callpath.TenantLimits{Rate: ratelimit.Limit{Rate: 60, Period: time.Hour, Burst: burst}}
		hs := replicas(t, kind, []tools.Tool{tool}, limits)

		var wg sync.WaitGroup
		results := make([]response, calls)
		for i := range calls {
			wg.Go(func() {
				r, err := hs[i%len(hs)].try(callSpec{tool: "provision", session: "rl", step: uint64(i), args: `{"i":` + strconv.Itoa(i) + `}`, token: limitedToken})
				if err != nil {
					t.Errorf("call %d: %v", i, err)
				}
				results[i] = r
			})
		}
		wg.Wait()
		ok, limited := 0, 0
		for i, r := range results {
			switch r.status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				limited++
				// One call per 60 s; the GCRA's wait is at most that.
				if ra := wantRateLimited(t, r); ra > 60 {
					t.Errorf("Retry-After %d s for a rate of 60/h", ra)
				}
				key := derivedKey(t, "rl", uint64(i), "provision", `{"i":`+strconv.Itoa(i)+`}`)
				if _, err := hs[0].store.Get(context.Background(), idempotency.Scope{Tenant: limitedTenant, Tool: "provision", Key: key}); !errors.Is(err, idempotency.ErrNotFound) {
					t.Errorf("call %d was refused but the store holds a record for it (err %v)", i, err)
				}
			default:
				t.Errorf("call %d: status %d: %s", i, r.status, r.body)
			}
		}
		if ok != burst || limited != calls-burst {
			t.Fatalf("%d ran and %d were refused; want the burst of %d to run across %d replica(s)", ok, limited, burst, len(hs))
		}
		if got := tool.total.Load(); got != burst {
			t.Fatalf("the tool ran %d times, want %d", got, burst)
		}
		if got := rateLimitedCount(hs, "provision"); got != calls-burst {
			t.Fatalf("gateway_requests_total{outcome=rate_limited} = %v, want %d", got, calls-burst)
		}
	})
}

// TestRateLimitCountsReplays: a replay costs a token like an execution
// (it reaches the store), and a tenant without limits is not limited.
func TestRateLimitCountsReplays(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("provision")
		limits := callpath.TenantLimits{Rate: ratelimit.Limit{Rate: 3, Period: time.Hour, Burst: 3}}
		hs := replicas(t, kind, []tools.Tool{tool}, limits)
		call := callSpec{tool: "provision", session: "replays", step: 0, args: `{"x":1}`, token: limitedToken}
		for i := range 3 {
			r := hs[i%len(hs)].do(call)
			if r.status != http.StatusOK || r.header.Get(wire.HeaderReplayed) != strconv.FormatBool(i > 0) {
				t.Fatalf("call %d: %d replayed=%q: %s", i, r.status, r.header.Get(wire.HeaderReplayed), r.body)
			}
		}
		wantRateLimited(t, hs[0].do(call))
		if tool.total.Load() != 1 {
			t.Fatalf("the tool ran %d times, want 1", tool.total.Load())
		}
	})
}

// TestRateLimitComesAfterTheRequestChecks: a malformed call is answered
// for what is wrong with it, and costs no token.
func TestRateLimitComesAfterTheRequestChecks(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("provision")
		hs := replicas(t, kind, []tools.Tool{tool}, callpath.TenantLimits{Rate: ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}})
		bad := callSpec{tool: "provision", session: "checks", step: 0, args: `{"x":1}`, key: "0000000000000000000000000000000000000000000000000000000000000000", token: limitedToken}
		for range 3 {
			wantProblem(t, hs[0].do(bad), http.StatusUnprocessableEntity, wire.CodeIdempotencyKeyMismatch)
		}
		wantProblem(t, hs[0].do(callSpec{tool: "provision", session: "checks", step: 0, args: `{"x":1}`}), http.StatusUnauthorized, wire.CodeUnauthorized)
		if r := hs[0].do(callSpec{tool: "provision", session: "checks", step: 0, args: `{"x":1}`, token: limitedToken}); r.status != http.StatusOK {
			t.Fatalf("first good call: %d: %s", r.status, r.body)
		}
		wantRateLimited(t, hs[0].do(callSpec{tool: "provision", session: "checks", step: 1, args: `{"x":1}`, token: limitedToken}))
	})
}

// TestMaxInFlight holds slow calls running and shows that the tenant's
// max_in_flight is shared by the replicas, refuses a further call with 429
// without storing or running anything, and is not taken by replays or
// duplicates of a running call; once the tools finish, calls run again.
func TestMaxInFlight(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		const maxInFlight = 2
		tool := newTestTool("provision")
		release := make(chan struct{})
		started := make(chan struct{}, 16)
		tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			if req.StepIndex >= 100 { // the slow ones
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return tools.JSON(200, map[string]any{"step": req.StepIndex})
		}
		hs := replicas(t, kind, []tools.Tool{tool}, callpath.TenantLimits{MaxInFlight: maxInFlight})
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock)
		call := func(step uint64) callSpec {
			return callSpec{tool: "provision", session: "inflight", step: step, args: `{"s":` + strconv.FormatUint(step, 10) + `}`, token: limitedToken}
		}

		done := hs[0].do(call(1)) // completed before the slow ones start
		if done.status != http.StatusOK {
			t.Fatalf("first call: %d: %s", done.status, done.body)
		}
		slow := make(chan response, maxInFlight)
		for i := range maxInFlight {
			go func() {
				r, err := hs[i%len(hs)].try(call(100 + uint64(i)))
				if err != nil {
					t.Errorf("slow call: %v", err)
				}
				slow <- r
			}()
		}
		for range maxInFlight {
			<-started
		}

		// Over the cap, on every replica: 429, nothing stored, nothing run.
		for i, h := range hs {
			step := uint64(200 + i)
			wantRateLimited(t, h.do(call(step)))
			key := derivedKey(t, "inflight", step, "provision", `{"s":`+strconv.FormatUint(step, 10)+`}`)
			if _, err := h.store.Get(context.Background(), idempotency.Scope{Tenant: limitedTenant, Tool: "provision", Key: key}); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("a call refused for max_in_flight left a record (err %v)", err)
			}
		}
		// A replay and a duplicate of a running call take no slot.
		if r := hs[len(hs)-1].do(call(1)); r.status != http.StatusOK || r.header.Get(wire.HeaderReplayed) != "true" {
			t.Fatalf("replay at the cap: %d replayed=%q: %s", r.status, r.header.Get(wire.HeaderReplayed), r.body)
		}
		wantProblem(t, hs[0].do(call(100)), http.StatusConflict, wire.CodeRequestInProgress)
		if got := tool.total.Load(); got != 1+maxInFlight {
			t.Fatalf("the tool ran %d times, want %d", got, 1+maxInFlight)
		}

		unblock()
		for range maxInFlight {
			if r := <-slow; r.status != http.StatusOK {
				t.Fatalf("slow call: %d: %s", r.status, r.body)
			}
		}
		// The slots are free again (the refused call's step is free too).
		for i, h := range hs {
			if r := h.do(call(200 + uint64(i))); r.status != http.StatusOK {
				t.Fatalf("after the slow calls ended: %d: %s", r.status, r.body)
			}
		}
	})
}

// TestRateLimitIsPerTenant makes sure a tenant's limits do not leak to
// others: another tenant is never refused for acme's budget.
func TestRateLimitIsPerTenant(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withTenants(twoTenants),
		withTenantLimits("acme", callpath.TenantLimits{Rate: ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}}))
	for i := range 3 {
		tok := "tok-globex"
		r := h.do(callSpec{tool: "provision", session: "per-tenant", step: uint64(i), args: `{}`, token: tok})
		if r.status != http.StatusOK {
			t.Fatalf("globex call %d: %d: %s", i, r.status, r.body)
		}
	}
	if r := h.do(callSpec{tool: "provision", session: "per-tenant", step: 0, args: `{}`, token: "tok-acme"}); r.status != http.StatusOK {
		t.Fatalf("acme's first call: %d: %s", r.status, r.body)
	}
	wantRateLimited(t, h.do(callSpec{tool: "provision", session: "per-tenant", step: 1, args: `{}`, token: "tok-acme"}))
}

// TestNewServerRefusesBadLimits: limits that cannot be enforced are refused.
func TestNewServerRefusesBadLimits(t *testing.T) {
	reg, err := tools.NewRegistryOf(newTestTool("provision"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []callpath.TenantLimits{
		{MaxInFlight: -1},
		{Rate: ratelimit.Limit{Rate: 10, Period: time.Second}},
		{Rate: ratelimit.Limit{Rate: 10, Burst: 1}},
	} {
		_, err := gateway.NewServer(callpath.Options{Store: newStore(t, storeEmbedded), Tools: reg,
			Tenants: []callpath.Tenant{{Name: "acme", Limits: l}}})
		if err == nil {
			t.Errorf("limits %+v accepted", l)
		}
	}
}

// TestLimiterDownIsAStoreError: when the limiter's store does not answer
// (a Redis nobody listens on), the call gets 503 store_unavailable, the
// tool does not run, and gateway_store_errors_total counts the failure
// under the limit's op, as every other failure of the store.
func TestLimiterDownIsAStoreError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close() // nothing listens there any more: connections are refused
	client := redis.NewClient(&redis.Options{Addr: deadAddr, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	for _, c := range []struct {
		op     string
		limits callpath.TenantLimits
	}{
		{"rate_limit", callpath.TenantLimits{Rate: ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 10}}},
		{"in_flight", callpath.TenantLimits{MaxInFlight: 1}},
	} {
		t.Run(c.op, func(t *testing.T) {
			tool := newTestTool("provision")
			h := newHarness(t, storeEmbedded, []tools.Tool{tool},
				withTenants(map[string]string{limitedTenant: limitedToken}), withTenantLimits(limitedTenant, c.limits),
				withLimiter(ratelimit.NewRedis(client, "gwtest:")))
			call := callSpec{tool: "provision", session: "limiter-down", step: 1, args: `{}`, token: limitedToken}
			wantProblem(t, h.do(call), http.StatusServiceUnavailable, wire.CodeStoreUnavailable)
			if n := tool.total.Load(); n != 0 {
				t.Fatalf("tool ran %d times with its limiter down", n)
			}
			if n := storeErrors(t, h, c.op); n != 1 {
				t.Fatalf("gateway_store_errors_total{op=%q} = %v, want 1", c.op, n)
			}
		})
	}
}

// storeErrors reads gateway_store_errors_total{op}.
func storeErrors(t *testing.T, h *harness, op string) float64 {
	t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "gateway_store_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestMCPRateLimited: a tenant over its rate gets, over MCP, the dedicated
// JSON-RPC error -32029 with data.code rate_limited, retryable and
// retry_after_ms (not -32602, which says the params are wrong); the tool
// does not run for the refused call.
func TestMCPRateLimited(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool},
		withTenants(map[string]string{limitedTenant: limitedToken}),
		withTenantLimits(limitedTenant, callpath.TenantLimits{Rate: ratelimit.Limit{Rate: 1, Period: time.Minute, Burst: 1}}))
	cs := h.mcpSession(mcpClientOptions{Token: limitedToken})

	res, err := mcpCall(t, cs, "provision", `{}`, identityMeta("rl", 0))
	wantExecuted(t, res, err, false)
	_, err = mcpCall(t, cs, "provision", `{}`, identityMeta("rl", 1))
	data := wantRPCError(t, err, wire.RPCRateLimited, wire.CodeRateLimited)
	if data["retryable"] != true {
		t.Fatalf("rate_limited over MCP must be retryable: %v", data)
	}
	ms, ok := data["retry_after_ms"].(float64)
	if !ok || ms < 1000 || ms != float64(int64(ms)) {
		t.Fatalf("data.retry_after_ms = %#v, want whole milliseconds >= 1000 (REST's Retry-After in seconds)", data["retry_after_ms"])
	}
	if n := tool.total.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1 (the limited call must not run)", n)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == wire.RPCInvalidParams {
		t.Fatal("rate_limited is answered as invalid params")
	}
}
