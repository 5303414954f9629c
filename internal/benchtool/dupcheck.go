package benchtool

import (
	"context"
)

// DupReport is the dup check's verdict over a set of steps.
type DupReport struct {
	// Steps is the number of steps checked.
	Steps int
	// Duplicated counts steps whose tool ran more than once: never
	// acceptable behind the gateway.
	Duplicated int
	// Missing counts steps whose tool never ran (every copy failed).
	Missing int
	// MaxRuns is the most runs of any one step.
	MaxRuns int64
}

// CheckOnce reads the tool's counters for keys and reports the steps that
// did not run exactly once.
func CheckOnce(ctx context.Context, tool *CounterTool, keys []string) (DupReport, error) {
	counts, err := tool.Counts(ctx, keys)
	if err != nil {
		return DupReport{}, err
	}
	report := DupReport{Steps: len(keys)}
	for _, n := range counts {
		switch {
		case n == 0:
			report.Missing++
		case n > 1:
			report.Duplicated++
		}
		report.MaxRuns = max(report.MaxRuns, n)
	}
	return report, nil
}
