package gatewaycmd

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/oidctest"
	"github.com/toolgateway/toolgateway/wire"
)

// TestIdentitylessCallerApprovalElicitation: a host that supports
// elicitation gets the approval question of an identityless call
// directly. go-sdk's client (protocol 2026-07-28, an elicitation handler
// playing the person at the host) calls as a chat host does: the
// person's access token from a real OpenID provider, no identity in
// _meta, so the call is keyed on its fingerprint. On each store, counted
// at the upstream: a call held for approver: caller asks the person
// once, naming the tool and the canonical arguments; accepted, it runs
// once; the same call again replays without asking; declined, another
// call is approval_denied and nothing runs.
func TestIdentitylessCallerApprovalElicitation(t *testing.T) {
	for name, storeSection := range pinStores {
		t.Run(name, func(t *testing.T) { identitylessElicitation(t, storeSection(t)) })
	}
}

func identitylessElicitation(t *testing.T, storeSection string) {
	p := oidctest.Start(t, oidcAudience)
	up, runs := countingUpstream(t, 0)
	g := startGateway(t, "listen: 127.0.0.1:0\n"+storeSection+`auth:
  oidc:
    issuer: `+p.Issuer+`
    audience: `+oidcAudience+`
    tenant_claim: `+oidctest.TenantClaim+`
tools:
  - name: refund
    http:
      url: `+up.URL+`
    decide:
      - decision: approve
        approver: caller
        reason: "refunds need the user's yes"
`)
	var asked atomic.Int64
	var question atomic.Value
	var answer atomic.Value
	answer.Store("accept")
	ada := mcpClientWithTokenOptions(t, g.addr, p.Token(t, "org:acme", oidctest.SubjectScopePrefix+"ada"), &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			question.Store(req.Params.Message)
			if a := answer.Load().(string); a != "accept" {
				return &mcp.ElicitResult{Action: a}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		},
	})
	call := func(args string) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return ada.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: json.RawMessage(args)})
	}

	// Accepted by the person at the host: runs once.
	res, err := call(`{ "amount": 900 }`)
	if err != nil || res.IsError || res.Meta[wire.MetaIdentity] != wire.MetaIdentityFingerprint || res.Meta[wire.MetaReplayed] != false {
		t.Fatalf("accepted: %v %+v: want the tool's result, keyed by fingerprint", err, res)
	}
	if n, q := asked.Load(), question.Load().(string); n != 1 || !strings.Contains(q, "refund") || !strings.Contains(q, `{"amount":900}`) {
		t.Fatalf("asked %d times, question %q: want once, naming the tool and the canonical arguments", n, q)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the approved call ran %d times, want 1", n)
	}

	// The same call again (regenerate, "go on"): the first answer, not asked again.
	again, err := call(`{"amount":900}`)
	if err != nil || again.IsError || again.Meta[wire.MetaReplayed] != true || again.Meta[wire.MetaExecutionID] != res.Meta[wire.MetaExecutionID] {
		t.Fatalf("the call again: %v %+v: want a replay of execution %v", err, again, res.Meta[wire.MetaExecutionID])
	}
	if text, ok := again.Content[0].(*mcp.TextContent); !ok || !strings.HasPrefix(text.Text, "This exact call") {
		t.Fatalf("the replay's first text: %+v, want the note that it already ran", again.Content)
	}
	if n := runs.Load(); n != 1 || asked.Load() != 1 {
		t.Fatalf("after the repeat: %d runs, asked %d times; want 1 and 1", n, asked.Load())
	}

	// Declined: denied, nothing runs.
	answer.Store("decline")
	res, err = call(`{"amount":901}`)
	if err != nil || !res.IsError || errorCode(t, res) != wire.CodeApprovalDenied {
		t.Fatalf("declined: %v %+v: want approval_denied", err, res)
	}
	if n := runs.Load(); n != 1 || asked.Load() != 2 {
		t.Fatalf("after the decline: %d runs, asked %d times; want 1 and 2", n, asked.Load())
	}
}
