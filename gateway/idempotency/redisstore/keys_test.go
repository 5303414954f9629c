package redisstore

import (
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

// TestRecordNames: a record's name holds its scope exactly on both
// layouts; a single Redis names it without a tag (no slots to share), a
// cluster with its session's tag or its scope's.
func TestRecordNames(t *testing.T) {
	req := storetest.ReferenceCall(7)
	single := keyLayout{prefix: "gw:"}
	cluster := keyLayout{prefix: "gw:", sessionSlots: true}
	opaque := idempotency.Scope{Tenant: strings.Repeat("t", 200), Tool: "x{y}", Key: "order-17/charge"}
	for _, c := range []struct {
		name    string
		layout  keyLayout
		scope   idempotency.Scope
		step    *idempotency.Step
		wantTag string
	}{
		{"single, derived", single, req.Scope, req.Step, ""},
		{"single, opaque key, long tenant", single, opaque, nil, ""},
		{"cluster, session tag", cluster, req.Scope, req.Step, "{" + sessionTag(req.Scope.Tenant, req.Step.SessionID) + "}"},
		{"cluster, scope tag", cluster, opaque, nil, "{" + tag(opaque.Tenant, opaque.Tool, opaque.Key) + "}"},
	} {
		name := c.layout.record(c.scope, c.step)
		if !strings.HasPrefix(name, "gw:R"+c.wantTag) || (c.wantTag == "" && len(name) != len("gw:R")+len(packScopeHead(c.scope.Tenant, c.scope.Tool))+len(packID(c.scope.Key))) {
			t.Errorf("%s: name %q, want gw:R%s then the packed scope", c.name, name, c.wantTag)
		}
		got, err := c.layout.parseRecord(name)
		if err != nil || got != c.scope {
			t.Errorf("%s: parsed %+v, %v; want %+v", c.name, got, err, c.scope)
		}
	}
}
