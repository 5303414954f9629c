package verify

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/reconcile"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// standIn replaces one of the user's tools: the same spec (name, schema,
// read_only, policy), no upstream. It counts its executions and does what
// the running guarantee tells it to.
type standIn struct {
	spec tools.Spec
	runs atomic.Int64
	// uncertain, when set, makes the next executions end as if the upstream
	// took the call and never answered.
	uncertain atomic.Bool
}

func (s *standIn) Spec() tools.Spec { return s.spec }

func (s *standIn) Call(_ context.Context, req *tools.Request) (*tools.Response, error) {
	n := s.runs.Add(1)
	if s.uncertain.Load() {
		return nil, fmt.Errorf("verify stand-in %s: %w", s.spec.Name, tools.ErrOutcomeUncertain)
	}
	return tools.JSON(200, map[string]any{"ok": true, "n": n, "execution_id": req.ExecutionID})
}

// scratchTenant is a scratch tenant: one of the configured names with a
// token verify made up (the configured tokens are never known to it).
type scratchTenant struct {
	name, token string
}

// scratchEnv is the scratch gateway the guarantees run against: the user's
// options with stand-ins for the tools, scratch tenants and a scratch store.
type scratchEnv struct {
	srv *httptest.Server
	// decided is the same gateway with the user's decide rules and mode,
	// on the same store and stand-ins: the guarantees about decisions.
	decided *httptest.Server
	// expiring is decided with approvals that expire after
	// approvalExpiry: the guarantee that approvals expire.
	expiring *httptest.Server
	client   *http.Client
	store    idempotency.Store
	// reconcile are the config's reconcile targets by tool.
	reconcile map[string]reconcile.Target
	// receipts is nil when the config turns receipts off.
	receipts receipts.Store
	opts     callpath.Options
	standIn  map[string]*standIn
	// mcp serves the stand-ins of the tools MCP servers listed (nil
	// without -mcp-list).
	mcp     *mcpStandIns
	tenants []scratchTenant
	// refused counts the answers 503 and keeps the store's last message.
	refused refusals
	mu      sync.Mutex
	n       int
	// usedSeeds are the argument seeds calls of this run took.
	usedSeeds map[int]bool
}

// tenantName is the name of scratch tenant i ("" without tenants).
func (env *scratchEnv) tenantName(i int) string {
	if i >= len(env.tenants) {
		return ""
	}
	return env.tenants[i].name
}

// newScratchEnv builds the scratch gateway from p on its scratch store.
// The user's decide rules are left out of it: the guarantees about calls
// that run need calls that are allowed.
func newScratchEnv(ctx context.Context, p Program) (*scratchEnv, error) {
	store, err := p.Scratch.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("verify: scratch store %s: %w", p.Scratch.Name, err)
	}
	// Receipts as start-up keeps them (none when the config turns them off),
	// beside the scratch store.
	receiptStore, err := p.Scratch.Receipts(ctx, store)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("verify: scratch receipts: %w", err)
	}
	var wrapped idempotency.Store = store
	if p.WrapStore != nil {
		wrapped = p.WrapStore(store)
	}
	env := &scratchEnv{store: wrapped, receipts: receiptStore, standIn: map[string]*standIn{}, reconcile: map[string]reconcile.Target{}}
	for _, target := range p.Reconcile {
		env.reconcile[target.Tool] = target
	}
	registry, err := env.standInRegistry(ctx, p)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	o := p.Options
	o.Store, o.Tools = wrapped, registry
	o.Decisions, o.OIDC, o.Limiter, o.Notifier, o.Receipts = nil, nil, nil, nil, receiptStore
	o.Mounts, o.TracerProvider = nil, nil
	o.Tenants = nil
	for i, t := range p.Options.Tenants {
		if i == 2 {
			break
		}
		token := randomToken()
		env.tenants = append(env.tenants, scratchTenant{name: t.Name, token: token})
		o.Tenants = append(o.Tenants, callpath.Tenant{Name: t.Name, TokenSHA256: sha256.Sum256([]byte(token))})
	}
	// Nothing printed; the store's message of a refused call kept.
	o.Logger = slog.New(logHandler{&env.refused})
	d := o
	d.Decisions, d.Mode = p.Options.Decisions, p.Options.Mode
	x := d
	x.Approvals.Timeout = approvalExpiry
	servers, err := scratchServers(o, d, x)
	if err != nil {
		env.mcp.Close()
		_ = store.Close()
		return nil, err
	}
	env.opts = d
	env.srv, env.decided, env.expiring = servers[0], servers[1], servers[2]
	env.client = &http.Client{Timeout: 30 * time.Second}
	return env, nil
}

// standInRegistry is a registry of stand-ins for p's tools: in process,
// but the tools MCP servers listed (-mcp-list) are served by stand-in MCP
// servers and reached through the gateway's MCP upstream code.
func (env *scratchEnv) standInRegistry(ctx context.Context, p Program) (*tools.Registry, error) {
	registry := tools.NewRegistry()
	for _, e := range p.Options.Tools.Entries() {
		if _, ok := e.Tool.(*mcptool.Tool); ok {
			continue
		}
		s := &standIn{spec: e.Spec}
		if err := registry.Add(s); err != nil {
			return nil, fmt.Errorf("verify: stand-in for %s: %w", e.Spec.Name, err)
		}
		env.standIn[e.Spec.Name] = s
	}
	var err error
	env.mcp, err = startMCPStandIns(ctx, p, registry, env.standIn)
	return registry, err
}

// scratchServers serves a gateway for each of opts, each with its own
// metrics registry (they share the store and the stand-ins).
func scratchServers(opts ...callpath.Options) ([]*httptest.Server, error) {
	gateways := make([]*gateway.Server, len(opts))
	for i, o := range opts {
		reg := prometheus.NewRegistry()
		o.Registerer, o.Gatherer = reg, reg
		gw, err := gateway.NewServer(o)
		if err != nil {
			return nil, fmt.Errorf("verify: scratch gateway: %w", err)
		}
		gateways[i] = gw
	}
	servers := make([]*httptest.Server, len(gateways))
	for i, gw := range gateways {
		servers[i] = httptest.NewServer(gw)
	}
	return servers, nil
}

// Close stops the scratch gateways and closes the scratch store.
func (env *scratchEnv) Close() {
	env.srv.Close()
	env.decided.Close()
	env.expiring.Close()
	env.mcp.Close()
	_ = env.store.Close()
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// session returns a session id no other call of this run used.
func (env *scratchEnv) session() string {
	env.mu.Lock()
	defer env.mu.Unlock()
	env.n++
	return "verify-" + strconv.Itoa(env.n) + "-" + randomToken()[:8]
}

// seed returns an argument seed no other call of this run used (the next
// one is free too: freshArgs takes two).
func (env *scratchEnv) seed() int {
	env.mu.Lock()
	defer env.mu.Unlock()
	env.n += 2
	env.markSeed(env.n)
	return env.n
}

// unusedSeed is the smallest argument seed (with the next one) no call of
// this run used yet, for a tool whose decide rules refuse the large seeds
// fresh calls get (an amount the rules cap, say); false after 1000.
func (env *scratchEnv) unusedSeed() (int, bool) {
	env.mu.Lock()
	defer env.mu.Unlock()
	for s := range 1000 {
		if !env.usedSeeds[s] && !env.usedSeeds[s+1] {
			env.markSeed(s)
			return s, true
		}
	}
	return 0, false
}

// markSeed notes that seed and the next one are taken (env.mu held).
func (env *scratchEnv) markSeed(seed int) {
	if env.usedSeeds == nil {
		env.usedSeeds = map[int]bool{}
	}
	env.usedSeeds[seed], env.usedSeeds[seed+1] = true, true
}
