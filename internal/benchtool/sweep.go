package benchtool

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// A sweep is one run over modes, APIs, profiles and concurrencies: for
// each (mode, concurrency) one RunBench whose targets alternate in every
// round. Its rows are what the round-five table and plot are made of:
// per target, the median over the rounds of each figure, so one round
// disturbed by the shared machine does not move it.

// SweepRow is one target at one mode and concurrency.
type SweepRow struct {
	Mode        Mode   `json:"mode"`
	Concurrency int    `json:"concurrency"`
	Target      string `json:"target"`
	API         API    `json:"api"`
	// Profile is "bare" or "everything" for a gateway, "" for the
	// references (floor, baseline, plain go-sdk).
	Profile string `json:"profile,omitempty"`
	Rounds  int    `json:"rounds"`
	// Medians over the rounds; nil when not measured.
	RPS            *float64 `json:"rps"`
	P50MS          *float64 `json:"p50_ms"`
	P99MS          *float64 `json:"p99_ms"`
	ServerUSPerReq *float64 `json:"server_us_per_req"`
	RedisUSPerReq  *float64 `json:"redis_us_per_req"`
	// RoundTripsPerReq is the store round trips per request over all
	// rounds (gateways and floor only).
	RoundTripsPerReq *float64 `json:"round_trips_per_req,omitempty"`
	// Requests and Errors are summed over the rounds; Statuses counts
	// the answers by status (over MCP: 200, isError, rpc codes).
	Requests int64            `json:"requests"`
	Errors   int64            `json:"errors"`
	Statuses map[string]int64 `json:"statuses"`
	// PerRound are each round's req/s and p99, in order, to show the
	// spread the medians hide.
	PerRoundRPS   []float64 `json:"per_round_rps"`
	PerRoundP99MS []float64 `json:"per_round_p99_ms"`
}

// Sweep is a whole run's output.
type Sweep struct {
	// Started is when the run began (UTC); Machine describes the CPUs,
	// Go and where the servers ran; LoadBefore/LoadAfter the load
	// average at the start and the end, to tell a quiet machine from a
	// shared one.
	Started time.Time `json:"started"`
	// Command is the command line of the run.
	Command    string `json:"command"`
	Machine    string `json:"machine"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
	// Duration and Rounds are every run's.
	Duration string     `json:"duration"`
	Rounds   int        `json:"rounds"`
	Rows     []SweepRow `json:"rows"`
}

// SweepRows are the report's targets as sweep rows.
func (r *Report) SweepRows() []SweepRow {
	rows := make([]SweepRow, 0, len(r.Targets))
	for _, t := range r.Targets {
		row := SweepRow{Mode: r.Mode, Concurrency: r.Workers, Target: t.Name, API: t.API, Profile: t.Profile,
			Rounds: len(t.Rounds), Requests: t.Result.Requests, Errors: t.Result.Errors, Statuses: map[string]int64{}}
		for status, n := range t.Result.Statuses {
			row.Statuses[statusName(status)] = n
		}
		row.RPS = medianOf(t.Rounds, (*Result).RPS)
		row.P50MS = medianOf(t.Rounds, func(res *Result) float64 { return ms(res.Percentile(0.50)) })
		row.P99MS = medianOf(t.Rounds, func(res *Result) float64 { return ms(res.Percentile(0.99)) })
		row.ServerUSPerReq = medianOf(t.Rounds, (*Result).ServerMicrosPerRequest)
		row.RedisUSPerReq = medianOf(t.Rounds, (*Result).RedisMicrosPerRequest)
		row.RoundTripsPerReq = number(t.Result.RoundTripsPerRequest())
		for _, res := range t.Rounds {
			row.PerRoundRPS = append(row.PerRoundRPS, round3(res.RPS()))
			row.PerRoundP99MS = append(row.PerRoundP99MS, round3(ms(res.Percentile(0.99))))
		}
		rows = append(rows, row)
	}
	return rows
}

// statusName is how a status is keyed in a row: the HTTP status, or over
// MCP "isError" and "rpc<code>".
func statusName(status int) string {
	switch {
	case status == StatusMCPIsError:
		return "isError"
	case status < 0:
		return "rpc" + strconv.Itoa(status)
	}
	return strconv.Itoa(status)
}

// medianOf is the median of f over the rounds, nil when no round has a
// figure.
func medianOf(rounds []*Result, f func(*Result) float64) *float64 {
	var vs []float64
	for _, res := range rounds {
		if v := f(res); !math.IsNaN(v) && !math.IsInf(v, 0) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return nil
	}
	slices.Sort(vs)
	m := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		m = (vs[len(vs)/2-1] + m) / 2
	}
	return number(m)
}

// number is v rounded to three decimals, nil when v is not a number.
func number(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	v = round3(v)
	return &v
}

// WriteJSON writes the sweep as one indented JSON document.
func (s *Sweep) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("benchtool: sweep JSON: %w", err)
	}
	return nil
}

// sweepColumns are the CSV's columns, one per SweepRow figure.
var sweepColumns = []string{"mode", "concurrency", "target", "api", "profile", "rounds", "rps", "p50_ms", "p99_ms",
	"server_us_per_req", "redis_us_per_req", "round_trips_per_req", "requests", "errors", "vs_reference", "reference"}

// WriteCSV writes one line per row, unknown figures empty.
func (s *Sweep) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(sweepColumns)
	for _, row := range s.Rows {
		ratio, ref := s.vsReference(row)
		_ = cw.Write([]string{string(row.Mode), strconv.Itoa(row.Concurrency), row.Target, string(row.API), row.Profile,
			strconv.Itoa(row.Rounds), text(row.RPS), text(row.P50MS), text(row.P99MS), text(row.ServerUSPerReq),
			text(row.RedisUSPerReq), text(row.RoundTripsPerReq), strconv.FormatInt(row.Requests, 10),
			strconv.FormatInt(row.Errors, 10), text(ratio), ref})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("benchtool: sweep CSV: %w", err)
	}
	return nil
}

// WriteTable writes the sweep as a text table, one line per row, with
// each gateway's req/s over its reference's in the same mode and
// concurrency (the floor for REST, the plain go-sdk server for MCP).
func (s *Sweep) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%s\nstarted %s; %s\nbefore: %s; after: %s\nmedians of %d round(s) x %s per target\n\n",
		s.Command, s.Started.Format(time.RFC3339), s.Machine, s.LoadBefore, s.LoadAfter, s.Rounds, s.Duration)
	width := len("target")
	for _, row := range s.Rows {
		width = max(width, len(row.Target))
	}
	fmt.Fprintf(w, "%-6s %4s  %-*s %10s %8s %8s %10s %9s %7s %7s  %s\n",
		"mode", "C", width, "target", "req/s", "p50 ms", "p99 ms", "server us", "redis us", "rt/req", "ratio", "errors")
	for _, row := range s.Rows {
		ratio, ref := s.vsReference(row)
		ratioText := "-"
		if ratio != nil {
			ratioText = fmt.Sprintf("%.2f", *ratio)
			if ref != "" {
				ratioText += "*"
			}
		}
		fmt.Fprintf(w, "%-6s %4d  %-*s %10s %8s %8s %10s %9s %7s %7s  %d\n",
			row.Mode, row.Concurrency, width, row.Target, fixed(row.RPS, 0), fixed(row.P50MS, 2), fixed(row.P99MS, 2),
			fixed(row.ServerUSPerReq, 1), fixed(row.RedisUSPerReq, 1), fixed(row.RoundTripsPerReq, 2), ratioText, row.Errors)
	}
	fmt.Fprintln(w, "\nratio*: req/s over the reference's in the same mode and C (REST: floor; MCP: plain-mcp); server us and")
	fmt.Fprintln(w, "redis us: CPU per request of the servers' process and of Redis (INFO cpu deltas); all medians over the rounds.")
}

// vsReference is row's median req/s over its reference's, and the
// reference's name (nil, "" for a reference or without one).
func (s *Sweep) vsReference(row SweepRow) (*float64, string) {
	if row.Profile == "" || row.RPS == nil {
		return nil, ""
	}
	ref := FloorName
	if row.API == APIMCP {
		ref = PlainMCPName
	}
	for _, other := range s.Rows {
		if other.Target == ref && other.Mode == row.Mode && other.Concurrency == row.Concurrency && other.RPS != nil && *other.RPS > 0 {
			return number(*row.RPS / *other.RPS), ref
		}
	}
	return nil, ""
}

func text(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}

func fixed(v *float64, decimals int) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', decimals, 64)
}
