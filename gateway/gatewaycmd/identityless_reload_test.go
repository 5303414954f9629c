package gatewaycmd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/oidctest"
	"github.com/toolgateway/toolgateway/wire"
)

// TestReloadChangesIdentitylessHandling: mcp.dedupe_window and
// tools[].identityless change with a SIGHUP and the next call uses them.
// Counted at the upstream, for a person's identityless call (go-sdk's
// client with an OpenID provider's token, no identity in _meta): with a
// 1s window the same call 1.1s later runs again; reloaded to 1h, the call
// is keyed in the new window (it runs once more) and the same call 1.1s
// later replays; reloaded with the tool's identityless: refuse, it is
// refused and nothing runs.
func TestReloadChangesIdentitylessHandling(t *testing.T) {
	p := oidctest.Start(t, oidcAudience)
	up, runs := countingUpstream(t, 0)
	base := storeSection(t)
	config := func(window, toolMode string) string {
		text := base + `auth:
  oidc:
    issuer: ` + p.Issuer + `
    audience: ` + oidcAudience + `
    tenant_claim: ` + oidctest.TenantClaim + `
mcp:
  dedupe_window: ` + window + `
tools:
  - name: refund
    http:
      url: ` + up.URL + `
`
		if toolMode != "" {
			text += "    identityless: " + toolMode + "\n"
		}
		return text
	}
	g := startReloading(t, config("1s", ""))
	ada := mcpClientWithToken(t, g.addr, p.Token(t, "org:acme", oidctest.SubjectScopePrefix+"ada"))
	call := func() (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return ada.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: json.RawMessage(`{"amount":5}`)})
	}
	mustCall := func(replayed bool, wantRuns int64) {
		t.Helper()
		res, err := call()
		if err != nil || res.IsError || res.Meta[wire.MetaReplayed] != replayed || res.Meta[wire.MetaIdentity] != wire.MetaIdentityFingerprint {
			t.Fatalf("refund: %v %+v; want replayed=%v, identity fingerprint", err, res, replayed)
		}
		if n := runs.Load(); n != wantRuns {
			t.Fatalf("refund ran %d times, want %d", n, wantRuns)
		}
	}

	// 1s windows: any two instants 1.1s apart lie in different windows.
	mustCall(false, 1)
	time.Sleep(1100 * time.Millisecond)
	mustCall(false, 2)

	line := g.reload(t, config("1h", ""))
	if line["msg"] != "config reloaded" || strings.Join(strs(line["changed"]), ",") != "mcp.dedupe_window" {
		t.Fatalf("reload: %v", line)
	}
	// Clear of an hour's end, so the next 1.1s stay in one 1h window.
	if left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); left < 5*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
	mustCall(false, 3) // the 1h window's start: a new key
	time.Sleep(1100 * time.Millisecond)
	mustCall(true, 3)

	line = g.reload(t, config("1h", "refuse"))
	if line["msg"] != "config reloaded" || strings.Join(strs(line["changed"]), ",") != "tools[refund].identityless" {
		t.Fatalf("reload: %v", line)
	}
	if _, err := call(); err == nil || !strings.Contains(err.Error(), "send the agent session") {
		t.Fatalf("after identityless: refuse: %v, want -32602 agent_session_missing", err)
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("the refused call ran: %d runs", n)
	}
}
