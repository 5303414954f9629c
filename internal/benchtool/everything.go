package benchtool

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/oidcauth"
	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// The "everything" profile (ServersConfig.Everything): gateways the same
// as the bare ones (profile "bare") but with every feature of the product
// a user would turn on, loaded beside them, the floor and the plain go-sdk
// server in the same rounds:
//
//   - decide rules evaluated on every call (two CEL rules; the call is
//     allowed by the second);
//   - receipts, with their chains' checkpoints signed (an Ed25519 key;
//     receipts.checkpoint_every at its defaults, 1000 receipts or 1 min);
//   - provider tokens: every call carries a JWT of the run's Issuer,
//     verified by oidcauth (discovery and key set fetched once and cached;
//     one token per load worker, each verified on its first call and then
//     found in the verified-token cache), so the tenant and the requester
//     (principal) come from the token;
//   - one budget (per tenant, a day's window) charged 1 by every call,
//     reserved in the claim's own atomic step;
//   - pinned MCP tools: an MCP upstream (the same counting tool served by
//     a plain go-sdk server on loopback, in the servers' process) listed
//     by tools/mcptool with its default 4 sessions, its tools pinned on
//     first use in the store.
//
// Which tool the load calls is ServersConfig.EverythingTool: by default
// the counting tool in process, as the floor and the bare gateways run
// it, so the gateways' own stages are what differs (the upstream's tool
// is listed and pinned under the prefix "up-", and not called); with
// EverythingToolMCP the pinned upstream tool itself, so every call also
// makes the loopback MCP round trip to the upstream (and its go-sdk
// server's CPU counts as the servers'): what fronting an MCP server
// costs, which the floor does not pay.

// EverythingName is the name of the everything gateways' REST target;
// EverythingMCPName is their MCP endpoint's.
const (
	EverythingName    = "gateway+everything"
	EverythingMCPName = "gateway-mcp+everything"
)

// The everything profile's settings.
const (
	// EverythingAudience is the audience of the provider tokens.
	EverythingAudience = "http://gatewaybench.invalid/mcp"
	// EverythingTenant is the tenant claim of every token.
	EverythingTenant = "bench"
	// everythingTokens is how many tokens are signed: one per load
	// worker, up to the largest concurrency a run sweeps.
	everythingTokens = 256
	// everythingBudget is the budget every call is charged 1 of; its
	// limit is out of reach of any run.
	everythingBudget    = "bench-calls"
	everythingLimit     = 1e9
	everythingUpstream  = "bench-upstream"
	everythingTokenLife = 24 * time.Hour
	// The config defaults of receipts.checkpoint_every.
	everythingCheckpointReceipts = 1000
	everythingCheckpointInterval = time.Minute
)

// The tools the everything gateways' callers call (ServersConfig.EverythingTool).
const (
	// EverythingToolInProcess: the counting tool in the gateway's process.
	EverythingToolInProcess = "inprocess"
	// EverythingToolMCP: the pinned MCP upstream's tool.
	EverythingToolMCP = "mcp"
)

// everythingInProcessPrefix is the upstream's tools' prefix when the
// in-process tool is the one called (so the names do not clash).
const everythingInProcessPrefix = "up-"

// EverythingRules are the decide rules of the everything gateways' tool:
// the first never matches a benchmark call, the second allows it, so
// every call evaluates both.
var EverythingRules = []decide.Rule{
	{When: `args.op == "drop" || args.seq < 0`, Decision: decide.Deny, Reason: "gatewaybench: never matches"},
	{When: `args.seq >= 0 && size(args.op) > 0`, Decision: decide.Allow},
}

// everything is what the everything gateways share.
type everything struct {
	issuer    *Issuer
	upstream  string
	managers  []*mcptool.Manager
	scheduler *receipts.Scheduler
	stopSched context.CancelFunc
	log       *countingReceipts
	tool      *countingTool
}

// startEverythingGateways starts the Replicas gateways of the
// everything profile (see above).
func (s *Servers) startEverythingGateways(ctx context.Context, cfg ServersConfig) error {
	if cfg.BoltPath != "" {
		return errors.New("benchtool: the everything profile is measured on the Redis store only")
	}
	e := &everything{tool: &countingTool{Tool: s.Tool}}
	s.everything = e
	var err error
	if e.issuer, err = StartIssuer(); err != nil {
		return err
	}
	for i := range everythingTokens {
		tok, err := e.issuer.Token(EverythingAudience, EverythingTenant, fmt.Sprintf("agent-%d", i), everythingTokenLife)
		if err != nil {
			return err
		}
		s.EverythingTokens = append(s.EverythingTokens, tok)
	}
	upstream := http.NewServeMux()
	upstream.Handle("POST /mcp", PlainMCPHandler(e.tool))
	if e.upstream, err = s.serve(upstream); err != nil {
		return err
	}

	// Receipts through a client of their own (the store's round trip
	// counter stays the idempotency store's), checkpoints signed off the
	// call path as the gateway command does.
	client := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, Protocol: cfg.Protocol})
	s.storeClients = append(s.storeClients, client)
	_, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("benchtool: checkpoint key: %w", err)
	}
	key := receipts.NewSigningKey(private)
	keys := receipts.KeySet{}
	keys.Add(key.Public())
	store := redisreceipts.New(client, s.Prefix+"everything:", nil)
	e.scheduler = receipts.NewScheduler(receipts.Checkpointer{Store: store, Key: key, Keys: keys},
		everythingCheckpointReceipts, everythingCheckpointInterval, nil)
	var runCtx context.Context
	runCtx, e.stopSched = context.WithCancel(context.Background())
	go e.scheduler.Run(runCtx)
	e.log = &countingReceipts{Store: e.scheduler.Store(store)}

	verifier, err := oidcauth.New(oidcauth.Config{Issuer: e.issuer.URL, Audience: EverythingAudience, TenantClaim: IssuerTenantClaim}, oidcauth.Options{})
	if err != nil {
		return fmt.Errorf("benchtool: oidc: %w", err)
	}
	policy, err := decide.Compile(s.Tool.Spec().Name, EverythingRules)
	if err != nil {
		return fmt.Errorf("benchtool: decide rules: %w", err)
	}
	set, err := budgets.New([]budgets.Budget{{Name: everythingBudget, Limit: everythingLimit, Window: budgets.Window{Calendar: "day"}, Scope: budgets.ScopeTenant}},
		map[string][]budgets.Charge{s.Tool.Spec().Name: {{Budget: everythingBudget, Cost: "1"}}})
	if err != nil {
		return fmt.Errorf("benchtool: budget: %w", err)
	}
	upstreamCfg := mcptool.ServerConfig{Name: everythingUpstream, URL: e.upstream + "/mcp", RecordIsError: true}
	var inProcess []tools.Tool
	switch cfg.EverythingTool {
	case "", EverythingToolInProcess:
		upstreamCfg.Prefix, inProcess = everythingInProcessPrefix, []tools.Tool{e.tool}
	case EverythingToolMCP:
	default:
		return fmt.Errorf("benchtool: everything tool %q: want %s or %s", cfg.EverythingTool, EverythingToolInProcess, EverythingToolMCP)
	}
	for range cfg.Replicas {
		st, counter, err := s.newStore(cfg, true)
		if err != nil {
			return err
		}
		s.everythingRoundTrips = append(s.everythingRoundTrips, counter)
		opts := s.gatewayOptions(cfg, st)
		if opts.Tools, err = tools.NewRegistryOf(inProcess...); err != nil {
			return fmt.Errorf("benchtool: registry: %w", err)
		}
		m, err := mcptool.NewManager(opts.Tools, []mcptool.ServerConfig{upstreamCfg}, mcptool.Options{Logger: opts.Logger})
		if err != nil {
			return fmt.Errorf("benchtool: MCP upstream: %w", err)
		}
		e.managers = append(e.managers, m)
		m.UsePins(st.(pins.Store), nil)
		if err := m.Start(ctx); err != nil {
			return fmt.Errorf("benchtool: MCP upstream: %w", err)
		}
		opts.Pins = m
		opts.OIDC = verifier
		opts.Decisions = map[string]*decide.Policy{s.Tool.Spec().Name: policy}
		opts.Budgets = set
		opts.Receipts, opts.ReceiptCheckpoints, opts.ReceiptKeys = e.log, e.scheduler, keys
		if _, err := s.startGateway(opts, &s.EverythingURLs); err != nil {
			return err
		}
	}
	return nil
}

// close stops what the everything gateways started besides their
// listeners (after the gateways drained: the last receipts' chains are
// signed).
func (e *everything) close(ctx context.Context) error {
	var errs []error
	if e.stopSched != nil {
		e.stopSched()
		e.scheduler.Flush(ctx)
	}
	for _, m := range e.managers {
		errs = append(errs, m.Close())
	}
	if e.issuer != nil {
		errs = append(errs, e.issuer.Close())
	}
	return errors.Join(errs...)
}

// EverythingRoundTripsCount is StoreRoundTrips of the everything gateways.
func (s *Servers) EverythingRoundTripsCount() int64 { return sumRoundTrips(s.everythingRoundTrips) }

// EverythingReceiptCounts is ReceiptCounts of the everything gateways.
func (s *Servers) EverythingReceiptCounts() ReceiptCounts {
	if s.everything == nil {
		return ReceiptCounts{}
	}
	return countsOf(s.everything.log, s.everything.tool)
}
