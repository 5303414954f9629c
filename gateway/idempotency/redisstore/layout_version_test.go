package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func layoutRequest(key string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "t", Tool: "tool", Key: key},
		Fingerprint: "fp", ExecutionID: "exec-" + key, Owner: "owner-" + key,
		LockTTL: time.Minute, ReplayTTL: time.Hour,
	}
}

// TestNewerLayoutDecidesNothing: a gateway that finds a newer layout
// version under its prefix claims nothing (a *LayoutError, the call path's
// 503) and its Ping names both versions (/readyz); a running store notices
// within idempotency.LayoutRefresh.
func TestNewerLayoutDecidesNothing(t *testing.T) {
	client := testClient(t)
	prefix := uniquePrefix(t, client)
	running := New(client, Options{Prefix: prefix})
	ctx := t.Context()
	if _, err := running.Claim(ctx, layoutRequest("before")); err != nil {
		t.Fatal(err)
	}
	if v, err := running.LayoutVersion(ctx); err != nil || v.Found != layoutVersion {
		t.Fatalf("layout version after the first claim = %+v, %v; want %d recorded", v, err, layoutVersion)
	}
	newer := newestKnownLayout + 1
	if err := client.Set(ctx, prefix+"layout", newer, 0).Err(); err != nil {
		t.Fatal(err)
	}
	keysBefore, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(idempotency.LayoutRefresh + 100*time.Millisecond)
	started := New(client, Options{Prefix: prefix})
	for name, s := range map[string]*Store{"running": running, "started": started} {
		_, err := s.Claim(ctx, layoutRequest("after-"+name))
		var layoutErr *idempotency.LayoutError
		if !errors.As(err, &layoutErr) || layoutErr.Found != newer || layoutErr.Known != newestKnownLayout {
			t.Errorf("%s: Claim = %v, want a LayoutError %d > %d", name, err, newer, newestKnownLayout)
		}
		if _, err := s.Get(ctx, layoutRequest("before").Scope); !errors.Is(err, idempotency.ErrNewerLayout) {
			t.Errorf("%s: Get = %v, want ErrNewerLayout", name, err)
		}
		if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("layout version %d, this gateway knows up to %d", newer, newestKnownLayout)) {
			t.Errorf("%s: Ping = %v, want both versions named", name, err)
		}
	}
	keysAfter, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keysAfter) != len(keysBefore) {
		t.Errorf("keys under the prefix: %d after the refused claims, want %d", len(keysAfter), len(keysBefore))
	}
	if v, _ := started.LayoutVersion(ctx); v.Found != newer {
		t.Errorf("an older gateway lowered the layout version to %d", v.Found)
	}
}
