package benchtool

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
	"github.com/toolgateway/toolgateway/tools"
)

// ApprovalToolName is the tool of ServersConfig.Console whose every call
// waits for an operator's approval (a decide rule "approve", no condition).
const ApprovalToolName = "bench-approve"

// startGateways starts the Replicas gateways of the "gateway" target.
func (s *Servers) startGateways(cfg ServersConfig) error {
	tl := []tools.Tool{s.Tool}
	var decisions map[string]*decide.Policy
	if cfg.Console {
		// It never runs: its calls wait for approvals nobody gives.
		tl = append(tl, NewCounterTool(s.toolClient, ApprovalToolName, s.Prefix+"approve:"))
		policy, err := decide.Compile(ApprovalToolName, []decide.Rule{{Decision: decide.Approve, Reason: "gatewaybench: every call waits"}})
		if err != nil {
			return fmt.Errorf("benchtool: approval rule: %w", err)
		}
		decisions = map[string]*decide.Policy{ApprovalToolName: policy}
		s.AdminToken = "gwbench-admin-" + randomHex(16)
	}
	for range cfg.Replicas {
		opts, counter, err := s.replicaOptions(cfg, false, tl...)
		if err != nil {
			return err
		}
		s.roundTrips = append(s.roundTrips, counter)
		if cfg.Console {
			sum := sha256.Sum256([]byte(s.AdminToken))
			opts.AdminTokenSHA256, opts.SeparateOperations, opts.Decisions = &sum, true, decisions
		}
		gw, err := s.startGateway(opts, &s.GatewayURLs)
		if err != nil {
			return err
		}
		if cfg.Console {
			url, err := s.serve(gw.OperationsHandler())
			if err != nil {
				return err
			}
			s.AdminURLs = append(s.AdminURLs, url)
		}
	}
	return nil
}

// startReceiptGateways starts the Replicas gateways of the
// "gateway+receipts" target: the same as startGateways' (no console), and
// receipts on, in Redis under the run's prefix through a client of their
// own, so the store's round trip counter stays the idempotency store's.
func (s *Servers) startReceiptGateways(cfg ServersConfig) error {
	client := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, Protocol: cfg.Protocol})
	s.storeClients = append(s.storeClients, client)
	s.receiptLog = &countingReceipts{Store: redisreceipts.New(client, s.Prefix, nil)}
	s.receiptTool = &countingTool{Tool: s.Tool}
	for range cfg.Replicas {
		opts, counter, err := s.replicaOptions(cfg, true, s.receiptTool)
		if err != nil {
			return err
		}
		s.receiptRoundTrips = append(s.receiptRoundTrips, counter)
		opts.Receipts = s.receiptLog
		if _, err := s.startGateway(opts, &s.ReceiptGatewayURLs); err != nil {
			return err
		}
	}
	return nil
}

// replicaOptions are the options of one more replica serving tl: a new
// store (receiptOutbox as newStore's) with its round-trip counter, the
// shared options, tl's registry.
func (s *Servers) replicaOptions(cfg ServersConfig, receiptOutbox bool, tl ...tools.Tool) (callpath.Options, *RoundTrips, error) {
	store, counter, err := s.newStore(cfg, receiptOutbox)
	if err != nil {
		return callpath.Options{}, nil, err
	}
	opts := s.gatewayOptions(cfg, store)
	if opts.Tools, err = tools.NewRegistryOf(tl...); err != nil {
		return callpath.Options{}, nil, fmt.Errorf("benchtool: registry: %w", err)
	}
	return opts, counter, nil
}

// newStore returns a new replica's idempotency store: Redis through a
// client of its own (as separate processes would have) with its round
// trips counted, or the embedded store. receiptOutbox: its completions
// write the receipt outbox, as a gateway's with receipts on do.
func (s *Servers) newStore(cfg ServersConfig, receiptOutbox bool) (idempotency.Store, *RoundTrips, error) {
	client := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, Protocol: cfg.Protocol})
	counter := &RoundTrips{}
	client.AddHook(counter)
	s.storeClients = append(s.storeClients, client)
	if cfg.BoltPath == "" {
		return redisstore.New(client, redisstore.Options{Prefix: s.Prefix + "store:", ReceiptOutbox: receiptOutbox}), counter, nil
	}
	if _, err := os.Stat(cfg.BoltPath); err == nil {
		return nil, nil, fmt.Errorf("benchtool: embedded store %s exists; give a new path", cfg.BoltPath)
	}
	bolt, err := boltstore.Open(cfg.BoltPath, boltstore.Options{ReceiptOutbox: receiptOutbox})
	if err != nil {
		return nil, nil, fmt.Errorf("benchtool: embedded store: %w", err)
	}
	s.boltStores = append(s.boltStores, bolt)
	s.boltPath = cfg.BoltPath
	return bolt, counter, nil
}

// gatewayOptions are the options every benchmark gateway shares.
func (s *Servers) gatewayOptions(cfg ServersConfig, store idempotency.Store) callpath.Options {
	logger := slog.New(slog.DiscardHandler)
	if cfg.AccessLog {
		logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	return callpath.Options{
		Store: store,
		// Records outlive the run only briefly if Close never runs.
		ReplayTTL: 10 * time.Minute,
		Logger:    logger,
		Mounts:    []callpath.Mount{mcpserver.Mount(mcpserver.Options{InProgressWait: cfg.MCPInProgressWait})},
		// The records gauge's sample (every 30 s, up to thousands of
		// store reads over the records a run leaves) would land in
		// whichever target runs at that moment: a periodic cost, not a
		// call's, that skews side-by-side targets at random.
		RecordsSampleInterval: -1,
	}
}

// startGateway builds a gateway from opts, serves it and appends its URL
// to urls.
func (s *Servers) startGateway(opts callpath.Options, urls *[]string) (*gateway.Server, error) {
	gw, err := gateway.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("benchtool: gateway: %w", err)
	}
	s.gateways = append(s.gateways, gw)
	url, err := s.serve(gw)
	if err != nil {
		return nil, err
	}
	*urls = append(*urls, url)
	return gw, nil
}

// countingReceipts is a receipts store that counts the executed receipts it wrote,
// so a run can wait for the gateway's asynchronous writer to catch up.
type countingReceipts struct {
	receipts.Store
	written atomic.Int64
}

// Append counts the receipt once written, if it is an executed one.
func (c *countingReceipts) Append(ctx context.Context, tenant string, r receipts.Receipt) (receipts.Receipt, error) {
	out, err := c.Store.Append(ctx, tenant, r)
	if err == nil {
		c.written.Add(executedIn([]receipts.Receipt{out}))
	}
	return out, err
}

// AppendRun counts the run's executed receipts once written.
func (c *countingReceipts) AppendRun(ctx context.Context, tenant string, rs []receipts.Receipt) ([]receipts.Receipt, error) {
	out, err := c.Store.AppendRun(ctx, tenant, rs)
	if err == nil {
		c.written.Add(executedIn(out))
	}
	return out, err
}

// executedIn counts the executed receipts of rs: the one receipt each
// execution leaves, which the runs check against the tool's executions
// (a call charging a budget also leaves budget_reserved and
// budget_committed receipts, not counted).
func executedIn(rs []receipts.Receipt) int64 {
	var n int64
	for _, r := range rs {
		if r.Event == receipts.EventExecuted {
			n++
		}
	}
	return n
}

// countingTool counts the executions of the tool it wraps: each one
// leaves exactly one receipt ("executed") in a benchmark run.
type countingTool struct {
	tools.Tool
	executed atomic.Int64
}

// Call runs the tool and counts the execution.
func (c *countingTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	defer c.executed.Add(1)
	return c.Tool.Call(ctx, req)
}
