package callpath

import (
	"fmt"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// ToolCounter is one tool's counters as the console's Tools page shows
// them: read from the gateway's own registry, so the page and /metrics
// never disagree.
type ToolCounter struct {
	// Executions counts the tool's runs (gateway_tool_executions_total):
	// once per time the tool was called, whatever became of the call, so
	// a retry that replays or is refused adds nothing and one that runs
	// the tool again adds one; ExecutionsUnknown are those of them left
	// UNKNOWN. Replays counts the calls answered from a record.
	Executions, ExecutionsUnknown, Replays float64
	// Decisions counts the enforced decisions by kind; Observed those of
	// mode: observe, which an enforcing gateway would have taken (the
	// call ran as allowed): kept apart so neither reads as the other.
	Decisions, Observed map[string]float64
	// buckets are the latency histogram of its executed calls, summed over
	// doors: cumulative counts by upper bound (seconds).
	bounds []float64
	counts []float64
	total  float64
}

// toolCounters reads every tool's counters from the gateway's registry.
func (m *metrics) toolCounters() (map[string]*ToolCounter, error) {
	families, err := m.gatherer.Gather()
	if err != nil {
		return nil, fmt.Errorf("gateway: read counters: %w", err)
	}
	out := map[string]*ToolCounter{}
	of := func(tool string) *ToolCounter {
		if out[tool] == nil {
			out[tool] = &ToolCounter{Decisions: map[string]float64{}, Observed: map[string]float64{}}
		}
		return out[tool]
	}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			tool := labels["tool"]
			if tool == "" {
				continue
			}
			switch f.GetName() {
			case "gateway_requests_total":
				if labels["outcome"] == labelReplayed {
					of(tool).Replays += metric.GetCounter().GetValue()
				}
			case "gateway_tool_executions_total":
				of(tool).Executions += metric.GetCounter().GetValue()
				if labels["outcome"] == executionUnknown {
					of(tool).ExecutionsUnknown += metric.GetCounter().GetValue()
				}
			case "gateway_decisions_total":
				if labels["enforced"] == enforcedLabel(false) {
					of(tool).Observed[labels["decision"]] += metric.GetCounter().GetValue()
				} else {
					of(tool).Decisions[labels["decision"]] += metric.GetCounter().GetValue()
				}
			case "gateway_request_duration_seconds":
				if labels["outcome"] == labelExecuted {
					of(tool).addHistogram(metric.GetHistogram())
				}
			}
		}
	}
	return out, nil
}

func (c *ToolCounter) addHistogram(h *dto.Histogram) {
	for i, b := range h.GetBucket() {
		if i >= len(c.bounds) {
			c.bounds = append(c.bounds, b.GetUpperBound())
			c.counts = append(c.counts, 0)
		}
		c.counts[i] += float64(b.GetCumulativeCount())
	}
	c.total += float64(h.GetSampleCount())
}

// Quantile estimates the q-quantile of the latency the way PromQL's
// histogram_quantile does: linear within the bucket that holds it. Zero
// when no call was observed; the largest finite bound when it lies past it.
func (c *ToolCounter) Quantile(q float64) time.Duration {
	if c == nil || c.total == 0 {
		return 0
	}
	rank := q * c.total
	lower, below := 0.0, 0.0
	for i, upper := range c.bounds {
		if c.counts[i] >= rank {
			inBucket := c.counts[i] - below
			frac := 1.0
			if inBucket > 0 {
				frac = (rank - below) / inBucket
			}
			return time.Duration((lower + (upper-lower)*frac) * float64(time.Second))
		}
		lower, below = upper, c.counts[i]
	}
	return time.Duration(lower * float64(time.Second))
}
