package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

func TestOpaqueModeKeyReuse(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("charge")
		h := newHarness(t, kind, []tools.Tool{tool}, withKeyMode(callpath.KeyModeOpaque))
		quoted := h.do(callSpec{tool: "charge", args: `{"amount":10}`, key: `"order-17/charge"`})
		if quoted.status != 200 {
			t.Fatalf("quoted key: %d %s", quoted.status, quoted.body)
		}
		// The unquoted form is the same key.
		plain := h.do(callSpec{tool: "charge", args: `{"amount":10}`, key: `order-17/charge`})
		if plain.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("unquoted key did not replay the quoted one: %d %s", plain.status, plain.body)
		}
		reused := h.do(callSpec{tool: "charge", args: `{"amount":11}`, key: `order-17/charge`})
		p := wantProblem(t, reused, 422, wire.CodeIdempotencyKeyReused)
		if p["retryable"] != false {
			t.Fatal("key_reused is not retryable")
		}
		if tool.total.Load() != 1 {
			t.Fatalf("tool ran %d times", tool.total.Load())
		}
		// Opaque mode still applies the step guard when the Agent-* headers come.
		a := h.do(callSpec{tool: "charge", args: `{"amount":1}`, key: "k-a", headers: map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "3"}})
		b := h.do(callSpec{tool: "charge", args: `{"amount":2}`, key: "k-b", headers: map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "3"}})
		if a.status != 200 {
			t.Fatalf("opaque with step: %d %s", a.status, a.body)
		}
		wantProblem(t, b, 422, wire.CodeStepConflict)
		// A lone Agent-Step-Index in opaque mode asks for its session.
		wantProblem(t, h.do(callSpec{tool: "charge", args: `{}`, key: "k-c", headers: map[string]string{"Agent-Step-Index": "3"}}), 400, wire.CodeAgentSessionMissing)
	})
}

// TestOpaqueKeysAreScopedByTenant: in opaque mode two tenants may pick the
// same key for different arguments; neither sees idempotency_key_reused or
// the other's outcome.
func TestOpaqueKeysAreScopedByTenant(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("charge")
		h := newHarness(t, kind, []tools.Tool{tool}, withTenants(twoTenants), withKeyMode(callpath.KeyModeOpaque))
		a := h.do(callSpec{tool: "charge", key: "order-1", args: `{"cents":100}`, token: "tok-acme"})
		wantProblem(t, h.do(callSpec{tool: "charge", key: "order-1", args: `{"cents":999}`, token: "tok-acme"}), 422, wire.CodeIdempotencyKeyReused)
		g := h.do(callSpec{tool: "charge", key: "order-1", args: `{"cents":999}`, token: "tok-globex"})
		if a.status != 200 || g.status != 200 || g.header.Get("Idempotent-Replayed") != "false" {
			t.Fatalf("acme %d, globex %d %s", a.status, g.status, g.body)
		}
		again := h.do(callSpec{tool: "charge", key: "order-1", args: `{"cents":999}`, token: "tok-globex"})
		if again.header.Get("Tool-Execution-Id") != g.header.Get("Tool-Execution-Id") || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("globex replay: %v", again.header)
		}
	})
}

// TestOpaqueModeKeysAndAgentHeaders checks opaque keys: 1–255 visible
// ASCII, quoted keys unwrapped everywhere (tool, replay, admin path),
// Agent-* headers format-checked and feeding the step guard, and no
// re-derivation.
func TestOpaqueModeKeysAndAgentHeaders(t *testing.T) {
	tool := newTestTool("op")
	var mu sync.Mutex
	var seenKeys []string
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		mu.Lock()
		seenKeys = append(seenKeys, req.IdempotencyKey)
		mu.Unlock()
		return tools.JSON(200, map[string]any{"exec": req.ExecutionID})
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withKeyMode(callpath.KeyModeOpaque), withAdmin("adm"))
	call := func(key string, headers map[string]string, args string) response {
		return h.do(callSpec{tool: "op", args: args, key: key, headers: headers})
	}

	t.Run("key formats", func(t *testing.T) {
		for _, key := range []string{"!", "~", strings.Repeat("k", 255), "!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~"} {
			if r := call(key, nil, `{}`); r.status != 200 {
				t.Fatalf("key %q: %d %s", key, r.status, r.body)
			}
		}
		for _, key := range []string{strings.Repeat("k", 256), "a b", "caf\u00e9", `""`, `"a"b"`, `"a\x"`} {
			wantContractProblem(t, call(key, nil, `{}`), 400, wire.CodeIdempotencyKeyMalformed, false)
		}
	})

	t.Run("quoted key is the unwrapped key everywhere", func(t *testing.T) {
		mu.Lock()
		seenKeys = nil
		mu.Unlock()
		first := call(`"order-\"7\"\\x"`, nil, `{"n":1}`)
		if first.status != 200 {
			t.Fatalf("%d %s", first.status, first.body)
		}
		replay := call(`order-"7"\x`, nil, `{"n":1}`)
		if replay.header.Get("Idempotent-Replayed") != "true" || replay.header.Get("Tool-Execution-Id") != first.header.Get("Tool-Execution-Id") {
			t.Fatalf("the bare key did not replay the quoted one: %v", replay.header)
		}
		mu.Lock()
		if len(seenKeys) != 1 || seenKeys[0] != `order-"7"\x` {
			t.Fatalf("tool saw keys %q", seenKeys)
		}
		mu.Unlock()
		_, rec := adminRecord(t, h, "/admin/v1/records/anonymous/op/order-%227%22%5Cx", "adm")
		wantString(t, rec, "key", `order-"7"\x`)
		wantContractProblem(t, call(`order-"7"\x`, nil, `{"n":2}`), 422, wire.CodeIdempotencyKeyReused, false)
	})

	t.Run("agent headers are checked and feed the step guard", func(t *testing.T) {
		wantContractProblem(t, call("k-a", map[string]string{"Agent-Session-Id": "a:b", "Agent-Step-Index": "1"}, `{}`), 400, wire.CodeAgentSessionMalformed, false)
		wantContractProblem(t, call("k-a", map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "01"}, `{}`), 400, wire.CodeAgentStepMalformed, false)
		// A 64-hex key that is not the derived one: opaque mode does not re-derive.
		notDerived := strings.Repeat("ab", 32)
		first := call(notDerived, map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "1"}, `{}`)
		if first.status != 200 {
			t.Fatalf("opaque key re-derived? %d %s", first.status, first.body)
		}
		p := wantContractProblem(t, call("k-other", map[string]string{"Agent-Session-Id": "s", "Agent-Step-Index": "1"}, `{}`), 422, wire.CodeStepConflict, false)
		if p["tool"] != "op" || p["execution_id"] != first.header.Get("Tool-Execution-Id") {
			t.Fatalf("step_conflict must name the earlier call: %v", p)
		}
	})
}
