package principal_test

import (
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/principal"
)

func TestPrincipalIDs(t *testing.T) {
	p, err := principal.OIDC("https://Dex.example:5556/dex", "CiQwOGE4", "Ada", map[string]any{"groups": []any{"finance"}})
	if err != nil || p.ID != "oidc:dex.example:5556:CiQwOGE4" || p.Name != "Ada" || !p.IsPerson() {
		t.Fatalf("OIDC = %+v, %v", p, err)
	}
	h, err := principal.HostUser("https://idp.example", "u1", "", nil)
	if err != nil || h.ID != "host-user:idp.example:u1" || h.Name != "u1" || !h.IsPerson() {
		t.Fatalf("HostUser = %+v, %v", h, err)
	}
	if tok := principal.Token("acme"); tok.ID != "token:acme" || tok.IsPerson() {
		t.Fatalf("Token = %+v", tok)
	}
	if principal.Admin.ID != "token:admin" || principal.Admin.IsPerson() {
		t.Fatalf("Admin = %+v", principal.Admin)
	}
	for _, id := range []string{p.ID, h.ID, "token:admin", "oidc:h:sub:with:colons"} {
		if err := principal.Validate(id); err != nil {
			t.Errorf("Validate(%q) = %v", id, err)
		}
	}
	if k, err := principal.KindOf(h.ID); err != nil || k != principal.KindHostUser {
		t.Errorf("KindOf(%q) = %q, %v", h.ID, k, err)
	}
}

func TestPrincipalRefusesBadIDs(t *testing.T) {
	for _, id := range []string{"", "alice", "token:", "oidc:host", "oidc::sub", "oidc:host:", "user:x",
		"token:a\u202eb", "token:a\nb", "token:" + strings.Repeat("a", principal.MaxIDBytes), "token:\xff"} {
		if err := principal.Validate(id); err == nil {
			t.Errorf("Validate(%q) = nil, want an error", id)
		}
	}
	if _, err := principal.OIDC("not a url", "s", "", nil); err == nil {
		t.Error("OIDC with an issuer without host: no error")
	}
	if _, err := principal.HostUser("https://idp.example", "", "", nil); err == nil {
		t.Error("HostUser without sub: no error")
	}
}

func TestSamePerson(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"oidc:idp.example:ada", "host-user:idp.example:ada", true},
		{"oidc:idp.example:ada", "oidc:idp.example:ada", true},
		{"token:acme", "token:acme", true},
		{"oidc:idp.example:ada", "oidc:idp.example:bob", false},
		{"oidc:idp.example:ada", "oidc:other.example:ada", false},
		{"token:ada", "oidc:idp.example:ada", false},
		{"", "", false},
	} {
		if got := principal.Same(c.a, c.b); got != c.want {
			t.Errorf("Same(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
