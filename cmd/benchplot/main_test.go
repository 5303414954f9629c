package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotsASweep: a sweep.json becomes an SVG with one line per target;
// a missing flag or a file that is not a sweep writes nothing.
func TestPlotsASweep(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "sweep.json"), filepath.Join(dir, "p99.svg")
	sweep := `{"rounds":3,"duration":"10s","rows":[
{"mode":"fresh","concurrency":1,"target":"floor","api":"rest","p99_ms":1.5},
{"mode":"fresh","concurrency":10,"target":"floor","api":"rest","p99_ms":4},
{"mode":"fresh","concurrency":1,"target":"gateway","api":"rest","profile":"bare","p99_ms":2},
{"mode":"fresh","concurrency":10,"target":"gateway","api":"rest","profile":"bare","p99_ms":6},
{"mode":"fresh","concurrency":10,"target":"baseline","api":"rest","p99_ms":1}]}`
	if err := os.WriteFile(in, []byte(sweep), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-in", in, "-out", out}, io.Discard); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(svg), "<polyline"); n != 2 || strings.Contains(string(svg), ">baseline<") {
		t.Errorf("%d lines, want the floor's and the gateway's (not the baseline's):\n%s", n, svg)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[1,2]`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-in", in}, {"-in", bad, "-out", filepath.Join(dir, "bad.svg")}} {
		if err := run(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.svg")); err == nil {
		t.Error("a plot was written from a file that is not a sweep")
	}
}
