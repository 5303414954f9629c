// Package callpath is the gateway's engine: the call path that runs each
// mutating tool call at most once per idempotency key through an
// idempotency.Store (Engine.Call and its stages, pipeline.go), and what
// that path runs on: the settings snapshot, metrics, tracing, the
// request's info, auth and rate limits, the receipt writer and drain
// accounting. The doors (REST in package gateway, MCP in
// gateway/mcpserver) and the operator surfaces (the admin API, the
// console) are attached over it with [Mount]; nothing here routes a
// request to a handler.
package callpath

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/gateway/ratelimit"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/tools"
)

// Defaults of the contract, used where Options leaves a field zero.
const (
	DefaultLockTTL      = 30 * time.Second
	DefaultReplayTTL    = tools.DefaultReplayTTL
	DefaultMaxBodyBytes = 1 << 20
	DefaultToolTimeout  = tools.DefaultTimeout
	// MaxPreferWait caps Prefer: wait=N.
	MaxPreferWait = 60
	// MinLockTTL is the shortest lease: renewals run every LockTTL/3, and a
	// store round trip plus scheduling must fit well inside that.
	MinLockTTL = 300 * time.Millisecond
)

// Tenant is one caller allowed in when auth is configured.
type Tenant struct {
	Name string
	// TokenSHA256 is the SHA-256 of the tenant's bearer token; the token
	// itself is never configured.
	TokenSHA256 [sha256.Size]byte
	// PreviousTokenSHA256, when set, is a second accepted token hash: the
	// token being rotated out (docs/security.md, "Rotating tokens").
	PreviousTokenSHA256 *[sha256.Size]byte
	// Limits are the tenant's rate and in-flight limits (ratelimit.go).
	Limits TenantLimits
}

// AnonymousTenant is the tenant of every caller when auth is not configured.
const AnonymousTenant = "anonymous"

// Options configure a gateway (its Engine and HTTP server). Store and Tools
// are required.
type Options struct {
	Store idempotency.Store
	Tools *tools.Registry
	// Policies holds the configured per-tool policies. A field left zero
	// takes the policy the tool brings in its Spec (tools.Spec.Policy), then
	// the gateway's default.
	Policies map[string]tools.Policy

	KeyMode      KeyMode       // default derived
	LockTTL      time.Duration // default 30s
	ReplayTTL    time.Duration // default 24h
	MaxBodyBytes int64         // default 1 MiB
	// StepGuardOff disables the step guard, which is on by default.
	StepGuardOff bool
	ToolTimeout  time.Duration // default 30s

	// KeepArguments keeps a completed call's canonical arguments with its
	// record for the record's replay TTL (Lease.KeepArguments), so
	// `gateway policy replay` can evaluate completed calls; off by
	// default (they cost store memory or disk per record).
	KeepArguments bool

	// Tenants enables bearer auth when non-empty.
	Tenants []Tenant
	// OIDC, when set, enables bearer auth with the access tokens of the
	// operator's identity provider too (beside Tenants, or alone): a token
	// that is no static tenant's is verified by it, and its tenant is the
	// one the token names.
	OIDC TokenVerifier
	// ProviderLimits are the rate and in-flight limits of each tenant only
	// OIDC names (a tenant Tenants lists has its own); zero: none.
	ProviderLimits TenantLimits
	// AdminTokenSHA256 enables the admin API when non-nil.
	AdminTokenSHA256 *[sha256.Size]byte
	// AdminPreviousTokenSHA256, when set, is the admin token being rotated
	// out, accepted beside AdminTokenSHA256.
	AdminPreviousTokenSHA256 *[sha256.Size]byte
	// Mounts add routes beside the tool API (the MCP endpoint: package
	// mcpserver), with the middleware every endpoint has ([Mount]).
	Mounts []Mount
	// Limiter keeps the tenants' limit state; nil means in process
	// (ratelimit.Memory), which is right for the embedded store only:
	// replicas sharing a store must share a Limiter on it.
	Limiter ratelimit.Backend
	// TracerProvider, when set, traces every call (tracing.go); nil: off.
	TracerProvider trace.TracerProvider
	// SeparateOperations leaves /healthz, /readyz, /metrics and /admin off
	// the Server's handler: OperationsHandler serves them, on a listener of
	// their own (admin_listen).
	SeparateOperations bool
	// Decisions are the tools' compiled decide rules by tool name
	// (decide.Compile); a tool without an entry allows every call.
	Decisions map[string]*decide.Policy
	// Mode is the configuration's mode (default enforce): observe takes
	// and counts every decision but runs every call as allowed.
	Mode decide.Mode
	// Approvals bound how long approvals live (zero fields: defaults).
	Approvals ApprovalSettings
	// Budgets are the compiled budgets and the tools' charges
	// (budgets.New); nil: none.
	Budgets *budgets.Set
	// Notifier, when set, is told of each new pending approval.
	Notifier ApprovalNotifier
	// RecordsSampleInterval is how often the gateway_records gauge is
	// sampled from the store (recordsgauge.go); 0: 30s, negative: never.
	RecordsSampleInterval time.Duration
	// Receipts, when set, keeps every consequential event's receipt
	// (receipt.go); nil: no receipts.
	Receipts receipts.Store
	// Pins, when set, answers the admin API's tools endpoints (GET
	// /admin/v1/tools, POST /admin/v1/tools/{tool}/accept; adminpins.go):
	// the MCP upstream tools' pins (tools/mcptool's Manager).
	Pins pins.Keeper
	// ReceiptRetention is how long receipts are kept (0: 30 days).
	ReceiptRetention time.Duration
	// ReceiptCheckpoints signs the chains' checkpoints (nil: no signing
	// key): POST /admin/v1/receipts/checkpoints asks it to sign now.
	ReceiptCheckpoints *receipts.Scheduler
	// ReceiptKeys are the checkpoints' public keys, served as a JWKS at
	// receipts.KeysPath (empty: 404).
	ReceiptKeys receipts.KeySet
	// ReceiptRecoverAfter is the age of a receipt outbox entry the
	// recovery sweep appends (0: 2 minutes; receiptrecovery.go). The
	// store keeps an outbox when it implements idempotency.ReceiptOutbox.
	ReceiptRecoverAfter time.Duration

	Logger *slog.Logger
	// Registerer receives the gateway's metrics; nil means a private registry
	// (served on /metrics either way).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// Engine is the call path and what it runs on; package gateway's Server
// serves it over HTTP.
type Engine struct {
	opts  Options
	store idempotency.Store
	// admin is the store's search and resolve side; nil when the store
	// has none (the admin API then answers 501 for those routes).
	admin   idempotency.Admin
	tools   *tools.Registry
	log     *slog.Logger
	metrics *metrics
	// settings is what Reload changes (reload.go): tenants, admin token,
	// tenant limits, tool policies. limiter keeps the limits' state.
	settings atomic.Pointer[settings]
	limiter  ratelimit.Backend
	// tracer is nil when tracing is off.
	tracer trace.Tracer
	// txStore runs transactional tools; nil unless the store is one.
	txStore idempotency.TxStore

	// baseCtx parents every tool execution, detached from client requests so
	// an impatient client cannot abort a tool half-way; cancelling it aborts
	// the tools that are still running when a drain times out.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	// inflight counts tool executions; drainMu orders its Add calls before
	// Drain's Wait, and draining refuses new executions once Drain began.
	inflight sync.WaitGroup
	drainMu  sync.RWMutex
	draining bool
	// pending holds the completions the store has not taken yet
	// (completion.go).
	pending pendingCompletions
	// waitCtx ends the Prefer: wait polls when shutdown begins.
	waitCtx     context.Context
	stopWaiting context.CancelFunc
	// receipts writes the receipts; nil when off (receipt.go).
	receipts *receiptWriter
	// stopSampling ends the records gauge's sampler (Drain).
	stopSampling func()
}

// New builds an Engine from opts.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("gateway: Options.Store is required")
	}
	if opts.Tools == nil {
		return nil, errors.New("gateway: Options.Tools is required")
	}
	if opts.KeyMode == "" {
		opts.KeyMode = KeyModeDerived
	}
	if err := opts.KeyMode.Validate(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	opts.LockTTL = orDefault(opts.LockTTL, DefaultLockTTL)
	if opts.LockTTL < MinLockTTL {
		return nil, fmt.Errorf("gateway: lock ttl %v: must be at least %v", opts.LockTTL, MinLockTTL)
	}
	opts.ReplayTTL = orDefault(opts.ReplayTTL, DefaultReplayTTL)
	opts.ToolTimeout = orDefault(opts.ToolTimeout, DefaultToolTimeout)
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	live, err := newSettings(Settings{Tenants: opts.Tenants, AdminTokenSHA256: opts.AdminTokenSHA256, AdminPreviousTokenSHA256: opts.AdminPreviousTokenSHA256,
		Policies: opts.Policies, ReplayTTL: opts.ReplayTTL, OIDC: opts.OIDC, ProviderLimits: opts.ProviderLimits,
		Decisions: opts.Decisions, Mode: opts.Mode, Approvals: opts.Approvals, Budgets: opts.Budgets,
		KeepArguments: opts.KeepArguments})
	if err != nil {
		return nil, err
	}
	if opts.Limiter == nil {
		opts.Limiter = ratelimit.NewMemory(nil)
	}
	for name := range opts.Policies {
		if _, ok := opts.Tools.Lookup(name); !ok {
			return nil, fmt.Errorf("gateway: policy for tool %q: no such tool", name)
		}
	}
	if k, ok := opts.Store.(idempotency.BudgetKeeper); opts.Budgets.Any() && (!ok || !k.KeepsBudgets()) {
		return nil, errors.New("gateway: budgets: this idempotency store does not keep budgets (docs/budgets.md); use Redis, PostgreSQL or the embedded store, or remove the tools' charges")
	}
	txStore, _ := opts.Store.(idempotency.TxStore)
	if err := checkTransactional(opts.Tools, txStore != nil); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer, opts.Gatherer, opts.Tools, opts.Notifier)
	if err != nil {
		return nil, err
	}
	s := &Engine{
		txStore: txStore,
		opts:    opts,
		store:   instrumentStore(opts.Store, m),
		tools:   opts.Tools,
		log:     opts.Logger,
		metrics: m,
		limiter: opts.Limiter,
	}
	s.settings.Store(live)
	s.store.(*instrumentedStore).settled = s.budgetSettled // budgetreceipts.go
	outbox, _ := opts.Store.(idempotency.ReceiptOutbox)
	s.receipts = newReceiptWriter(receiptWriterConfig{store: opts.Receipts, retention: opts.ReceiptRetention,
		outbox: outbox, recoverAfter: opts.ReceiptRecoverAfter,
		unwritten: m.receiptsUnwritten, recovered: m.receiptsRecovered, log: opts.Logger})
	s.admin, _ = opts.Store.(idempotency.Admin)
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer(tracerName)
	}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.waitCtx, s.stopWaiting = context.WithCancel(s.baseCtx)
	s.stopSampling = s.startRecordsSampler(opts.RecordsSampleInterval)
	return s, nil
}

// Drain waits for the tool executions in flight to finish and record their
// outcomes (completions still retried through a store outage included, see
// completion.go); from its start no new execution begins and Prefer: wait
// polls answer 409. When ctx ends first, the remaining tools are cancelled
// (their records are released, so a retry runs them again; a
// lease_expiry: unknown tool's record is left UNKNOWN, since the tool may
// have acted) and Drain waits a bounded grace for them to unwind before
// returning ctx's error.
func (s *Engine) Drain(ctx context.Context) error {
	s.drainMu.Lock()
	s.draining = true
	s.drainMu.Unlock()
	s.stopWaiting() // waiting clients get their 409 now, not at the deadline
	s.stopSampling()
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return s.receipts.flush(ctx) // receipt.go
	case <-ctx.Done():
		s.cancelBase()
		_ = s.receipts.flush(ctx) // counts what is left unwritten
		// A bounded grace to release the cancelled tools' records; a tool
		// that ignores its context is not waited for any longer.
		select {
		case <-done:
		case <-time.After(storeCallTimeout):
		}
		return fmt.Errorf("gateway: drain: %w", ctx.Err())
	}
}

// StopWaiting ends every Prefer: wait poll now (they answer 409 with
// Retry-After), so waiting clients do not hold a shutdown up. Register it
// with http.Server.RegisterOnShutdown.
func (s *Engine) StopWaiting() { s.stopWaiting() }

// enter registers an execution of tool (for Drain and the in-flight
// gauge) and returns the func that ends it, or reports false when the
// server is draining and must not start one.
func (s *Engine) enter(tool string) (leave func(), ok bool) {
	s.drainMu.RLock()
	defer s.drainMu.RUnlock()
	if s.draining {
		return nil, false
	}
	s.inflight.Add(1)
	gauge := s.metrics.inFlight.WithLabelValues(tool)
	gauge.Inc()
	return func() {
		gauge.Dec()
		s.inflight.Done()
	}, true
}

// policy returns the effective policy of a tool under the current
// settings: configured, then the tool's own, then the defaults, field by
// field (a claim keeps the one it got, so a reload does not change a call
// in flight).
func (s *Engine) policy(entry *tools.Entry) tools.Policy {
	return s.policyWith(entry.Spec.Name, entry.Spec.Policy)
}

// policyNamed is policy for a tool known by name only (the admin API's
// resolve): the tool may have left the registry since its record was made.
func (s *Engine) policyNamed(tool string) tools.Policy {
	var own tools.Policy
	if e, ok := s.tools.Lookup(tool); ok {
		own = e.Spec.Policy
	}
	return s.policyWith(tool, own)
}

// policyWith resolves the policy of tool, own being the one it brings.
func (s *Engine) policyWith(tool string, own tools.Policy) tools.Policy {
	live := s.settings.Load()
	return live.policies[tool].Resolve(own, tools.Policy{Timeout: s.opts.ToolTimeout, ReplayTTL: live.replayTTL})
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
