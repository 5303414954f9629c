package reconcile

import "github.com/prometheus/client_golang/prometheus"

// metrics are the worker's series; the tool label is a configured tool.
type metrics struct {
	attempts *prometheus.CounterVec
	enabled  *prometheus.GaugeVec
	gaveUp   *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer, targets []Target) (*metrics, error) {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_reconcile_total",
			Help: "Reconciliation attempts by tool and outcome (committed, not_committed, unknown, invalid, error).",
		}, []string{"tool", "outcome"}),
		enabled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gateway_reconcile_enabled",
			Help: "1 for each tool whose uncertain records this gateway reconciles.",
		}, []string{"tool"}),
		gaveUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gateway_reconcile_gave_up",
			Help: "UNKNOWN records of the tool whose reconciliation used all its attempts (last scan): they wait for an operator.",
		}, []string{"tool"}),
	}
	for _, t := range targets {
		m.enabled.WithLabelValues(t.Tool).Set(1)
		m.gaveUp.WithLabelValues(t.Tool).Set(0)
		for _, o := range []string{OutcomeCommitted, OutcomeNotCommitted, OutcomeUnknown, OutcomeInvalid, OutcomeError} {
			m.attempts.WithLabelValues(t.Tool, o)
		}
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.attempts, m.enabled, m.gaveUp} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
