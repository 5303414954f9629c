package gatewaycmd

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// With admin_listen, /healthz, /readyz, /metrics and /admin are served on
// that listener only, and the tool API on listen only.
func TestAdminListenSeparatesOperations(t *testing.T) {
	g := startGateway(t, "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nstore:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+
		"\nadmin:\n  token_sha256: "+tokenHash("adm")+"\n")
	var opsAddr string
	for _, l := range g.logs.JSONLines() {
		if l["msg"] == "gateway listening" {
			opsAddr, _ = l["admin_addr"].(string)
		}
	}
	if opsAddr == "" || opsAddr == g.addr {
		t.Fatalf("admin_addr %q in the start-up line (listen %s)", opsAddr, g.addr)
	}
	get := func(addr, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer adm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if resp := call(t, g.addr, "ops", 1, "reloadtest", `{}`); resp.StatusCode != 200 {
		t.Fatalf("tool call on listen: %d", resp.StatusCode)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/admin/v1/records?state=UNKNOWN"} {
		if st, _ := get(g.addr, path); st != http.StatusNotFound {
			t.Errorf("%s on listen: %d, want 404", path, st)
		}
		if st, body := get(opsAddr, path); st != http.StatusOK {
			t.Errorf("%s on admin_listen: %d %s", path, st, body)
		}
	}
	if _, body := get(opsAddr, "/metrics"); !strings.Contains(body, `gateway_requests_total{api="rest",outcome="executed",tool="reloadtest"} 1`) {
		t.Errorf("metrics on admin_listen do not count the call:\n%s", body)
	}
	if st, _ := get(opsAddr, "/api/tools/v1"); st != http.StatusNotFound {
		t.Errorf("tool API on admin_listen: %d, want 404", st)
	}
}
