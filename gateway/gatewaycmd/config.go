package gatewaycmd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/tools"
)

// Config is the gateway's configuration file (YAML; JSON is YAML too).
// Every field is optional; Defaults fills what a file leaves out.
type Config struct {
	Listen string `yaml:"listen"`
	// AdminListen, when set, is a second listener for /healthz, /readyz,
	// /metrics and /admin, which the listen address then does not serve.
	AdminListen  string        `yaml:"admin_listen"`
	DrainTimeout Duration      `yaml:"drain_timeout"`
	LogLevel     string        `yaml:"log_level"`
	Server       ServerConfig  `yaml:"server"`
	TLS          TLSConfig     `yaml:"tls"`
	Store        StoreConfig   `yaml:"store"`
	Idempotency  IdemConfig    `yaml:"idempotency"`
	Admin        AdminConfig   `yaml:"admin"`
	Auth         *AuthConfig   `yaml:"auth"`
	Tracing      TracingConfig `yaml:"tracing"`
	MCP          MCPConfig     `yaml:"mcp"`
	Tools        []ToolEntry   `yaml:"tools"`
	// MCPServers are MCP servers whose tools the gateway serves (mcp.go).
	MCPServers []MCPServerEntry `yaml:"mcp_servers"`
	// Mode is enforce (default) or observe: decisions taken and counted,
	// every call run as allowed (approvals.go).
	Mode string `yaml:"mode"`
	// Approvals bounds approvals and pushes new ones (approvals.go).
	Approvals ApprovalsConfig `yaml:"approvals"`
	// Receipts keeps the receipts of consequential events (receipts.go).
	Receipts ReceiptsConfig `yaml:"receipts"`
	// Console configures the operator console's sign-in (console.go).
	Console ConsoleConfig `yaml:"console"`
	// Budgets are shared limits the tools' charges count against
	// (docs/budgets.md).
	Budgets []budgets.Budget `yaml:"budgets"`

	// dir is the directory relative paths are resolved against.
	dir string
	// redisURLFrom names where Store.RedisURL came from when it was not the
	// file (the REDIS_URL variable), so an error names what to fix.
	redisURLFrom string
	// postgresURLFrom is the same for Store.PostgresURL (DATABASE_URL).
	postgresURLFrom string
	// notifySecret is the value of approvals.notify.secret_env.
	notifySecret string
	// consoleSecret is the value of console.oidc.client_secret_env.
	consoleSecret string
	// secretsOptional: the config is read by `gateway check` or `gateway
	// verify`, which never serve the console, so the console's secrets
	// (console.oidc.client_secret_env, console.session_key_file) may be
	// absent; what is missing is a warning (missingSecrets), not an error.
	secretsOptional bool
	missingSecrets  []string
	// receiptsSigningPEM is TOOLGATEWAY_RECEIPTS_SIGNING_KEY: the
	// checkpoints' signing key itself, over receipts.signing_key's file.
	receiptsSigningPEM string
	// mcpLive holds the MCP endpoint's reloadable options
	// (mcp.identityless and the dedupe windows): serverOptions mounts the
	// endpoint with it, and the reloader of the config the gateway
	// started with replaces them.
	mcpLive *mcpserver.Reloadable
	// consoleSessionKeyEnv is the value of TOOLGATEWAY_CONSOLE_SESSION_KEY.
	consoleSessionKeyEnv string
}

// ServerConfig bounds what one connection may cost the gateway (slow or
// oversized clients); fields left zero take the defaults below. There is
// deliberately no write timeout: a response is written when the tool
// finishes (up to its timeout) or a Prefer: wait ends (up to 60 s).
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading the request line and headers (default 10s).
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading the whole request, body included (default 60s).
	ReadTimeout Duration `yaml:"read_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long (default 120s).
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes caps the request line and headers (default 64 KiB);
	// larger requests get 431.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
}

// Defaults of the HTTP server limits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// StoreConfig selects the idempotency store.
type StoreConfig struct {
	// RedisURL selects Redis (redis://, rediss://); absent: the embedded store.
	RedisURL string `yaml:"redis_url"`
	// ClusterAddrs selects Redis Cluster (host:port of some masters).
	ClusterAddrs []string `yaml:"cluster_addrs"`
	// KeyPrefix prefixes every Redis key (default "gw:").
	KeyPrefix string `yaml:"key_prefix"`
	// WaitReplicas > 0: each claim and completion waits (Redis WAIT) for
	// that many replicas to acknowledge it (docs/reliability.md).
	WaitReplicas int `yaml:"wait_replicas"`
	// Path is the embedded store's file.
	Path string `yaml:"path"`
	// PostgresURL selects the PostgreSQL store (postgres:// URL); it
	// excludes RedisURL and ClusterAddrs. See postgres.go.
	PostgresURL string `yaml:"postgres_url"`
	// PostgresSchema is the PostgreSQL schema of the store (default
	// "toolgateway").
	PostgresSchema string `yaml:"postgres_schema"`
	// Migrate (default true) lets start-up create or upgrade the store's
	// schema or layout; false: start-up changes nothing and exits naming
	// `gateway migrate` when the store is behind (migratecmd.go).
	Migrate *bool `yaml:"migrate"`
}

// IdemConfig holds the idempotency settings.
type IdemConfig struct {
	KeyMode      string   `yaml:"key_mode"`
	LockTTL      Duration `yaml:"lock_ttl"`
	ReplayTTL    Duration `yaml:"replay_ttl"`
	MaxBodyBytes int64    `yaml:"max_body_bytes"`
	StepGuard    *bool    `yaml:"step_guard"`
	// KeepArguments keeps a completed call's canonical arguments with its
	// record for the record's replay TTL, so `gateway policy replay` can
	// evaluate completed calls (default false: completion drops them).
	KeepArguments bool `yaml:"keep_arguments"`
}

// MCPConfig configures the MCP endpoint, POST /mcp.
type MCPConfig struct {
	// Enabled serves POST /mcp (default true).
	Enabled *bool `yaml:"enabled"`
	// InProgressWait is how long a tools/call that meets a running call of
	// the same key waits for its outcome (default 10s, at most 60s; 0s
	// answers request_in_progress at once).
	InProgressWait *Duration `yaml:"in_progress_wait"`
	// AllowUnkeyed runs a mutating tool called without session and step,
	// unprotected, instead of refusing the call (default false).
	AllowUnkeyed bool `yaml:"allow_unkeyed"`
	// HostCallIDs are the _meta members whose value, a host's own id of
	// the call, keys a tools/call that carries none of the gateway's
	// identity (default claudecode/toolUseId, agent-tool-call-request-id;
	// [] turns host call ids off).
	HostCallIDs *[]string `yaml:"host_call_ids"`
	// Identityless is what a mutating tools/call with no identity and no
	// host call id gets: "fingerprint" (keyed on the signed-in person,
	// the tool, the arguments and the dedupe window) or "refuse"
	// (-32602). Default: fingerprint when auth.oidc is configured (a
	// person can be named), refuse otherwise (identityless.go).
	Identityless mcpserver.IdentitylessMode `yaml:"identityless"`
	// DedupeWindow is the window of fingerprint keys (default 24h).
	DedupeWindow Duration `yaml:"dedupe_window"`
	// FastPath answers a plain tools/call without go-sdk's decoding, as
	// go-sdk would (default true); false serves every message through
	// go-sdk.
	FastPath *bool `yaml:"fast_path"`
}

// mcpOptions converts the mcp section.
func (c *Config) mcpOptions() (mcpserver.Options, error) {
	o := mcpserver.Options{
		Disabled:     c.MCP.Enabled != nil && !*c.MCP.Enabled,
		AllowUnkeyed: c.MCP.AllowUnkeyed,
		FastPathOff:  c.MCP.FastPath != nil && !*c.MCP.FastPath,
	}
	if ids := c.MCP.HostCallIDs; ids != nil {
		if err := mcpserver.ValidateHostCallIDs(*ids); err != nil {
			return o, err
		}
		o.HostCallIDs = append([]string{}, *ids...) // non-nil: [] means none
	}
	if err := c.identitylessOptions(&o); err != nil {
		return o, err
	}
	if n := c.Approvals.Notify; n != nil {
		o.ConsoleBaseURL = n.ConsoleBaseURL
	}
	if w := c.MCP.InProgressWait; w != nil {
		wait := time.Duration(*w)
		if wait > mcpserver.MaxInProgressWait {
			return o, fmt.Errorf("mcp.in_progress_wait: %s: at most %s", wait, mcpserver.MaxInProgressWait)
		}
		o.InProgressWait = wait
		if wait == 0 {
			o.InProgressWait = -1 // explicitly no wait
		}
	}
	return o, nil
}

// AdminConfig enables the admin API.
type AdminConfig struct {
	TokenSHA256 string `yaml:"token_sha256"`
	// PreviousTokenSHA256 is the admin token being rotated out, accepted
	// beside TokenSHA256 until it is removed (a reload).
	PreviousTokenSHA256 string `yaml:"previous_token_sha256"`
}

// AuthConfig lists the tenants allowed in: static tenants with their
// token hashes, the operator's identity provider whose access tokens name
// their tenant, or both.
type AuthConfig struct {
	Tenants []TenantEntry `yaml:"tenants"`
	// OIDC makes the gateway a resource server of this issuer's access
	// tokens (docs/security.md, "Identity provider").
	OIDC *OIDCEntry `yaml:"oidc"`
}

// TenantEntry is one tenant, the SHA-256 of its bearer token and its
// optional limits.
type TenantEntry struct {
	Name        string `yaml:"name"`
	TokenSHA256 string `yaml:"token_sha256"`
	// PreviousTokenSHA256 is the tenant's token being rotated out,
	// accepted beside TokenSHA256 until it is removed (a reload).
	PreviousTokenSHA256 string `yaml:"previous_token_sha256"`
	// LimitsConfig is the tenant's rate and in-flight limits.
	LimitsConfig `yaml:",inline"`
}

// LimitsConfig is a tenant's limits as the file gives them.
type LimitsConfig struct {
	// Rate is "N/s", "N/m" or "N/h"; absent: no rate limit.
	Rate string `yaml:"rate"`
	// Burst is how many calls may come at once (default N of the rate).
	Burst int `yaml:"burst"`
	// MaxInFlight caps the tenant's tools running at once (absent: no cap).
	MaxInFlight int `yaml:"max_in_flight"`
}

// OIDCEntry is `auth.oidc`: the provider, and the limits of each of its
// tenants that auth.tenants does not list (a listed one has its own).
type OIDCEntry struct {
	oidcauth.Config `yaml:",inline"`
	LimitsConfig    `yaml:",inline"`
}

// ToolEntry configures one tool: an HTTP upstream (with http), or settings
// for an in-process plugin of the same name.
type ToolEntry struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Schema      string         `yaml:"schema"`
	InputSchema map[string]any `yaml:"input_schema"`
	// PolicyConfig is the tool's timeout, replay_ttl and lease_expiry.
	PolicyConfig `yaml:",inline"`
	ReadOnly     *bool           `yaml:"read_only"`
	HTTP         *HTTPToolConfig `yaml:"http"`
	// Decide are the tool's decision rules, in order (approvals.go).
	Decide []decide.Rule `yaml:"decide"`
	// Charges are the budgets each call of the tool charges, all or none
	// (docs/budgets.md).
	Charges []budgets.Charge `yaml:"charges"`
	// Reconcile asks the tool's owner about uncertain outcomes (reconcile.go).
	Reconcile *ReconcileConfig `yaml:"reconcile"`
	// EffectKey names the call's business action, e.g. "refund:{/txn_id}"
	// (RFC 6901 pointers into the arguments): one execution per value
	// whatever the idempotency key (docs/idempotency.md, "Effect keys").
	EffectKey string `yaml:"effect_key"`
	// Identityless and DedupeWindow override mcp.identityless and
	// mcp.dedupe_window for this tool (identityless.go).
	Identityless mcpserver.IdentitylessMode `yaml:"identityless"`
	DedupeWindow Duration                   `yaml:"dedupe_window"`
	// NotExecutedStatuses are the statuses among 408, 425 and 429 that,
	// answered by the tool's upstream, count as evidence it did not act
	// (tools.Policy.NotExecutedStatuses; docs/tools.md). Left out: all
	// three for lease_expiry: rerun, none for unknown.
	NotExecutedStatuses []int `yaml:"not_executed_statuses"`
}

// PolicyConfig is the execution policy as a tools: or an mcp_servers:
// entry writes it (both embed it), parsed once into a [tools.Policy]. A
// field left out takes the gateway's default ([tools.Policy.Resolve]).
type PolicyConfig struct {
	Timeout     Duration          `yaml:"timeout"`
	ReplayTTL   Duration          `yaml:"replay_ttl"`
	LeaseExpiry tools.LeaseExpiry `yaml:"lease_expiry"`
}

// Policy converts p.
func (p PolicyConfig) Policy() tools.Policy {
	return tools.Policy{Timeout: time.Duration(p.Timeout), ReplayTTL: time.Duration(p.ReplayTTL), LeaseExpiry: p.LeaseExpiry}
}

// HTTPToolConfig declares an HTTP upstream tool.
type HTTPToolConfig struct {
	URL              string            `yaml:"url"`
	Headers          map[string]string `yaml:"headers"`
	MaxResponseBytes int64             `yaml:"max_response_bytes"`
	// TLS pins the upstream's certificate (docs/tools.md, "Certificate
	// pins").
	TLS *HTTPToolTLS `yaml:"tls"`
}

// HTTPToolTLS is tools[].http.tls.
type HTTPToolTLS struct {
	// PinSHA256 is the SHA-256 of the upstream certificate's
	// SubjectPublicKeyInfo (hex or base64), or a list of them (the current
	// key and the next, for a rotation).
	PinSHA256 stringOrList `yaml:"pin_sha256"`
}

// stringOrList is a YAML string or list of strings.
type stringOrList []string

// UnmarshalYAML reads one string or a list.
func (l *stringOrList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = []string{n.Value}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return fmt.Errorf("line %d: want a string or a list of strings", n.Line)
	}
	*l = list
	return nil
}

// Duration is a time.Duration written as "30s", "24h".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration such as \"30s\"", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: bad duration %q (want e.g. \"30s\", \"24h\")", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// LoadConfig reads a config file. Unknown fields are errors, so a typo
// never silently falls back to a default.
func LoadConfig(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg.dir = abs
	return cfg, nil
}

// ParseConfig parses YAML (or JSON) config text.
func ParseConfig(raw []byte) (*Config, error) {
	// yaml.v3 truncates 0.5 into an int field silently: read the text as a
	// tree first to refuse such a number, naming the field.
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, oneLine(err)
	}
	if err := refuseFractions(&doc, reflect.TypeFor[Config](), ""); err != nil {
		return nil, err
	}
	cfg := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, oneLine(err)
	}
	return cfg, nil
}

// oneLine turns yaml's multi-line type errors into one line that names the
// field, e.g. "line 2: unknown field stroe".
func oneLine(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if field, rest, ok := strings.Cut(m, "field "); ok && strings.Contains(rest, " not found in type ") {
			name, _, _ := strings.Cut(rest, " not found in type ")
			m = field + "unknown field " + name
		}
		msgs[i] = m
	}
	return errors.New(strings.Join(msgs, "; "))
}

// path resolves p against the config file's directory.
func (c *Config) path(p string) string {
	if p == "" || filepath.IsAbs(p) || c.dir == "" {
		return p
	}
	return filepath.Join(c.dir, p)
}

// The environment overrides.
const (
	envAddr        = "GATEWAY_ADDR"
	envRedisURL    = "REDIS_URL"
	envDatabaseURL = "DATABASE_URL"
)

// applyEnv applies the environment overrides of the contract.
func (c *Config) applyEnv(getenv func(string) string) {
	if v := getenv(envAddr); v != "" {
		c.Listen = v
	}
	if v := getenv(envRedisURL); v != "" {
		c.Store.RedisURL = v
		c.Store.ClusterAddrs = nil
		c.redisURLFrom = envRedisURL
	}
	if v := getenv(envDatabaseURL); v != "" {
		c.Store.PostgresURL = v
		c.postgresURLFrom = envDatabaseURL
	}
	if n := c.Approvals.Notify; n != nil && n.SecretEnv != "" {
		c.notifySecret = getenv(n.SecretEnv)
	}
	if o := c.Console.OIDC; o != nil && o.ClientSecretEnv != "" {
		c.consoleSecret = getenv(o.ClientSecretEnv)
	}
	c.receiptsSigningPEM = getenv(envReceiptsSigningKey)
	c.consoleSessionKeyEnv = getenv(gateway.ConsoleSessionKeyEnv)
}

// withDefaults fills the fields a file left out.
func (c *Config) withDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = Duration(30 * time.Second)
	}
	if c.Server.ReadHeaderTimeout == 0 {
		c.Server.ReadHeaderTimeout = Duration(DefaultReadHeaderTimeout)
	}
	if c.Server.ReadTimeout == 0 {
		c.Server.ReadTimeout = Duration(DefaultReadTimeout)
	}
	if c.Server.IdleTimeout == 0 {
		c.Server.IdleTimeout = Duration(DefaultIdleTimeout)
	}
	if c.Server.MaxHeaderBytes <= 0 {
		c.Server.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.Store.Path == "" {
		c.Store.Path = "data/gateway.db"
	}
	if c.Idempotency.KeyMode == "" {
		c.Idempotency.KeyMode = string(callpath.KeyModeDerived)
	}
}

// decodeHash parses a hex SHA-256.
func decodeHash(field, s string) ([sha256.Size]byte, error) {
	var out [sha256.Size]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return out, fmt.Errorf("%s: want 64 hex characters (SHA-256 of the token), got %d characters", field, len(s))
	}
	copy(out[:], b)
	return out, nil
}

// toolSchema returns the tool's schema from the file or the inline object.
func (c *Config) toolSchema(i int, t ToolEntry) (json.RawMessage, error) {
	field := fmt.Sprintf("tools[%d] (%s)", i, t.Name)
	switch {
	case t.Schema != "" && t.InputSchema != nil:
		return nil, fmt.Errorf("%s: give schema or input_schema, not both", field)
	case t.Schema != "":
		raw, err := os.ReadFile(c.path(t.Schema))
		if err != nil {
			return nil, fmt.Errorf("%s.schema: %w", field, err)
		}
		return raw, nil
	case t.InputSchema != nil:
		raw, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("%s.input_schema: %w", field, err)
		}
		return raw, nil
	}
	return nil, nil
}
