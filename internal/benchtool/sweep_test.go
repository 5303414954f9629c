package benchtool

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// roundOf is a run of n requests in elapsed, each taking latency.
func roundOf(n int, elapsed, latency time.Duration) *Result {
	r := newResult()
	for range n {
		r.record(200, false, latency)
	}
	r.Elapsed = elapsed
	return r
}

// TestSweepRowsAreMediansOverRounds: a disturbed round moves the merged
// figures but not the medians; the ratio is over the same mode and C's
// reference; the CSV, JSON and SVG carry every row.
func TestSweepRowsAreMediansOverRounds(t *testing.T) {
	floorRounds := []*Result{roundOf(100, time.Second, time.Millisecond), roundOf(100, time.Second, time.Millisecond), roundOf(100, time.Second, time.Millisecond)}
	gwRounds := []*Result{roundOf(80, time.Second, 2*time.Millisecond), roundOf(10, time.Second, 90*time.Millisecond), roundOf(60, time.Second, 3*time.Millisecond)}
	var sweep Sweep
	for _, c := range []int{1, 10} {
		report := &Report{Mode: ModeFresh, Workers: c, Rounds: 3, Targets: []TargetReport{
			{Name: FloorName, API: APIREST, Result: merged(floorRounds), Rounds: floorRounds},
			{Name: "gateway", API: APIREST, Profile: "bare", Result: merged(gwRounds), Rounds: gwRounds},
		}}
		sweep.Rows = append(sweep.Rows, report.SweepRows()...)
	}
	gw := sweep.Rows[1]
	if *gw.RPS != 60 || *gw.P99MS != 3 || *gw.P50MS != 3 || gw.Requests != 150 || gw.Rounds != 3 || len(gw.PerRoundRPS) != 3 {
		t.Fatalf("gateway row %+v: want the medians 60 req/s, p50 and p99 3 ms over 150 requests", gw)
	}
	if ratio, ref := sweep.vsReference(gw); ratio == nil || *ratio != 0.6 || ref != FloorName {
		t.Errorf("ratio %v over %q, want 0.6 over the floor", ratio, ref)
	}
	if ratio, _ := sweep.vsReference(sweep.Rows[0]); ratio != nil {
		t.Errorf("the floor has a ratio %v, want none", *ratio)
	}

	var csvOut, jsonOut, svg, table bytes.Buffer
	if err := sweep.WriteCSV(&csvOut); err != nil {
		t.Fatal(err)
	}
	lines, err := csv.NewReader(&csvOut).ReadAll()
	if err != nil || len(lines) != 1+len(sweep.Rows) || lines[2][6] != "60" || lines[2][14] != "0.6" {
		t.Fatalf("CSV %v (%v): want a header and one line per row", lines, err)
	}
	if err := sweep.WriteJSON(&jsonOut); err != nil {
		t.Fatal(err)
	}
	var back Sweep
	if err := json.Unmarshal(jsonOut.Bytes(), &back); err != nil || len(back.Rows) != 4 || *back.Rows[3].P99MS != 3 {
		t.Fatalf("JSON does not read back (%v): %s", err, jsonOut.String())
	}
	if back.Rows[0].RedisUSPerReq != nil {
		t.Errorf("Redis CPU not measured but reported as %v", *back.Rows[0].RedisUSPerReq)
	}
	if err := back.WriteP99SVG(&svg); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(svg.String(), "<polyline"); n != 2 || !strings.Contains(svg.String(), ">gateway</text>") {
		t.Errorf("SVG has %d lines, want the floor's and the gateway's:\n%s", n, svg.String())
	}
	sweep.WriteTable(&table)
	if !strings.Contains(table.String(), "0.60*") {
		t.Errorf("table without the gateway's ratio:\n%s", table.String())
	}
	if err := (&Sweep{}).WriteP99SVG(&svg); err == nil {
		t.Error("an empty sweep was plotted")
	}
}

func merged(rounds []*Result) *Result {
	m := newResult()
	for _, r := range rounds {
		m.Merge(r)
	}
	return m
}
