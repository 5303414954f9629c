package gatewaycmd

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

func tenantConfig(extra string) string {
	return "auth:\n  tenants:\n    - name: acme\n      token_sha256: " + strings.Repeat("a", 64) + "\n" + extra
}

// TestTenantLimitsConfig: rate, burst and max_in_flight become the
// tenant's limits; each mistake is refused naming its field.
func TestTenantLimitsConfig(t *testing.T) {
	good := map[string]callpath.TenantLimits{
		"      rate: 100/s\n":                       {Rate: ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 100}},
		"      rate: 30/m\n      burst: 5\n":        {Rate: ratelimit.Limit{Rate: 30, Period: time.Minute, Burst: 5}},
		"      max_in_flight: 4\n":                  {MaxInFlight: 4},
		"      rate: 1/h\n      max_in_flight: 1\n": {Rate: ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}, MaxInFlight: 1},
		"": {},
	}
	for extra, want := range good {
		cfg, err := ParseConfig([]byte(tenantConfig(extra)))
		if err != nil {
			t.Fatal(err)
		}
		cfg.withDefaults()
		opts, err := cfg.serverOptions(nil)
		if err != nil {
			t.Fatalf("%q: %v", extra, err)
		}
		if got := opts.Tenants[0].Limits; got != want {
			t.Errorf("%q: limits %+v, want %+v", extra, got, want)
		}
	}
	bad := map[string]string{
		"      rate: 100/d\n":                 "auth.tenants[0].rate",
		"      rate: 0/s\n":                   "auth.tenants[0].rate",
		"      rate: fast\n":                  "auth.tenants[0].rate",
		"      burst: 10\n":                   "auth.tenants[0].burst",
		"      rate: 10/s\n      burst: -1\n": "auth.tenants[0].burst",
		"      max_in_flight: -2\n":           "auth.tenants[0].max_in_flight",
		"      max_inflight: 2\n":             "max_inflight",
	}
	for extra, field := range bad {
		err := Run(t.Context(), []string{"gateway", "-config", writeConfig(t, tenantConfig(extra))}, func(string) string { return "" }, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), field) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line naming %s", extra, err, field)
		}
	}
}

// TestLimiterFollowsTheStore: Redis keeps the limits of a Redis store and
// PostgreSQL those of a PostgreSQL store (so replicas share them); the
// embedded store keeps them in process.
func TestLimiterFollowsTheStore(t *testing.T) {
	cfg := &Config{}
	cfg.Store.RedisURL = "redis://127.0.0.1:6379/0"
	cfg.withDefaults()
	store, _, err := cfg.openStore(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, ok := cfg.limiterFor(store).(*ratelimit.Redis); !ok {
		t.Fatalf("Redis store: limiter %T, want *ratelimit.Redis", cfg.limiterFor(store))
	}
	pg := &Config{}
	pg.Store.PostgresURL = pgtest.URL(t)
	pg.Store.PostgresSchema = pgtest.Schema(t, pg.Store.PostgresURL)
	pg.withDefaults()
	ps, _, err := pg.openStore(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if _, ok := pg.limiterFor(ps).(*pgstore.Limiter); !ok {
		t.Fatalf("PostgreSQL store: limiter %T, want *pgstore.Limiter", pg.limiterFor(ps))
	}
	emb := &Config{}
	emb.Store.Path = t.TempDir() + "/gw.db"
	emb.withDefaults()
	es, _, err := emb.openStore(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	if l := emb.limiterFor(es); l != nil {
		t.Fatalf("embedded store: limiter %T, want nil (in process)", l)
	}
}
