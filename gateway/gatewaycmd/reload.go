package gatewaycmd

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/tools"
)

// Reloading the configuration (SIGHUP, docs/operations.md): the same file
// and the same environment are read and validated as at start, then either
// everything reloadable is applied at once or nothing is.
//
// Reloadable: auth.tenants (names, tokens, rate, burst, max_in_flight),
// admin.token_sha256 (a rotation), the console's session keys (the
// console.session_key_file read again), tools (added, removed, changed; their
// decide rules, identityless and dedupe_window included), mode,
// approvals.timeout and use_within, idempotency.replay_ttl,
// mcp.identityless and mcp.dedupe_window, log_level, drain_timeout, and the TLS
// certificate (the same files, read again). Everything else is
// fixed for the process's life: a change to it refuses the whole reload
// (fixedChanges lists which fields).

// loadConfig reads the config at path (none: the defaults), applies the
// environment overrides and the defaults, and checks what start-up checks
// before building anything: the log level and the TLS pair.
func loadConfig(path string, getenv func(string) string) (*Config, slog.Level, error) {
	cfg := &Config{}
	if path != "" {
		var err error
		if cfg, err = LoadConfig(path); err != nil {
			return nil, 0, err
		}
	}
	cfg.applyEnv(getenv)
	cfg.withDefaults()
	level, err := cfg.logLevel()
	if err != nil {
		return nil, 0, err
	}
	if err := cfg.TLS.check(cfg.path); err != nil {
		return nil, 0, err
	}
	return cfg, level, nil
}

// reloader applies a new config to the running gateway. It is used by the
// serve loop only, one reload at a time, so its fields need no lock.
type reloader struct {
	path     string
	getenv   func(string) string
	log      *slog.Logger
	level    *slog.LevelVar
	plugins  []tools.Tool
	gw       *gateway.Server
	registry *tools.Registry
	// cert is the served TLS pair (nil without TLS); a reload re-reads it.
	cert *servedCert
	// mcp holds the MCP endpoint's reloadable options.
	mcp *mcpserver.Reloadable

	// cfg, applied and consoleKeys are what serves now.
	cfg         *Config
	applied     callpath.Settings
	consoleKeys [][]byte
}

// settingsOf is the part of opts that gateway.Server.Reload takes.
func settingsOf(opts callpath.Options) callpath.Settings {
	return callpath.Settings{Tenants: opts.Tenants, AdminTokenSHA256: opts.AdminTokenSHA256,
		AdminPreviousTokenSHA256: opts.AdminPreviousTokenSHA256, Policies: opts.Policies, ReplayTTL: opts.ReplayTTL, OIDC: opts.OIDC, ProviderLimits: opts.ProviderLimits,
		Decisions: opts.Decisions, Mode: opts.Mode, Approvals: opts.Approvals, Budgets: opts.Budgets,
		KeepArguments: opts.KeepArguments}
}

// reload re-reads the config and applies it, or logs one line saying why
// nothing was applied.
func (r *reloader) reload() {
	refuse := func(msg string, args ...any) {
		r.log.Error("config reload refused; nothing applied, the running config keeps serving: "+msg, args...)
	}
	if r.path == "" {
		r.log.Warn("config reload: the gateway runs without -config; nothing to reload")
		return
	}
	next, level, err := loadConfig(r.path, r.getenv)
	if err != nil {
		refuse("invalid config", "error", err.Error())
		return
	}
	if fixed := fixedChanges(r.cfg, next); len(fixed) > 0 {
		refuse("fields that cannot change at run time differ (restart the gateway to change them)", "fields", fixed)
		return
	}
	opts, err := next.serverOptions(r.plugins)
	if err != nil {
		refuse("invalid config", "error", err.Error())
		return
	}
	// Checked by serverOptions already; the running endpoint takes them
	// with the tools (below).
	mcpNext, err := next.mcpOptions()
	if err != nil {
		refuse("invalid config", "error", err.Error())
		return
	}
	consoleOpts, err := next.consoleOptions()
	if err != nil {
		refuse("invalid config", "error", err.Error())
		return
	}
	if opts.OIDC = keepRunningOIDC(r.applied.OIDC, opts.OIDC); opts.OIDC != r.applied.OIDC {
		startOIDC(context.Background(), opts.OIDC)
	}
	// Auth and the admin API turned on or off: the gateway's one rule
	// (gateway.Server.Reload refuses the same), named before anything applies.
	if fixed := callpath.FixedChanges(r.applied, settingsOf(opts)); len(fixed) > 0 {
		refuse("fields that cannot change at run time differ (restart the gateway to change them)", "fields", fixed)
		return
	}
	// The TLS files are read again (same paths: a change of them is
	// refused above), so a renewed certificate is served after a SIGHUP.
	pair, err := next.TLS.load(next.path)
	if err != nil {
		refuse("invalid config", "error", err.Error())
		return
	}
	changed := r.changes(next, opts, consoleOpts.SessionKeys)

	// Three atomic swaps, so no call meets a tool without its configured
	// policy: first the running settings plus the policies of names that
	// had none (the new tools', invisible until the tools are in); then the
	// tools; then the new settings (tenants, tokens, limits, exact
	// policies). A refusal of the tools restores the running settings.
	final := settingsOf(opts)
	if err := r.gw.Reload(withNewPolicies(r.applied, final)); err != nil {
		refuse("invalid config", "error", err.Error())
		return
	}
	// The identityless handling goes in with the tools, so a new tool's
	// first call is keyed as configured.
	mcpCur, _ := r.cfg.mcpOptions() // serving now, so valid
	r.mcp.Reload(mcpNext)
	if err := r.registry.ReplaceAdded(opts.Tools); err != nil {
		r.mcp.Reload(mcpCur)
		if rerr := r.gw.Reload(r.applied); rerr != nil {
			r.log.Error("config reload: restoring the running settings failed", "error", rerr.Error())
		}
		refuse("invalid config", "error", "tools: "+err.Error())
		return
	}
	if err := r.gw.Reload(final); err != nil {
		// Not reached in practice: serverOptions ran the same checks on
		// the tenants, and callpath.FixedChanges kept auth and admin as they were.
		r.log.Error("config reload: the new tenants and policies were refused; the new tools serve with the old ones", "error", err.Error())
		return
	}
	if r.cert != nil && pair != nil && r.cert.swap(pair) {
		changed = append(changed, "tls certificate (files re-read)")
	}
	if err := r.gw.ReloadConsoleKeys(consoleOpts.SessionKeys); err != nil {
		// Not reached in practice: consoleOptions parsed the same keys.
		r.log.Error("config reload: the new console session keys were refused; the old ones sign", "error", err.Error())
	}
	r.cfg, r.applied, r.consoleKeys = next, final, consoleOpts.SessionKeys
	if len(changed) == 0 {
		changed = []string{"nothing"}
	}
	// Under the more verbose of the old and the new log_level, so the line
	// shows when either asks for info.
	r.level.Set(min(r.level.Level(), level))
	r.log.Info("config reloaded", "changed", changed)
	r.level.Set(level)
}

// fixedChanges names every field that differs between cur and next and
// cannot change while the gateway runs: the listener and its limits, TLS,
// the store, the idempotency settings the records depend on, tracing, the
// MCP endpoint and the MCP servers. Whether auth and the admin API are on
// is the gateway's rule (callpath.FixedChanges), checked once the new
// settings are built.
func fixedChanges(cur, next *Config) []string {
	var out []string
	if cur.Listen != next.Listen {
		out = append(out, "listen")
	}
	if cur.AdminListen != next.AdminListen {
		out = append(out, "admin_listen")
	}
	out = append(out, fieldChanges("server", cur.Server, next.Server)...)
	out = append(out, fieldChanges("tls", cur.TLS, next.TLS)...)
	out = append(out, fieldChanges("store", cur.Store, next.Store)...)
	idemCur, idemNext := cur.Idempotency, next.Idempotency
	idemCur.ReplayTTL, idemNext.ReplayTTL = 0, 0                 // reloadable
	idemCur.KeepArguments, idemNext.KeepArguments = false, false // reloadable
	out = append(out, fieldChanges("idempotency", idemCur, idemNext)...)
	out = append(out, fieldChanges("tracing", cur.Tracing, next.Tracing)...)
	mcpCur, mcpNext := cur.MCP, next.MCP
	mcpCur.Identityless, mcpNext.Identityless = "", "" // reloadable
	mcpCur.DedupeWindow, mcpNext.DedupeWindow = 0, 0   // reloadable
	out = append(out, fieldChanges("mcp", mcpCur, mcpNext)...)
	if !reflect.DeepEqual(cur.MCPServers, next.MCPServers) {
		out = append(out, "mcp_servers")
	}
	if !reflect.DeepEqual(cur.Approvals.Notify, next.Approvals.Notify) || cur.notifySecret != next.notifySecret {
		out = append(out, "approvals.notify")
	}
	// The receipts' writer, signer and keys start with the gateway.
	out = append(out, fieldChanges("receipts", cur.Receipts, next.Receipts)...)
	if cur.receiptsSigningPEM != next.receiptsSigningPEM {
		out = append(out, envReceiptsSigningKey)
	}
	consoleCur, consoleNext := cur.Console, next.Console
	consoleCur.SessionKeyFile, consoleNext.SessionKeyFile = "", "" // reloadable: the keys are read again
	out = append(out, fieldChanges("console", consoleCur, consoleNext)...)
	if !reflect.DeepEqual(toolReconciles(cur), toolReconciles(next)) {
		out = append(out, "tools[].reconcile") // the worker starts with the gateway
	}
	return out
}

// fieldChanges names, as section.yaml_name, the exported fields of the
// structs a and b (of one type) that differ, an inline struct's fields as
// the struct's own.
func fieldChanges(section string, a, b any) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		f := va.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if opts == "inline" { // PolicyConfig: its fields are the entry's own
				out = append(out, fieldChanges(section, va.Field(i).Interface(), vb.Field(i).Interface())...)
				continue
			}
			out = append(out, section+"."+name)
		}
	}
	return out
}

// changes lists what the reload changes, by field and name; never a token
// or a hash, only that it changed.
func (r *reloader) changes(next *Config, opts callpath.Options, consoleKeys [][]byte) []string {
	cur := r.cfg
	var out []string
	if cur.LogLevel != next.LogLevel {
		out = append(out, "log_level")
	}
	if cur.DrainTimeout != next.DrainTimeout {
		out = append(out, "drain_timeout")
	}
	if cur.Idempotency.ReplayTTL != next.Idempotency.ReplayTTL {
		out = append(out, "idempotency.replay_ttl")
	}
	if cur.Idempotency.KeepArguments != next.Idempotency.KeepArguments {
		out = append(out, "idempotency.keep_arguments")
	}
	if cur.Mode != next.Mode {
		out = append(out, "mode")
	}
	if cur.Approvals.Timeout != next.Approvals.Timeout {
		out = append(out, "approvals.timeout")
	}
	if cur.Approvals.UseWithin != next.Approvals.UseWithin {
		out = append(out, "approvals.use_within")
	}
	if cur.MCP.Identityless != next.MCP.Identityless {
		out = append(out, "mcp.identityless")
	}
	if cur.MCP.DedupeWindow != next.MCP.DedupeWindow {
		out = append(out, "mcp.dedupe_window")
	}
	out = append(out, fieldChanges("admin", cur.Admin, next.Admin)...)
	if !reflect.DeepEqual(r.consoleKeys, consoleKeys) {
		out = append(out, "console session keys")
	}
	out = append(out, tenantChanges(tenantsOf(cur), tenantsOf(next))...)
	out = append(out, r.toolChanges(next, opts.Tools)...)
	return out
}

func tenantsOf(c *Config) []TenantEntry {
	if c.Auth == nil {
		return nil
	}
	return c.Auth.Tenants
}

// tenantChanges compares the tenants by name.
func tenantChanges(cur, next []TenantEntry) []string {
	byName := make(map[string]TenantEntry, len(cur))
	for _, t := range cur {
		byName[t.Name] = t
	}
	var out []string
	seen := make(map[string]bool, len(next))
	for _, t := range next {
		seen[t.Name] = true
		old, ok := byName[t.Name]
		if !ok {
			out = append(out, fmt.Sprintf("auth.tenants[%s] added", t.Name))
			continue
		}
		out = append(out, fieldChanges(fmt.Sprintf("auth.tenants[%s]", t.Name), old, t)...)
	}
	for _, t := range cur {
		if !seen[t.Name] {
			out = append(out, fmt.Sprintf("auth.tenants[%s] removed", t.Name))
		}
	}
	return out
}

// toolChanges compares the configured tools by name, and the effective
// specs (a schema file's content may change under the same path).
func (r *reloader) toolChanges(next *Config, fresh *tools.Registry) []string {
	cur := make(map[string]ToolEntry, len(r.cfg.Tools))
	for _, t := range r.cfg.Tools {
		cur[t.Name] = t
	}
	var out []string
	seen := make(map[string]bool, len(next.Tools))
	for _, t := range next.Tools {
		seen[t.Name] = true
		old, ok := cur[t.Name]
		if !ok {
			out = append(out, fmt.Sprintf("tools[%s] added", t.Name))
			continue
		}
		fields := fieldChanges(fmt.Sprintf("tools[%s]", t.Name), old, t)
		if before, ok := r.registry.Lookup(t.Name); ok {
			if after, ok := fresh.Lookup(t.Name); ok && string(before.Spec.InputSchema) != string(after.Spec.InputSchema) {
				if f := fmt.Sprintf("tools[%s].schema", t.Name); !slices.Contains(fields, f) {
					fields = append(fields, f)
				}
			}
		}
		out = append(out, fields...)
	}
	for _, t := range r.cfg.Tools {
		if !seen[t.Name] {
			out = append(out, fmt.Sprintf("tools[%s] removed", t.Name))
		}
	}
	return out
}

// drainTimeout is the drain_timeout of the config serving now.
func (r *reloader) drainTimeout() time.Duration { return time.Duration(r.cfg.DrainTimeout) }

// withNewPolicies is the running settings plus the policies of the names
// that had none in them (the new tools'): what serves while the tools are
// swapped, the first of reload's three swaps.
func withNewPolicies(running, final callpath.Settings) callpath.Settings {
	staged := running
	staged.Policies = maps.Clone(running.Policies)
	for name, p := range final.Policies {
		if _, ok := staged.Policies[name]; !ok {
			if staged.Policies == nil {
				staged.Policies = make(map[string]tools.Policy)
			}
			staged.Policies[name] = p
		}
	}
	return staged
}
