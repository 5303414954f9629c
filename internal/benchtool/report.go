package benchtool

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The targets for the gateway against the baseline.
const (
	TargetFreshRatio    = 0.6
	TargetReplayRatio   = 1.0
	TargetP99AddedMS    = 2.0
	TargetFloorRatio    = 0.8
	TargetP99AtWorkers  = 32
	TargetFreshTrips    = 2.0
	TargetReplayTrips   = 1.0
	tripsTolerance      = 0.01
	jsonLatencyDecimals = 1000
)

// Check is one target of the issue, evaluated on a report.
type Check struct {
	Name string  `json:"name"`
	Want string  `json:"want"`
	Got  float64 `json:"got"`
	Pass bool    `json:"pass"`
	// Correctness: a miss is wrong behaviour, not slowness (a step run
	// twice, a console poll refused), and fails the run even when
	// throughput and latency misses do not.
	Correctness bool `json:"correctness,omitempty"`
}

func (r *Report) baseline() *TargetReport { return r.target(BaselineName) }

// target is the target called name, or nil.
func (r *Report) target(name string) *TargetReport {
	for i := range r.Targets {
		if r.Targets[i].Name == name {
			return &r.Targets[i]
		}
	}
	return nil
}

// floorCheck is the gateway's throughput against the exactly-once floor
// (FloorHandler) in fresh and replay mode, when the run loaded both.
func (r *Report) floorCheck(t TargetReport) (Check, bool) {
	floor := r.target(FloorName)
	if floor == nil || t.Name == FloorName || t.NoIdempotency || floor.Result.RPS() <= 0 || r.Rate > 0 ||
		(r.Mode != ModeFresh && r.Mode != ModeReplay) {
		return Check{}, false
	}
	ratio := t.Result.RPS() / floor.Result.RPS()
	return Check{fmt.Sprintf("%s %s throughput / floor", t.Name, r.Mode), fmt.Sprintf(">= %.1f", TargetFloorRatio), ratio, ratio >= TargetFloorRatio, false}, true
}

// Checks evaluates the targets for every non-baseline target: the
// throughput ratio and added p99 need a baseline in the same run, round
// trips need a counter, the dup check needs the tool's counters.
func (r *Report) Checks() []Check {
	base := r.baseline()
	var out []Check
	for _, t := range r.Targets {
		if t.Name == BaselineName {
			continue
		}
		res := t.Result
		if c, ok := r.floorCheck(t); ok {
			out = append(out, c)
		}
		// The floor is a reference like the baseline: only its
		// exactly-once and round trips are checked.
		reference := t.Name == FloorName
		if !reference && base != nil && base.Result.RPS() > 0 && r.Rate <= 0 {
			// At a capped rate both keep up; the ratio says nothing.
			ratio := res.RPS() / base.Result.RPS()
			switch r.Mode {
			case ModeFresh:
				out = append(out, Check{t.Name + " fresh throughput / baseline", fmt.Sprintf(">= %.1f", TargetFreshRatio), ratio, ratio >= TargetFreshRatio, false})
			case ModeReplay:
				out = append(out, Check{t.Name + " replay throughput / baseline", fmt.Sprintf(">= %.1f", TargetReplayRatio), ratio, ratio >= TargetReplayRatio, false})
			}
		}
		if !reference && base != nil && base.Result.Requests > 0 {
			if r.Workers == TargetP99AtWorkers && r.Mode != ModeDup {
				added := ms(res.Percentile(0.99) - base.Result.Percentile(0.99))
				out = append(out, Check{t.Name + " p99 added over baseline (ms)", fmt.Sprintf("<= %.1f", TargetP99AddedMS), added, added <= TargetP99AddedMS, false})
			}
		}
		// A companion's requests (the console's reads) share the store
		// client: its round trips are reported, not held against a call.
		if trips := res.RoundTripsPerRequest(); !math.IsNaN(trips) && res.Companion == nil {
			switch r.Mode {
			case ModeFresh:
				out = append(out, Check{t.Name + " store round trips per fresh call", fmt.Sprintf("= %.0f", TargetFreshTrips), trips, math.Abs(trips-TargetFreshTrips) <= tripsTolerance, false})
			case ModeReplay:
				out = append(out, Check{t.Name + " store round trips per replay", fmt.Sprintf("= %.0f", TargetReplayTrips), trips, math.Abs(trips-TargetReplayTrips) <= tripsTolerance, false})
			}
		}
		if t.Dup != nil && !t.NoIdempotency {
			out = append(out, Check{t.Name + " steps executed more than once", "= 0", float64(t.Dup.Duplicated), t.Dup.Duplicated == 0, true})
			out = append(out, Check{t.Name + " steps never executed", "= 0", float64(t.Dup.Missing), t.Dup.Missing == 0, true})
		}
		out = append(out, r.besideChecks(t)...)
	}
	return out
}

// WriteText prints the report as a table, then the checks.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "mode %s, %d workers, %d round(s) x %s per target", r.Mode, r.Workers, r.Rounds, r.Duration)
	if r.Rate > 0 {
		fmt.Fprintf(w, ", capped at %.0f/s", r.Rate)
	}
	if r.Mode == ModeDup {
		fmt.Fprintf(w, ", %d copies per step", r.DupK)
	}
	fmt.Fprintln(w)
	width := nameWidth(r.Targets)
	fmt.Fprintf(w, "%-*s %9s %9s %6s %7s %7s %7s %7s %6s %8s %9s %8s  %s\n",
		width, "target", "requests", "req/s", "ratio", "p50 ms", "p90 ms", "p99 ms", "p99.9", "rt/req", "proc us", "server us", "redis us", "statuses")
	base := r.baseline()
	for _, t := range r.Targets {
		res := t.Result
		ratio := "-"
		if base != nil && base.Result.RPS() > 0 {
			ratio = fmt.Sprintf("%.2f", res.RPS()/base.Result.RPS())
		}
		trips := "-"
		if v := res.RoundTripsPerRequest(); !math.IsNaN(v) {
			trips = fmt.Sprintf("%.2f", v)
		}
		redisUS := "-"
		if v := res.RedisMicrosPerRequest(); !math.IsNaN(v) {
			redisUS = fmt.Sprintf("%.1f", v)
		}
		fmt.Fprintf(w, "%-*s %9d %9.0f %6s %7.2f %7.2f %7.2f %7.2f %6s %8.1f %9.1f %8s  %s",
			width, t.Name, res.Requests, res.RPS(), ratio,
			ms(res.Percentile(0.5)), ms(res.Percentile(0.9)), ms(res.Percentile(0.99)), ms(res.Percentile(0.999)),
			trips, res.ProcessMicrosPerRequest(), res.ServerMicrosPerRequest(), redisUS, statusLine(res))
		if t.Dup != nil {
			fmt.Fprintf(w, "  dup check: %d steps, %d ran twice or more (max %d runs), %d never ran",
				t.Dup.Steps, t.Dup.Duplicated, t.Dup.MaxRuns, t.Dup.Missing)
		}
		fmt.Fprintln(w)
	}
	for _, t := range r.Targets {
		if line := commandLine(t.Result); line != "" {
			fmt.Fprintf(w, "redis commands per request, %s: %s\n", t.Name, line)
		}
	}
	for _, t := range r.Targets {
		if c := t.Result.Companion; c != nil {
			fmt.Fprintf(w, "console beside %s: %d polls (%s), p50 %.2f ms, p99 %.2f ms, max %.2f ms, %.1f pending approvals shown per poll\n",
				t.Name, c.Requests+c.Errors, statusLine(c), ms(c.Percentile(0.5)), ms(c.Percentile(0.99)), ms(c.Percentile(1)),
				float64(c.Listed)/float64(max(c.Requests, 1)))
		}
		if n := t.Result.Receipts; n >= 0 {
			fmt.Fprintf(w, "receipts, %s: %d written for %d fresh calls (the writer drained inside each run)\n", t.Name, n, t.Result.FreshCalls())
		}
	}
	for _, c := range r.Checks() {
		verdict := "PASS"
		if !c.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "target %-4s %-55s want %-7s got %.3f\n", verdict, c.Name, c.Want, c.Got)
	}
}

// nameWidth is the width of the target column: the longest name, at
// least 11 (the table's width before the longer names).
func nameWidth(targets []TargetReport) int {
	width := 11
	for _, t := range targets {
		width = max(width, len(t.Name))
	}
	return width
}

// commandLine lists the Redis commands per request, most frequent first.
func commandLine(res *Result) string {
	per := res.RedisCommandsPerRequest()
	names := make([]string, 0, len(per))
	for name, n := range per {
		if n >= 0.005 { // background noise of a shared Redis
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if per[a] != per[b] {
			if per[a] > per[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %.2f", name, per[name])
	}
	return strings.Join(parts, ", ")
}

func statusLine(res *Result) string {
	codes := make([]int, 0, len(res.Statuses))
	for code := range res.Statuses {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	parts := make([]string, 0, len(codes)+2)
	for _, code := range codes {
		switch {
		case code == StatusMCPIsError:
			parts = append(parts, fmt.Sprintf("isError:%d", res.Statuses[code]))
		case code < 0:
			parts = append(parts, fmt.Sprintf("rpc%d:%d", code, res.Statuses[code]))
		default:
			parts = append(parts, fmt.Sprintf("%d:%d", code, res.Statuses[code]))
		}
	}
	if res.Replayed > 0 {
		parts = append(parts, fmt.Sprintf("replayed:%d", res.Replayed))
	}
	if res.Errors > 0 {
		parts = append(parts, fmt.Sprintf("errors:%d", res.Errors))
	}
	return strings.Join(parts, " ")
}

type jsonTarget struct {
	Name           string             `json:"name"`
	API            API                `json:"api"`
	Requests       int64              `json:"requests"`
	Errors         int64              `json:"errors"`
	RPS            float64            `json:"rps"`
	Ratio          *float64           `json:"ratio_to_baseline,omitempty"`
	P50MS          float64            `json:"p50_ms"`
	P90MS          float64            `json:"p90_ms"`
	P99MS          float64            `json:"p99_ms"`
	P999MS         float64            `json:"p999_ms"`
	Statuses       map[string]int64   `json:"statuses"`
	Replayed       int64              `json:"replayed"`
	TripsPerReq    *float64           `json:"store_round_trips_per_request,omitempty"`
	RedisUSPerReq  *float64           `json:"redis_cpu_us_per_request,omitempty"`
	ProcUSPerReq   float64            `json:"process_cpu_us_per_request"`
	ServerUSPerReq *float64           `json:"server_cpu_us_per_request,omitempty"`
	RedisCommands  map[string]float64 `json:"redis_commands_per_request,omitempty"`
	DupSteps       *int               `json:"dup_steps,omitempty"`
	DupDuplicated  *int               `json:"dup_duplicated,omitempty"`
	DupMissing     *int               `json:"dup_missing,omitempty"`
	Receipts       *int64             `json:"receipts_written,omitempty"`
	Console        *jsonConsole       `json:"console,omitempty"`
}

// jsonConsole is what a target's console measured.
type jsonConsole struct {
	Polls    int64            `json:"polls"`
	Errors   int64            `json:"errors"`
	Statuses map[string]int64 `json:"statuses"`
	P50MS    float64          `json:"p50_ms"`
	P99MS    float64          `json:"p99_ms"`
	// Shown is the pending approvals the polled list showed, summed.
	Shown int64 `json:"approvals_shown"`
}

// JSON returns the report as one JSON object.
func (r *Report) JSON() []byte {
	out := struct {
		Mode     Mode         `json:"mode"`
		Workers  int          `json:"workers"`
		DupK     int          `json:"dup_k,omitempty"`
		Rounds   int          `json:"rounds"`
		Rate     float64      `json:"rate_cap,omitempty"`
		Duration string       `json:"duration_per_run"`
		Targets  []jsonTarget `json:"targets"`
		Checks   []Check      `json:"checks"`
	}{Mode: r.Mode, Workers: r.Workers, Rounds: r.Rounds, Rate: r.Rate, Duration: r.Duration.String(), Checks: r.Checks()}
	if r.Mode == ModeDup {
		out.DupK = r.DupK
	}
	base := r.baseline()
	for _, t := range r.Targets {
		res := t.Result
		jt := jsonTarget{
			Name: t.Name, API: t.API, Requests: res.Requests, Errors: res.Errors, RPS: round3(res.RPS()),
			P50MS: roundMS(res.Percentile(0.5)), P90MS: roundMS(res.Percentile(0.9)),
			P99MS: roundMS(res.Percentile(0.99)), P999MS: roundMS(res.Percentile(0.999)),
			Statuses: map[string]int64{}, Replayed: res.Replayed,
			ProcUSPerReq: round3(res.ProcessMicrosPerRequest()),
		}
		for code, n := range res.Statuses {
			jt.Statuses[fmt.Sprint(code)] = n
		}
		if base != nil && base.Result.RPS() > 0 {
			v := round3(res.RPS() / base.Result.RPS())
			jt.Ratio = &v
		}
		if v := res.RoundTripsPerRequest(); !math.IsNaN(v) {
			v = round3(v)
			jt.TripsPerReq = &v
		}
		if v := res.RedisMicrosPerRequest(); !math.IsNaN(v) {
			v = round3(v)
			jt.RedisUSPerReq = &v
		}
		if res.ServerCPU >= 0 {
			v := round3(res.ServerMicrosPerRequest())
			jt.ServerUSPerReq = &v
		}
		for name, n := range res.RedisCommandsPerRequest() {
			if jt.RedisCommands == nil {
				jt.RedisCommands = make(map[string]float64)
			}
			jt.RedisCommands[name] = round3(n)
		}
		if res.Receipts >= 0 {
			jt.Receipts = &res.Receipts
		}
		if c := res.Companion; c != nil {
			jt.Console = &jsonConsole{Polls: c.Requests, Errors: c.Errors, Statuses: map[string]int64{},
				P50MS: roundMS(c.Percentile(0.5)), P99MS: roundMS(c.Percentile(0.99)), Shown: c.Listed}
			for code, n := range c.Statuses {
				jt.Console.Statuses[fmt.Sprint(code)] = n
			}
		}
		if t.Dup != nil {
			jt.DupSteps, jt.DupDuplicated, jt.DupMissing = &t.Dup.Steps, &t.Dup.Duplicated, &t.Dup.Missing
		}
		out.Targets = append(out.Targets, jt)
	}
	b, _ := json.Marshal(out) // plain data: cannot fail
	return b
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func roundMS(d time.Duration) float64 {
	return math.Round(ms(d)*jsonLatencyDecimals) / jsonLatencyDecimals
}
