package gatewaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
)

// buildRegistry adds every registered plugin and every configured tool.
// A configured tool with the name of a plugin configures that plugin; one
// with http is an upstream; anything else is an error.
func (c *Config) buildRegistry(plugins []tools.Tool) (*tools.Registry, map[string]tools.Policy, error) {
	registry := tools.NewRegistry()
	policies := make(map[string]tools.Policy)
	byName := make(map[string]tools.Tool, len(plugins))
	for _, p := range plugins {
		byName[p.Spec().Name] = p
	}
	configured := make(map[string]bool)
	// One pool of keep-alive connections for every upstream tool.
	var upstreamClient *http.Client
	for i, t := range c.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		if !tools.ValidName(t.Name) {
			return nil, nil, fmt.Errorf("%s.name: %q must match %s", field, t.Name, tools.NamePattern)
		}
		if err := tools.CheckReserved(t.Name); err != nil {
			return nil, nil, fmt.Errorf("%s.name: %w", field, err)
		}
		field += " (" + t.Name + ")"
		if configured[t.Name] {
			return nil, nil, fmt.Errorf("%s: configured twice", field)
		}
		configured[t.Name] = true
		if err := t.LeaseExpiry.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%s.lease_expiry: %w", field, err)
		}
		if err := checkEffectKey(t); err != nil {
			return nil, nil, fmt.Errorf("%s.effect_key: %w", field, err)
		}
		var notExecuted tools.StatusSet
		if t.NotExecutedStatuses != nil {
			var err error
			if notExecuted, err = tools.NewStatusSet(t.NotExecutedStatuses); err != nil {
				return nil, nil, fmt.Errorf("%s.not_executed_statuses: %w", field, err)
			}
		}
		schema, err := c.toolSchema(i, t)
		if err != nil {
			return nil, nil, err
		}
		var opts []tools.AddOption
		if schema != nil {
			opts = append(opts, tools.WithSchema(schema))
		}
		if t.Description != "" {
			opts = append(opts, tools.WithDescription(t.Description))
		}
		if t.ReadOnly != nil {
			opts = append(opts, tools.WithReadOnly(*t.ReadOnly))
		}
		var tool tools.Tool
		switch plugin, isPlugin := byName[t.Name]; {
		case t.HTTP != nil && isPlugin:
			return nil, nil, fmt.Errorf("%s.http: a plugin named %q is compiled in; pick another name", field, t.Name)
		case t.HTTP != nil:
			if upstreamClient == nil {
				upstreamClient = httptool.NewClient()
			}
			if tool, err = httpUpstream(field, t, schema, upstreamClient); err != nil {
				return nil, nil, err
			}
		case isPlugin:
			tool = plugin
		default:
			return nil, nil, fmt.Errorf("%s: no plugin of that name is compiled in; give http.url for an upstream tool", field)
		}
		if err := registry.Add(tool, opts...); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", field, err)
		}
		policy := t.Policy()
		policy.EffectKey = t.EffectKey
		policy.NotExecutedStatuses = notExecuted
		policies[t.Name] = policy
	}
	for _, p := range plugins {
		if configured[p.Spec().Name] {
			continue
		}
		if err := registry.Add(p); err != nil {
			return nil, nil, fmt.Errorf("plugin: %w", err)
		}
	}
	if c.Store.PostgresURL == "" {
		// Only the PostgreSQL store can commit a tool's writes with its
		// record (gateway.NewServer refuses it too; this names the fix).
		for _, e := range registry.Entries() {
			if e.Spec.Transactional {
				return nil, nil, fmt.Errorf("tool %s is transactional: it needs the PostgreSQL store (store.postgres_url or DATABASE_URL)", e.Spec.Name)
			}
		}
	}
	if err := c.addMCPToolPolicies(policies); err != nil {
		return nil, nil, err
	}
	return registry, policies, nil
}

// httpUpstream is the tool of a configured HTTP upstream (tools[].http),
// its URL and TLS pins checked; field names the entry in errors. Every
// upstream shares client's keep-alive connections.
func httpUpstream(field string, t ToolEntry, schema json.RawMessage, client *http.Client) (tools.Tool, error) {
	u, err := url.Parse(t.HTTP.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s.http.url: %q: want an http(s) URL", field, t.HTTP.URL)
	}
	var pins [][]byte
	if t.HTTP.TLS != nil {
		if len(t.HTTP.TLS.PinSHA256) == 0 {
			return nil, fmt.Errorf("%s.http.tls.pin_sha256: give at least one pin", field)
		}
		for j, p := range t.HTTP.TLS.PinSHA256 {
			pin, err := httptool.ParsePin(p)
			if err != nil {
				return nil, fmt.Errorf("%s.http.tls.pin_sha256[%d]: %w", field, j, err)
			}
			pins = append(pins, pin)
		}
		if u.Scheme != "https" {
			return nil, fmt.Errorf("%s.http.tls.pin_sha256: the url must be https", field)
		}
	}
	ht, err := httptool.New(httptool.Config{
		PinSHA256:        pins,
		Client:           client,
		Name:             t.Name,
		Description:      t.Description,
		InputSchema:      schema,
		URL:              t.HTTP.URL,
		Headers:          t.HTTP.Headers,
		MaxResponseBytes: t.HTTP.MaxResponseBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("%s.http: %w", field, err)
	}
	return ht, nil
}

// buildAuth converts the auth and admin sections; the rules on tenants are
// callpath.ValidateAuth's, this only decodes the hashes and adds the path.
func (c *Config) buildAuth() ([]callpath.Tenant, *adminHashes, error) {
	var tenants []callpath.Tenant
	if c.Auth != nil {
		if len(c.Auth.Tenants) == 0 && c.Auth.OIDC == nil {
			return nil, nil, errors.New("auth.tenants: list at least one tenant, or configure auth.oidc, or remove auth")
		}
		for i, t := range c.Auth.Tenants {
			sum, err := decodeHash(fmt.Sprintf("auth.tenants[%d].token_sha256", i), t.TokenSHA256)
			if err != nil {
				return nil, nil, err
			}
			previous, err := optionalHash(fmt.Sprintf("auth.tenants[%d].previous_token_sha256", i), t.PreviousTokenSHA256)
			if err != nil {
				return nil, nil, err
			}
			limits, err := t.limits(fmt.Sprintf("auth.tenants[%d]", i))
			if err != nil {
				return nil, nil, err
			}
			tenants = append(tenants, callpath.Tenant{Name: t.Name, TokenSHA256: sum, PreviousTokenSHA256: previous, Limits: limits})
		}
	}
	admin, err := optionalHash("admin.token_sha256", c.Admin.TokenSHA256)
	if err != nil {
		return nil, nil, err
	}
	adminPrevious, err := optionalHash("admin.previous_token_sha256", c.Admin.PreviousTokenSHA256)
	if err != nil {
		return nil, nil, err
	}
	if err := callpath.ValidateAuth(tenants, admin, adminPrevious); err != nil {
		if strings.HasPrefix(err.Error(), "tenants[") {
			return nil, nil, fmt.Errorf("auth.%w", err)
		}
		return nil, nil, err
	}
	return tenants, &adminHashes{current: admin, previous: adminPrevious}, nil
}

// buildOIDC returns the verifier of auth.oidc (nil without it). It makes no
// request: discovery happens on the first token or at Start.
func (c *Config) buildOIDC() (*oidcauth.Authenticator, error) {
	if c.Auth == nil || c.Auth.OIDC == nil {
		return nil, nil
	}
	a, err := oidcauth.New(c.Auth.OIDC.Config, oidcauth.Options{})
	if err != nil {
		return nil, fmt.Errorf("auth.oidc.%w", err)
	}
	return a, nil
}

// adminHashes are the admin API's accepted token hashes (current is nil
// without an admin API; previous is set during a rotation).
type adminHashes struct {
	current, previous *[32]byte
}

// optionalHash decodes a hex SHA-256 that may be absent (nil).
func optionalHash(field, s string) (*[32]byte, error) {
	if s == "" {
		return nil, nil
	}
	sum, err := decodeHash(field, s)
	if err != nil {
		return nil, err
	}
	return &sum, nil
}

// limits converts the tenant's rate, burst and max_in_flight; field is the
// tenant's path in the file, e.g. auth.tenants[2]. The rules on their
// values are callpath.ValidateAuth's (buildAuth calls it).
func (t LimitsConfig) limits(field string) (callpath.TenantLimits, error) {
	var limits callpath.TenantLimits
	if t.Rate == "" && t.Burst != 0 {
		return limits, fmt.Errorf("%s.burst: %d without a rate: give rate too (e.g. rate: 100/s)", field, t.Burst)
	}
	if t.Rate != "" {
		rate, err := ratelimit.ParseRate(t.Rate)
		if err != nil {
			return limits, fmt.Errorf("%s.rate: %w", field, err)
		}
		if t.Burst != 0 {
			rate.Burst = t.Burst // callpath.ValidateAuth refuses one below 1
		}
		limits.Rate = rate
	}
	limits.MaxInFlight = t.MaxInFlight
	return limits, nil
}

// openStore opens Redis (single node or cluster), PostgreSQL or the
// embedded store; with store.migrate false it refuses a store whose layout
// is behind (migratecmd.go) before it says anything else about it, so such
// a store is named for what it is, not as one that does not answer yet. A
// shared store that does not answer is not fatal: the gateway answers 503
// until it does, and /readyz says so.
func (c *Config) openStore(ctx context.Context, log *slog.Logger) (idempotency.Store, string, error) {
	store, desc, err := c.openStoreAnyLayout(ctx, log)
	if err != nil {
		return store, desc, err
	}
	if err := c.refuseBehindLayout(ctx, store, desc); err != nil {
		return store, desc, err
	}
	if choice, _ := c.storeChoice(); choice.kind != storeKindEmbedded { // openStoreAnyLayout checked it
		pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := store.Ping(pingCtx); err != nil {
			name := "redis"
			if choice.kind == storeKindPostgres {
				name = "postgres"
			}
			log.Warn(name+" does not answer yet; calls get 503 until it does", "store", desc, "error", err)
		}
	}
	return store, desc, nil
}

// openStoreAnyLayout opens the store without judging its layout version.
func (c *Config) openStoreAnyLayout(ctx context.Context, log *slog.Logger) (idempotency.Store, string, error) {
	choice, err := c.storeChoice()
	if err != nil {
		return nil, "", err
	}
	switch choice.kind {
	case storeKindPostgres:
		return c.openPostgres(ctx)
	case storeKindEmbedded:
		s, err := boltstore.Open(c.path(c.Store.Path), boltstore.Options{NoMigrate: !c.Store.migrates(), ReceiptOutbox: c.receiptsOn()})
		if err != nil {
			return nil, "", fmt.Errorf("store.path: %w", err)
		}
		return s, choice.desc, nil
	}
	// go-redis logs (dial failures, pool events) as JSON lines like ours,
	// not as plain text on stderr. Its logger is process-wide, which is
	// fine: this is the process's main.
	redis.SetLogger(redisLogger{log: log})
	client := c.redisClient()
	s := redisstore.New(client, c.redisOptions())
	return clientOwningStore{Store: s, client: client}, choice.desc, nil
}

// redisClient is the client of a Redis store section that storeChoice
// accepted (single node or cluster). Its commands end at their context's
// deadline (ContextTimeoutEnabled): without it go-redis waits out its own
// socket timeouts (3 s a read, each retry again), so a store that hangs
// rather than refuses (a frozen process, a network that drops packets)
// kept a completion's last attempt, and the client's answer, seconds past
// the max(5 s, lock_ttl) the gateway gives it.
func (c *Config) redisClient() redis.UniversalClient {
	if len(c.Store.ClusterAddrs) > 0 {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Store.ClusterAddrs, ContextTimeoutEnabled: true})
	}
	opts, _ := redis.ParseURL(c.Store.RedisURL) // storeChoice parsed it
	opts.ContextTimeoutEnabled = true
	return redis.NewClient(opts)
}

// clientOwningStore is the Redis store of the program, which also owns (and
// closes) the client it opened.
type clientOwningStore struct {
	*redisstore.Store
	client redis.UniversalClient
}

// Close closes the Redis client.
func (s clientOwningStore) Close() error { return s.client.Close() }

// redisLogger hands go-redis's log lines to slog.
type redisLogger struct{ log *slog.Logger }

// Printf logs one go-redis message as a warning.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// redisOptions converts the store section for the Redis store.
func (c *Config) redisOptions() redisstore.Options {
	return redisstore.Options{
		Prefix:       c.Store.KeyPrefix,
		WaitReplicas: c.Store.WaitReplicas,
		NoMigrate:    !c.Store.migrates(),
		// With receipts on, completions mark their receipt pending.
		ReceiptOutbox: c.receiptsOn(),
	}
}
