package benchtool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/mcpserver"
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
	// Prefix starts every Redis key of this run.
	Prefix string

	toolClient   *redis.Client
	boltStores   []*boltstore.Store
	boltPath     string
	storeClients []*redis.Client
	roundTrips   []*RoundTrips
	gateways     []*gateway.Server
	httpServers  []*http.Server
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

	for range cfg.Replicas {
		// Each replica has its own client, as separate processes would.
		client := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, Protocol: cfg.Protocol})
		counter := &RoundTrips{}
		client.AddHook(counter)
		s.storeClients = append(s.storeClients, client)
		s.roundTrips = append(s.roundTrips, counter)
		reg, err := tools.NewRegistryOf(s.Tool)
		if err != nil {
			return nil, fmt.Errorf("benchtool: registry: %w", err)
		}
		logger := slog.New(slog.DiscardHandler)
		if cfg.AccessLog {
			logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
		}
		var store idempotency.Store = redisstore.New(client, redisstore.Options{Prefix: s.Prefix + "store:"})
		if cfg.BoltPath != "" {
			if _, err := os.Stat(cfg.BoltPath); err == nil {
				return nil, fmt.Errorf("benchtool: embedded store %s exists; give a new path", cfg.BoltPath)
			}
			bolt, err := boltstore.Open(cfg.BoltPath, boltstore.Options{})
			if err != nil {
				return nil, fmt.Errorf("benchtool: embedded store: %w", err)
			}
			s.boltStores = append(s.boltStores, bolt)
			s.boltPath = cfg.BoltPath
			store = bolt
		}
		gw, err := gateway.NewServer(gateway.Options{
			Store: store,
			Tools: reg,
			// Records outlive the run only briefly if Close never runs.
			ReplayTTL: 10 * time.Minute,
			Logger:    logger,
			Mounts:    []gateway.Mount{mcpserver.Mount(mcpserver.Options{InProgressWait: cfg.MCPInProgressWait})},
		})
		if err != nil {
			return nil, fmt.Errorf("benchtool: gateway: %w", err)
		}
		s.gateways = append(s.gateways, gw)
		url, err := s.serve(gw)
		if err != nil {
			return nil, err
		}
		s.GatewayURLs = append(s.GatewayURLs, url)
	}

	reg, err := tools.NewRegistryOf(s.Tool)
	if err != nil {
		return nil, fmt.Errorf("benchtool: registry: %w", err)
	}
	if s.BaselineURL, err = s.serve(BaselineHandler(reg)); err != nil {
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
func (s *Servers) StoreRoundTrips() int64 {
	var n int64
	for _, rt := range s.roundTrips {
		n += rt.Count()
	}
	return n
}

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
