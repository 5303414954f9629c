package gatewaycmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/verify"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// TestAdversaryVerifyLooseSchemaWithDenyRules is issue 40's reproduction of
// `gateway verify` on a sound config: a tool whose schema lets verify make
// arguments its decide rules deny (any object; the rules allow only a
// small "amount", and deny the rest), next to an acceptance-style tool
// whose rules allow, approve and deny. No FAIL: verify makes only calls
// the rules allow, and where they allow none of its arguments the
// guarantees are N/A naming the rule; the denial guarantee still passes.
func TestAdversaryVerifyLooseSchemaWithDenyRules(t *testing.T) {
	path := writeConfig(t, `listen: 127.0.0.1:0
store:
  path: `+filepath.Join(t.TempDir(), "gw.db")+`
auth:
  tenants:
    - name: acme
      token_sha256: 96a325371892126d14e88b8534a4f7f3e99156f1abe3c08aa29634c40682dd26
    - name: globex
      token_sha256: 7716235111c68b0290240bc3f9a24e0ca0cea34982440b0cafb5a3548497d2df
tools:
  - name: loose-refund
    http: {url: "http://127.0.0.1:1/refund"}
    lease_expiry: unknown
    input_schema: {type: object}
    decide:
      - when: "has(args.amount) && args.amount <= 100"
        decision: allow
      - decision: deny
        reason: "only small refunds"
  - name: charge
    http: {url: "http://127.0.0.1:1/charge"}
    lease_expiry: unknown
    input_schema:
      type: object
      required: [amount_cents]
      properties:
        amount_cents: {type: integer, minimum: 1}
    decide:
      - when: "args.amount_cents <= 10000"
        decision: allow
      - when: "args.amount_cents <= 500000"
        decision: approve
        reason: "a second pair of eyes"
      - decision: deny
        reason: "not an agent's call"
`)
	results, err := verifyConfig(t.Context(), path, envOf(nil), verifyRun{storeMode: verifyStoreScratch})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]verify.Result{}
	for _, r := range results {
		got[r.Tool+"/"+r.Guarantee] = r
		if r.Verdict == verify.Fail {
			t.Errorf("FAIL on a sound config: %+v", r)
		}
	}
	for _, g := range []string{"replay runs once", "racing identical calls run once", "tenants never see each other's records", "uncertain outcome is not rerun"} {
		r := got["loose-refund/"+g]
		if r.Verdict != verify.NA || !strings.Contains(r.Detail, "decide rule 2") || !strings.Contains(r.Detail, "only small refunds") {
			t.Errorf("loose-refund / %s: %+v, want N/A naming decide rule 2 and its reason", g, r)
		}
	}
	if r := got["loose-refund/denied call never runs"]; r.Verdict != verify.Pass {
		t.Errorf("loose-refund / denied call never runs: %+v, want PASS", r)
	}
	for _, g := range []string{"replay runs once", "racing identical calls run once", "tenants never see each other's records",
		"uncertain outcome is not rerun", "denied call never runs", "approval is used once"} {
		if r := got["charge/"+g]; r.Verdict != verify.Pass {
			t.Errorf("charge / %s: %+v, want PASS", g, r)
		}
	}
}

// TestAdversaryVerifyOnAReadOnlyRedisUser: `gateway verify -store
// configured` with a Redis ACL user that may run only read commands (a
// private redis-server) gets every call refused 503. Before issue 40 that
// gave a FAIL ("globex's identical call got acme's record") and vacuous
// PASSes; now verify stops with an error that names the store and gives
// its own message (NOPERM), and no guarantee is reported.
func TestAdversaryVerifyOnAReadOnlyRedisUser(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "reader", "on", ">reader-pass", "~*", "&*", "-@all", "+@read", "+@connection", "+scan").Err(); err != nil {
		t.Fatal(err)
	}
	path := exampleWithStore(t, "  redis_url: redis://reader:reader-pass@"+srv.Addr+"/0\n  key_prefix: \"ro:\"\n")
	results, err := verifyConfig(t.Context(), path, envOf(nil), verifyRun{storeMode: verifyStoreConfigured})
	for _, r := range results {
		if r.Verdict != verify.NA {
			t.Errorf("a guarantee judged on a store that refuses writes: %+v", r)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "NOPERM") || strings.Contains(err.Error(), "reader-pass") {
		t.Fatalf("verify: %v; want an error with the store's NOPERM message, without the password", err)
	}
	t.Logf("verify: %v", err)
}

// TestAdversaryVerifyOnAReadOnlyPostgresRole: a PostgreSQL role with only
// USAGE and SELECT cannot take verify's scratch schema: verify stops with
// the store's message (permission denied) before any guarantee runs.
func TestAdversaryVerifyOnAReadOnlyPostgresRole(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	role := "verify_ro_" + hex.EncodeToString(b)
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(t.Context(), "CREATE ROLE "+role+" LOGIN; GRANT USAGE ON SCHEMA "+schema+" TO "+role+
		"; GRANT SELECT ON ALL TABLES IN SCHEMA "+schema+" TO "+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// DROP OWNED revokes the grants, so the role can go.
		_ = exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role)
	})
	roURL := strings.Replace(url, "://", "://"+role+"@", 1)
	if at := strings.Index(url, "@"); at >= 0 {
		roURL = url[:strings.Index(url, "://")+3] + role + url[at:]
	}
	path := exampleWithStore(t, "  postgres_url: "+roURL+"\n  postgres_schema: "+schema+"\n")
	results, err := verifyConfig(t.Context(), path, envOf(nil), verifyRun{storeMode: verifyStoreConfigured})
	if len(results) != 0 {
		t.Errorf("guarantees judged on a store verify cannot write: %+v", results)
	}
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("verify: %v; want the store's permission denied", err)
	}
	t.Logf("verify: %v", err)
}

// refusingStore takes the first claim (verify's probe) and then refuses
// every claim, as a store whose credential lost its write rights would:
// every later call is answered 503 store_unavailable.
type refusingStore struct {
	*boltstore.Store
	claims *atomic.Int64
}

func (s refusingStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	if s.claims.Add(1) > 1 {
		return idempotency.Decision{}, errors.New("NOPERM this user has no permissions to run the 'evalsha' command")
	}
	return s.Store.Claim(ctx, req)
}

// TestAdversaryVerifyCallsAnswered503AreNotJudged: once the store refuses
// the calls (503 store_unavailable), no guarantee of a tool is PASS or
// FAIL — each is N/A, saying a call answered 503 and what the store said.
func TestAdversaryVerifyCallsAnswered503AreNotJudged(t *testing.T) {
	var claims atomic.Int64
	wrap := func(s idempotency.Store) idempotency.Store { return refusingStore{s.(*boltstore.Store), &claims} }
	results, err := verifyConfig(t.Context(), v4Config(t), envOf(nil), verifyRun{storeMode: verifyStoreScratch, wrap: wrap})
	if err != nil {
		t.Fatal(err)
	}
	judged := 0
	for _, r := range results {
		if r.Tool != "refund" {
			continue
		}
		switch {
		case r.Verdict == verify.Fail:
			t.Errorf("FAIL on a store that refused the calls: %+v", r)
		case r.Verdict == verify.Pass && r.Guarantee != "denied call never runs":
			// A denial is decided before the store: it needs no write.
			t.Errorf("PASS on a store that refused the calls: %+v", r)
		case r.Verdict == verify.NA && strings.Contains(r.Detail, "answered 503 store_unavailable") && strings.Contains(r.Detail, "NOPERM"):
			judged++
		}
	}
	if judged < 5 {
		t.Errorf("%d guarantees of refund N/A for the 503s, want at least 5: %+v", judged, results)
	}
}
