package callpath

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// requestSeries are the two series a request with one (api, tool,
// outcome) counts into.
type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

type requestSeriesKey struct {
	api         API
	tool, label string
}

// requestSeriesCache keeps each (api, tool, outcome)'s series once looked
// up. A Vec lookup validates and hashes its label values under a lock, and
// every request made two; the keys are bounded like the series themselves
// (doors × configured tools and "unknown" × fixed labels), and no request
// series is ever deleted, so a kept series is always the registered one.
type requestSeriesCache struct {
	mu     sync.RWMutex
	series map[requestSeriesKey]requestSeries
}

// of returns m's series of api, tool and label.
func (c *requestSeriesCache) of(m *metrics, api API, tool, label string) requestSeries {
	key := requestSeriesKey{api: api, tool: tool, label: label}
	c.mu.RLock()
	s, ok := c.series[key]
	c.mu.RUnlock()
	if ok {
		return s
	}
	s = requestSeries{
		count:    m.requests.WithLabelValues(string(api), tool, label),
		duration: m.duration.WithLabelValues(string(api), tool, label),
	}
	c.mu.Lock()
	if c.series == nil {
		c.series = make(map[requestSeriesKey]requestSeries)
	}
	c.series[key] = s
	c.mu.Unlock()
	return s
}
