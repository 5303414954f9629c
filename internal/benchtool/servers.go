package benchtool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/tools"
)

// ServersConfig configures the in-process servers of a benchmark.
type ServersConfig struct {
	// RedisAddr is the Redis both the store and the tool use.
	RedisAddr string
	// Replicas is the number of gateway servers sharing one store (default 1).
	Replicas int
	// ToolName defaults to DefaultToolName.
	ToolName string
	// AccessLog makes each gateway write its JSON access log lines to
	// io.Discard, so their cost is measured; off means slog's discard
	// handler, which skips formatting.
	AccessLog bool
	// Protocol is the RESP version of every Redis client (0: go-redis's
	// default, RESP3). RESP2 skips the check for pending push notifications
	// that go-redis makes before each command on RESP3.
	Protocol int
	// BoltPath, when set, gives the gateway the embedded store (a new bbolt
	// file at this path, removed by Close) instead of Redis; the tool still
	// counts in Redis. One replica only: the file is single-process.
	BoltPath string
	// MCPInProgressWait is the gateways' mcp.in_progress_wait: how long a
	// tools/call that meets a running call of its key waits for the
	// outcome (0: the gateway's default, 10 s; negative: answer -32001 at
	// once, as REST answers 409 without Prefer: wait).
	MCPInProgressWait time.Duration
	// Console gives every gateway replica an admin token (Servers.AdminToken),
	// an admin listener serving the admin API and the operator console
	// (Servers.AdminURLs), and a second tool (ApprovalToolName) whose every
	// call waits for an operator's approval, so a console has approvals to
	// show.
	Console bool
	// Receipts starts a second set of Replicas gateways
	// (Servers.ReceiptGatewayURLs), the same as the first but keeping
	// receipts in Redis under the run's prefix, so receipts on and off are
	// loaded side by side.
	Receipts bool
	// Everything starts a third set of Replicas gateways
	// (Servers.EverythingURLs), the "everything" profile
	// (everything.go): decide rules, receipts with signed checkpoints,
	// provider tokens, a budget and a pinned MCP upstream tool.
	Everything bool
	// EverythingTool is the tool the everything gateways' callers call:
	// EverythingToolInProcess ("" too) or EverythingToolMCP.
	EverythingTool string
}

// Servers are the gateway replicas and the baseline, on loopback
// listeners, serving one CounterTool. Every key they write lives under one
// random prefix, deleted by Close.
type Servers struct {
	// Tool is the tool all servers call; its counters drive the dup check.
	Tool *CounterTool
	// GatewayURLs are the base URLs of the gateway replicas.
	GatewayURLs []string
	// BaselineURL is the base URL of the plain chi server.
	BaselineURL string
	// PlainMCPURL is the base URL of the plain go-sdk MCP server
	// (PlainMCPHandler at /mcp).
	PlainMCPURL string
	// FloorURL is the base URL of the minimal exactly-once server
	// (FloorHandler at the gateway's call path), with a Redis client of
	// its own, as a gateway replica has.
	FloorURL string
	// Prefix starts every Redis key of this run.
	Prefix string
	// AdminURLs are the base URLs of the gateways' admin listeners
	// (ServersConfig.Console), serving /admin/v1 and /console/.
	AdminURLs []string
	// AdminToken is the gateways' admin token (ServersConfig.Console).
	AdminToken string
	// ReceiptGatewayURLs are the base URLs of the gateways that keep
	// receipts (ServersConfig.Receipts).
	ReceiptGatewayURLs []string
	// EverythingURLs are the base URLs of the everything profile's
	// gateways (ServersConfig.Everything); EverythingTokens the provider
	// tokens their callers send, one per load worker.
	EverythingURLs   []string
	EverythingTokens []string

	toolClient   *redis.Client
	boltStores   []*boltstore.Store
	boltPath     string
	storeClients []*redis.Client
	roundTrips   []*RoundTrips
	// floorRoundTrips counts the floor's store round trips.
	floorRoundTrips RoundTrips
	gateways        []*gateway.Server
	httpServers     []*http.Server
	// receiptRoundTrips count the store round trips of the gateways that
	// keep receipts (their receipt writes excluded: another client).
	receiptRoundTrips []*RoundTrips
	// receiptLog counts the receipts written; receiptTool the executions
	// of the tool behind the gateways that keep receipts.
	receiptLog  *countingReceipts
	receiptTool *countingTool
	// everything is what the everything gateways share;
	// everythingRoundTrips count their store round trips.
	everything           *everything
	everythingRoundTrips []*RoundTrips
}

// StartServers starts the servers; Close stops them and deletes their keys.
func StartServers(ctx context.Context, cfg ServersConfig) (_ *Servers, err error) {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.ToolName == "" {
		cfg.ToolName = DefaultToolName
	}
	if cfg.BoltPath != "" && cfg.Replicas > 1 {
		return nil, errors.New("benchtool: the embedded store serves one replica")
	}
	s := &Servers{Prefix: "gwbench:" + randomHex(6) + ":"}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	s.toolClient = redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, Protocol: cfg.Protocol})
	if err := s.toolClient.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("benchtool: redis at %s: %w", cfg.RedisAddr, err)
	}
	s.Tool = NewCounterTool(s.toolClient, cfg.ToolName, s.Prefix+"tool:")

	if cfg.BoltPath != "" && cfg.Receipts {
		return nil, errors.New("benchtool: receipts are measured on the Redis store only")
	}
	if err := s.startGateways(cfg); err != nil {
		return nil, err
	}
	if cfg.Receipts {
		if err := s.startReceiptGateways(cfg); err != nil {
			return nil, err
		}
	}

	if cfg.Everything {
		if err := s.startEverythingGateways(ctx, cfg); err != nil {
			return nil, err
		}
	}

	reg, err := tools.NewRegistryOf(s.Tool)
	if err != nil {
		return nil, fmt.Errorf("benchtool: registry: %w", err)
	}
	if s.BaselineURL, err = s.serve(BaselineHandler(reg)); err != nil {
		return nil, err
	}
	floorClient := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, Protocol: cfg.Protocol})
	floorClient.AddHook(&s.floorRoundTrips)
	s.storeClients = append(s.storeClients, floorClient)
	floor := http.NewServeMux()
	floor.Handle("POST /api/tools/v1/{tool}", FloorHandler(floorClient, s.Prefix+"floor:", s.Tool))
	if s.FloorURL, err = s.serve(floor); err != nil {
		return nil, err
	}
	plain := http.NewServeMux()
	plain.Handle("POST /mcp", PlainMCPHandler(s.Tool))
	if s.PlainMCPURL, err = s.serve(plain); err != nil {
		return nil, err
	}
	return s, nil
}

// serve serves h on a new loopback listener and returns its base URL.
func (s *Servers) serve(h http.Handler) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("benchtool: listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.httpServers = append(s.httpServers, srv)
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), nil
}

// StoreRoundTrips is the sum of the round trips of every gateway replica's
// store client so far.
func (s *Servers) StoreRoundTrips() int64 { return sumRoundTrips(s.roundTrips) }

// sumRoundTrips is the sum of the counters' round trips so far.
func sumRoundTrips(counters []*RoundTrips) int64 {
	var n int64
	for _, rt := range counters {
		n += rt.Count()
	}
	return n
}

// ReceiptStoreRoundTrips is StoreRoundTrips of the gateways that keep
// receipts (ServersConfig.Receipts).
func (s *Servers) ReceiptStoreRoundTrips() int64 { return sumRoundTrips(s.receiptRoundTrips) }

// ReceiptCounts reports, for the gateways that keep receipts, the receipts
// written so far and the tool executions so far (each leaves one receipt);
// zeros without ServersConfig.Receipts.
func (s *Servers) ReceiptCounts() ReceiptCounts {
	if s.receiptLog == nil {
		return ReceiptCounts{}
	}
	return countsOf(s.receiptLog, s.receiptTool)
}

// countsOf is what log has written and tool has executed so far.
func countsOf(log *countingReceipts, tool *countingTool) ReceiptCounts {
	return ReceiptCounts{Written: log.written.Load(), Executed: tool.executed.Load()}
}

// FloorRoundTrips is the number of round trips the floor's store client
// made so far.
func (s *Servers) FloorRoundTrips() int64 { return s.floorRoundTrips.Count() }

// RedisCPU reads the CPU time the Redis server has used so far (user +
// system, from INFO cpu). Deltas around a run attribute Redis work to it,
// accurately only when nothing else uses that Redis at the time.
func (s *Servers) RedisCPU(ctx context.Context) (time.Duration, error) {
	return RedisCPU(ctx, s.toolClient)
}

// Close stops the servers, waits for tools in flight, deletes every key of
// the run and closes the Redis clients.
func (s *Servers) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, srv := range s.httpServers {
		errs = append(errs, srv.Shutdown(ctx))
	}
	for _, gw := range s.gateways {
		errs = append(errs, gw.Drain(ctx))
	}
	if s.everything != nil {
		errs = append(errs, s.everything.close(ctx))
	}
	if s.toolClient != nil {
		deletePrefix(ctx, s.toolClient, s.Prefix)
		errs = append(errs, s.toolClient.Close())
	}
	for _, c := range s.storeClients {
		errs = append(errs, c.Close())
	}
	for _, b := range s.boltStores {
		errs = append(errs, b.Close())
	}
	if s.boltPath != "" {
		errs = append(errs, os.Remove(s.boltPath))
	}
	return errors.Join(errs...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
