package gateway_test

// The problem document: its full shape for every code a client can meet,
// and Retry-After in whole seconds.

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// TestEveryProblemHasTheFullShape walks each error code a client can
// provoke and checks status, code, retryable and the RFC 9457 members.
func TestEveryProblemHasTheFullShape(t *testing.T) {
	tool := scriptedTool("ct")
	tool.schema = `{"type":"object","properties":{"mode":{"type":"string"},"n":{"type":"integer"}}}`
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withMaxBody(128),
		withPolicy("ct", tools.Policy{Timeout: 150 * time.Millisecond}))
	good := `{"n":1}`
	key := derivedKey(t, "shape", 1, "ct", good)
	hdr := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name      string
		c         callSpec
		status    int
		code      string
		retryable bool
	}{
		{"invalid_json", callSpec{tool: "ct", args: `{"n":`}, 400, wire.CodeInvalidJSON, false},
		{"invalid_arguments", callSpec{tool: "ct", session: "shape", step: 2, args: `{"n":"x"}`}, 400, wire.CodeInvalidArguments, false},
		{"idempotency_key_missing", callSpec{tool: "ct", args: good}, 400, wire.CodeIdempotencyKeyMissing, false},
		{"idempotency_key_malformed", callSpec{tool: "ct", args: good, key: "nothex"}, 400, wire.CodeIdempotencyKeyMalformed, false},
		{"agent_session_missing", callSpec{tool: "ct", args: good, key: key, headers: hdr("Agent-Step-Index", "1")}, 400, wire.CodeAgentSessionMissing, false},
		{"agent_session_malformed", callSpec{tool: "ct", args: good, key: key, headers: hdr("Agent-Session-Id", "a:b", "Agent-Step-Index", "1")}, 400, wire.CodeAgentSessionMalformed, false},
		{"agent_step_missing", callSpec{tool: "ct", args: good, key: key, headers: hdr("Agent-Session-Id", "shape")}, 400, wire.CodeAgentStepMissing, false},
		{"agent_step_malformed", callSpec{tool: "ct", args: good, key: key, headers: hdr("Agent-Session-Id", "shape", "Agent-Step-Index", "1.0")}, 400, wire.CodeAgentStepMalformed, false},
		{"tool_not_found", callSpec{tool: "no-such-tool", session: "shape", step: 1, args: good}, 404, wire.CodeToolNotFound, false},
		{"method_not_allowed", callSpec{tool: "ct", method: http.MethodPatch, args: good}, 405, wire.CodeMethodNotAllowed, false},
		{"payload_too_large", callSpec{tool: "ct", args: `{"s":"` + strings.Repeat("x", 200) + `"}`}, 413, wire.CodePayloadTooLarge, false},
		{"unsupported_media_type", callSpec{tool: "ct", session: "shape", step: 1, args: good, headers: hdr("Content-Type", "text/json")}, 415, wire.CodeUnsupportedMediaType, false},
		{"idempotency_key_mismatch", callSpec{tool: "ct", session: "shape", step: 3, args: good, key: key}, 422, wire.CodeIdempotencyKeyMismatch, false},
		{"tool_failed", callSpec{tool: "ct", session: "shape", step: 4, args: `{"mode":"fail"}`}, 500, wire.CodeToolFailed, true},
		{"upstream_unreachable", callSpec{tool: "ct", session: "shape", step: 5, args: `{"mode":"unreachable"}`}, 502, wire.CodeUpstreamUnreachable, true},
		{"tool_timeout", callSpec{tool: "ct", session: "shape", step: 6, args: `{"mode":"hang"}`}, 504, wire.CodeToolTimeout, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(tc.c)
			p := wantContractProblem(t, r, tc.status, tc.code, tc.retryable)
			switch tc.code {
			case wire.CodeInvalidArguments:
				errs, ok := p["errors"].([]any)
				if !ok || len(errs) == 0 {
					t.Fatalf("invalid_arguments without errors[]: %s", r.body)
				}
				first := errs[0].(map[string]any)
				if first["location"] != "/n" || first["message"] == "" {
					t.Fatalf("errors[0] = %v, want location /n and a message", first)
				}
			case wire.CodeToolFailed, wire.CodeUpstreamUnreachable, wire.CodeToolTimeout:
				// Executed calls carry the execution headers whatever the status.
				if r.header.Get("Idempotent-Replayed") != "false" || r.header.Get("Tool-Execution-Id") == "" {
					t.Fatalf("%s lacks execution headers: %v", tc.code, r.header)
				}
			}
			if r.header.Get("Retry-After") != "" {
				t.Fatalf("%s must not carry Retry-After", tc.code)
			}
		})
	}
}

// TestRetryAfterIsWholeSeconds checks 409 request_in_progress and
// 503 store_unavailable carry Retry-After in whole seconds ≥ 1, even when
// the remaining lease is below one second, and outcome_unknown has none.
func TestRetryAfterIsWholeSeconds(t *testing.T) {
	tool := newTestTool("slow")
	release := make(chan struct{})
	tool.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return tools.JSON(200, map[string]any{"ok": true})
	}
	store := &hookStore{Store: newStore(t, storeEmbedded)}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withStore(store), withLockTTL(600*time.Millisecond))
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)

	c := callSpec{tool: "slow", session: "ra", step: 1, args: `{}`}
	first := make(chan response, 1)
	go func() {
		r, _ := h.try(c)
		first <- r
	}()
	eventually(t, 2*time.Second, "the tool to start", func() bool { return tool.total.Load() == 1 })
	r := h.do(c)
	wantContractProblem(t, r, 409, wire.CodeRequestInProgress, true)
	if ra := r.header.Get("Retry-After"); !wholeSeconds.MatchString(ra) {
		t.Fatalf("409 Retry-After %q, want whole seconds >= 1", ra)
	}
	unblock()
	if r := <-first; r.status != 200 {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}

	store.down.Store(true)
	r = h.do(callSpec{tool: "slow", session: "ra", step: 2, args: `{}`})
	wantContractProblem(t, r, 503, wire.CodeStoreUnavailable, true)
	if ra := r.header.Get("Retry-After"); !wholeSeconds.MatchString(ra) {
		t.Fatalf("503 Retry-After %q, want whole seconds >= 1", ra)
	}
	if tool.total.Load() != 1 {
		t.Fatalf("the tool ran with the store down (fail closed): %d runs", tool.total.Load())
	}
}
