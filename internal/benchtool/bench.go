package benchtool

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Target is one server (or set of replicas) a benchmark loads.
type Target struct {
	// Name labels the target in reports; "baseline" is what ratios divide by.
	Name string
	URLs []string
	// API is the gateway API the target is loaded through (default
	// APIREST; the baseline only serves REST).
	API API
	// RoundTrips, when set, reads the target's store round-trip counter.
	RoundTrips func() int64
	// Tool, when set, is the tool the target calls; dup mode checks its
	// counters.
	Tool *CounterTool
	// RedisCPU, when set, reads the CPU time used by the Redis the target
	// (store and tool) uses.
	RedisCPU func(context.Context) (time.Duration, error)
	// RedisCommands, when set, reads the per-command call counts of that
	// Redis (RedisCommandCalls), so a run reports the commands per call.
	RedisCommands func(context.Context) (map[string]int64, error)
	// ServerCPU, when set, reads the CPU time used so far by the process
	// serving the target (servers in another process than the load); unset,
	// this process's CPU time (load generator included) is what is counted.
	ServerCPU func(context.Context) (time.Duration, error)
	// NoIdempotency: the target is a plain server without the gateway's
	// layer (over MCP its results carry no executionId to verify).
	NoIdempotency bool
	// Companion, when set, runs beside the load in each measured run (a
	// console left polling: ConsolePoller); what it measured is the run's
	// Result.Companion.
	Companion Companion
	// Settle, when set, waits for the target's work that outlives its
	// answers (receipts: WaitReceipts) before and after each measured run,
	// so that work is counted in the run that caused it.
	Settle func(context.Context) error
	// Receipts, when set, reads the receipts the target has written so
	// far, so a run reports how many it wrote (Result.Receipts).
	Receipts func(context.Context) (int64, error)
	// Beside names the target this one is the same as but for one thing
	// (the console, receipts), which its checks compare it with.
	Beside string
	// BearerTokens, when set, are the tokens the target's callers send
	// (LoadConfig.BearerTokens).
	BearerTokens []string
	// Profile names the gateway configuration the target runs ("bare",
	// "everything"; "" for the references), for the reports.
	Profile string
}

// BaselineName is the name of the target ratios are computed against.
const BaselineName = "baseline"

// BenchConfig configures RunBench.
type BenchConfig struct {
	Targets []Target
	// Load is the template of every target's load (URLs are the target's).
	Load LoadConfig
	// Rounds alternate the targets (A, B, A, B, ...) so that drift of the
	// shared machine hits them alike (default 2).
	Rounds int
	// Duration is the length of each target's run in each round.
	Duration time.Duration
	// Warmup is an unmeasured run per target before the first round.
	Warmup time.Duration
	// Progress receives one line per run; nil means none.
	Progress io.Writer
}

// TargetReport is what a benchmark measured on one target.
type TargetReport struct {
	Name string
	// API is the API the target was loaded through.
	API    API
	Result *Result
	// Dup is the dup check's verdict (dup mode, with a Tool).
	Dup *DupReport
	// NoIdempotency: a plain server, which makes no exactly-once promise
	// (its dup check is reported, not held against it).
	NoIdempotency bool
	// Beside is Target.Beside.
	Beside string
	// Profile is Target.Profile.
	Profile string
	// Rounds are the target's runs, one per round, in order (Result
	// merges them); medians over them are what the sweep reports.
	Rounds []*Result
}

// Report is the outcome of RunBench.
type Report struct {
	Mode    Mode
	Workers int
	DupK    int
	Rounds  int
	// Rate is the cap on requests per second (0: none).
	Rate float64
	// Duration is each run's length.
	Duration time.Duration
	Targets  []TargetReport
}

// RunBench loads each target in turn, Rounds times, and merges each
// target's runs.
func RunBench(ctx context.Context, cfg BenchConfig) (_ *Report, err error) {
	cfg.Rounds = orInt(cfg.Rounds, 2)
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	loads := make([]*Load, len(cfg.Targets))
	defer func() {
		for _, l := range loads {
			if l != nil {
				if cerr := l.Close(); cerr != nil && err == nil {
					err = fmt.Errorf("close load: %w", cerr)
				}
			}
		}
	}()
	for i, t := range cfg.Targets {
		if loads[i], err = prepareLoad(ctx, cfg, t); err != nil {
			return nil, err
		}
	}
	merged := make([]*Result, len(cfg.Targets))
	rounds := make([][]*Result, len(cfg.Targets))
	for i := range merged {
		merged[i] = newResult()
	}
	// The warm-up's dup steps are checked too: they ran under the same rules.
	width := 11
	for _, t := range cfg.Targets {
		width = max(width, len(t.Name))
	}
	for round := range cfg.Rounds {
		for i, t := range cfg.Targets {
			res, err := measuredRun(ctx, t, loads[i], cfg.Duration)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(cfg.Progress, "round %d %-*s %8.0f req/s  p99 %7.2f ms  errors %d  server %.0f us/req  redis %.1f us/req\n",
				round+1, width, t.Name, res.RPS(), ms(res.Percentile(0.99)), res.Errors, res.ServerMicrosPerRequest(), res.RedisMicrosPerRequest())
			merged[i].Merge(res)
			rounds[i] = append(rounds[i], res)
		}
	}
	report, err := newReport(ctx, cfg, loads, merged)
	if err != nil {
		return nil, err
	}
	for i := range report.Targets {
		report.Targets[i].Rounds = rounds[i]
	}
	return report, nil
}

// prepareLoad makes t's load, prepares it and runs its warm-up.
func prepareLoad(ctx context.Context, cfg BenchConfig, t Target) (*Load, error) {
	lc := cfg.Load
	lc.URLs = append([]string(nil), t.URLs...)
	lc.API = orAPI(t.API)
	lc.NoIdempotency = t.NoIdempotency
	lc.BearerTokens = t.BearerTokens
	l, err := NewLoad(lc)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	if err := l.Prepare(ctx); err != nil {
		return l, fmt.Errorf("target %s: %w", t.Name, err)
	}
	if t.Companion != nil {
		if err := t.Companion.Prepare(ctx); err != nil {
			return l, fmt.Errorf("target %s: %w", t.Name, err)
		}
	}
	if cfg.Warmup > 0 {
		if _, err := l.Run(ctx, cfg.Warmup); err != nil {
			return l, fmt.Errorf("target %s: warm-up: %w", t.Name, err)
		}
	}
	return l, nil
}

// counters are what a target's probes read before and after a run.
type counters struct {
	roundTrips int64
	redisCPU   time.Duration
	commands   map[string]int64
	serverCPU  time.Duration
	receipts   int64
}

// readCounters reads every probe t has.
func readCounters(ctx context.Context, t Target) (c counters, err error) {
	if t.RoundTrips != nil {
		c.roundTrips = t.RoundTrips()
	}
	if t.RedisCPU != nil {
		if c.redisCPU, err = t.RedisCPU(ctx); err != nil {
			return c, err
		}
	}
	if t.RedisCommands != nil {
		if c.commands, err = t.RedisCommands(ctx); err != nil {
			return c, err
		}
	}
	if t.ServerCPU != nil {
		if c.serverCPU, err = t.ServerCPU(ctx); err != nil {
			return c, err
		}
	}
	if t.Receipts != nil {
		if c.receipts, err = t.Receipts(ctx); err != nil {
			return c, err
		}
	}
	return c, nil
}

// measuredRun runs l for d, with t's companion beside it, and attributes
// to it what t's probes counted meanwhile, t's settling included.
func measuredRun(ctx context.Context, t Target, l *Load, d time.Duration) (*Result, error) {
	if err := settle(ctx, t); err != nil {
		return nil, err
	}
	before, err := readCounters(ctx, t)
	if err != nil {
		return nil, err
	}
	procBefore := processCPU()
	companion := startCompanion(ctx, t.Companion)
	res, err := l.Run(ctx, d)
	polled := companion()
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	res.Companion = polled
	if err := settle(ctx, t); err != nil {
		return nil, err
	}
	res.ProcessCPU = processCPU() - procBefore
	after, err := readCounters(ctx, t)
	if err != nil {
		return nil, err
	}
	if t.ServerCPU != nil {
		res.ServerCPU = after.serverCPU - before.serverCPU
	}
	if t.RedisCommands != nil {
		res.RedisCommands = commandDeltas(before.commands, after.commands)
	}
	if t.RoundTrips != nil {
		res.RoundTrips = after.roundTrips - before.roundTrips
	}
	if t.RedisCPU != nil {
		res.RedisCPU = after.redisCPU - before.redisCPU
	}
	if t.Receipts != nil {
		res.Receipts = after.receipts - before.receipts
	}
	return res, nil
}

// settle runs t.Settle when it has one.
func settle(ctx context.Context, t Target) error {
	if t.Settle == nil {
		return nil
	}
	if err := t.Settle(ctx); err != nil {
		return fmt.Errorf("target %s: %w", t.Name, err)
	}
	return nil
}

// startCompanion runs c until the returned function is called, which
// returns what c measured (nil without a companion).
func startCompanion(ctx context.Context, c Companion) func() *Result {
	if c == nil {
		return func() *Result { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan *Result, 1)
	go func() { done <- c.Run(ctx) }()
	return func() *Result {
		cancel()
		return <-done
	}
}

// newReport puts the merged results together, with the dup check of each
// target in dup mode.
func newReport(ctx context.Context, cfg BenchConfig, loads []*Load, merged []*Result) (*Report, error) {
	lc := loads[0].Config()
	report := &Report{Mode: lc.Mode, Workers: lc.Workers, DupK: lc.DupK, Rounds: cfg.Rounds, Duration: cfg.Duration, Rate: lc.Rate}
	for i, t := range cfg.Targets {
		tr := TargetReport{Name: t.Name, API: orAPI(t.API), Result: merged[i], NoIdempotency: t.NoIdempotency, Beside: t.Beside, Profile: t.Profile}
		if lc.Mode == ModeDup && t.Tool != nil {
			dup, err := CheckOnce(ctx, t.Tool, loads[i].DupKeys())
			if err != nil {
				return nil, fmt.Errorf("target %s: %w", t.Name, err)
			}
			tr.Dup = &dup
		}
		report.Targets = append(report.Targets, tr)
	}
	return report, nil
}

func orAPI(a API) API {
	if a == "" {
		return APIREST
	}
	return a
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
