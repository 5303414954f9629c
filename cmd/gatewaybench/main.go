// Command gatewaybench loads a tool-execution gateway and compares it, side
// by side on the same machine, with a plain chi server calling the same tool
// without any idempotency layer.
//
// By default it starts, on loopback listeners in a child process of its own
// (so the servers' CPU time is read apart from the load generator's;
// -inprocess keeps them in this process), the gateway (or -replicas of them
// sharing one Redis store) and the baseline, all serving a tool whose only
// side effect is one Redis write (INCR of a counter per idempotency key),
// and runs each -mode against them in alternating rounds. Beside them runs
// the exactly-once floor (target "floor", benchtool.FloorHandler): a
// minimal server making the same store round trips as a gateway call and
// nothing else, so "gateway ... throughput / floor" says what the product
// costs beyond the protocol.
// With -url it loads an external gateway instead; -upstream serves the
// counting tool for such a gateway to call, so the dup check can read its
// counters.
//
// -console-poll 1s adds the target "gateway+console": the same gateway(s),
// loaded the same way, while a console signed in on the admin listener
// polls what the open Approvals page polls, over -console-pending pending
// approvals. -receipts adds "gateway+receipts": gateways the same but for
// receipts on, each run ending once the receipt writer has caught up.
// Both are compared with "gateway" in the same rounds.
//
// -profile bare,everything loads, beside the gateway as it is (bare),
// gateways with every feature on (everything: decide rules, receipts with
// signed checkpoints, provider tokens, a budget, pinned MCP tools;
// benchtool's everything.go). -c takes a list of concurrencies, run one
// after the other on the same servers; -out writes the medians over the
// rounds of every (mode, C, target) as sweep.json, sweep.csv and a text
// table, which cmd/benchplot draws (round-five.sh runs it all).
//
// -api mcp sends the same traffic to the gateway's MCP endpoint (one raw
// JSON-RPC tools/call POST per request, no MCP client library) and adds a
// plain go-sdk MCP server calling the same tool without idempotency
// (plain-mcp); -api rest,mcp loads both APIs of the same gateway,
// alternating with the baseline and the plain server in every round.
//
//	gatewaybench -mode fresh -c 32 -d 10s
//	gatewaybench -mode fresh,replay -api rest,mcp
//	gatewaybench -mode dup -replicas 2 -k 4
//	gatewaybench -mode fresh,replay -console-poll 1s -d 5s -rounds 3
//	gatewaybench -mode fresh,replay -receipts -d 5s -rounds 3
//	gatewaybench -profile bare,everything -api rest,mcp -mode fresh,replay -c 1,10,50,200 -rounds 3 -out round-five
//	gatewaybench -upstream 127.0.0.1:9000 -counters gwbench:ext:   # tool for an external gateway
//	gatewaybench -mode dup -url http://127.0.0.1:8080,http://127.0.0.1:8081 -tool bench-incr -counters gwbench:ext:
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/internal/benchtool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatewaybench:", err)
		os.Exit(1)
	}
}

// errChecksFailed makes the exit status say that a target was missed.
var errChecksFailed = errors.New("some targets were not met (see FAIL lines)")

type flags struct {
	modes string
	// concurrency is -c: comma-separated counts of requests in flight;
	// workers the parsed list, run one after the other.
	concurrency string
	workers     []int
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	dupK        int
	pool        int
	payload     int
	preferWait  int
	replicas    int
	redisAddr   string
	urls        string
	baseline    string
	tool        string
	counters    string
	upstream    string
	accessLog   bool
	cpuProfile  string
	strict      bool
	only        string
	protocol    int
	rate        float64
	bolt        string
	apis        string
	inProcess   bool
	serveChild  bool
	// consolePoll, when positive, adds the gateway+console target.
	consolePoll    time.Duration
	consolePending int
	// receipts adds the gateway+receipts target.
	receipts bool
	// profiles are -profile's: which gateway configurations are loaded
	// (bare: the gateway and gateway-mcp targets; everything: their
	// everything counterparts).
	profiles []string
	// out, when set, is the directory the sweep is written to
	// (sweep.json, sweep.csv, table.txt).
	out string
	// everythingTool is -everything-tool.
	everythingTool string
}

// The gateway profiles -profile names.
const (
	profileBare       = "bare"
	profileEverything = "everything"
)

func parseFlags(args []string, out io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("gatewaybench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&f.modes, "mode", "fresh,replay,dup", "comma-separated modes: fresh, replay, dup")
	fs.StringVar(&f.concurrency, "c", "32", "requests in flight (keep-alive workers); a comma-separated list runs each in turn, e.g. 1,10,50,200")
	fs.DurationVar(&f.duration, "d", 10*time.Second, "length of each target's run in each round")
	fs.DurationVar(&f.warmup, "warmup", time.Second, "unmeasured run per target before the rounds")
	fs.IntVar(&f.rounds, "rounds", 2, "rounds; each loads every target in turn (A, B, A, B) to cancel drift")
	fs.IntVar(&f.dupK, "k", 4, "dup mode: identical concurrent requests per step")
	fs.IntVar(&f.pool, "pool", 1000, "replay mode: steps in the warmed pool")
	fs.IntVar(&f.payload, "payload", 64, "length of the payload string in the arguments")
	fs.IntVar(&f.preferWait, "wait", 0, "dup mode: send Prefer: wait=N (0: none, the losers get 409)")
	fs.IntVar(&f.replicas, "replicas", 1, "in-process gateway replicas sharing one Redis store")
	fs.StringVar(&f.redisAddr, "redis", "127.0.0.1:6379", "Redis for the in-process store and the tool's counters")
	fs.StringVar(&f.urls, "url", "", "comma-separated base URLs of an external gateway (no in-process servers)")
	fs.StringVar(&f.baseline, "baseline-url", "", "with -url: base URL of a baseline to compare against")
	fs.StringVar(&f.tool, "tool", benchtool.DefaultToolName, "tool to call")
	fs.StringVar(&f.counters, "counters", "", "Redis key prefix of the counting tool's counters (-upstream, and -url's dup check)")
	fs.StringVar(&f.upstream, "upstream", "", "serve the counting tool as an HTTP upstream on this address and wait")
	fs.BoolVar(&f.accessLog, "accesslog", true, "in-process gateways format their JSON access log (to io.Discard)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole process (servers and load) here")
	fs.BoolVar(&f.strict, "strict", false, "exit 1 when a throughput or latency target is missed (dup failures always do)")
	fs.Float64Var(&f.rate, "rate", 0, "cap on requests started per second (dup: steps), to compare latency at equal throughput; 0: as fast as possible")
	fs.IntVar(&f.protocol, "resp", 0, "in-process: RESP version of the Redis clients (0: go-redis default, 3)")
	fs.StringVar(&f.bolt, "bolt", "", "in-process: the gateway uses the embedded store, a new bbolt file at this path (removed at exit), instead of Redis")
	fs.StringVar(&f.apis, "api", "rest", "comma-separated gateway APIs to load: rest (POST /api/tools/v1/{tool}), mcp (tools/call at /mcp); each is a target next to the baseline")
	fs.StringVar(&f.only, "only", "", "in-process: load only this target (baseline, floor, gateway: every -api, gateway-mcp, or plain-mcp), e.g. to profile it")
	fs.BoolVar(&f.inProcess, "inprocess", false, "run the servers in the load generator's process (then 'server us' is the whole process's CPU); default: a child process, measured apart")
	fs.DurationVar(&f.consolePoll, "console-poll", 0, "in-process: add the target gateway+console, the gateway loaded while a console signed in on its admin listener polls the pending approvals every interval (0: off)")
	fs.IntVar(&f.consolePending, "console-pending", 200, "with -console-poll: pending approvals made before the rounds")
	fs.BoolVar(&f.receipts, "receipts", false, "in-process, Redis store: add the target gateway+receipts, gateways the same as gateway's with receipts on (in Redis under the run's prefix)")
	profiles := fs.String("profile", profileBare, "comma-separated gateway profiles to load side by side: bare (the gateway alone), everything (decide rules, receipts with signed checkpoints, provider tokens, a budget, a pinned MCP upstream tool; in-process, Redis store)")
	fs.StringVar(&f.everythingTool, "everything-tool", benchtool.EverythingToolInProcess, "with -profile everything, the tool called: inprocess (the counting tool in the gateway, as the floor runs it; the pinned MCP upstream's tools listed beside it) or mcp (the pinned MCP upstream's tool: one more loopback MCP round trip per call)")
	fs.StringVar(&f.out, "out", "", "write the run's medians to this directory: sweep.json, sweep.csv and table.txt (cmd/benchplot draws sweep.json)")
	fs.BoolVar(&f.serveChild, "serve-child", false, "internal: be the servers' child process")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if f.workers, err = parseCounts(f.concurrency); err != nil {
		return nil, err
	}
	if f.profiles, err = parseProfiles(*profiles); err != nil {
		return nil, err
	}
	if f.consolePending < 1 {
		return nil, fmt.Errorf("-console-pending %d: want at least 1 (the console polls a list of pending approvals)", f.consolePending)
	}
	return f, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	if f.upstream != "" {
		return serveUpstream(ctx, f, out)
	}
	// The CPU profile is of the process that runs the servers.
	profileHere := f.serveChild || f.inProcess || f.urls != ""
	if f.cpuProfile != "" && profileHere {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if f.serveChild {
		return serveChild(ctx, f, out)
	}
	modes, err := parseModes(f.modes)
	if err != nil {
		return err
	}
	apis, err := parseAPIs(f.apis)
	if err != nil {
		return err
	}
	targets, cleanup, err := setUp(ctx, f, apis, args)
	if err != nil {
		return err
	}
	defer cleanup()

	where := "servers in a child process"
	if f.inProcess || f.urls != "" {
		where = "servers in this process"
	}
	machine := fmt.Sprintf("%d CPUs, GOMAXPROCS %d, %s; %s; load generator, servers and Redis share the CPUs",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), where)
	fmt.Fprintf(out, "machine: %s; %s\n", machine, loadAverage())
	sweep := &benchtool.Sweep{Started: time.Now().UTC(), Machine: machine, LoadBefore: loadAverage(),
		Duration: f.duration.String(), Rounds: f.rounds, Command: strings.Join(append([]string{"gatewaybench"}, args...), " ")}
	failed := false
	for _, workers := range f.workers {
		for _, mode := range modes {
			report, err := benchtool.RunBench(ctx, benchtool.BenchConfig{
				Targets: targets,
				Load: benchtool.LoadConfig{
					Tool: f.tool, Mode: mode, Workers: workers, DupK: f.dupK,
					PoolSize: f.pool, PayloadBytes: f.payload, PreferWait: f.preferWait, Rate: f.rate,
				},
				Rounds: f.rounds, Duration: f.duration, Warmup: f.warmup, Progress: out,
			})
			if err != nil {
				return fmt.Errorf("mode %s, -c %d: %w", mode, workers, err)
			}
			fmt.Fprintln(out)
			report.WriteText(out)
			fmt.Fprintln(out, loadAverage())
			fmt.Fprintf(out, "%s\n\n", report.JSON())
			sweep.Rows = append(sweep.Rows, report.SweepRows()...)
			for _, c := range report.Checks() {
				if !c.Pass && (c.Correctness || f.strict) {
					failed = true
				}
			}
		}
	}
	sweep.LoadAfter = loadAverage()
	if len(f.workers) > 1 || f.out != "" {
		fmt.Fprintln(out)
		sweep.WriteTable(out)
	}
	if f.out != "" {
		if err := writeSweep(f.out, sweep); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", filepath.Join(f.out, "sweep.json"))
	}
	if failed {
		return errChecksFailed
	}
	return nil
}

// writeSweep writes the sweep into dir (created if missing): sweep.json,
// sweep.csv and table.txt.
func writeSweep(dir string, sweep *benchtool.Sweep) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	var table bytes.Buffer
	sweep.WriteTable(&table)
	var jsonOut, csvOut bytes.Buffer
	if err := sweep.WriteJSON(&jsonOut); err != nil {
		return err
	}
	if err := sweep.WriteCSV(&csvOut); err != nil {
		return err
	}
	for name, b := range map[string][]byte{"sweep.json": jsonOut.Bytes(), "sweep.csv": csvOut.Bytes(), "table.txt": table.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("-out: %w", err)
		}
	}
	return nil
}

// parseCounts reads -c: positive counts, comma-separated.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, field := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-c %q: want positive counts of requests in flight, comma-separated (e.g. 1,10,50,200)", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseProfiles reads -profile: bare and/or everything, each once.
func parseProfiles(s string) ([]string, error) {
	var out []string
	for _, field := range strings.Split(s, ",") {
		p := strings.TrimSpace(field)
		if (p != profileBare && p != profileEverything) || slices.Contains(out, p) {
			return nil, fmt.Errorf("-profile %q: want %s and/or %s, comma-separated, each once", s, profileBare, profileEverything)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseModes(s string) ([]benchtool.Mode, error) {
	var modes []benchtool.Mode
	for _, name := range strings.Split(s, ",") {
		m, err := benchtool.ParseMode(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		modes = append(modes, m)
	}
	return modes, nil
}

func parseAPIs(s string) ([]benchtool.API, error) {
	var apis []benchtool.API
	for _, name := range strings.Split(s, ",") {
		a, err := benchtool.ParseAPI(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		if slices.Contains(apis, a) {
			return nil, fmt.Errorf("-api %q: %s twice", s, a)
		}
		apis = append(apis, a)
	}
	return apis, nil
}

// gatewayName names the gateway target loaded through api: "gateway" for
// REST, as before there was a choice, and "gateway-mcp" for MCP.
func gatewayName(api benchtool.API) string {
	if api == benchtool.APIMCP {
		return "gateway-mcp"
	}
	return "gateway"
}

// gatewayTargets returns one target per API, all on the same gateway(s).
func gatewayTargets(template benchtool.Target, apis []benchtool.API) []benchtool.Target {
	var out []benchtool.Target
	for _, api := range apis {
		t := template
		t.Name, t.API = gatewayName(api), api
		out = append(out, t)
	}
	return out
}

// everythingServers is what the servers serve for the everything profile.
type everythingServers struct {
	urls   []string
	tokens []string
	// roundTrips reads the everything gateways' store round trips;
	// receiptCounts their receipt counters.
	roundTrips    func() int64
	receiptCounts func(context.Context) (benchtool.ReceiptCounts, error)
}

// profileTargets returns the gateway targets of every -profile, one per
// API each: bare's on the gateway(s) of gw, everything's on the
// everything gateways (their callers sending provider tokens, each run
// ending once their receipts are written).
func profileTargets(f *flags, apis []benchtool.API, gw benchtool.Target, ev everythingServers) []benchtool.Target {
	var out []benchtool.Target
	if slices.Contains(f.profiles, profileBare) {
		gw.Profile = profileBare
		out = append(out, gatewayTargets(gw, apis)...)
	}
	if slices.Contains(f.profiles, profileEverything) {
		t := gw
		t.Profile, t.URLs, t.BearerTokens = profileEverything, ev.urls, ev.tokens
		if f.everythingTool == benchtool.EverythingToolMCP {
			// The upstream's tool counts under the scoped keys the
			// gateway sends it, not the load's: no dup check.
			t.Tool = nil
		}
		if t.RoundTrips != nil {
			t.RoundTrips = ev.roundTrips
		}
		settleOnReceipts(&t, ev.receiptCounts)
		for _, api := range apis {
			t.API, t.Name = api, benchtool.EverythingName
			if api == benchtool.APIMCP {
				t.Name = benchtool.EverythingMCPName
			}
			out = append(out, t)
		}
	}
	return out
}

// mcpInProgressWait is the in-process gateways' mcp.in_progress_wait for
// -wait: the MCP counterpart of Prefer: wait=N, and without -wait an
// immediate -32001, as REST answers 409 without Prefer.
func mcpInProgressWait(preferWait int) time.Duration {
	if preferWait > 0 {
		return time.Duration(preferWait) * time.Second
	}
	return -1
}

// serversConfig is the configuration of the in-process servers.
func serversConfig(f *flags) benchtool.ServersConfig {
	return benchtool.ServersConfig{
		RedisAddr: f.redisAddr, Replicas: f.replicas, ToolName: f.tool, AccessLog: f.accessLog, Protocol: f.protocol,
		BoltPath: f.bolt, MCPInProgressWait: mcpInProgressWait(f.preferWait),
		Console: f.consolePoll > 0, Receipts: f.receipts, Everything: slices.Contains(f.profiles, profileEverything),
		EverythingTool: f.everythingTool,
	}
}

// onlyTargets keeps the target -only names ("gateway" keeps the gateway
// under every -api).
func onlyTargets(targets []benchtool.Target, only string) ([]benchtool.Target, error) {
	if only == "" {
		return targets, nil
	}
	var kept []benchtool.Target
	for _, t := range targets {
		if t.Name == only || (only == "gateway" && strings.HasPrefix(t.Name, "gateway")) {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("-only %q: want baseline, %s, gateway (every gateway target), gateway-mcp, %s, %s or %s", only, benchtool.FloorName, benchtool.EverythingName, benchtool.EverythingMCPName, benchtool.PlainMCPName)
	}
	return kept, nil
}

// setUp returns the targets: the baseline, the gateway(s) (one target per
// API) and, with MCP, the plain go-sdk MCP server, in a child process (or
// in this one with -inprocess); or the external URLs.
func setUp(ctx context.Context, f *flags, apis []benchtool.API, args []string) ([]benchtool.Target, func(), error) {
	if f.urls == "" && !f.inProcess {
		info, stop, err := startChild(args)
		if err != nil {
			return nil, nil, err
		}
		targets, closeClient, err := childTargets(ctx, f, apis, info)
		if err == nil {
			targets, err = onlyTargets(targets, f.only)
		}
		if err != nil {
			stop()
			return nil, nil, err
		}
		return targets, func() { closeClient(); stop() }, nil
	}
	if f.urls == "" {
		servers, err := benchtool.StartServers(ctx, serversConfig(f))
		if err != nil {
			return nil, nil, err
		}
		gw := benchtool.Target{URLs: servers.GatewayURLs, RoundTrips: servers.StoreRoundTrips, Tool: servers.Tool, RedisCPU: servers.RedisCPU}
		if f.bolt != "" {
			gw.RoundTrips = nil // the embedded store makes no Redis round trips
		}
		beside, err := besideTargets(f, apis, gw, besideServers{adminURLs: servers.AdminURLs, adminToken: servers.AdminToken,
			receiptURLs: servers.ReceiptGatewayURLs, receiptRoundTrips: servers.ReceiptStoreRoundTrips,
			receiptCounts: func(context.Context) (benchtool.ReceiptCounts, error) { return servers.ReceiptCounts(), nil }})
		if err != nil {
			_ = servers.Close()
			return nil, nil, err
		}
		ev := everythingServers{urls: servers.EverythingURLs, tokens: servers.EverythingTokens, roundTrips: servers.EverythingRoundTripsCount,
			receiptCounts: func(context.Context) (benchtool.ReceiptCounts, error) { return servers.EverythingReceiptCounts(), nil }}
		targets := append([]benchtool.Target{
			{Name: benchtool.BaselineName, URLs: []string{servers.BaselineURL}, Tool: servers.Tool, RedisCPU: servers.RedisCPU, NoIdempotency: true},
			{Name: benchtool.FloorName, URLs: []string{servers.FloorURL}, Tool: servers.Tool, RedisCPU: servers.RedisCPU, RoundTrips: servers.FloorRoundTrips},
		}, profileTargets(f, apis, gw, ev)...)
		targets = append(targets, beside...)
		if slices.Contains(apis, benchtool.APIMCP) {
			targets = append(targets, benchtool.Target{Name: benchtool.PlainMCPName, API: benchtool.APIMCP, URLs: []string{servers.PlainMCPURL},
				Tool: servers.Tool, RedisCPU: servers.RedisCPU, NoIdempotency: true})
		}
		targets, err = onlyTargets(targets, f.only)
		if err != nil {
			_ = servers.Close()
			return nil, nil, err
		}
		return targets, func() { _ = servers.Close() }, nil
	}

	if f.consolePoll > 0 || f.receipts || slices.Contains(f.profiles, profileEverything) {
		return nil, nil, errors.New("-console-poll, -receipts and -profile everything need the in-process servers (no -url)")
	}
	gw := benchtool.Target{URLs: strings.Split(f.urls, ",")}
	var targets []benchtool.Target
	cleanup := func() {}
	if f.counters != "" {
		client := redis.NewClient(&redis.Options{Addr: f.redisAddr})
		gw.Tool = benchtool.NewCounterTool(client, f.tool, f.counters)
		cleanup = func() { _ = client.Close() }
	}
	if f.baseline != "" {
		targets = append(targets, benchtool.Target{Name: benchtool.BaselineName, URLs: []string{f.baseline}})
	}
	return append(targets, gatewayTargets(gw, apis)...), cleanup, nil
}

// startCPUProfile profiles this process into path until the returned
// function runs.
func startCPUProfile(path string) (func(), error) {
	file, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(file); err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = file.Close() }, nil
}

// loadAverage is the machine's load average (Linux), to note how busy the
// shared machine was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	fields := strings.Fields(string(b))
	if len(fields) < 3 {
		return "load average unknown"
	}
	return "load average " + strings.Join(fields[:3], " ")
}

// serveUpstream serves the counting tool for an external gateway until ctx ends.
func serveUpstream(ctx context.Context, f *flags, out io.Writer) error {
	if f.counters == "" {
		return errors.New("-upstream needs -counters (the key prefix the dup check will read)")
	}
	client := redis.NewClient(&redis.Options{Addr: f.redisAddr})
	defer client.Close()
	tool := benchtool.NewCounterTool(client, f.tool, f.counters)
	srv := &http.Server{Addr: f.upstream, Handler: tool.UpstreamHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	fmt.Fprintf(out, "serving tool %s on http://%s (counters under %q); Ctrl-C to stop\n", f.tool, f.upstream, f.counters)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("upstream: %w", err)
	}
	return nil
}
