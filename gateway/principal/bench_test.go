package principal_test

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/principal"
)

// BenchmarkHostUser is the identity resolution of a call with a provider
// token: the verified token's issuer, subject, name and claims turned into
// the requester's principal (parse the issuer URL, build and check the
// id), once per call.
func BenchmarkHostUser(b *testing.B) {
	claims := map[string]any{"org_id": "acme", "groups": []any{"finance"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := principal.HostUser("https://id.example.com/realms/acme", "agent-7", "Agent 7", claims); err != nil {
			b.Fatal(err)
		}
	}
}
