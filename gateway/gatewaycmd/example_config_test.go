package gatewaycmd

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/tools"
)

// exampleConfigPath is docs/gateway.example.yaml, seen from this package.
var exampleConfigPath = filepath.Join("..", "..", "docs", "gateway.example.yaml")

// The placeholder tokens whose hashes the example's comments name.
const (
	exampleAcmeToken   = "acme-token-change-me"
	exampleGlobexToken = "globex-token-change-me"
	exampleAdminToken  = "admin-token-change-me"
)

// loadExample loads the documented example the way Run does, with an empty
// environment, and converts it into server options. Building the options
// never contacts the store, so no Redis is needed.
func loadExample(t *testing.T) (*Config, callpath.Options) {
	t.Helper()
	cfg, err := LoadConfig(exampleConfigPath)
	if err != nil {
		t.Fatalf("the documented example does not load: %v", err)
	}
	cfg.applyEnv(func(string) string { return "" })
	cfg.withDefaults()
	opts, err := cfg.serverOptions(tools.Registered())
	if err != nil {
		t.Fatalf("the documented example does not build: %v", err)
	}
	return cfg, opts
}

// TestExampleConfigBuilds keeps docs/gateway.example.yaml honest: it must
// load, and it must configure what its comments and docs/configuration.md
// say it does.
func TestExampleConfigBuilds(t *testing.T) {
	cfg, opts := loadExample(t)

	if !strings.HasPrefix(cfg.Store.RedisURL, "redis://") || len(cfg.Store.ClusterAddrs) != 0 {
		t.Errorf("store: want a single Redis URL, got %+v", cfg.Store)
	}
	if opts.KeyMode != callpath.KeyModeDerived || opts.LockTTL != 30*time.Second ||
		opts.ReplayTTL != 24*time.Hour || opts.MaxBodyBytes != 1<<20 || opts.StepGuardOff {
		t.Errorf("idempotency settings: %+v", opts)
	}
	if time.Duration(cfg.DrainTimeout) != 60*time.Second {
		t.Errorf("drain_timeout %v", time.Duration(cfg.DrainTimeout))
	}

	wantTenants := map[string][sha256.Size]byte{
		"acme":   sha256.Sum256([]byte(exampleAcmeToken)),
		"globex": sha256.Sum256([]byte(exampleGlobexToken)),
	}
	if len(opts.Tenants) != len(wantTenants) {
		t.Fatalf("want %d tenants, got %d", len(wantTenants), len(opts.Tenants))
	}
	for _, tenant := range opts.Tenants {
		if want, ok := wantTenants[tenant.Name]; !ok || tenant.TokenSHA256 != want {
			t.Errorf("tenant %q: hash is not SHA-256 of the token its comment names", tenant.Name)
		}
	}
	if opts.AdminTokenSHA256 == nil || *opts.AdminTokenSHA256 != sha256.Sum256([]byte(exampleAdminToken)) {
		t.Error("admin.token_sha256 is not SHA-256 of the token its comment names")
	}
	consoleOpts, err := cfg.consoleOptions()
	if err != nil {
		t.Fatal(err)
	}
	if consoleOpts.TokenSignInOff || consoleOpts.SecureCookies || consoleOpts.SessionKeys != nil {
		t.Errorf("console: token sign-in off %v, secure cookies %v, %d session keys; want the token sign-in and a random key",
			consoleOpts.TokenSignInOff, consoleOpts.SecureCookies, len(consoleOpts.SessionKeys))
	}

	cases := []struct {
		tool        string
		readOnly    bool
		leaseExpiry idempotency.LeaseExpiry
		timeout     time.Duration
		validArgs   string
	}{
		{"provision-infra-v2", false, idempotency.LeaseExpiryRerun, 2 * time.Minute, `{"name":"db","region":"eu-west-1","cpus":2}`},
		{"charge-card", false, idempotency.LeaseExpiryUnknown, 20 * time.Second, `{"customer_id":"c1","amount_cents":500,"currency":"EUR"}`},
		{"get-invoice", true, "", 5 * time.Second, `{"invoice_id":"inv_42"}`},
	}
	for _, tc := range cases {
		entry, ok := opts.Tools.Lookup(tc.tool)
		if !ok {
			t.Errorf("tool %s missing", tc.tool)
			continue
		}
		if entry.Spec.ReadOnly != tc.readOnly || entry.Spec.Description == "" {
			t.Errorf("tool %s: read_only=%v description=%q", tc.tool, entry.Spec.ReadOnly, entry.Spec.Description)
		}
		policy := opts.Policies[tc.tool]
		if policy.LeaseExpiry != tc.leaseExpiry || policy.Timeout != tc.timeout {
			t.Errorf("tool %s: policy %+v", tc.tool, policy)
		}
		if v, err := entry.Schema().ValidateJSON([]byte(tc.validArgs)); err != nil || len(v) != 0 {
			t.Errorf("tool %s: documented arguments rejected: %v %v", tc.tool, err, v)
		}
		if v, _ := entry.Schema().ValidateJSON([]byte(`{}`)); len(v) == 0 {
			t.Errorf("tool %s: schema accepts {}; the example's required members are not applied", tc.tool)
		}
	}
	charges, err := opts.Budgets.Evaluate(t.Context(), budgets.Call{Tool: "charge-card", Tenant: "acme",
		Arguments: []byte(`{"amount_cents":9050,"currency":"EUR","customer_id":"c1"}`), Now: time.Now()})
	if err != nil || len(charges) != 1 || charges[0].Budget != "card-charges-daily" || charges[0].Cost != 90_500_000 ||
		charges[0].Limit != 20000*budgets.Unit || opts.Budgets.Charges("provision-infra-v2") {
		t.Errorf("budgets: charge-card should charge 90.50 of card-charges-daily's 20 000: %+v %v", charges, err)
	}
	if p := opts.Policies["provision-infra-v2"]; p.ReplayTTL != 72*time.Hour || p.Timeout <= opts.LockTTL {
		t.Errorf("provision-infra-v2 should show replay_ttl 72h and a timeout above lock_ttl: %+v", p)
	}
}

// TestExampleConfigServes builds a server from the example on an embedded
// store (in place of Redis) and checks auth, discovery and the admin API
// behave as the example's comments say.
func TestExampleConfigServes(t *testing.T) {
	_, opts := loadExample(t)
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "gateway.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	opts.Store = store
	srv, err := gateway.NewServer(opts)
	if err != nil {
		t.Fatalf("NewServer rejects the example's options: %v", err)
	}

	get := func(path, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}

	if rec := get("/api/tools/v1", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("discovery without a token: %d, want 401", rec.Code)
	}
	if rec := get("/api/tools/v1", exampleAdminToken); rec.Code != http.StatusUnauthorized {
		t.Errorf("discovery with the admin token: %d, want 401", rec.Code)
	}
	rec := get("/api/tools/v1", exampleGlobexToken)
	if rec.Code != http.StatusOK {
		t.Fatalf("discovery with globex's token: %d %s", rec.Code, rec.Body)
	}
	var catalog struct {
		Tools []struct {
			Name     string `json:"name"`
			ReadOnly bool   `json:"read_only"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &catalog); err != nil {
		t.Fatal(err)
	}
	readOnly := map[string]bool{}
	for _, tool := range catalog.Tools {
		readOnly[tool.Name] = tool.ReadOnly
	}
	for name, want := range map[string]bool{"provision-infra-v2": false, "charge-card": false, "get-invoice": true} {
		if got, listed := readOnly[name]; !listed || got != want {
			t.Errorf("discovery: %s listed=%v read_only=%v", name, listed, got)
		}
	}

	key := strings.Repeat("a", 64)
	if rec := get("/admin/v1/records/acme/charge-card/"+key, exampleAcmeToken); rec.Code != http.StatusUnauthorized {
		t.Errorf("admin API with a tenant token: %d, want 401", rec.Code)
	}
	rec = get("/admin/v1/records/acme/charge-card/"+key, exampleAdminToken)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"record_not_found"`) {
		t.Errorf("admin API with the admin token: %d %s, want 404 record_not_found", rec.Code, rec.Body)
	}
}
