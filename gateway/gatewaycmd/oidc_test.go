package gatewaycmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/internal/oidctest"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// oidcAudience is the gateway's resource identifier in these tests.
const oidcAudience = "http://gateway.test/mcp"

// startOIDCGateway runs the gateway with auth.oidc on a real OpenID
// provider (tenant from org_id) beside one static tenant, fronting a
// counting MCP upstream.
func startOIDCGateway(t *testing.T) (*started, *oidctest.Provider, *mcpUpstream) {
	t.Helper()
	p := oidctest.Start(t, oidcAudience)
	up := newMCPUpstream(t)
	g := startGateway(t, oidcConfig(t, p.Issuer, up, ""))
	return g, p, up
}

// oidcConfig is a gateway with auth.oidc on issuer (tenant from org_id;
// extra adds lines to the oidc section) beside one static tenant
// ("static-token"), fronting up.
func oidcConfig(t *testing.T, issuer string, up *mcpUpstream, extra string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
store:
  path: %s
auth:
  tenants:
    - name: static
      token_sha256: %s
  oidc:
    issuer: %s
    audience: %s
    tenant_claim: %s
%smcp_servers:
  - name: tickets
    url: %s
    prefix: t_
`, filepath.Join(t.TempDir(), "gw.db"), tokenHash("static-token"), issuer, oidcAudience, oidctest.TenantClaim, extra, up.http.URL)
}

// bearerCall is keyedCall with a bearer token.
func bearerCall(t *testing.T, addr, token, session string, step uint64, tool, args string) reply {
	t.Helper()
	key, _ := keyderive.Key(session, step, tool, []byte(args))
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/tools/v1/"+tool, strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.HeaderIdempotencyKey, key)
	req.Header.Set(wire.HeaderSessionID, session)
	req.Header.Set(wire.HeaderStepIndex, itoa(step))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, req)
}

// TestOIDCTenantsAreIsolatedAsStaticOnes: the provider's tokens name their
// tenant; one call made with the same key by two tenants of one issuer
// runs once for each (two records, counted at the upstream, each forwarded
// as its own tenant), replays within its tenant, and a static token keeps
// working beside them.
func TestOIDCTenantsAreIsolatedAsStaticOnes(t *testing.T) {
	g, p, up := startOIDCGateway(t)
	acme, globex := p.Token(t, "org:acme"), p.Token(t, "org:globex")
	args := `{"title":"one per tenant"}`
	for _, c := range []struct{ token, tenant, replayed string }{
		{acme, "acme", "false"}, {acme, "acme", "true"}, {globex, "globex", "false"}, {"static-token", "static", "false"},
	} {
		r := bearerCall(t, g.addr, c.token, "sess", 1, "t_create_ticket", args)
		if r.status != http.StatusOK || r.header.Get(wire.HeaderReplayed) != c.replayed {
			t.Fatalf("%s: %d replayed=%q %s; want 200 replayed=%s", c.tenant, r.status, r.header.Get(wire.HeaderReplayed), r.body, c.replayed)
		}
	}
	runs := up.srv.Executions(mcptest.ToolCreate)
	if len(runs) != 3 {
		t.Fatalf("%d executions at the upstream, want 3 (acme, globex, static)", len(runs))
	}
	for i, tenant := range []string{"acme", "globex", "static"} {
		if got := runs[i].Meta[wire.MetaTenant]; got != tenant {
			t.Errorf("execution %d ran as tenant %v, want %s", i, got, tenant)
		}
	}
}

// TestOIDCRefusals: a request without a token, or with one the provider
// did not issue for this gateway, gets 401 with the RFC 9728 challenge
// (error="invalid_token" when a token was refused) and runs nothing; the
// metadata the challenge points at names the provider.
func TestOIDCRefusals(t *testing.T) {
	g, p, up := startOIDCGateway(t)
	other := oidctest.Start(t, oidcAudience) // another issuer, same audience
	metadata := `resource_metadata="http://gateway.test/.well-known/oauth-protected-resource/mcp"`
	for _, c := range []struct {
		name, token string
		invalid     bool
	}{
		{"no token", "", false},
		{"another issuer's token", other.Token(t, "org:acme"), true},
		{"no tenant claim", p.Token(t), true},
		{"not a tenant name", p.Token(t, "org:Not_A_Tenant"), true},
		{"garbage", "eyJhbGciOiJub25lIn0.e30.", true},
	} {
		r := bearerCall(t, g.addr, c.token, "sess", 1, "t_create_ticket", `{"title":"refused"}`)
		challenge := r.header.Get("WWW-Authenticate")
		if r.status != http.StatusUnauthorized || !strings.Contains(challenge, metadata) ||
			strings.Contains(challenge, `error="invalid_token"`) != c.invalid {
			t.Errorf("%s: %d, WWW-Authenticate %q", c.name, r.status, challenge)
		}
	}
	if n := len(up.srv.Executions(mcptest.ToolCreate)); n != 0 {
		t.Fatalf("refused calls ran the tool %d times", n)
	}
	for _, path := range []string{oidcauth.WellKnownPath, oidcauth.WellKnownPath + "/mcp"} {
		r := get(t, "http://"+g.addr+path)
		var m oidcauth.ResourceMetadata
		if r.status != http.StatusOK || json.Unmarshal(r.body, &m) != nil || m.Resource != oidcAudience ||
			len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != p.Issuer {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	r := get(t, "http://"+g.addr+"/mcp")
	if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), metadata) {
		t.Errorf("/mcp without a token: %d, WWW-Authenticate %q", r.status, r.header.Get("WWW-Authenticate"))
	}
}

// TestOIDCOverMCPAndKeyRotation: the official Go MCP client calls with the
// provider's token; the provider rotates its signing key mid-run and the
// next token, signed with the new key, is accepted (the key set is fetched
// again for the unknown key id).
func TestOIDCOverMCPAndKeyRotation(t *testing.T) {
	g, p, up := startOIDCGateway(t)
	callMCP := func(token string, step int) {
		t.Helper()
		cs := mcpClientWithToken(t, g.addr, token)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
			Name: "t_create_ticket", Arguments: map[string]any{"title": fmt.Sprint("mcp ", step)},
			Meta: mcp.Meta{wire.MetaSessionID: "mcp-sess", wire.MetaStepIndex: step},
		})
		if err != nil || res.IsError {
			t.Fatalf("MCP call at step %d: %v %+v", step, err, res)
		}
	}
	callMCP(p.Token(t, "org:acme"), 0)
	p.RotateKeys()
	// The key set is fetched again at most once per interval: a token of
	// the new key is refused until then, and accepted after. Asked until
	// accepted (a loaded machine may stretch the interval's end), never
	// before one interval has passed.
	rotated := p.Token(t, "org:acme")
	time.Sleep(oidcauth.DefaultMinRefreshInterval + 100*time.Millisecond)
	for deadline := time.Now().Add(20 * time.Second); !mcpAccepts(g.addr, rotated); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a token signed with the rotated key is still refused after 20 s")
		}
	}
	callMCP(rotated, 1)
	runs := up.srv.Executions(mcptest.ToolCreate)
	if len(runs) != 2 || runs[0].Meta[wire.MetaTenant] != "acme" || runs[1].Meta[wire.MetaTenant] != "acme" {
		t.Fatalf("executions %+v, want 2 as tenant acme", runs)
	}
}

// mcpAccepts reports whether the gateway at addr accepts token for an MCP
// session (initialize only: no tool runs).
func mcpAccepts(addr, token string) bool {
	cs, err := connectMCPWithToken(addr, token, nil)
	if err != nil {
		return false
	}
	_ = cs.Close()
	return true
}

func mcpClientWithToken(t *testing.T, addr, token string) *mcp.ClientSession {
	t.Helper()
	return mcpClientWithTokenOptions(t, addr, token, nil)
}

// mcpClientWithTokenOptions is mcpClientWithToken with the client's
// options (an elicitation handler).
func mcpClientWithTokenOptions(t *testing.T, addr, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := connectMCPWithToken(addr, token, opts)
	if err != nil {
		t.Fatalf("connect the MCP client: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// connectMCPWithToken opens an MCP session with the go-sdk client, token
// in every request, with the client's opts (nil: none).
func connectMCPWithToken(addr, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: bearerTransport(token)}
	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: client, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return mcp.NewClient(&mcp.Implementation{Name: "gatewaycmd-oidc-test", Version: "1"}, opts).Connect(ctx, transport, nil)
}

// bearerTransport adds the token to every request.
type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestOIDCIssuerUnreachableAtStart: the gateway starts while its identity
// provider does not answer; static tokens work, the provider's tokens get
// 401 with the challenge, and /readyz stays ready but says why.
func TestOIDCIssuerUnreachableAtStart(t *testing.T) {
	p := oidctest.Start(t, oidcAudience)
	token := p.Token(t, "org:acme") // a real token of a provider that then goes away
	issuer := p.Issuer
	p.Server.Close()
	up := newMCPUpstream(t)
	g := startGateway(t, oidcConfig(t, issuer, up, ""))
	if r := bearerCall(t, g.addr, "static-token", "sess", 1, "t_create_ticket", `{"title":"static"}`); r.status != http.StatusOK {
		t.Fatalf("static token with the provider down: %d %s", r.status, r.body)
	}
	r := bearerCall(t, g.addr, token, "sess", 2, "t_create_ticket", `{"title":"provider"}`)
	if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("provider token with the provider down: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	if n := len(up.srv.Executions(mcptest.ToolCreate)); n != 1 {
		t.Fatalf("%d executions, want 1 (the static tenant's)", n)
	}
	ready := get(t, "http://"+g.addr+"/readyz")
	var body map[string]string
	if ready.status != http.StatusOK || json.Unmarshal(ready.body, &body) != nil || body["status"] != "ready" ||
		!strings.Contains(body["oidc"], "unavailable") {
		t.Fatalf("/readyz: %d %s, want ready naming the provider's state", ready.status, ready.body)
	}
}

// TestOIDCTenantsHaveTheProviderLimits: auth.oidc's rate applies to each
// tenant the provider names on its own (acme over it gets 429, globex
// still runs), not to a static tenant, which has its own limits.
func TestOIDCTenantsHaveTheProviderLimits(t *testing.T) {
	p := oidctest.Start(t, oidcAudience)
	up := newMCPUpstream(t)
	g := startGateway(t, oidcConfig(t, p.Issuer, up, `    rate: 1/h
`))
	acme, globex := p.Token(t, "org:acme"), p.Token(t, "org:globex")
	for i, c := range []struct {
		token string
		want  int
	}{{acme, 200}, {acme, 429}, {globex, 200}, {"static-token", 200}, {"static-token", 200}} {
		r := bearerCall(t, g.addr, c.token, "lim", uint64(i), "t_create_ticket", fmt.Sprintf(`{"title":"call %d"}`, i))
		if r.status != c.want {
			t.Fatalf("call %d: %d %s, want %d", i, r.status, r.body, c.want)
		}
	}
	if n := len(up.srv.Executions(mcptest.ToolCreate)); n != 4 {
		t.Fatalf("%d executions, want 4 (the 429 ran nothing)", n)
	}
}
