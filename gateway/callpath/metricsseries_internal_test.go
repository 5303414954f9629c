package callpath

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
)

// TestRequestSeriesCacheCountsIntoTheRegisteredSeries: requests observed
// through the cache, concurrently and under several label sets, land in
// the registered series, each under its own labels.
func TestRequestSeriesCacheCountsIntoTheRegisteredSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, reg, tools.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				m.observeRequest(APIREST, "echo", labelReplayed, time.Millisecond)
				m.observeRequest(APIMCP, "echo", labelReplayed, time.Millisecond)
			}
		})
	}
	wg.Wait()
	m.observeRequest(APIREST, "echo", labelExecuted, time.Millisecond)
	want := map[string]float64{"rest,replayed,echo": 400, "mcp,replayed,echo": 400, "rest,executed,echo": 1}
	for _, name := range []string{"gateway_requests_total", "gateway_request_duration_seconds"} {
		got := gatheredSeries(t, reg, name)
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
		for labels, n := range want {
			if got[labels] != n {
				t.Errorf("%s{%s} = %v, want %v", name, labels, got[labels], n)
			}
		}
	}
}

// TestStoreOpSeriesAppearOnFirstUse: an operation's duration series is
// exported once it ran, not before, and counts every run.
func TestStoreOpSeriesAppearOnFirstUse(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, reg, tools.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const name = "gateway_store_operation_duration_seconds"
	store := instrumentStore(releaseOnlyStore{}, m)
	if got := gatheredSeries(t, reg, name); len(got) != 0 {
		t.Fatalf("store series before any operation: %v", got)
	}
	for range 3 {
		if err := store.Release(context.Background(), idempotency.Lease{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := gatheredSeries(t, reg, name); len(got) != 1 || got["release"] != 3 {
		t.Errorf("store series after 3 releases: %v, want release: 3", got)
	}
}

// releaseOnlyStore answers Release; the rest is not called.
type releaseOnlyStore struct{ idempotency.Store }

func (releaseOnlyStore) Release(context.Context, idempotency.Lease) error { return nil }

// gatheredSeries returns the series of the metric family name in reg, by
// their label values joined with commas (in the label names' order): a
// counter's value, a histogram's sample count.
func gatheredSeries(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var values []string
			for _, l := range m.GetLabel() {
				values = append(values, l.GetValue())
			}
			key := strings.Join(values, ",")
			if h := m.GetHistogram(); h != nil {
				series[key] = float64(h.GetSampleCount())
			} else {
				series[key] = m.GetCounter().GetValue()
			}
		}
	}
	return series
}
