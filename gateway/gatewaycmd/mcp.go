package gatewaycmd

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/buildinfo"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
	"github.com/toolgateway/toolgateway/wire"
)

// MCPServerEntry is one entry of mcp_servers: an MCP server whose tools the
// gateway lists and serves (package tools/mcptool).
type MCPServerEntry struct {
	Name     string            `yaml:"name"`
	URL      string            `yaml:"url"`
	Command  []string          `yaml:"command"`
	Headers  map[string]string `yaml:"headers"`
	Prefix   string            `yaml:"prefix"`
	Tools    []string          `yaml:"tools"`
	ReadOnly []string          `yaml:"read_only"`
	// PolicyConfig is the timeout, replay_ttl and lease_expiry of every
	// tool of the server.
	PolicyConfig   `yaml:",inline"`
	RecordIsError  *bool    `yaml:"record_is_error"`
	RelistInterval Duration `yaml:"relist_interval"`
	Sessions       int      `yaml:"sessions"`
	// MaxResponseBytes caps one message from the server (default 4 MiB).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// Reconcile asks about the uncertain outcomes of the server's tools
	// (reconcile.go).
	Reconcile *ReconcileConfig `yaml:"reconcile"`
	// Pin is how the server's tools are pinned: first_use (the only
	// value, and the default) records each definition the first time it
	// is listed (docs/tools.md, "Pins").
	Pin string `yaml:"pin"`
	// Pins fixes some tools' pins: upstream tool name → "sha256:<hex>".
	Pins map[string]string `yaml:"pins"`
	// ToolSettings are single tools' own settings: upstream tool name →
	// its decide rules, effect_key and policy (docs/mcp.md, "One tool's
	// settings").
	ToolSettings map[string]MCPToolSettings `yaml:"tool_settings"`
}

// MCPToolSettings are one MCP upstream tool's own settings, what a
// tools[] entry sets for an HTTP tool or a plugin; a field left out takes
// the server entry's.
type MCPToolSettings struct {
	// PolicyConfig is the tool's timeout, replay_ttl and lease_expiry.
	PolicyConfig `yaml:",inline"`
	// Decide are the tool's decision rules, in order (approvals.go).
	Decide []decide.Rule `yaml:"decide"`
	// EffectKey names the call's business action (ToolEntry.EffectKey).
	EffectKey string `yaml:"effect_key"`
}

// mcpToolSettings calls each for every tool_settings entry, in config
// order and by tool name, with its server entry, the tool's name there
// and the entry's field path.
func (c *Config) mcpToolSettings(each func(e MCPServerEntry, tool, field string, s MCPToolSettings) error) error {
	for i, e := range c.MCPServers {
		for _, tool := range slices.Sorted(maps.Keys(e.ToolSettings)) {
			if err := each(e, tool, fmt.Sprintf("mcp_servers[%d].tool_settings.%s", i, tool), e.ToolSettings[tool]); err != nil {
				return err
			}
		}
	}
	return nil
}

// addMCPToolPolicies checks tool_settings and adds each tool's policy to
// policies, by its gateway name (the prefix and its name on the server).
func (c *Config) addMCPToolPolicies(policies map[string]tools.Policy) error {
	return c.mcpToolSettings(func(e MCPServerEntry, tool, field string, s MCPToolSettings) error {
		name := e.Prefix + tool
		switch _, named := policies[name]; {
		case named:
			return fmt.Errorf("%s: a tools[] entry is named %s too; configure the tool in one place", field, name)
		case len(e.Tools) > 0 && !slices.Contains(e.Tools, tool):
			return fmt.Errorf("%s: the entry's tools list does not serve %q; add it there or remove these settings", field, tool)
		case s.EffectKey != "" && slices.Contains(e.ReadOnly, tool):
			return fmt.Errorf("%s.effect_key: a read_only tool stores nothing, so it cannot hold an effect key; remove one of them", field)
		}
		if err := s.LeaseExpiry.Validate(); err != nil {
			return fmt.Errorf("%s.lease_expiry: %w", field, err)
		}
		if s.EffectKey != "" {
			if _, err := callpath.CompileEffectKey(s.EffectKey); err != nil {
				return fmt.Errorf("%s.effect_key: %w", field, err)
			}
		}
		p := s.Policy()
		p.EffectKey = s.EffectKey
		policies[name] = p
		return nil
	})
}

// mcpStartWait bounds how long start-up waits for the MCP servers' first
// listing before it serves anyway (the servers not listed by then answer
// upstream_unavailable and are retried with backoff).
const mcpStartWait = 10 * time.Second

// buildMCP checks mcp_servers and registers their tools' stand-ins in
// registry; nil when there are none. Errors name the entry and the field.
func (c *Config) buildMCP(registry *tools.Registry, log *slog.Logger, getenv func(string) string) (*mcptool.Manager, error) {
	if len(c.MCPServers) == 0 {
		return nil, nil
	}
	servers := make([]mcptool.ServerConfig, len(c.MCPServers))
	for i, e := range c.MCPServers {
		if e.Pin != "" && e.Pin != pins.ModeFirstUse {
			return nil, fmt.Errorf("mcp_servers[%d].pin: %q: want %s (the default); fix a tool's pin with pins: {<tool>: \"sha256:<hex>\"}", i, e.Pin, pins.ModeFirstUse)
		}
		command := e.Command
		if len(command) > 0 && strings.ContainsRune(command[0], '/') {
			command = append([]string{c.path(command[0])}, command[1:]...) // relative to the config file
		}
		servers[i] = mcptool.ServerConfig{
			Name:           e.Name,
			URL:            e.URL,
			Headers:        e.Headers,
			Command:        command,
			Prefix:         e.Prefix,
			Tools:          e.Tools,
			ReadOnly:       e.ReadOnly,
			Policy:         e.Policy(),
			RecordIsError:  e.RecordIsError == nil || *e.RecordIsError,
			RelistInterval: time.Duration(e.RelistInterval),
			Sessions:       e.Sessions,

			MaxResponseBytes: e.MaxResponseBytes,
			Pins:             e.Pins,
		}
	}
	return mcptool.NewManager(registry, servers, mcptool.Options{Logger: log, Getenv: getenv, Version: buildinfo.Version()})
}

// startMCP starts the MCP servers and waits (bounded) for their first
// listing; tools a server offers that break the name rule or clash are a
// config error.
func startMCP(ctx context.Context, m *mcptool.Manager, log *slog.Logger) error {
	if m == nil {
		return nil
	}
	startCtx, cancel := context.WithTimeout(ctx, mcpStartWait)
	defer cancel()
	if err := m.Start(startCtx); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if waiting := m.NotReady(); len(waiting) > 0 {
		log.Warn("MCP servers not listed yet; their tools answer 503 upstream_unavailable until they are", "mcp_servers", waiting)
	}
	return nil
}

// readyzNamingMCPServers answers GET /readyz with 503 upstream_unavailable,
// naming the MCP servers whose tools are not listed yet, and leaves every
// other request (and /readyz once all are listed) to next.
func readyzNamingMCPServers(next http.Handler, m *mcptool.Manager) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		waiting := m.NotReady()
		if len(waiting) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		p := callpath.NewProblem(wire.CodeUpstreamUnavailable, "MCP servers not listed yet: "+strings.Join(waiting, ", ")).WithRetryAfter(1)
		p.MCPServers = waiting
		callpath.WriteProblem(w, p)
	})
}

// usePins makes the MCP servers pin their tools in store (every store of
// this module keeps pins) and leaves a receipt of each pin stored in
// receiptStore's tools chain (nil: receipts off). It also hands the
// gateway the pins for the admin API.
func usePins(m *mcptool.Manager, store idempotency.Store, receiptStore receipts.Store, opts *callpath.Options, log *slog.Logger) {
	if m == nil {
		return
	}
	pinStore, ok := store.(pins.Store)
	if !ok {
		log.Warn("the idempotency store keeps no tool pins: MCP tools are served unpinned")
		return
	}
	m.UsePins(pinStore, func(p pins.Pin, accepted bool) {
		if receiptStore == nil {
			return
		}
		event := receipts.EventToolPinned
		if accepted {
			event = receipts.EventToolAccepted
		}
		ctx, cancel := context.WithTimeout(context.Background(), pinReceiptTimeout)
		defer cancel()
		if _, err := receiptStore.Append(ctx, receipts.ToolsChain, receipts.Receipt{Event: event, Tool: p.Tool, Definition: p.SHA256, By: p.By}); err != nil {
			log.Warn("receipts: could not write a tool pin's receipt", "event", string(event), "tool", p.Tool, "error", err)
		}
	})
	opts.Pins = m
}

// pinReceiptTimeout bounds the append of one pin receipt (rare: a tool's
// first listing or an acceptance).
const pinReceiptTimeout = 5 * time.Second
