package gatewaycmd

import (
	"io"
	"log/slog"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/reconcile"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// startup is a config checked exactly as the gateway checks it before it
// opens anything: what `gateway check` reports on and what start-up builds
// from. Nothing in it is connected yet.
type startup struct {
	// path is the config file ("" without -config).
	path  string
	cfg   *Config
	level *slog.LevelVar
	log   *slog.Logger
	// plugins are the compiled-in tools.
	plugins []tools.Tool
	// opts are the gateway's options without store, limiter, logger and
	// tracer.
	opts callpath.Options
	// console are the console's settings (served with the admin API).
	console gateway.ConsoleOptions
	store   storeChoice
	// mcp holds the MCP servers, checked and their stand-ins registered in
	// opts.Tools, not started (nil without mcp_servers).
	mcp *mcptool.Manager
	// reconcile are the reconcile worker's targets (none: no worker).
	reconcile []reconcile.Target
}

// prepare reads the config at path (none: the defaults) with the
// environment getenv, and runs every check start-up runs before it
// connects to anything: the file, the environment overrides, the log
// level, TLS, the store choice and its URL, the tools, auth and admin,
// idempotency and MCP settings, tracing, and mcp_servers (${ENV} in
// headers included). It is the one validation: `gateway check` calls it
// and reports, start-up calls it and builds. Logs go to logOut.
// secretsOptional (check, verify: they never serve the console) lets the
// console's secrets be absent, as warnings in cfg.missingSecrets.
func prepare(path string, getenv func(string) string, logOut io.Writer, secretsOptional bool) (*startup, error) {
	cfg, startLevel, err := loadConfig(path, getenv)
	if err != nil {
		return nil, err
	}
	cfg.secretsOptional = secretsOptional
	store, err := cfg.storeChoice()
	if err != nil {
		return nil, err
	}
	if _, _, err := cfg.tracingSettings(getenv); err != nil {
		return nil, err
	}
	// A LevelVar, so a reload can change log_level.
	level := new(slog.LevelVar)
	level.Set(startLevel)
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))
	plugins := tools.Registered()
	opts, err := cfg.serverOptions(plugins)
	if err != nil {
		return nil, err
	}
	consoleOpts, err := cfg.consoleOptions()
	if err != nil {
		return nil, err
	}
	mcpServers, err := cfg.buildMCP(opts.Tools, log, getenv)
	if err != nil {
		return nil, err
	}
	targets, err := cfg.reconcileTargets(opts)
	if err != nil {
		return nil, err
	}
	return &startup{path: path, cfg: cfg, level: level, log: log, plugins: plugins, opts: opts, console: consoleOpts, store: store, mcp: mcpServers, reconcile: targets}, nil
}
