package gatewaycmd

import (
	"net/http"
	"strings"
	"testing"
)

// Token rotation without a window of 401s: a reload makes the new token
// current and keeps the old one as previous_token_sha256, both work (the
// log line of a call with the old one says so), and a second reload that
// drops previous_token_sha256 ends the old token. The same for the admin.
func TestTokenRotationByReload(t *testing.T) {
	base := storeSection(t)
	tenant := func(current, previous string) string {
		s := "auth:\n  tenants:\n    - name: acme\n      token_sha256: " + tokenHash(current) + "\n"
		if previous != "" {
			s += "      previous_token_sha256: " + tokenHash(previous) + "\n"
		}
		return s
	}
	admin := func(current, previous string) string {
		s := "admin:\n  token_sha256: " + tokenHash(current) + "\n"
		if previous != "" {
			s += "  previous_token_sha256: " + tokenHash(previous) + "\n"
		}
		return s
	}
	adminStatus := func(g *reloading, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/records?state=UNKNOWN", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	g := startReloading(t, base+tenant("old", "")+admin("adm-old", ""))

	line := g.reload(t, base+tenant("new", "old")+admin("adm-new", "adm-old"))
	if line["msg"] != "config reloaded" || strings.Join(strs(line["changed"]), ",") != "admin.token_sha256,admin.previous_token_sha256,auth.tenants[acme].token_sha256,auth.tenants[acme].previous_token_sha256" {
		t.Fatalf("rotation start: %v", line)
	}
	for step, token := range []string{"new", "old"} {
		if st, _, body := callAs(t, g.addr, token, "rot", uint64(step+1), "reloadtest", `{}`); st != 200 {
			t.Fatalf("tenant token %q during the rotation: %d %s", token, st, body)
		}
	}
	for _, token := range []string{"adm-new", "adm-old"} {
		if st := adminStatus(g, token); st != 200 {
			t.Fatalf("admin token %q during the rotation: %d", token, st)
		}
	}
	// The access log tells who still uses an old token, and names the admin.
	var previous, adminLines int
	for _, l := range g.logs.JSONLines() {
		if l["msg"] != "request" {
			continue
		}
		if l["token"] == "previous" {
			previous++
		}
		if l["route"] == "/admin/v1/records" {
			adminLines++
			if l["tenant"] != "(admin)" {
				t.Fatalf("admin request logged as tenant %v", l["tenant"])
			}
		}
	}
	if previous != 2 || adminLines != 2 {
		t.Fatalf("%d lines with token=previous (want 2: one tenant call, one admin call), %d admin lines", previous, adminLines)
	}

	line = g.reload(t, base+tenant("new", "")+admin("adm-new", ""))
	if line["msg"] != "config reloaded" {
		t.Fatalf("rotation end: %v", line)
	}
	if st, _, _ := callAs(t, g.addr, "old", "rot", 3, "reloadtest", `{}`); st != 401 {
		t.Fatalf("old tenant token after the rotation: %d, want 401", st)
	}
	if st, _, body := callAs(t, g.addr, "new", "rot", 3, "reloadtest", `{}`); st != 200 {
		t.Fatalf("new tenant token after the rotation: %d %s", st, body)
	}
	if st := adminStatus(g, "adm-old"); st != 401 {
		t.Fatalf("old admin token after the rotation: %d, want 401", st)
	}

	// A previous token equal to the current one, or to another caller's,
	// is refused and changes nothing.
	for _, bad := range []string{base + tenant("new", "new") + admin("adm-new", ""), base + tenant("new", "adm-new") + admin("adm-new", "")} {
		if line := g.reload(t, bad); line["level"] != "ERROR" {
			t.Fatalf("reload %q: %v, want a refusal", bad, line)
		}
	}
}
