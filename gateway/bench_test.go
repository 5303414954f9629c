package gateway_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

// Whole-request benchmarks: one call through the router, every check, the
// store decision and the tool, in process (no network between client and
// gateway). "redis" uses the real Redis store, so its ns/op is dominated by
// the store round trips; "stub" answers the store decision from memory and
// so measures the gateway's own CPU and allocations per request. The tool
// does nothing, so neither measures the tool. Profile with
//
//	go test ./gateway -run '^$' -bench BenchmarkRequest/stub/fresh -benchmem -cpuprofile cpu.out

const benchToolName = "bench-nop"

// benchNopTool answers a small fixed body; its cost is not the gateway's.
type benchNopTool struct{}

func (benchNopTool) Spec() tools.Spec {
	return tools.Spec{Name: benchToolName, Description: "benchmark no-op",
		InputSchema: []byte(`{"type":"object","properties":{"seq":{"type":"integer","minimum":0},"op":{"type":"string"},"payload":{"type":"string"}},"required":["seq","op"]}`)}
}

var benchNopBody = []byte(`{"ok":true,"n":1}`)

func (benchNopTool) Call(context.Context, *tools.Request) (*tools.Response, error) {
	return &tools.Response{Status: http.StatusOK, ContentType: "application/json", Body: benchNopBody}, nil
}

// benchStubStore decides every claim the same way without any I/O.
type benchStubStore struct {
	idempotency.Store // nil: the methods the call path does not use panic
	replay            bool
}

func (s benchStubStore) Claim(_ context.Context, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	if s.replay {
		return idempotency.Decision{Outcome: idempotency.OutcomeReplay, ExecutionID: "01J8ZK4Q7XKZ3V9W6T2R5M0ABC",
			Response: &idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: benchNopBody}}, nil
	}
	return idempotency.Decision{Outcome: idempotency.OutcomeClaimed, ExecutionID: req.ExecutionID,
		Lease: idempotency.Lease{Scope: req.Scope, Step: req.Step, Owner: req.Owner, FencingToken: 1, ExecutionID: req.ExecutionID}}, nil
}

func (benchStubStore) Complete(context.Context, idempotency.Lease, idempotency.StoredResponse, time.Duration) error {
	return nil
}

func (benchStubStore) Renew(context.Context, idempotency.Lease, time.Duration) error { return nil }

func (benchStubStore) Release(context.Context, idempotency.Lease) error { return nil }

func (benchStubStore) Ping(context.Context) error { return nil }

func (benchStubStore) Close() error { return nil }

// benchGateway builds a gateway on store with the JSON access log a
// deployment would write (to io.Discard, so formatting is measured, not
// I/O), or with slog's discard handler, which formats nothing.
func benchGateway(b *testing.B, store idempotency.Store, accessLog, traced, decided bool, rs receipts.Store) *gateway.Server {
	b.Helper()
	logger := slog.New(slog.DiscardHandler)
	if accessLog {
		logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	reg, err := tools.NewRegistryOf(benchNopTool{})
	if err != nil {
		b.Fatal(err)
	}
	opts := callpath.Options{
		Store: store, Tools: reg, ReplayTTL: 10 * time.Minute,
		Logger: logger, Receipts: rs,
	}
	if decided {
		// Rules that read args and allow every benchmark call: the decide
		// stage's cost on a tool that has rules.
		p, err := decide.Compile(benchToolName, []decide.Rule{
			{When: `args.op == "bench" && args.seq >= 0`, Decision: decide.Allow},
			{Decision: decide.Deny, Reason: "not a benchmark call"},
		})
		if err != nil {
			b.Fatal(err)
		}
		opts.Decisions = map[string]*decide.Policy{benchToolName: p}
	}
	if traced {
		// Every span recorded and batched, then dropped by a no-op
		// exporter: the gateway's and the SDK's cost, not the network's.
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		opts.TracerProvider = tp
	}
	gw, err := gateway.NewServer(opts)
	if err != nil {
		b.Fatal(err)
	}
	return gw
}

func benchRedisStore(b *testing.B) idempotency.Store {
	b.Helper()
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(b)})
	prefix := redistest.Prefix("gwbench")
	b.Cleanup(func() {
		redistest.CleanPrefix(context.Background(), client, prefix)
		_ = client.Close()
	})
	return redisstore.New(client, redisstore.Options{Prefix: prefix})
}

// benchCall is one prepared request of session at step.
type benchCall struct {
	body                []byte
	key, session, index string
}

func newBenchCall(b *testing.B, session string, step uint64) benchCall {
	args := `{"op":"bench","payload":"` + string(bytes.Repeat([]byte("x"), 64)) + `","seq":` + strconv.FormatUint(step, 10) + `}`
	key, canonical, err := keyderive.Derive(session, step, benchToolName, []byte(args))
	if err != nil {
		b.Fatal(err)
	}
	return benchCall{body: canonical, key: key, session: session, index: strconv.FormatUint(step, 10)}
}

// serve runs c through gw and fails unless it got 200 with the expected
// Idempotent-Replayed.
func (c benchCall) serve(b *testing.B, gw http.Handler, wantReplayed string) {
	req := httptest.NewRequest(http.MethodPost, "/api/tools/v1/"+benchToolName, bytes.NewReader(c.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", c.key)
	req.Header.Set("Agent-Session-Id", c.session)
	req.Header.Set("Agent-Step-Index", c.index)
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Idempotent-Replayed") != wantReplayed {
		b.Fatalf("status %d, Idempotent-Replayed %q: %s", rec.Code, rec.Header().Get("Idempotent-Replayed"), rec.Body)
	}
}

func BenchmarkRequest(b *testing.B) {
	stub := func(b *testing.B, replay bool) idempotency.Store { return benchStubStore{replay: replay} }
	stores := []struct {
		name      string
		open      func(b *testing.B, replay bool) idempotency.Store
		accessLog bool
		traced    bool
		decided   bool
	}{
		{"stub", stub, true, false, false},
		// The same with tracing on (every call sampled): the difference is
		// tracing's cost; "stub" itself is tracing off.
		{"stub-traced", stub, true, true, false},
		// The same without formatting the access log line: the difference
		// is the log's cost.
		{"stub-nolog", stub, false, false, false},
		// The same with decide rules on the tool: the difference is the
		// decide stage's cost; "stub" itself is a tool without rules.
		{"stub-decide", stub, true, false, true},
		{"redis", func(b *testing.B, _ bool) idempotency.Store { return benchRedisStore(b) }, true, false, false},
	}
	for _, st := range stores {
		benchRequest(b, st.name, st.open, st.accessLog, st.traced, st.decided, nil)
	}
	// Receipts on: the same Redis call with its receipt appended to the
	// same Redis (receipt_bench_test.go compares on and off).
	b.Run("redis-receipts", func(b *testing.B) {
		client := redis.NewClient(&redis.Options{Addr: redistest.Addr(b)})
		prefix := redistest.Prefix("gwbenchr")
		b.Cleanup(func() {
			redistest.CleanPrefix(context.Background(), client, prefix)
			_ = client.Close()
		})
		benchRequest(b, "", func(b *testing.B, _ bool) idempotency.Store { return benchRedisStore(b) }, true, false, false,
			redisreceipts.New(client, prefix, nil))
	})
	// The same with signed checkpoints (the defaults: every 1 000
	// receipts or a minute), signed by the scheduler's goroutine as a
	// gateway with receipts.signing_key does: beside redis-receipts, the
	// signing's cost per call.
	b.Run("redis-receipts-checkpoints", func(b *testing.B) {
		client := redis.NewClient(&redis.Options{Addr: redistest.Addr(b)})
		prefix := redistest.Prefix("gwbenchc")
		store := redisreceipts.New(client, prefix, nil)
		key := receipts.NewSigningKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
		sched := receipts.NewScheduler(receipts.Checkpointer{Store: store, Key: key}, 1000, time.Minute, nil)
		ctx, stop := context.WithCancel(context.Background())
		go sched.Run(ctx)
		b.Cleanup(func() {
			stop()
			redistest.CleanPrefix(context.Background(), client, prefix)
			_ = client.Close()
		})
		benchRequest(b, "", func(b *testing.B, _ bool) idempotency.Store { return benchRedisStore(b) }, true, false, false,
			sched.Store(store))
	})
}

// benchRequest runs the fresh and replay benchmarks of one configuration.
func benchRequest(b *testing.B, name string, open func(b *testing.B, replay bool) idempotency.Store, accessLog, traced, decided bool, rs receipts.Store) {
	st := struct {
		name                       string
		open                       func(b *testing.B, replay bool) idempotency.Store
		accessLog, traced, decided bool
	}{name, open, accessLog, traced, decided}
	prefix := st.name + "/"
	if st.name == "" {
		prefix = ""
	}
	{
		b.Run(prefix+"fresh", func(b *testing.B) {
			gw := benchGateway(b, st.open(b, false), st.accessLog, st.traced, st.decided, rs)
			cpu := startCPUMeter(b)
			// Requests are built ahead, outside the timer, in chunks: the
			// client's key derivation is not the gateway's cost.
			const chunk = 4096
			var step uint64
			calls := make([]benchCall, 0, chunk)
			b.ReportAllocs()
			for b.Loop() {
				if len(calls) == 0 {
					b.StopTimer()
					for range chunk {
						calls = append(calls, newBenchCall(b, "bench-fresh", step))
						step++
					}
					b.StartTimer()
				}
				calls[len(calls)-1].serve(b, gw, "false")
				calls = calls[:len(calls)-1]
			}
			cpu.report(b, func() { flushReceipts(b, gw, rs) })
		})
		b.Run(prefix+"replay", func(b *testing.B) {
			store := st.open(b, true)
			gw := benchGateway(b, store, st.accessLog, st.traced, st.decided, rs)
			c := newBenchCall(b, "bench-replay", 0)
			if !strings.HasPrefix(st.name, "stub") {
				c.serve(b, gw, "false") // the execution every iteration replays
			}
			cpu := startCPUMeter(b)
			b.ReportAllocs()
			for b.Loop() {
				c.serve(b, gw, "true")
			}
			cpu.report(b, func() { flushReceipts(b, gw, rs) })
		})
	}
}
