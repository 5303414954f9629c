package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// hostMeta is the _meta a host sends with a call: only its own member
// (Claude Code's "claudecode/toolUseId", Goose's
// "agent-tool-call-request-id"), none of the gateway's.
func hostMeta(name, id string) mcp.Meta {
	return mcp.Meta{name: id}
}

// TestMCPHostCallIDs drives the go-sdk client as Claude Code and Goose do,
// on every store: the same host id replays the first answer byte for byte
// (replayed true, the tool ran once), the same id with other arguments is
// idempotency_key_reused, two ids are two executions, and the result names
// the identity used. The key is the contract's
// SHA-256(<meta name>:<id>:<tool>:JCS(arguments)), the tool receives it.
func TestMCPHostCallIDs(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		tool := newTestTool("ship")
		h := newHarness(t, kind, []tools.Tool{tool})
		for _, host := range mcpserver.DefaultHostCallIDs() {
			t.Run(host, func(t *testing.T) {
				before := tool.Total.Load()
				cs := h.MCPSession(mcpClientOptions{})
				id := "toolu_01A09q90qw90lq917835lq9-" + string(kind)

				first, err := mcpCall(t, cs, "ship", `{"to": "berlin", "n": 1}`, hostMeta(host, id))
				executionID := wantExecuted(t, first, err, false)
				if got := resultMeta(first, wire.MetaIdentity); got != wire.MetaIdentityHostPrefix+host {
					t.Fatalf("_meta identity = %v, want host:%s", got, host)
				}
				sum := sha256.Sum256([]byte(host + ":" + id + `:ship:{"n":1,"to":"berlin"}`))
				if n := tool.Runs(hex.EncodeToString(sum[:])); n != 1 {
					t.Fatalf("the tool saw the contract's host key %d times, want 1", n)
				}

				// The host (or its transport) sends the call again, from a
				// new connection, arguments reordered: a replay.
				again, err := mcpCall(t, h.MCPSession(mcpClientOptions{}), "ship", `{"n": 1, "to": "berlin"}`, hostMeta(host, id))
				if wantExecuted(t, again, err, true) != executionID {
					t.Fatal("the replay has another execution id")
				}
				a, b := resultJSON(t, first), resultJSON(t, again)
				delete(a["_meta"].(map[string]any), wire.MetaReplayed)
				delete(b["_meta"].(map[string]any), wire.MetaReplayed)
				if !jsonEqual(t, mustMarshal(t, a), mustMarshal(t, b)) {
					t.Fatalf("replay differs from the first answer:\n%v\n%v", a, b)
				}

				// The same host id with other arguments: reused, not run.
				_, err = mcpCall(t, cs, "ship", `{"to": "paris", "n": 1}`, hostMeta(host, id))
				wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeIdempotencyKeyReused)

				// Another id: another execution.
				other, err := mcpCall(t, cs, "ship", `{"to": "berlin", "n": 1}`, hostMeta(host, id+"-2"))
				if wantExecuted(t, other, err, false) == executionID {
					t.Fatal("a second host id replayed the first call")
				}
				if n := tool.Total.Load() - before; n != 2 {
					t.Fatalf("the tool ran %d times, want 2 (one per host id)", n)
				}
			})
		}
	})
}

// TestMCPHostCallIDsUnreachableFromREST: a host-keyed record is reached
// by that host id only. A REST call with the same arguments, whatever
// session and step it names (the host member's name as its session
// included), runs as its own call; the host id's entry for "other
// arguments" has a session with ':', which no REST or MCP session may
// have.
func TestMCPHostCallIDsUnreachableFromREST(t *testing.T) {
	tool := newTestTool("ship")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	const host, id, args = "claudecode/toolUseId", "toolu_rest", `{"to":"berlin"}`
	res, err := mcpCall(t, h.MCPSession(mcpClientOptions{}), "ship", args, hostMeta(host, id))
	hostExecution := wantExecuted(t, res, err, false)

	for _, c := range []callSpec{
		{Tool: "ship", Session: host, Step: 0, Args: args},
		{Tool: "ship", Session: id, Step: 0, Args: args},
		{Tool: "ship", Session: "s", Step: 0, Args: args},
	} {
		r := h.Do(c)
		if r.Status != http.StatusOK || r.Header.Get(wire.HeaderReplayed) != "false" || r.Header.Get(wire.HeaderExecutionID) == hostExecution {
			t.Fatalf("REST %+v: %d replayed=%s execution %s, want its own execution", c, r.Status, r.Header.Get(wire.HeaderReplayed), r.Header.Get(wire.HeaderExecutionID))
		}
	}
	// The host id's entry is named by a session with ':'.
	r := h.Do(callSpec{Tool: "ship", Session: "host:x", Step: 0, Args: args, Key: strings.Repeat("ab", 32)})
	if r.Status != http.StatusBadRequest || r.Problem(t)["code"] != wire.CodeAgentSessionMalformed {
		t.Fatalf("a REST session with ':' answered %d %s", r.Status, r.Body)
	}
	if n := tool.Total.Load(); n != 4 {
		t.Fatalf("the tool ran %d times, want 4 (the host call and three REST calls)", n)
	}
}

// TestMCPHostCallIDsConfig: a host member can be added and a listed one
// removed; the gateway's own identity wins over a host id; a call with
// the gateway's identity says so in _meta.
func TestMCPHostCallIDsConfig(t *testing.T) {
	tool := newTestTool("ship")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool}, withMCP(mcpserver.Options{HostCallIDs: []string{"myhost/callId"}}))
	cs := h.MCPSession(mcpClientOptions{})

	_, err := mcpCall(t, cs, "ship", `{}`, hostMeta("claudecode/toolUseId", "toolu_x"))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeAgentSessionMissing)

	res, err := mcpCall(t, cs, "ship", `{}`, hostMeta("myhost/callId", "c-1"))
	wantExecuted(t, res, err, false)
	if got := resultMeta(res, wire.MetaIdentity); got != "host:myhost/callId" {
		t.Fatalf("_meta identity = %v", got)
	}

	meta := identityMeta("s-config", 0)
	meta["myhost/callId"] = "c-1"
	res, err = mcpCall(t, cs, "ship", `{}`, meta)
	wantExecuted(t, res, err, false) // the gateway's identity: a call of its own
	if got := resultMeta(res, wire.MetaIdentity); got != wire.MetaIdentityGateway {
		t.Fatalf("_meta identity = %v, want gateway", got)
	}
	if n := tool.Total.Load(); n != 2 {
		t.Fatalf("the tool ran %d times, want 2", n)
	}
}

// TestMCPHostCallIDsConcurrent fires a host's call and its duplicates at
// once while the tool runs: one execution; a duplicate with the same
// arguments waits and replays it, one with other arguments is
// idempotency_key_reused while the first still runs.
func TestMCPHostCallIDsConcurrent(t *testing.T) {
	tool := newTestTool("ship")
	tool.Started = make(chan *tools.Request, 4)
	release := make(chan struct{})
	tool.Behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		<-release
		return tools.JSON(200, map[string]any{"shipped": true})
	}
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	const host, id = "agent-tool-call-request-id", "call_concurrent"
	first := make(chan error, 1)
	var firstRes *mcp.CallToolResult
	go func() {
		res, err := mcpCall(t, h.MCPSession(mcpClientOptions{}), "ship", `{"to":"oslo"}`, hostMeta(host, id))
		firstRes = res
		first <- err
	}()
	<-tool.Started // the first call runs

	_, err := mcpCall(t, h.MCPSession(mcpClientOptions{}), "ship", `{"to":"rome"}`, hostMeta(host, id))
	wantRPCError(t, err, wire.RPCInvalidParams, wire.CodeIdempotencyKeyReused)

	var wg sync.WaitGroup
	dupes := make([]*mcp.CallToolResult, 3)
	dupeErrs := make([]error, 3)
	for i := range dupes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dupes[i], dupeErrs[i] = mcpCall(t, h.MCPSession(mcpClientOptions{}), "ship", `{"to":"oslo"}`, hostMeta(host, id))
		}()
	}
	time.Sleep(100 * time.Millisecond) // the duplicates are waiting on the running call
	close(release)
	wg.Wait()
	firstErr := <-first
	executionID := wantExecuted(t, firstRes, firstErr, false)
	for i := range dupes {
		if wantExecuted(t, dupes[i], dupeErrs[i], true) != executionID {
			t.Fatalf("duplicate %d replayed another execution", i)
		}
	}
	if n := tool.Total.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}
