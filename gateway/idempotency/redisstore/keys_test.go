package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
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
		if !strings.HasPrefix(name, "gw:R"+c.wantTag) || (c.wantTag == "" && len(name) != len("gw:R")+len(appendScopeHead(nil, c.scope.Tenant, c.scope.Tool))+len(packID(c.scope.Key))) {
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

// TestPackIDPacksOnlyCanonicalSpellings: the spellings the gateway mints
// pack to their bytes, every other string (uppercase hex or UUID, a
// lowercase ULID, a near miss) stays text, and every one comes back as it
// was sent.
func TestPackIDPacksOnlyCanonicalSpellings(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	id := ulid.Make().String()
	cases := []struct {
		in   string
		kind byte
	}{
		{hex64, 'h'},
		{strings.ToUpper(hex64), 't'},
		{hex64[:63] + "g", 't'},
		{hex64[:63], 't'},
		{id, 'u'},
		{strings.ToLower(id), 't'},
		{"8ZZZZZZZZZZZZZZZZZZZZZZZZZ", 't'}, // overflows 128 bits
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", 'g'},
		{"0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", 't'},
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg", 't'},
		{"0f1e2d3c+4b5a-6978-8796-a5b4c3d2e1f0", 't'},
		{"", 't'},
		{"session-1", 't'},
	}
	for _, c := range cases {
		p := packID(c.in)
		if p[0] != c.kind {
			t.Errorf("packID(%q) is kind %q, want %q", c.in, p[0], c.kind)
		}
		if back, ok := unpackID(p); !ok || back != c.in {
			t.Errorf("unpackID(packID(%q)) = %q, %v", c.in, back, ok)
		}
	}
	if got, want := packID(hex64), "h"+string(mustHex(t, hex64)); got != want {
		t.Errorf("packID(hex) = %x, want %x", got, want)
	}
}

// TestTagIsSHA256OfJoinedParts: the hash tag is the first 16 hex digits
// of SHA-256 over the newline-joined parts, short or long (a long part
// does not fit the stack buffer).
func TestTagIsSHA256OfJoinedParts(t *testing.T) {
	for _, parts := range [][]string{{"t"}, {"tenant", "tool", "key"}, {"a", strings.Repeat("s", 1000)}} {
		sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
		if got, want := tag(parts...), hex.EncodeToString(sum[:])[:16]; got != want {
			t.Errorf("tag(%d parts) = %s, want %s", len(parts), got, want)
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzPackID: whatever the string, unpackID gives it back, and packID
// packs it as the plain text-based reference does (stored key names must
// not change with the implementation).
func FuzzPackID(f *testing.F) {
	f.Add(strings.Repeat("ab", 32))
	f.Add(ulid.Make().String())
	f.Add("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
	f.Fuzz(func(t *testing.T, s string) {
		if back, ok := unpackID(packID(s)); !ok || back != s {
			t.Fatalf("unpackID(packID(%q)) = %q, %v", s, back, ok)
		}
		if got, want := packID(s), packIDReference(s); got != want {
			t.Fatalf("packID(%q) = %x, the reference packs %x", s, got, want)
		}
	})
}

// packIDReference is packID written with the library's text round trips.
func packIDReference(s string) string {
	switch len(s) {
	case 36:
		if s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' {
			h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
			if b, err := hex.DecodeString(h); err == nil && hex.EncodeToString(b) == h {
				return "g" + string(b)
			}
		}
	case ulid.EncodedSize:
		if id, err := ulid.ParseStrict(s); err == nil && id.String() == s {
			return "u" + string(id[:])
		}
	case 2 * sha256.Size:
		if b, err := hex.DecodeString(s); err == nil && hex.EncodeToString(b) == s {
			return "h" + string(b)
		}
	}
	return "t" + s
}
