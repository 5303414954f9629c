package callpath

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgateway/toolgateway/gateway/buildinfo"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/tools"
)

// metrics holds the gateway's Prometheus series. Every label value is a
// configured tool name, "unknown", or one of a fixed set of words.
type metrics struct {
	gatherer    prometheus.Gatherer
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	storeOps    *prometheus.HistogramVec
	storeErrors *prometheus.CounterVec
	leasesLost  *prometheus.CounterVec
	takeovers   *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec
	unrecorded  *prometheus.CounterVec
	rateLimited *prometheus.CounterVec
	// decisions counts the decide stage's verdicts (decide.go).
	decisions *prometheus.CounterVec
	// executions counts the tools' runs by what became of the call
	// (countExecution).
	executions *prometheus.CounterVec
	// records and recordsTruncated are the records gauge (recordsgauge.go).
	records          *prometheus.GaugeVec
	recordsTruncated *prometheus.GaugeVec
	recordsAbandoned *prometheus.GaugeVec
	// recordsPublished are the labels of the last sample, by state.
	recordsPublished map[idempotency.State]map[string]float64
	// abandonedPublished are the labels of the last gateway_records_abandoned.
	abandonedPublished map[string]float64
	// budgets are the budget gauges (budgetsgauge.go).
	budgets *budgetGauges
	// receiptsUnwritten counts the receipts given up on (receipt.go).
	receiptsUnwritten prometheus.Counter
	// receiptsRecovered counts the receipts the recovery sweep appended
	// from the outbox (receiptrecovery.go).
	receiptsRecovered prometheus.Counter
	// requestSeries caches the requests' and duration's series
	// (metricsseries.go).
	requestSeries requestSeriesCache
}

// labelUnknownTool is the tool label of a name that is not a configured tool.
const labelUnknownTool = "unknown"

func newMetrics(reg prometheus.Registerer, gath prometheus.Gatherer, registry *tools.Registry, notifier ApprovalNotifier) (*metrics, error) {
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg, gath = r, r
	}
	if gath == nil {
		gath = prometheus.DefaultGatherer
	}
	m := &metrics{
		gatherer:         gath,
		recordsPublished: make(map[idempotency.State]map[string]float64),
		budgets:          newBudgetGauges(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_requests_total",
			Help: "Tool calls and tool API requests by door (rest, mcp), tool and outcome.",
		}, []string{"api", "tool", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gateway_request_duration_seconds",
			Help:    "Tool API request latency by door (rest, mcp), tool and outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"api", "tool", "outcome"}),
		storeOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gateway_store_operation_duration_seconds",
			Help:    "Idempotency store operation latency.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_store_errors_total",
			Help: "Idempotency store operations that failed (store unreachable or broken).",
		}, []string{"op"}),
		leasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_leases_lost_total",
			Help: "Tool executions whose lease was lost while running (their outcome was not recorded).",
		}, []string{"tool"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_lease_takeovers_total",
			Help: "Claims that took over an expired lease of a dead gateway.",
		}, []string{"tool"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gateway_tools_in_flight",
			Help: "Tool executions running now.",
		}, []string{"tool"}),
		unrecorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_outcomes_unrecorded_total",
			Help: "Tool outcomes that could not be written to the store (they will not replay).",
		}, []string{"tool"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_rate_limited_total",
			Help: "Calls refused with 429 rate_limited, by tenant and by the limit they were over (rate, in_flight).",
		}, []string{"tenant", "limit"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_decisions_total",
			Help: "Decisions of the tools' decide rules by tool, decision (allow, approve, deny) and whether it was enforced (false in mode: observe).",
		}, []string{"tool", "decision", "enforced"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_tool_executions_total",
			Help: "Tool runs (the tool was called; replays and refusals run nothing) by tool and what became of the call: completed (recorded for replay), unknown (left UNKNOWN for an operator), released (nothing kept: a retry runs it again), no_record (read-only and unkeyed calls).",
		}, []string{"tool", "outcome"}),
		records: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gateway_records",
			Help: "Records in the store by state (UNKNOWN, IN_PROGRESS, AWAITING_APPROVAL) and tool, sampled from the store (bounded work; see gateway_records_truncated).",
		}, []string{"state", "tool"}),
		recordsTruncated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gateway_records_truncated",
			Help: "1 when the last sample of gateway_records for the state stopped at its bound (the counts are a lower bound), else 0.",
		}, []string{"state"}),
		receiptsUnwritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_receipts_unwritten_total",
			Help: "Receipts the gateway gave up writing (queue full, store failing past the retries, drain deadline); each is logged with its fields.",
		}),
		receiptsRecovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_receipts_recovered_total",
			Help: "Executed receipts the recovery sweep appended from the receipt outbox: receipts a gateway had not written when it died (or gave up on).",
		}),
		recordsAbandoned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gateway_records_abandoned",
			Help: "IN_PROGRESS records of lease_expiry: unknown tools whose gateway died holding them (lease ended over a lock_ttl ago): UNKNOWN at their next call; sampled with gateway_records.",
		}, []string{"tool"}),
	}
	if err := m.register(reg, registry, notifier); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers m's collectors, the build info and the
// notifier's counters with reg, and pre-creates the per-tool series.
func (m *metrics) register(reg prometheus.Registerer, registry *tools.Registry, notifier ApprovalNotifier) error {
	for _, c := range append([]prometheus.Collector{m.requests, m.duration, m.storeOps, m.storeErrors, m.leasesLost, m.takeovers, m.inFlight, m.unrecorded, m.rateLimited, m.decisions, m.executions, m.records, m.recordsTruncated, m.recordsAbandoned, m.receiptsUnwritten, m.receiptsRecovered}, m.budgets.collectors()...) {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("gateway: register metrics: %w", err)
		}
	}
	// The running version, so a rollout and the alert on a target that
	// stopped answering (deploy/prometheus) can tell gateways apart.
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gateway_build_info",
		Help: "Always 1; the label version is the gateway's version (gateway -version).",
	}, []string{"version"})
	if err := reg.Register(buildInfo); err != nil {
		return fmt.Errorf("gateway: register metrics: %w", err)
	}
	buildInfo.WithLabelValues(buildinfo.Version()).Set(1)
	if notifier != nil {
		if err := reg.Register(notificationsCollector{notifier}); err != nil {
			return fmt.Errorf("gateway: register metrics: %w", err)
		}
	}
	// Pre-create the per-tool series so dashboards see zeros, not gaps.
	for _, e := range registry.Entries() {
		m.inFlight.WithLabelValues(e.Spec.Name)
		m.leasesLost.WithLabelValues(e.Spec.Name)
	}
	return nil
}

// The outcome label of gateway_tool_executions_total: what became of a
// call whose tool ran.
const (
	executionCompleted = "completed"
	executionUnknown   = "unknown"
	executionReleased  = "released"
	executionNoRecord  = "no_record"
)

// countExecution counts one run of tool, once per time the tool was
// called, whatever its answer (a 5xx, an error and a timeout included),
// unless err proves the call never reached it (toolRan).
func (m *metrics) countExecution(tool, outcome string, err error) {
	if toolRan(err) {
		m.executions.WithLabelValues(tool, outcome).Inc()
	}
}

// toolRan reports whether a tool that returned err may have run: every
// error but one that proves the call never reached it — an upstream not
// reached (nothing written), not listed yet, a held tool, an upstream
// that says it did not execute.
func toolRan(err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, tools.ErrNotExecuted), errors.Is(err, tools.ErrToolChanged), errors.Is(err, tools.ErrUpstreamUnavailable):
		return false
	case errors.Is(err, tools.ErrOutcomeUncertain), errors.Is(err, tools.ErrUpstreamRejected):
		return true
	}
	return !errors.Is(err, tools.ErrUpstreamUnreachable)
}

// publishRecords sets the gauge of state to counts: every tool of tools
// (0 when it has none), every label counted, and 0 for a label of an
// earlier sample that is no longer counted.
func (m *metrics) publishRecords(state idempotency.State, counts map[string]float64, tools []string, truncated bool) {
	for _, tool := range tools {
		if _, ok := counts[tool]; !ok {
			counts[tool] = 0
		}
	}
	for tool, n := range counts {
		m.records.WithLabelValues(string(state), tool).Set(n)
	}
	// Only the sampler writes the gauge, one sample at a time, so the
	// labels of the previous sample need no lock.
	for tool := range m.recordsPublished[state] {
		if _, ok := counts[tool]; !ok {
			m.records.DeleteLabelValues(string(state), tool)
		}
	}
	m.recordsPublished[state] = counts
	m.recordsTruncated.WithLabelValues(string(state)).Set(boolGauge(truncated))
}

// publishAbandoned sets gateway_records_abandoned: counts by tool, 0 for
// every tool of tools without any; the series of tools gone are deleted.
func (m *metrics) publishAbandoned(counts map[string]float64, tools []string) {
	for _, tool := range tools {
		if _, ok := counts[tool]; !ok {
			counts[tool] = 0
		}
	}
	for tool, n := range counts {
		m.recordsAbandoned.WithLabelValues(tool).Set(n)
	}
	for tool := range m.abandonedPublished {
		if _, ok := counts[tool]; !ok {
			m.recordsAbandoned.DeleteLabelValues(tool)
		}
	}
	m.abandonedPublished = counts
}

// observeRequest counts one request: api is the door, tool a configured
// name or "unknown", label one of the fixed outcome labels.
func (m *metrics) observeRequest(api API, tool, label string, d time.Duration) {
	s := m.requestSeries.of(m, api, tool, label)
	s.count.Inc()
	s.duration.Observe(d.Seconds())
}

// instrumentedStore times every store operation.
type instrumentedStore struct {
	idempotency.Store
	m *metrics
	// ops are the operations' duration series, looked up once each (a
	// call observes one or two), on first use: a series appears when its
	// operation first ran, as without the cache.
	opsMu sync.RWMutex
	ops   map[string]prometheus.Observer
	// settled hears of each lease with budget charges that Complete or
	// Release settled (budgetreceipts.go); nil: nobody listens.
	settled func(idempotency.Lease, receipts.Event)
}

func instrumentStore(s idempotency.Store, m *metrics) idempotency.Store {
	return &instrumentedStore{Store: s, m: m, ops: make(map[string]prometheus.Observer)}
}

// opSeries returns op's duration series.
func (s *instrumentedStore) opSeries(op string) prometheus.Observer {
	s.opsMu.RLock()
	series, ok := s.ops[op]
	s.opsMu.RUnlock()
	if !ok {
		series = s.m.storeOps.WithLabelValues(op)
		s.opsMu.Lock()
		s.ops[op] = series
		s.opsMu.Unlock()
	}
	return series
}

func (s *instrumentedStore) observe(op string, start time.Time, err error) {
	s.opSeries(op).Observe(time.Since(start).Seconds())
	if err != nil && !isStoreVerdict(err) {
		s.m.storeErrors.WithLabelValues(op).Inc()
	}
}

// boolGauge is 1 for true, 0 for false.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// isStoreVerdict tells the store's answers (lease lost, not found) from its failures.
func isStoreVerdict(err error) bool {
	return err == nil || errors.Is(err, idempotency.ErrLeaseLost) || errors.Is(err, idempotency.ErrNotFound)
}

func (s *instrumentedStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	start := time.Now()
	d, err := s.Store.Claim(ctx, req)
	s.observe("claim", start, err)
	return d, err
}

func (s *instrumentedStore) Renew(ctx context.Context, l idempotency.Lease, ttl time.Duration) error {
	start := time.Now()
	err := s.Store.Renew(ctx, l, ttl)
	s.observe("renew", start, err)
	return err
}

func (s *instrumentedStore) Complete(ctx context.Context, l idempotency.Lease, resp idempotency.StoredResponse, ttl time.Duration) error {
	start := time.Now()
	err := s.Store.Complete(ctx, l, resp, ttl)
	s.observe("complete", start, err)
	if err == nil && len(l.Charges) > 0 && s.settled != nil {
		s.settled(l, receipts.EventBudgetCommitted)
	}
	return err
}

func (s *instrumentedStore) MarkUnknown(ctx context.Context, l idempotency.Lease, ttl time.Duration) error {
	start := time.Now()
	err := s.Store.MarkUnknown(ctx, l, ttl)
	s.observe("mark_unknown", start, err)
	return err
}

func (s *instrumentedStore) Release(ctx context.Context, l idempotency.Lease) error {
	start := time.Now()
	err := s.Store.Release(ctx, l)
	s.observe("release", start, err)
	if err == nil && len(l.Charges) > 0 && s.settled != nil {
		s.settled(l, receipts.EventBudgetReleased)
	}
	return err
}

func (s *instrumentedStore) Get(ctx context.Context, scope idempotency.Scope) (idempotency.Record, error) {
	start := time.Now()
	rec, err := s.Store.Get(ctx, scope)
	s.observe("get", start, err)
	return rec, err
}

func (s *instrumentedStore) Delete(ctx context.Context, scope idempotency.Scope) error {
	start := time.Now()
	err := s.Store.Delete(ctx, scope)
	s.observe("delete", start, err)
	return err
}

// notificationsDesc is gateway_approval_notifications_total: what the
// approvals notifier did with the new pending approvals it was given.
var notificationsDesc = prometheus.NewDesc("gateway_approval_notifications_total",
	"Notifications of new pending approvals (approvals.notify) by result: delivered, failed (given up), dropped (queue full), retries (attempts after the first).",
	[]string{"result"}, nil)

// notificationsCollector reads the notifier's counts at each scrape.
type notificationsCollector struct{ n ApprovalNotifier }

// Describe implements prometheus.Collector.
func (c notificationsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- notificationsDesc }

// Collect implements prometheus.Collector.
func (c notificationsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.Stats()
	for _, v := range []struct {
		result string
		n      uint64
	}{{"delivered", st.Delivered}, {"failed", st.Failed}, {"dropped", st.Dropped}, {"retries", st.Retries}} {
		ch <- prometheus.MustNewConstMetric(notificationsDesc, prometheus.CounterValue, float64(v.n), v.result)
	}
}

// countDecision counts the call's verdict in gateway_decisions_total,
// once per call. A call with a record is counted where the store makes it
// new — its fresh claim (allowed, or run in observe mode) or its new
// approval (claim.go's answer stage) — so a retry that replays, finds its
// approval pending, or consumes it is not counted again; a denied call
// and one without a record, which the store never keeps, as they arrive
// (decide.go).
func (m *metrics) countDecision(st *callState) {
	if st.verdict == nil || st.decisionCounted {
		return
	}
	st.decisionCounted = true
	m.decisions.WithLabelValues(st.call.Entry.Spec.Name, string(st.verdict.Decision), enforcedLabel(st.verdict.Enforced())).Inc()
}
