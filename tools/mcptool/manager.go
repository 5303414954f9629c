package mcptool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/toolgateway/toolgateway/tools"
)

// Options configure a Manager.
type Options struct {
	// Logger receives the upstreams' events and their stderr (tagged
	// mcp_server); nil discards them.
	Logger *slog.Logger
	// HTTPClient's Transport carries the Streamable HTTP upstreams' requests
	// (nil: a transport of the Manager's own). Its Timeout is not used: each
	// call is bounded by its tool's timeout.
	HTTPClient *http.Client
	// Getenv expands ${NAME} in headers (nil: os.Getenv).
	Getenv func(string) string
	// Version is sent as the client version in the MCP handshake.
	Version string
}

// Manager runs the configured MCP upstreams and keeps their tools in a
// tools.Registry.
type Manager struct {
	upstreams []*upstream
	log       *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewManager checks every server's config and registers its stand-ins in
// reg: until a server's tools are listed, its allow-listed names (or, without
// an allow-list, every name under its prefix) are found but unavailable
// (tools.ErrUpstreamUnavailable). It starts nothing; Start does. Errors name
// the entry (mcp_servers[i] (name).field).
func NewManager(reg *tools.Registry, servers []ServerConfig, opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	base := opts.HTTPClient
	if base == nil || base.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		base = &http.Client{Transport: t}
	}
	version := opts.Version
	if version == "" {
		version = "devel"
	}
	m := &Manager{log: opts.Logger}
	seen := make(map[string]bool, len(servers))
	for i, cfg := range servers {
		field := fmt.Sprintf("mcp_servers[%d]", i)
		if cfg.Name != "" {
			field += " (" + cfg.Name + ")"
		}
		headers, err := cfg.check(opts.Getenv)
		if err != nil {
			return nil, fmt.Errorf("%s.%w", field, err)
		}
		if seen[cfg.Name] {
			return nil, fmt.Errorf("%s.name: %q is used by another entry", field, cfg.Name)
		}
		seen[cfg.Name] = true
		u := newUpstream(cfg, headers, reg, opts.Logger, base, version)
		if err := u.installStandIns(); err != nil {
			return nil, fmt.Errorf("%s.tools: %w", field, err)
		}
		m.upstreams = append(m.upstreams, u)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// Start connects to every server (starting the stdio ones) and lists their
// tools in the background, then waits until each server is listed, or its
// first attempt to connect or list failed, or ctx ends: a server that is
// down at start does not hold the gateway up (its tools answer
// upstream_unavailable meanwhile, and it is retried with backoff). The error lists the tools that the servers listed
// by then offer but the gateway refused (a name that breaks the tool-name
// rule after the prefix, a schema that does not compile, a clash with
// another tool, each naming both sides); callers treat it as a config
// error. Later listings log such tools and leave them out.
func (m *Manager) Start(ctx context.Context) error {
	for _, u := range m.upstreams {
		u.pool.start()
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			u.run(m.ctx)
		}()
	}
	var errs []string
	for _, u := range m.upstreams {
		select {
		case <-u.settled:
		case <-ctx.Done():
		}
		select {
		case <-u.listed:
			if u.firstErr != nil {
				errs = append(errs, fmt.Sprintf("mcp_servers (%s): %v", u.cfg.Name, u.firstErr))
			}
		default:
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; ")) // one line, like every start-up error
	}
	return nil
}

// NotReady names the servers whose tools have not been listed yet, sorted;
// /readyz answers 503 naming them.
func (m *Manager) NotReady() []string {
	var out []string
	for _, u := range m.upstreams {
		if !u.ready.Load() {
			out = append(out, u.cfg.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Close stops listing and ends every session; stdio servers are stopped
// (stdin closed, then SIGTERM, then SIGKILL, a few seconds apart). Their
// tools stay in the registry: the gateway is shutting down.
func (m *Manager) Close() error {
	m.once.Do(func() {
		m.cancel()
		m.wg.Wait()
		var wg sync.WaitGroup
		for _, u := range m.upstreams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				u.pool.close()
			}()
		}
		wg.Wait()
	})
	return nil
}
