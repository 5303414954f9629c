package benchtool

import (
	"math"
	"slices"
	"time"
)

// Result is what one load run (or several merged) measured.
type Result struct {
	// Requests counts answered requests; Errors counts transport failures
	// (no answer at all).
	Requests int64
	Errors   int64
	// Elapsed is the wall time the requests took (summed over merged runs).
	Elapsed time.Duration
	// Statuses counts answers by HTTP status; over MCP, 200 is a tool
	// result without isError, StatusMCPIsError one with isError, and a
	// JSON-RPC error counts under its (negative) code.
	Statuses map[int]int64
	// Replayed counts answers with Idempotent-Replayed: true (over MCP,
	// _meta "io.github.toolgateway/replayed": true).
	Replayed int64
	// RoundTrips is the store round trips counted during the run, when known
	// (in-process gateways only; -1 otherwise).
	RoundTrips int64
	// RedisCPU is the CPU time Redis spent during the run, when known
	// (-1 otherwise).
	RedisCPU time.Duration
	// ProcessCPU is the CPU time of this process during the run: the load
	// generator, plus the servers when they run in process.
	ProcessCPU time.Duration
	// ServerCPU is the CPU time of the servers' process during the run,
	// when they run in another process than the load (-1 otherwise).
	ServerCPU time.Duration
	// RedisCommands counts the Redis commands run during the run, by name,
	// when known (nil otherwise).
	RedisCommands map[string]int64
	// Receipts counts the receipts the target wrote during the run, when
	// known (-1 otherwise).
	Receipts int64
	// Listed counts the items the answers listed, for a companion that
	// reads a list (the console: pending approvals shown per poll).
	Listed int64
	// Companion is what the target's companion (a console polling)
	// measured during the run; nil without one.
	Companion *Result
	// latencies of the answered requests, sorted once read.
	latencies []time.Duration
	sorted    bool
}

func newResult() *Result {
	return &Result{Statuses: make(map[int]int64), RoundTrips: -1, RedisCPU: -1, ServerCPU: -1, Receipts: -1}
}

func (r *Result) record(status int, replayed bool, latency time.Duration) {
	r.Requests++
	r.Statuses[status]++
	if replayed {
		r.Replayed++
	}
	r.latencies = append(r.latencies, latency)
	r.sorted = false
}

// Merge adds o's counts, time and latencies to r.
func (r *Result) Merge(o *Result) {
	r.Requests += o.Requests
	r.Errors += o.Errors
	r.Elapsed += o.Elapsed
	r.Replayed += o.Replayed
	r.Listed += o.Listed
	for status, n := range o.Statuses {
		r.Statuses[status] += n
	}
	if o.RoundTrips >= 0 {
		r.RoundTrips = max(r.RoundTrips, 0) + o.RoundTrips
	}
	r.ProcessCPU += o.ProcessCPU
	if o.ServerCPU >= 0 {
		r.ServerCPU = max(r.ServerCPU, 0) + o.ServerCPU
	}
	if o.RedisCommands != nil {
		if r.RedisCommands == nil {
			r.RedisCommands = make(map[string]int64)
		}
		for name, n := range o.RedisCommands {
			r.RedisCommands[name] += n
		}
	}
	if o.RedisCPU >= 0 {
		r.RedisCPU = max(r.RedisCPU, 0) + o.RedisCPU
	}
	if o.Receipts >= 0 {
		r.Receipts = max(r.Receipts, 0) + o.Receipts
	}
	if o.Companion != nil {
		if r.Companion == nil {
			r.Companion = newResult()
		}
		r.Companion.Merge(o.Companion)
	}
	r.latencies = append(r.latencies, o.latencies...)
	r.sorted = false
}

// ProcessMicrosPerRequest is this process's CPU time per answered
// request in microseconds.
func (r *Result) ProcessMicrosPerRequest() float64 {
	if r.Requests == 0 {
		return math.NaN()
	}
	return float64(r.ProcessCPU) / float64(time.Microsecond) / float64(r.Requests)
}

// ServerMicrosPerRequest is the servers' CPU time per answered request in
// microseconds when they ran in another process, else this process's
// (load generator included).
func (r *Result) ServerMicrosPerRequest() float64 {
	if r.ServerCPU < 0 {
		return r.ProcessMicrosPerRequest()
	}
	if r.Requests == 0 {
		return math.NaN()
	}
	return float64(r.ServerCPU) / float64(time.Microsecond) / float64(r.Requests)
}

// RedisCommandsPerRequest is each Redis command's calls per answered
// request, or nil when they were not counted.
func (r *Result) RedisCommandsPerRequest() map[string]float64 {
	if r.RedisCommands == nil || r.Requests == 0 {
		return nil
	}
	out := make(map[string]float64, len(r.RedisCommands))
	for name, n := range r.RedisCommands {
		out[name] = float64(n) / float64(r.Requests)
	}
	return out
}

// RedisMicrosPerRequest is Redis CPU time per answered request in
// microseconds, or NaN when it was not measured.
func (r *Result) RedisMicrosPerRequest() float64 {
	if r.RedisCPU < 0 || r.Requests == 0 {
		return math.NaN()
	}
	return float64(r.RedisCPU) / float64(time.Microsecond) / float64(r.Requests)
}

// FreshCalls counts the answers of calls that ran the tool: 2xx and not
// replayed.
func (r *Result) FreshCalls() int64 {
	var n int64
	for status, count := range r.Statuses {
		if status >= 200 && status < 300 {
			n += count
		}
	}
	return n - r.Replayed
}

// RPS is answered requests per second of wall time.
func (r *Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// RoundTripsPerRequest is the average store round trips per answered
// request, or NaN when they were not counted.
func (r *Result) RoundTripsPerRequest() float64 {
	if r.RoundTrips < 0 || r.Requests == 0 {
		return math.NaN()
	}
	return float64(r.RoundTrips) / float64(r.Requests)
}

// Percentile returns the latency below which a fraction p (0–1) of the
// answered requests fell (nearest rank).
func (r *Result) Percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	if !r.sorted {
		slices.Sort(r.latencies)
		r.sorted = true
	}
	rank := int(math.Ceil(p*float64(len(r.latencies)))) - 1
	return r.latencies[min(max(rank, 0), len(r.latencies)-1)]
}
