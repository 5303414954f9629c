package gatewaycmd

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/reconcile"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// ReconcileConfig is a tool's reconcile: section: how the gateway asks the
// tool's owner what happened to an uncertain call (docs/reliability.md).
// Under tools: it gives http; under mcp_servers: tool (a tool of the same
// server, by its name on the server) or http, and the tools it covers.
type ReconcileConfig struct {
	HTTP *ReconcileHTTPConfig `yaml:"http"`
	Tool string               `yaml:"tool"`
	// Tools are the server's tools (names on the server) reconciled so;
	// mcp_servers: entries only.
	Tools    []string `yaml:"tools"`
	Every    Duration `yaml:"every"`
	Attempts int      `yaml:"attempts"`
}

// ReconcileHTTPConfig is the endpoint reconcile: POSTs to.
type ReconcileHTTPConfig struct {
	URL string `yaml:"url"`
}

// Defaults of a reconcile: section.
const (
	defaultReconcileEvery    = 30 * time.Second
	defaultReconcileAttempts = 20
)

// reconcileTargets checks every reconcile: section and returns the
// worker's targets; errors name the field. Every store offers
// reconciliation (idempotency.Reconciler).
func (c *Config) reconcileTargets(opts callpath.Options) ([]reconcile.Target, error) {
	var targets []reconcile.Target
	var client *http.Client
	httpAsker := func(field, url string) (reconcile.Asker, error) {
		if client == nil {
			client = httptool.NewClient()
		}
		a, err := reconcile.NewHTTPAsker(url, client)
		if err != nil {
			return nil, fmt.Errorf("%s.http.url: %q: %w", field, url, err)
		}
		return a, nil
	}
	for i, t := range c.Tools {
		if t.Reconcile == nil {
			continue
		}
		field := fmt.Sprintf("tools[%d] (%s).reconcile", i, t.Name)
		rc := t.Reconcile
		switch {
		case rc.Tool != "" || len(rc.Tools) > 0:
			return nil, fmt.Errorf("%s.tool: only an MCP upstream tool asks a tool (under mcp_servers[].reconcile); give http.url", field)
		case rc.HTTP == nil:
			return nil, fmt.Errorf("%s.http.url: required", field)
		}
		ask, err := httpAsker(field, rc.HTTP.URL)
		if err != nil {
			return nil, err
		}
		maxBytes := httptool.DefaultMaxResponseBytes
		if t.HTTP != nil && t.HTTP.MaxResponseBytes > 0 {
			maxBytes = t.HTTP.MaxResponseBytes
		}
		target, err := c.reconcileTarget(field, opts, t.Name, rc, ask, maxBytes)
		if err != nil {
			return nil, err
		}
		targets = append(targets, target)
	}
	for i, s := range c.MCPServers {
		if s.Reconcile == nil {
			continue
		}
		field := fmt.Sprintf("mcp_servers[%d] (%s).reconcile", i, s.Name)
		targets2, err := c.mcpReconcileTargets(field, opts, s, httpAsker)
		if err != nil {
			return nil, err
		}
		targets = append(targets, targets2...)
	}
	return targets, nil
}

// mcpReconcileTargets are the targets of one mcp_servers: entry's
// reconcile: section.
func (c *Config) mcpReconcileTargets(field string, opts callpath.Options, s MCPServerEntry, httpAsker func(field, url string) (reconcile.Asker, error)) ([]reconcile.Target, error) {
	rc := s.Reconcile
	var ask reconcile.Asker
	switch {
	case (rc.Tool == "") == (rc.HTTP == nil):
		return nil, fmt.Errorf("%s.tool: give tool (a tool of this server) or http.url, one of them", field)
	case len(rc.Tools) == 0:
		return nil, fmt.Errorf("%s.tools: list the server's tools to reconcile", field)
	case rc.Tool != "":
		if !tools.ValidName(s.Prefix + rc.Tool) {
			return nil, fmt.Errorf("%s.tool: %q is not a tool name", field, rc.Tool)
		}
		registry := opts.Tools
		ask = reconcile.ToolAsker{Name: s.Prefix + rc.Tool, Lookup: func(name string) (tools.Tool, bool) {
			e, ok := registry.Lookup(name)
			if !ok {
				return nil, false
			}
			return e.Tool, true
		}}
	default:
		var err error
		if ask, err = httpAsker(field, rc.HTTP.URL); err != nil {
			return nil, err
		}
	}
	maxBytes := mcptool.DefaultMaxResponseBytes
	if s.MaxResponseBytes > 0 {
		maxBytes = s.MaxResponseBytes
	}
	var targets []reconcile.Target
	for j, name := range rc.Tools {
		if name == rc.Tool || (len(s.Tools) > 0 && !slices.Contains(s.Tools, name)) || slices.Contains(s.ReadOnly, name) {
			return nil, fmt.Errorf("%s.tools[%d]: %q is not a tool of this server that acts (the reconcile tool itself, a read-only tool, or one not under tools)", field, j, name)
		}
		target, err := c.reconcileTarget(fmt.Sprintf("%s.tools[%d]", field, j), opts, s.Prefix+name, rc, ask, maxBytes)
		if err != nil {
			return nil, err
		}
		targets = append(targets, target)
	}
	return targets, nil
}

// reconcileTarget checks every and attempts and takes the tool's policy.
func (c *Config) reconcileTarget(field string, opts callpath.Options, tool string, rc *ReconcileConfig, ask reconcile.Asker, maxBytes int64) (reconcile.Target, error) {
	if !tools.ValidName(tool) {
		return reconcile.Target{}, fmt.Errorf("%s: %q is not a tool name", field, tool)
	}
	if rc.Attempts < 0 {
		return reconcile.Target{}, fmt.Errorf("%s.attempts: %d: must be at least 1", field, rc.Attempts)
	}
	every := time.Duration(rc.Every)
	if every == 0 {
		every = defaultReconcileEvery
	}
	attempts := rc.Attempts
	if attempts == 0 {
		attempts = defaultReconcileAttempts
	}
	if e, ok := opts.Tools.Lookup(tool); ok && e.Spec.ReadOnly {
		return reconcile.Target{}, fmt.Errorf("%s: %s is read_only: nothing is recorded, nothing to reconcile", field, tool)
	}
	var own tools.Policy
	if e, ok := opts.Tools.Lookup(tool); ok {
		own = e.Spec.Policy
	}
	policy := opts.Policies[tool].Resolve(own, tools.Policy{Timeout: opts.ToolTimeout, ReplayTTL: opts.ReplayTTL})
	return reconcile.Target{Tool: tool, Ask: ask, Every: every, Attempts: attempts, Timeout: policy.Timeout,
		MaxResponseBytes: maxBytes, ReplayTTL: policy.ReplayTTL, Abandoned: policy.LeaseExpiry == tools.LeaseExpiryUnknown,
		AbandonedAfter: cmp.Or(time.Duration(c.Idempotency.LockTTL), callpath.DefaultLockTTL)}, nil
}

// startReconcile starts the reconcile worker on store when targets are
// configured; stop ends it (a question in flight is cancelled: its record
// stays UNKNOWN for the next scan of any replica).
func startReconcile(targets []reconcile.Target, store idempotency.Store, reg prometheus.Registerer, log *slog.Logger, receipt callpath.ReceiptHook) (stop func(), err error) {
	if len(targets) == 0 {
		return func() {}, nil
	}
	rs, ok := store.(reconcile.Store)
	if !ok {
		return nil, errors.New("reconcile: the store does not offer reconciliation")
	}
	opts := reconcile.Options{Store: rs, Targets: targets, Owner: "reconcile-" + rand.Text(), Registerer: reg, Logger: log}
	if receipt != nil { // receipts on: the resolution and what it settled are receipted
		opts.OnResolved = resolvedReceipt(receipt)
	}
	w, err := reconcile.New(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	return func() { cancel(); <-done }, nil
}

// newMetricsRegistry is the registry /metrics serves, with the Go and
// process collectors the gateway's own default registry has.
func newMetricsRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// toolReconciles are the tools' reconcile: sections by tool name, which a
// reload cannot change.
func toolReconciles(c *Config) map[string]ReconcileConfig {
	out := make(map[string]ReconcileConfig)
	for _, t := range c.Tools {
		if t.Reconcile != nil {
			out[t.Name] = *t.Reconcile
		}
	}
	return out
}

// resolvedReceipt leaves the `resolved` receipt (by reconcile) of a record
// reconciliation completed or removed, then the budget receipts of what
// that settled: committed with a completion, released with a removal.
func resolvedReceipt(receipt callpath.ReceiptHook) func(idempotency.Record, int, []idempotency.Reservation) {
	return func(rec idempotency.Record, status int, settled []idempotency.Reservation) {
		r := receipts.Receipt{Event: receipts.EventResolved, By: receipts.ByReconcile, Tool: rec.Scope.Tool,
			Key: receipts.KeyHash(rec.Scope.Key), ExecutionID: rec.ExecutionID, Status: status}
		if rec.Step != nil {
			r.Session, r.Step = rec.Step.SessionID, strconv.FormatUint(rec.Step.Index, 10)
		}
		receipt(rec.Scope.Tenant, r)
		event := receipts.EventBudgetCommitted
		if status == 0 {
			event = receipts.EventBudgetReleased
		}
		for _, b := range callpath.SettledReceipts(event, rec, settled) {
			receipt(rec.Scope.Tenant, b)
		}
	}
}
