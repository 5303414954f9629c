package gatewaycmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/wire"
)

// errorCode is the gateway's error code in a tool result's _meta ("" for
// a result that is not the gateway's failure).
func errorCode(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	raw, err := json.Marshal(res.Meta[wire.MetaError])
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Code
}

// TestMCPCallerApprovalElicitation: a rule with approver: caller, called
// by go-sdk's client (protocol 2026-07-28, an elicitation handler): the
// gateway asks the client's human a yes/no (an input request of kind
// elicitation) showing the tool and its canonical arguments, and records
// the answer as the approval's decision. Accept: the call runs, once
// (counted at the tool), and the same call again replays. Decline:
// approval_denied, by the tenant, nothing ran. Cancel: still pending,
// nothing ran, and a later call asks again. A client without elicitation
// gets the operator's answer: a pending tool result, nothing asked.
func TestMCPCallerApprovalElicitation(t *testing.T) {
	up, runs := countingUpstream(t, 0)
	const token = "admin-token-for-elicitation-test"
	sum := sha256.Sum256([]byte(token))
	g := startGateway(t, "listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
admin:
  token_sha256: `+hex.EncodeToString(sum[:])+`
tools:
  - name: refund
    http:
      url: `+up.URL+`
    decide:
      - when: "args.amount <= 100"
        decision: allow
      - decision: approve
        approver: caller
        reason: "refunds above 100 need the user's yes"
`)
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	action := "accept"
	cs := mcpClientWith(t, g.addr, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params)
			if action == "accept" {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			return &mcp.ElicitResult{Action: action}, nil
		},
	})
	answer := func(a string) int {
		mu.Lock()
		defer mu.Unlock()
		action = a
		return len(asked)
	}

	// Accept: runs once.
	before := answer("accept")
	res, err := mcpCallTool(t, cs, "refund", `{ "amount": 900 }`, "elicit", 1)
	if err != nil || res.IsError || runs.Load() != 1 {
		t.Fatalf("accepted: %v %+v, runs %d: want the tool's result, one run", err, res, runs.Load())
	}
	mu.Lock()
	if len(asked) != before+1 || !strings.Contains(asked[before].Message, "refund") || !strings.Contains(asked[before].Message, `{"amount":900}`) {
		t.Fatalf("asked %d times; question %+v: want one naming the tool and the canonical arguments", len(asked)-before, asked[len(asked)-1])
	}
	mu.Unlock()
	again, err := mcpCallTool(t, cs, "refund", `{ "amount": 900 }`, "elicit", 1)
	if err != nil || again.Meta[wire.MetaReplayed] != true || runs.Load() != 1 || answer("accept") != before+1 {
		t.Fatalf("the accepted call again: %v _meta %v, runs %d: want a replay, nothing asked or run", err, again.Meta, runs.Load())
	}

	// Decline: denied by the tenant, nothing ran.
	before = answer("decline")
	res, err = mcpCallTool(t, cs, "refund", `{"amount":901}`, "elicit", 2)
	if err != nil || !res.IsError || errorCode(t, res) != wire.CodeApprovalDenied || runs.Load() != 1 || answer("decline") != before+1 {
		t.Fatalf("declined: %v %+v, runs %d: want approval_denied, nothing run", err, res, runs.Load())
	}
	admin := func(query string) reply {
		req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/approvals?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return do(t, req)
	}
	list := admin("state=DENIED")
	if list.status != http.StatusOK || !strings.Contains(string(list.body), "via MCP elicitation") || !strings.Contains(string(list.body), `"anonymous"`) {
		t.Fatalf("denied approvals: %d %s: want the decision by the tenant, noted via MCP elicitation", list.status, list.body)
	}

	// Cancel: still pending; asked again on the next call.
	before = answer("cancel")
	for i := 1; i <= 2; i++ {
		res, err = mcpCallTool(t, cs, "refund", `{"amount":902}`, "elicit", 3)
		if err != nil || !res.IsError || errorCode(t, res) != wire.CodeApprovalPending || runs.Load() != 1 || answer("cancel") != before+i {
			t.Fatalf("cancelled (%d): %v %+v, runs %d: want approval_pending, nothing run", i, err, res, runs.Load())
		}
	}
	if list := admin("state=PENDING"); !strings.Contains(string(list.body), `"step_index":3`) {
		t.Fatalf("pending approvals: %d %s: want the cancelled call's", list.status, list.body)
	}

	// No elicitation declared: the operator's answer.
	plain := mcpClientWith(t, g.addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err = plain.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: json.RawMessage(`{"amount":903}`),
		Meta: mcp.Meta{wire.MetaSessionID: "elicit", wire.MetaStepIndex: 4}})
	if err != nil || res.NeedsInput() || errorCode(t, res) != wire.CodeApprovalPending || runs.Load() != 1 {
		t.Fatalf("without elicitation: %v %+v: want a pending tool result", err, res)
	}
}
