package gatewaycmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// envOf is a getenv over a map.
func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestCheckRefusesWhatStartUpRefuses: every config start-up refuses,
// `gateway check` refuses with the same error (exit status 1), because
// both run prepare; and what check accepts, it names with the store
// start-up would use.
func TestCheckRefusesWhatStartUpRefuses(t *testing.T) {
	dir := t.TempDir()
	embedded := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(dir, "gw.db") + "\n"
	cases := []struct {
		name, config string
		env          map[string]string
		errorHas     string
	}{
		{"bad DATABASE_URL", embedded, map[string]string{"DATABASE_URL": "postgres://gw@127.0.0.1:notaport/gw"}, "DATABASE_URL"},
		{"bad REDIS_URL", embedded, map[string]string{"REDIS_URL": "mysql://nope"}, "REDIS_URL"},
		{"both stores in the file", "listen: 127.0.0.1:0\nstore:\n  redis_url: redis://127.0.0.1:6379/0\n  postgres_url: postgres://127.0.0.1/test\n", nil, "keep exactly one"},
		{"both stores by the environment", embedded, map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/0", "DATABASE_URL": "postgres://127.0.0.1/test"}, "keep exactly one"},
		{"unset variable in an MCP header", embedded + "mcp_servers:\n  - name: tickets\n    url: http://127.0.0.1:1/mcp\n    headers:\n      Authorization: Bearer ${TICKETS_TOKEN_UNSET}\n", nil, "TICKETS_TOKEN_UNSET} is not set"},
		{"admin_listen on listen's address", "listen: 127.0.0.1:8089\nadmin_listen: 127.0.0.1:8089\nstore:\n  path: " + filepath.Join(dir, "gw.db") + "\n", nil, "admin_listen"},
		{"bad tracing endpoint", embedded + "tracing:\n  endpoint: ftp://collector\n", nil, "tracing.endpoint"},
		{"fingerprint with static tokens only", embedded + "auth:\n  tenants:\n    - name: shared\n      token_sha256: " + tokenHash("shared-token") + "\nmcp:\n  identityless: fingerprint\n", nil, "mcp.identityless: fingerprint needs callers that are persons"},
		{"a tool's fingerprint without auth", embedded + "tools:\n  - name: refund\n    identityless: fingerprint\n    http:\n      url: http://127.0.0.1:1/x\n", nil, "tools[0] (refund).identityless: fingerprint needs callers that are persons"},
		{"an unknown identityless mode", embedded + "mcp:\n  identityless: hash\n", nil, `mcp.identityless: "hash": want fingerprint or refuse`},
		{"a tool named approvals", embedded + "tools:\n  - name: approvals\n    http:\n      url: http://127.0.0.1:1/x\n", nil, `tools[0].name: tool "approvals": the name is reserved`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, c.config)
			var out strings.Builder
			checkErr := RunIO(context.Background(), []string{"gateway", "check", "-config", path}, envOf(c.env), strings.NewReader(""), &out)
			if checkErr == nil || !strings.Contains(checkErr.Error(), c.errorHas) {
				t.Fatalf("check: %v (output %q), want an error naming %q", checkErr, out.String(), c.errorHas)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			startErr := Run(ctx, []string{"gateway", "-config", path}, envOf(c.env), &strings.Builder{})
			if startErr == nil || !strings.Contains(startErr.Error(), c.errorHas) {
				t.Fatalf("start-up: %v, want an error naming %q", startErr, c.errorHas)
			}
			if want := "check: " + startErr.Error(); checkErr.Error() != want {
				t.Fatalf("check says %q, start-up %q: want the same error", checkErr, startErr)
			}
		})
	}

	// DATABASE_URL set: check names PostgreSQL, as start-up would use it.
	report, err := Check(writeConfig(t, embedded), envOf(map[string]string{"DATABASE_URL": "postgres://gw:secret@db.example:5432/gw"}))
	if err != nil {
		t.Fatal(err)
	}
	if report.Store != "postgres:db.example:5432/gw schema toolgateway" {
		t.Fatalf("store %q with DATABASE_URL set", report.Store)
	}
}

// TestCheckDial connects to what the config names: the real Redis and
// PostgreSQL answer, an HTTP upstream and an MCP server listening answer;
// a port nobody listens on fails, is reported by name, and makes the exit
// status 1.
func TestCheckDial(t *testing.T) {
	up := newMCPUpstream(t)
	httpUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("check -dial sent a request to an HTTP upstream")
	}))
	t.Cleanup(httpUp.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	tools := fmt.Sprintf("tools:\n  - name: up-ok\n    http:\n      url: %s/run\n  - name: up-dead\n    http:\n      url: http://%s/run\n", httpUp.URL, dead)
	mcpServers := fmt.Sprintf("mcp_servers:\n  - name: tickets\n    url: %s\n    prefix: t_\n", up.http.URL)
	stores := map[string]string{
		"redis":    fmt.Sprintf("store:\n  redis_url: redis://%s/0\n", redistest.Addr(t)),
		"postgres": fmt.Sprintf("store:\n  postgres_url: %s\n", pgtest.URL(t)),
		"embedded": "store:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\n",
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			path := writeConfig(t, "listen: 127.0.0.1:0\n"+store+tools+mcpServers)
			var out strings.Builder
			err := RunIO(context.Background(), []string{"gateway", "check", "-dial", "-json", "-config", path}, envOf(nil), strings.NewReader(""), &out)
			if err == nil || !strings.Contains(err.Error(), "1 of 4 targets failed: http:up-dead") {
				t.Fatalf("check -dial: %v, want exactly http:up-dead failed", err)
			}
			var report CheckReport
			if err := json.Unmarshal([]byte(out.String()), &report); err != nil {
				t.Fatalf("report: %v\n%s", err, out.String())
			}
			got := map[string]DialResult{}
			for _, d := range report.Dial {
				got[d.Target] = d
			}
			if d := got["store"]; !d.OK {
				t.Fatalf("store: %+v", d)
			}
			if d := got["store"]; name != "embedded" && !strings.Contains(d.Detail, "; layout version ") {
				t.Fatalf("store: %+v, want its layout version", d)
			}
			if d := got["mcp:tickets"]; !d.OK || !strings.HasSuffix(d.Detail, "tools listed") || strings.HasPrefix(d.Detail, "0 ") {
				t.Fatalf("mcp:tickets: %+v", d)
			}
			if d := got["http:up-ok"]; !d.OK {
				t.Fatalf("http:up-ok: %+v", d)
			}
			if d := got["http:up-dead"]; d.OK || !strings.Contains(d.Detail, "refused") {
				t.Fatalf("http:up-dead: %+v", d)
			}
			var mcpTools int
			for _, tool := range report.Tools {
				if tool.Kind == "mcp" {
					mcpTools++
				}
			}
			if mcpTools == 0 {
				t.Fatalf("no MCP tool in the report after listing: %+v", report.Tools)
			}
		})
	}

	// A store nobody answers for is a failed target.
	for name, store := range map[string]string{
		"redis":    fmt.Sprintf("store:\n  redis_url: redis://%s/0\n", dead),
		"postgres": fmt.Sprintf("store:\n  postgres_url: postgres://test@%s/test\n", dead),
	} {
		report, err := CheckDial(context.Background(), writeConfig(t, "listen: 127.0.0.1:0\n"+store), envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Dial) != 1 || report.Dial[0].OK || !strings.Contains(report.Dial[0].Detail, "refused") {
			t.Fatalf("%s down: %+v", name, report.Dial)
		}
	}
}

// TestCheckShowsMCPServerPolicies: an MCP server's tools are reported with
// the policy of their mcp_servers: entry (timeout, replay_ttl,
// lease_expiry), the one the gateway runs them with, and a server without
// one with the gateway's defaults (idempotency.replay_ttl included), in the
// JSON report and in the table. The tools are known once listed: -dial.
func TestCheckShowsMCPServerPolicies(t *testing.T) {
	up := newMCPUpstream(t)
	config := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\n" +
		"idempotency:\n  replay_ttl: 48h\n" +
		"mcp_servers:\n" +
		"  - name: payments\n    url: " + up.http.URL + "\n    prefix: p_\n    tools: [create_ticket]\n" +
		"    timeout: 7s\n    replay_ttl: 2h\n    lease_expiry: unknown\n" +
		"  - name: plain\n    url: " + up.http.URL + "\n    prefix: q_\n    tools: [create_ticket]\n"
	path := writeConfig(t, config)
	report, err := CheckDial(context.Background(), path, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]CheckedTool{}
	for _, tool := range report.Tools {
		got[tool.Name] = tool
	}
	want := map[string]CheckedTool{
		"p_create_ticket": {Name: "p_create_ticket", Kind: "mcp", Timeout: "7s", ReplayTTL: "2h", LeaseExpiry: "unknown", URL: "mcp:payments"},
		"q_create_ticket": {Name: "q_create_ticket", Kind: "mcp", Timeout: "30s", ReplayTTL: "48h", LeaseExpiry: "rerun", URL: "mcp:plain",
			NotExecutedStatuses: []int{408, 425, 429}},
	}
	for name, w := range want {
		g := got[name]
		g.Description = ""
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %+v, want %+v", name, g, w)
		}
	}

	var out strings.Builder
	if err := RunIO(context.Background(), []string{"gateway", "check", "-dial", "-config", path}, envOf(nil), strings.NewReader(""), &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) == 7 && f[0] == "p_create_ticket" && (f[3] != "7s" || f[4] != "2h" || f[5] != "unknown") {
			t.Errorf("table row %q, want 7s 2h unknown", line)
		}
	}
	if !strings.Contains(out.String(), "p_create_ticket") {
		t.Errorf("table without the MCP tool:\n%s", out.String())
	}
}
