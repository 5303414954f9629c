package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/tools"
)

func TestCompileEffectKeyRefusesMalformedTemplates(t *testing.T) {
	bad := map[string]string{
		"refund:{/txn_id":       "not closed",
		"refund:/txn_id}":       "closes no",
		"refund:{{/txn_id}}":    "not closed",
		"refund:{txn_id}":       "must start with '/'",
		"refund:{/txn~2id}":     "'~' must be followed by 0 or 1",
		"refund:{/txn~}":        "'~' must be followed by 0 or 1",
		"refund":                "names no argument",
		"refund:{}":             "must start with '/'",
		"a:{/x}:{/y":            "not closed",
		"refund:{/a}{/b}}extra": "closes no",
	}
	for template, want := range bad {
		_, err := callpath.CompileEffectKey(template)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CompileEffectKey(%q) = %v, want an error saying %q", template, err, want)
		}
	}
}

func TestEffectKeyValueOnCanonicalArguments(t *testing.T) {
	cases := []struct {
		template, canonical, want, missing string
	}{
		{"refund:{/txn_id}", `{"amount":5,"txn_id":"t-1"}`, "refund:t-1", ""},
		{"{/n}/{/ok}/{/nil}", `{"n":1.5,"nil":null,"ok":true}`, "1.5/true/null", ""},
		{"{/a~1b}:{/m~0n}", `{"a/b":"x","m~n":"y"}`, "x:y", ""},
		{"{/items/1/id}", `{"items":[{"id":"a"},{"id":"b"}]}`, "b", ""},
		{"{/obj}", `{"obj":{"a":[1,"x"],"b":2}}`, `{"a":[1,"x"],"b":2}`, ""},
		{"refund:{/txn_id}", `{"amount":5}`, "", "/txn_id"},
		{"{/items/2}", `{"items":[1]}`, "", "/items/2"},
		{"{/items/01}", `{"items":[1,2]}`, "", "/items/01"},
		{"{/s/x}", `{"s":"str"}`, "", "/s/x"},
	}
	for _, c := range cases {
		k, err := callpath.CompileEffectKey(c.template)
		if err != nil {
			t.Fatalf("CompileEffectKey(%q): %v", c.template, err)
		}
		got, missing, err := k.Value([]byte(c.canonical))
		if err != nil || got != c.want || missing != c.missing {
			t.Errorf("%q on %s = %q, missing %q, %v; want %q, missing %q", c.template, c.canonical, got, missing, err, c.want, c.missing)
		}
	}
}

// effectHarness serves a refund tool whose effect key is its txn_id.
func effectHarness(t *testing.T, kind storeKind, hold chan struct{}) (*harness, *testTool) {
	t.Helper()
	tool := newTestTool("refund")
	tool.schema = `{"type":"object","required":["txn_id"],"properties":{"txn_id":{"type":"string"},"amount":{"type":"number"}}}`
	if hold != nil {
		tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
			<-hold
			return tools.JSON(201, map[string]any{"refund": "r-" + req.ExecutionID})
		}
	}
	return newHarness(t, kind, []tools.Tool{tool}, withPolicy("refund", tools.Policy{EffectKey: "refund:{/txn_id}"})), tool
}

// TestEffectKeyOneRunAcrossSessions: 8 sessions call one refund at once,
// each under its own key and step; it runs once, the others are told it
// is in progress, then every retry replays that one execution.
func TestEffectKeyOneRunAcrossSessions(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		hold := make(chan struct{})
		h, tool := effectHarness(t, kind, hold)
		const sessions = 8
		args := `{"amount":5,"txn_id":"t-42"}`
		call := func(i int) callSpec {
			return callSpec{tool: "refund", session: fmt.Sprintf("sess-%d", i), step: uint64(i), args: args}
		}
		answers := make([]response, sessions)
		var wg, answered sync.WaitGroup
		answered.Add(sessions - 1)
		for i := range sessions {
			wg.Go(func() {
				answers[i] = h.do(call(i))
				if answers[i].status == 409 {
					answered.Done()
				}
			})
		}
		answered.Wait() // the 7 that did not run answered while the one ran
		close(hold)
		wg.Wait()
		var execID string
		for i, r := range answers {
			switch r.status {
			case 201:
				if execID != "" {
					t.Fatalf("two sessions ran the refund")
				}
				execID = r.header.Get("Tool-Execution-Id")
			case 409:
				if code := r.problem(t)["code"]; code != "request_in_progress" {
					t.Fatalf("session %d: 409 %v, want request_in_progress", i, code)
				}
			default:
				t.Fatalf("session %d: %d %s", i, r.status, r.body)
			}
		}
		for i := range sessions {
			r := h.do(call(i))
			if r.status != 201 || r.header.Get("Tool-Execution-Id") != execID || r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("session %d retry: %d exec %q replayed %q, want 201 %s true", i, r.status, r.header.Get("Tool-Execution-Id"), r.header.Get("Idempotent-Replayed"), execID)
			}
			holder := answers[i].status == 201
			if got := r.header.Get("Effect-Key-Replayed"); (got == "true") == holder {
				t.Fatalf("session %d retry: Effect-Key-Replayed %q (holder %v)", i, got, holder)
			}
		}
		if n := tool.total.Load(); n != 1 {
			t.Fatalf("refund ran %d times, want 1", n)
		}
	})
}

// TestEffectKeyRegeneratedTurn: the turn [A] regenerated as [B, A] moves
// A to another step, so it has another key; its effect key still replays.
func TestEffectKeyRegeneratedTurn(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := effectHarness(t, kind, nil)
		a := `{"amount":5,"txn_id":"t-7"}`
		first := h.do(callSpec{tool: "refund", session: "s", step: 0, args: a})
		b := h.do(callSpec{tool: "refund", session: "s", step: 1, args: `{"amount":1,"txn_id":"t-8"}`})
		again := h.do(callSpec{tool: "refund", session: "s", step: 2, args: a})
		if first.status != 200 || b.status != 200 || again.status != 200 {
			t.Fatalf("statuses %d %d %d: %s %s %s", first.status, b.status, again.status, first.body, b.body, again.body)
		}
		if again.header.Get("Effect-Key-Replayed") != "true" || again.header.Get("Tool-Execution-Id") != first.header.Get("Tool-Execution-Id") || string(again.body) != string(first.body) {
			t.Fatalf("moved A: Effect-Key-Replayed %q exec %q body %s, want a replay of %q %s", again.header.Get("Effect-Key-Replayed"), again.header.Get("Tool-Execution-Id"), again.body, first.header.Get("Tool-Execution-Id"), first.body)
		}
		if n := tool.total.Load(); n != 2 {
			t.Fatalf("refund ran %d times, want 2 (A once, B once)", n)
		}
	})
}

// TestEffectKeyConflictAndMissingPointer: the same txn with another amount
// is effect_conflict naming the holder; a call without the pointed member
// is invalid_arguments naming the pointer.
func TestEffectKeyConflictAndMissingPointer(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		h, tool := effectHarness(t, kind, nil)
		payout := newTestTool("payout") // no schema: the pointer check is the effect stage's
		h2 := newHarness(t, kind, []tools.Tool{payout}, withPolicy("payout", tools.Policy{EffectKey: "payout:{/id}"}))
		first := h.do(callSpec{tool: "refund", session: "s1", step: 0, args: `{"amount":5,"txn_id":"t-9"}`})
		other := h.do(callSpec{tool: "refund", session: "s2", step: 0, args: `{"amount":6,"txn_id":"t-9"}`})
		p := other.problem(t)
		if other.status != 409 || p["code"] != "effect_conflict" || p["retryable"] != false ||
			p["execution_id"] != first.header.Get("Tool-Execution-Id") || p["state"] != "COMPLETED" {
			t.Fatalf("conflict: %d %s, want 409 effect_conflict naming %s COMPLETED", other.status, other.body, first.header.Get("Tool-Execution-Id"))
		}
		if n := tool.total.Load(); n != 1 {
			t.Fatalf("refund ran %d times, want 1", n)
		}
		missing := h2.do(callSpec{tool: "payout", session: "s1", step: 0, args: `{"amount":5}`})
		p = missing.problem(t)
		if missing.status != 400 || p["code"] != "invalid_arguments" || !strings.Contains(fmt.Sprint(p["detail"]), "/id") {
			t.Fatalf("missing pointer: %d %s, want 400 invalid_arguments naming /id", missing.status, missing.body)
		}
		if n := payout.total.Load(); n != 0 {
			t.Fatalf("payout ran %d times, want 0", n)
		}
	})
}

// BenchmarkEffectKey runs the same calls side by side through a tool
// without and with an effect_key ("{/seq}": every fresh call its own
// value), on Redis and the embedded store: what an effect key costs a
// fresh call and a replay.
//
//	go test ./gateway -run '^$' -bench BenchmarkEffectKey -benchmem
func BenchmarkEffectKey(b *testing.B) {
	stores := map[string]func(b *testing.B) idempotency.Store{
		"redis": benchRedisStore,
		"embedded": func(b *testing.B) idempotency.Store {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	for _, storeName := range []string{"redis", "embedded"} {
		for _, effectKey := range []string{"", "bench:{/seq}"} {
			name := storeName + "/plain"
			if effectKey != "" {
				name = storeName + "/effect"
			}
			gateway := func(b *testing.B) http.Handler {
				reg, err := tools.NewRegistryOf(benchNopTool{})
				if err != nil {
					b.Fatal(err)
				}
				gw, err := gateway.NewServer(callpath.Options{Store: stores[storeName](b), Tools: reg, ReplayTTL: 10 * time.Minute,
					Logger: slog.New(slog.DiscardHandler), Policies: map[string]tools.Policy{benchToolName: {EffectKey: effectKey}}})
				if err != nil {
					b.Fatal(err)
				}
				return gw
			}
			b.Run(name+"/fresh", func(b *testing.B) {
				gw := gateway(b)
				var step uint64
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					c := newBenchCall(b, "bench-effect", step)
					step++
					b.StartTimer()
					c.serve(b, gw, "false")
				}
			})
			b.Run(name+"/replay", func(b *testing.B) {
				gw := gateway(b)
				c := newBenchCall(b, "bench-effect-replay", 0)
				c.serve(b, gw, "false")
				b.ReportAllocs()
				for b.Loop() {
					c.serve(b, gw, "true")
				}
			})
		}
	}
}
