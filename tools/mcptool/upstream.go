package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/tools"
)

// listTimeout bounds one listing (every page).
const listTimeout = 30 * time.Second

// terminateGrace is how long a stdio server gets to exit after its stdin is
// closed, then again after SIGTERM, before SIGKILL.
const terminateGrace = 2 * time.Second

// upstream is one MCP server: its session pool, its listing loop and its
// group of tools in the registry.
type upstream struct {
	cfg      ServerConfig
	group    string
	reg      *tools.Registry
	log      *slog.Logger
	pool     *pool
	allow    map[string]bool // nil: every tool
	readOnly map[string]bool
	policy   tools.Policy

	relist chan struct{} // a pending request to list again (capacity 1)
	ready  atomic.Bool
	// listed is closed by the first successful listing; firstErr is what
	// that listing refused (names, schemas, clashes).
	listed    chan struct{}
	firstOnce sync.Once
	firstErr  error
	// settled is closed when the first listing succeeded or the first
	// attempt to connect or list failed: Start waits for no more.
	settled    chan struct{}
	settleOnce sync.Once

	// pins (pins.go): the store, set by Manager.UsePins before Start
	// (nil: no pinning); the server's pins fixed by config, by upstream
	// name; the last listing and each served tool's pin state.
	pinStore   pins.Store
	onPin      func(p pins.Pin, accepted bool)
	fixed      map[string]string
	installMu  sync.Mutex
	pinMu      sync.Mutex
	lastListed []*mcp.Tool
	pinStates  map[string]*pinState
}

func newUpstream(cfg ServerConfig, headers http.Header, reg *tools.Registry, log *slog.Logger, base *http.Client, version string) *upstream {
	if cfg.RelistInterval <= 0 {
		cfg.RelistInterval = DefaultRelistInterval
	}
	u := &upstream{
		cfg:     cfg,
		group:   "mcp:" + cfg.Name,
		reg:     reg,
		log:     log.With("mcp_server", cfg.Name),
		relist:  make(chan struct{}, 1),
		listed:  make(chan struct{}),
		settled: make(chan struct{}),
		policy:  cfg.Policy,
	}
	if len(cfg.Tools) > 0 {
		u.allow = make(map[string]bool, len(cfg.Tools))
		for _, name := range cfg.Tools {
			u.allow[name] = true
		}
	}
	u.fixed = make(map[string]string, len(cfg.Pins))
	for name, fixed := range cfg.Pins {
		u.fixed[name], _ = pins.ParseFixed(fixed) // checked by ServerConfig.check
	}
	u.readOnly = make(map[string]bool, len(cfg.ReadOnly))
	for _, name := range cfg.ReadOnly {
		u.readOnly[name] = true
	}

	maxBytes := cfg.MaxResponseBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResponseBytes
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgateway", Version: version}, &mcp.ClientOptions{
		Logger: u.log,
		// Nothing to offer the server (no roots, sampling or elicitation).
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { u.requestRelist() },
		// An input_required result goes back to the gateway's own client
		// (the gateway has no user to ask); go-sdk must not try to
		// fulfil it here.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	size := 1
	var transport func() mcp.Transport
	// go-sdk's own caps sit above the gateway's, which the transports
	// enforce per message without ending the session.
	sdkCap := int(maxBytes) + 64<<10
	if cfg.URL != "" {
		size = cfg.Sessions
		if size <= 0 {
			size = DefaultHTTPSessions
		}
		httpClient := &http.Client{Transport: &upstreamTransport{base: base.Transport, headers: headers, maxBytes: maxBytes, log: u.log}}
		transport = func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: httpClient, MaxEventSize: sdkCap}
		}
	} else {
		stderr := &stderrLog{log: u.log}
		transport = func() mcp.Transport {
			cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
			cmd.Stderr = stderr
			return &stdioTransport{cmd: cmd, maxBytes: maxBytes, terminate: terminateGrace, log: u.log}
		}
	}
	connect := func(ctx context.Context) (*mcp.ClientSession, error) {
		return client.Connect(ctx, transport(), nil)
	}
	u.pool = newPool(size, u.log, connect, u.requestRelist, u.settle)
	return u
}

// installStandIns registers what answers for the server's tools until they
// are listed: a stand-in per allow-listed name, or, without an allow-list,
// a catch-all for every name under the prefix.
func (u *upstream) installStandIns() error {
	g := tools.Group{}
	if u.allow != nil {
		for _, name := range u.cfg.Tools {
			g.Tools = append(g.Tools, &standIn{up: u, spec: tools.Spec{
				Name:        u.cfg.Prefix + name,
				Description: fmt.Sprintf("not available yet: MCP server %q is not listed", u.cfg.Name),
				ReadOnly:    u.readOnly[name],
				Policy:      u.policy,
			}})
		}
	} else {
		g.CatchAllPrefix = u.cfg.Prefix
		g.CatchAll = func(name string) tools.Tool {
			return &standIn{up: u, spec: tools.Spec{
				Name:        name,
				Description: fmt.Sprintf("not available yet: MCP server %q is not listed", u.cfg.Name),
				ReadOnly:    u.readOnly[strings.TrimPrefix(name, u.cfg.Prefix)],
				Policy:      u.policy,
			}}
		}
	}
	return u.reg.SetGroup(u.group, g)
}

// settle marks the first attempt as done, whatever its outcome.
func (u *upstream) settle() {
	u.settleOnce.Do(func() { close(u.settled) })
}

// requestRelist asks the listing loop to list again (coalesced).
func (u *upstream) requestRelist() {
	select {
	case u.relist <- struct{}{}:
	default:
	}
}

// run lists the tools whenever asked (a new session, list_changed, the
// relist interval), retrying a failed listing with backoff, until ctx ends.
func (u *upstream) run(ctx context.Context) {
	ticker := time.NewTicker(u.cfg.RelistInterval)
	defer ticker.Stop()
	// While a tool is held, its pin is read again every heldRecheck, so
	// an acceptance on another replica releases it here too.
	recheck := time.NewTicker(heldRecheck)
	defer recheck.Stop()
	var retry <-chan time.Time
	delay := minBackoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.relist:
		case <-ticker.C:
		case <-retry:
		case <-recheck.C:
			u.recheckHeld(ctx)
			continue
		}
		retry = nil
		if !u.pool.connected() {
			continue // the pool lists again when a session opens
		}
		err := u.list(ctx)
		var refused *refusedError
		switch {
		case err == nil:
			delay = minBackoff
		case errors.As(err, &refused):
			delay = minBackoff
			u.log.Error("mcp server: tools left out", "error", err)
		case ctx.Err() != nil:
			return
		default:
			u.settle()
			u.log.Warn("mcp server: listing tools failed; retrying with backoff", "retry_in", delay.String(), "error", err)
			retry = time.After(delay)
			delay = min(2*delay, maxBackoff)
		}
	}
}

// refusedError lists the tools a listing left out (invalid name after the
// prefix, schema that does not compile, clash with another tool); the other
// tools were installed.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// list fetches every page of tools/list, and replaces the server's tools in
// the registry with the allowed ones.
func (u *upstream) list(ctx context.Context) error {
	cs, err := u.pool.get()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	var listed []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) && ctx.Err() == nil {
				u.pool.broken(cs) // the connection failed: reconnect
			}
			return fmt.Errorf("tools/list: %w", err)
		}
		listed = append(listed, t)
	}
	offered := make(map[string]bool, len(listed))
	for _, t := range listed {
		offered[t.Name] = true
	}
	for _, name := range u.cfg.Tools {
		if !offered[name] {
			u.log.Warn("mcp server: an allow-listed tool is not offered by the server", "tool", name)
		}
	}
	return u.install(ctx, listed)
}

// install checks the listed tools against their pins (pins.go) and
// replaces the server's tools in the registry with the allowed ones: a
// tool whose definition matches its pin as the server lists it, a held
// one as it was pinned. One install at a time (a listing, an operator's
// acceptance, the recheck of held tools).
func (u *upstream) install(ctx context.Context, listed []*mcp.Tool) error {
	u.installMu.Lock()
	defer u.installMu.Unlock()
	var group []tools.Tool
	states := make(map[string]*pinState, len(listed))
	for _, t := range listed {
		if u.allow != nil && !u.allow[t.Name] {
			continue
		}
		tool, err := u.toolFrom(t)
		if err != nil {
			return err
		}
		served, state, err := u.pinned(ctx, t, tool)
		if err != nil {
			return err
		}
		if state != nil {
			states[tool.spec.Name] = state
		}
		group = append(group, served)
	}
	setErr := u.reg.SetGroup(u.group, tools.Group{Tools: group})
	u.pinMu.Lock()
	u.lastListed, u.pinStates = listed, states
	u.pinMu.Unlock()
	first := false
	u.firstOnce.Do(func() {
		first = true
		u.firstErr = setErr
		u.ready.Store(true)
		close(u.listed)
	})
	u.settle()
	u.log.Info("mcp server: tools listed", "tools", len(group), "offered", len(listed), "first", first, "held", heldCount(states))
	if setErr != nil {
		return &refusedError{err: setErr}
	}
	return nil
}

// toolFrom builds the gateway's tool for one listed tool.
func (u *upstream) toolFrom(t *mcp.Tool) (*Tool, error) {
	spec, err := u.specFrom(t)
	if err != nil {
		return nil, err
	}
	return &Tool{up: u, upstreamName: t.Name, spec: spec, annotations: t.Annotations}, nil
}

// specFrom is the gateway's Spec of one listed (or pinned) tool.
func (u *upstream) specFrom(t *mcp.Tool) (tools.Spec, error) {
	var schema json.RawMessage
	if t.InputSchema != nil {
		raw, err := json.Marshal(t.InputSchema)
		if err != nil {
			return tools.Spec{}, fmt.Errorf("MCP server %q, tool %q: input schema: %w", u.cfg.Name, t.Name, err)
		}
		schema = raw
	}
	description := t.Description
	if description == "" {
		description = t.Title
	}
	readOnly := u.readOnly[t.Name] || (t.Annotations != nil && t.Annotations.ReadOnlyHint)
	return tools.Spec{
		Name:                   u.cfg.Prefix + t.Name,
		Description:            description,
		InputSchema:            schema,
		ReadOnly:               readOnly,
		ResultIsCallToolResult: true,
		Policy:                 u.policy,
		Target:                 u.target(t.Name),
	}, nil
}

// target is the Spec.Target of the upstream's tool name: its server URL
// or command, and the name.
func (u *upstream) target(name string) string {
	where := u.cfg.URL
	if where == "" {
		where = strings.Join(u.cfg.Command, " ")
	}
	return "mcp " + where + " " + name
}
