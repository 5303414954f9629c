package tools

import (
	"strings"
	"testing"
)

func TestScopedKey(t *testing.T) {
	key := strings.Repeat("ab", 32)
	// printf 'acme:tickets_create:<key>' | sha256sum
	if got, want := ScopedKey("acme", "tickets_create", key), "f13b378dbe445af4caa6145d878f6a764b7c9b31dfde1f2cfa2f44b6632005f9"; got != want {
		t.Fatalf("ScopedKey = %s, want %s", got, want)
	}
	if ScopedKey("acme", "tickets_create", key) == ScopedKey("globex", "tickets_create", key) {
		t.Fatal("two tenants share a scoped key")
	}
}
