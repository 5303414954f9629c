package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/internal/benchtool"
)

// The in-process servers run in a child process (this binary with
// -serve-child), so the CPU time they use is read apart from the load
// generator's: "server us" is the servers' process alone. -inprocess keeps
// them in the load's process (then only the sum is known).

// childInfo is the line the child prints once its servers listen.
type childInfo struct {
	GatewayURLs []string `json:"gateway_urls"`
	BaselineURL string   `json:"baseline_url"`
	PlainMCPURL string   `json:"plain_mcp_url"`
	FloorURL    string   `json:"floor_url"`
	Prefix      string   `json:"prefix"`
	StatsURL    string   `json:"stats_url"`
	// AdminURLs, AdminToken: -console-poll's admin listeners and token.
	AdminURLs  []string `json:"admin_urls,omitempty"`
	AdminToken string   `json:"admin_token,omitempty"`
	// ReceiptGatewayURLs: -receipts' gateways.
	ReceiptGatewayURLs []string `json:"receipt_gateway_urls,omitempty"`
	// EverythingURLs, EverythingTokens: -profile everything's gateways
	// and their callers' provider tokens.
	EverythingURLs   []string `json:"everything_urls,omitempty"`
	EverythingTokens []string `json:"everything_tokens,omitempty"`
}

// childStats is what the child's stats endpoint answers.
type childStats struct {
	CPUNanos   int64 `json:"cpu_ns"`
	RoundTrips int64 `json:"round_trips"`
	// ReceiptRoundTrips and Receipts are the -receipts gateways' store
	// round trips and receipt counters.
	ReceiptRoundTrips int64                   `json:"receipt_round_trips"`
	Receipts          benchtool.ReceiptCounts `json:"receipts"`
	// EverythingRoundTrips and EverythingReceipts are the same for the
	// everything profile's gateways.
	EverythingRoundTrips int64                   `json:"everything_round_trips"`
	EverythingReceipts   benchtool.ReceiptCounts `json:"everything_receipts"`
}

// serveChild starts the servers, prints their childInfo and serves until
// its standard input closes (the parent ended) or a signal stops ctx.
func serveChild(ctx context.Context, f *flags, out io.Writer) error {
	servers, err := benchtool.StartServers(ctx, serversConfig(f))
	if err != nil {
		return err
	}
	defer servers.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("stats listener: %w", err)
	}
	stats := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(childStats{CPUNanos: int64(processCPU()), RoundTrips: servers.StoreRoundTrips(),
			ReceiptRoundTrips: servers.ReceiptStoreRoundTrips(), Receipts: servers.ReceiptCounts(),
			EverythingRoundTrips: servers.EverythingRoundTripsCount(), EverythingReceipts: servers.EverythingReceiptCounts()})
	})}
	go func() { _ = stats.Serve(l) }()
	defer stats.Close()
	info, _ := json.Marshal(childInfo{GatewayURLs: servers.GatewayURLs, BaselineURL: servers.BaselineURL,
		PlainMCPURL: servers.PlainMCPURL, FloorURL: servers.FloorURL, Prefix: servers.Prefix, StatsURL: "http://" + l.Addr().String(),
		AdminURLs: servers.AdminURLs, AdminToken: servers.AdminToken, ReceiptGatewayURLs: servers.ReceiptGatewayURLs,
		EverythingURLs: servers.EverythingURLs, EverythingTokens: servers.EverythingTokens})
	fmt.Fprintf(out, "%s\n", info)
	parentGone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(parentGone)
	}()
	select {
	case <-ctx.Done():
	case <-parentGone:
	}
	return nil
}

// processCPU is this process's CPU time (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startChild runs this binary with args and -serve-child and returns what
// it serves and a function that stops it (its keys deleted).
func startChild(args []string) (*childInfo, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("servers' process: %w", err)
	}
	cmd := exec.Command(self, append(append([]string(nil), args...), "-serve-child")...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("servers' process: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("servers' process: %w", err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("servers' process: %w", err)
	}
	stop := func() {
		_ = stdin.Close() // the child closes its servers and exits
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("servers' process did not start: %w", err)
	}
	var info childInfo
	if err := json.Unmarshal(line, &info); err != nil {
		stop()
		return nil, nil, fmt.Errorf("servers' process: %q: %w", line, err)
	}
	return &info, stop, nil
}

// childTargets returns the targets the child serves: baseline, the
// exactly-once floor, the gateway under each API, and with MCP the plain go-sdk server.
func childTargets(ctx context.Context, f *flags, apis []benchtool.API, info *childInfo) ([]benchtool.Target, func(), error) {
	client := redis.NewClient(&redis.Options{Addr: f.redisAddr})
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("redis at %s: %w", f.redisAddr, err)
	}
	httpClient := &http.Client{Timeout: 10 * time.Second}
	readStats := func(ctx context.Context) (childStats, error) {
		var s childStats
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, info.StatsURL, nil)
		if err != nil {
			return s, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return s, fmt.Errorf("servers' stats: %w", err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			return s, fmt.Errorf("servers' stats: %w", err)
		}
		return s, nil
	}
	serverCPU := func(ctx context.Context) (time.Duration, error) {
		s, err := readStats(ctx)
		return time.Duration(s.CPUNanos), err
	}
	roundTrips := func() int64 {
		s, err := readStats(context.Background())
		if err != nil {
			return -1
		}
		return s.RoundTrips
	}
	receiptRoundTrips := func() int64 {
		s, err := readStats(context.Background())
		if err != nil {
			return -1
		}
		return s.ReceiptRoundTrips
	}
	receiptCounts := func(ctx context.Context) (benchtool.ReceiptCounts, error) {
		s, err := readStats(ctx)
		return s.Receipts, err
	}
	ev := everythingServers{urls: info.EverythingURLs, tokens: info.EverythingTokens,
		roundTrips: func() int64 {
			s, err := readStats(context.Background())
			if err != nil {
				return -1
			}
			return s.EverythingRoundTrips
		},
		receiptCounts: func(ctx context.Context) (benchtool.ReceiptCounts, error) {
			s, err := readStats(ctx)
			return s.EverythingReceipts, err
		}}
	tool := benchtool.NewCounterTool(client, f.tool, info.Prefix+"tool:")
	redisCPU := func(ctx context.Context) (time.Duration, error) { return benchtool.RedisCPU(ctx, client) }
	commands := func(ctx context.Context) (map[string]int64, error) { return benchtool.RedisCommandCalls(ctx, client) }
	common := benchtool.Target{Tool: tool, RedisCPU: redisCPU, RedisCommands: commands, ServerCPU: serverCPU}

	base := common
	base.Name, base.URLs, base.NoIdempotency = benchtool.BaselineName, []string{info.BaselineURL}, true
	gw := common
	gw.URLs = info.GatewayURLs
	if f.bolt == "" {
		gw.RoundTrips = roundTrips
	}
	floor := common
	floor.Name, floor.URLs = benchtool.FloorName, []string{info.FloorURL}
	beside, err := besideTargets(f, apis, gw, besideServers{adminURLs: info.AdminURLs, adminToken: info.AdminToken,
		receiptURLs: info.ReceiptGatewayURLs, receiptRoundTrips: receiptRoundTrips, receiptCounts: receiptCounts})
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	targets := append([]benchtool.Target{base, floor}, profileTargets(f, apis, gw, ev)...)
	targets = append(targets, beside...)
	for _, api := range apis {
		if api == benchtool.APIMCP {
			plain := common
			plain.Name, plain.URLs, plain.API, plain.NoIdempotency = benchtool.PlainMCPName, []string{info.PlainMCPURL}, benchtool.APIMCP, true
			targets = append(targets, plain)
		}
	}
	return targets, func() { _ = client.Close() }, nil
}
