package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

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

// TestTakeoverKeepsTheHeldStep: on a single Redis a retry under another
// session meets the record by its scope; when it takes an expired lease
// over, the step the record holds stays the first claim's. The scripts
// find that entry from the record's own session and index (held_step),
// not from the request: it names the new execution, and Complete gives it
// the replay TTL, while the retry's step gets no entry.
func TestTakeoverKeepsTheHeldStep(t *testing.T) {
	client := testClient(t)
	s := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	first := storetest.ReferenceCall(1)
	first.StepBoundKey = false // a key not bound to its step (opaque mode)
	first.LockTTL = 50 * time.Millisecond
	if d, err := s.Claim(ctx, first); err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("first claim: %v %v", d.Outcome, err)
	}
	time.Sleep(first.LockTTL + 50*time.Millisecond) // the lease runs out
	retry := first
	retry.Step = &idempotency.Step{SessionID: "another-session", Index: 9}
	retry.ExecutionID, retry.Owner = ulid.Make().String(), ulid.Make().String()
	retry.LockTTL = time.Minute
	d, err := s.Claim(ctx, retry)
	if err != nil || d.Outcome != idempotency.OutcomeClaimed || !d.TakenOver {
		t.Fatalf("retry: %v taken over %v, %v; want a takeover", d.Outcome, d.TakenOver, err)
	}
	if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: storetest.ReferenceBody}, time.Hour); err != nil {
		t.Fatal(err)
	}
	held := s.keys.step(first.Scope.Tenant, *first.Step)
	value, err := client.Get(ctx, held).Result()
	r := &reader{b: []byte(value)}
	if exec, ok := unpackID(r.str(r.u8())); err != nil || !ok || exec != retry.ExecutionID || string(r.b) != first.Scope.Tool {
		t.Errorf("held step entry = %q, %v; want the retry's execution and the tool", value, err)
	}
	if ttl := client.PTTL(ctx, held).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("held step entry TTL = %v, want the replay TTL (≤ 1h)", ttl)
	}
	if n := client.Exists(ctx, s.keys.step(retry.Scope.Tenant, *retry.Step)).Val(); n != 0 {
		t.Error("the retry's own step got an entry; the record holds the first claim's")
	}
	rec, err := s.Get(ctx, first.Scope)
	if err != nil || rec.Step == nil || *rec.Step != *first.Step {
		t.Errorf("record step = %+v, %v; want %+v", rec.Step, err, *first.Step)
	}
}
