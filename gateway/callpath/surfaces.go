package callpath

import (
	"crypto/sha256"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway/budgets"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/tools"
)

// What the operator surfaces (the admin API, the console, readiness and
// /metrics, served by package gateway) read and do through the engine, so
// a record an operator resolves or deletes gets its receipt and its log
// line the same way whichever surface did it.

// Store returns the idempotency store, instrumented with the engine's
// metrics.
func (s *Engine) Store() idempotency.Store { return s.store }

// AdminStore returns the store's search and resolve side; nil when the
// store has none (the admin API then answers 501 for those routes).
func (s *Engine) AdminStore() idempotency.Admin { return s.admin }

// PolicyOf returns the effective policy of a tool known by name only (an
// operator's resolve: the tool may have left the registry since its
// record was made).
func (s *Engine) PolicyOf(tool string) tools.Policy { return s.policyNamed(tool) }

// ReceiptStore returns the receipts store; nil when receipts are off.
func (s *Engine) ReceiptStore() receipts.Store {
	if s.receipts == nil {
		return nil
	}
	return s.receipts.store
}

// ToolCounters reads every tool's counters from the engine's registry.
func (s *Engine) ToolCounters() (map[string]*ToolCounter, error) { return s.metrics.toolCounters() }

// Budgets returns the budgets and the tools' charges of the settings of
// now (nil: none), for the admin API's budget windows.
func (s *Engine) Budgets() *budgets.Set { return s.settings.Load().budgets }

// Decisions returns a tool's decide rules under the current settings (nil:
// none) and the configuration's mode.
func (s *Engine) Decisions(tool string) (*decide.Policy, decide.Mode) {
	live := s.settings.Load()
	return live.decisions[tool], live.mode
}

// AdminTokenHashes returns the admin tokens' hashes accepted now: the
// current one, and the previous one during a rotation.
func (s *Engine) AdminTokenHashes() []*[sha256.Size]byte { return s.settings.Load().admin }

// Gatherer returns the registry /metrics serves.
func (s *Engine) Gatherer() prometheus.Gatherer { return s.metrics.gatherer }

// OIDCReady reports why the identity provider's tokens cannot be checked
// yet (its keys not had); nil when they can or no provider is set.
func (s *Engine) OIDCReady() error {
	if v := s.settings.Load().oidc; v != nil {
		return v.Ready()
	}
	return nil
}

// AuthenticateAdmin is the admin API's auth middleware (the admin token).
func (s *Engine) AuthenticateAdmin(next http.Handler) http.Handler { return s.authenticateAdmin(next) }

// MountProtectedResourceMetadata serves the RFC 9728 metadata of the tool
// API when an identity provider is set.
func (s *Engine) MountProtectedResourceMetadata(r chi.Router) { s.mountProtectedResourceMetadata(r) }

// ByAdmin names the admin token as who acted, in receipts: token:admin.
var ByAdmin = byAdmin

// ApprovalEvent is the receipt event of an approval's decision.
func ApprovalEvent(approve bool) receipts.Event { return approvalEvent(approve) }
