package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// AdminRecord is a record as the admin API shows it (the JSON of
// GET /admin/v1/records/... and of each listed record); the gateway admin
// command decodes it.
type AdminRecord struct {
	Tenant         string `json:"tenant"`
	Tool           string `json:"tool"`
	Key            string `json:"key"`
	State          string `json:"state"`
	Fingerprint    string `json:"fingerprint"`
	ExecutionID    string `json:"execution_id"`
	FencingToken   int64  `json:"fencing_token"`
	CreatedAt      string `json:"created_at"`
	ExpiresAt      string `json:"expires_at"`
	LeaseExpiresAt string `json:"lease_expires_at,omitempty"`
	ResponseStatus int    `json:"response_status,omitempty"`
	// SessionID and StepIndex are the agent step of the call, when it had
	// one (and the store kept it).
	SessionID string  `json:"session_id,omitempty"`
	StepIndex *uint64 `json:"step_index,omitempty"`
	// Identity says which identity keyed the call: the gateway's own
	// (session and step, or a key), a host's call id, or a fingerprint
	// with its person and dedupe window.
	Identity idempotency.RecordIdentity `json:"identity"`
	// UpstreamKey is the Idempotency-Key the upstream saw for this call:
	// SHA-256(tenant ":" tool ":" key), what an upstream's own logs hold.
	UpstreamKey string `json:"upstream_key"`
	// Response is the stored response, with ?include=response only.
	Response *AdminResponse `json:"response,omitempty"`
	// CanonicalArguments are the call's arguments in canonical form (JCS
	// text), with ?include=arguments only, while IN_PROGRESS or UNKNOWN.
	CanonicalArguments *string `json:"canonical_arguments,omitempty"`
	// ResolvedBy is "reconcile" for a record reconciliation completed.
	ResolvedBy string `json:"resolved_by,omitempty"`
	// Requester is the principal of the call that wrote the record.
	Requester string `json:"requester,omitempty"`
	// Reconciliation shows the questions asked about an uncertain record.
	Reconciliation *AdminReconciliation `json:"reconciliation,omitempty"`
}

// adminScope reads tenant, tool and key from the path. The key is the rest
// of the path (less suffix, e.g. "/resolve"), so keys containing '/' work
// when sent percent-encoded.
func adminScope(r *http.Request, suffix string) (idempotency.Scope, bool) {
	key := chi.URLParam(r, "*")
	if suffix != "" {
		var found bool
		if key, found = strings.CutSuffix(key, suffix); !found {
			return idempotency.Scope{}, false
		}
	}
	if r.URL.RawPath != "" {
		unescaped, err := url.PathUnescape(key)
		if err != nil {
			return idempotency.Scope{}, false
		}
		key = unescaped
	}
	key, validKey := callpath.ValidAdminKey(key)
	scope := idempotency.Scope{Tenant: chi.URLParam(r, "tenant"), Tool: chi.URLParam(r, "tool"), Key: key}
	// Tenant and tool names follow the tool-name pattern, so a path segment
	// that does not cannot name a record (and never reaches the store or a log).
	if !tools.ValidName(scope.Tenant) || !tools.ValidName(scope.Tool) || !validKey {
		return idempotency.Scope{}, false
	}
	return scope, true
}

// handleAdminGet shows one record.
func (s *Server) handleAdminGet(w http.ResponseWriter, r *http.Request) {
	scope, ok := adminScope(r, "")
	if !ok {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeRecordNotFound, "no record under that path"))
		return
	}
	rec, err := s.Store().Get(r.Context(), scope)
	if s.adminStoreError(w, r, err) {
		return
	}
	include, ok := parseInclude(w, r)
	if !ok {
		return
	}
	out := toAdminRecord(rec, include)
	writeJSON(w, http.StatusOK, out)
}

// handleAdminDelete removes one record so the next call runs the tool: the
// way out of UNKNOWN after a human checked the side effect.
func (s *Server) handleAdminDelete(w http.ResponseWriter, r *http.Request) {
	scope, ok := adminScope(r, "")
	if !ok {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeRecordNotFound, "no record under that path"))
		return
	}
	_, err := s.Settle(r.Context(), scope, receipts.EventDeleted, callpath.ByAdmin, "", func() (idempotency.Record, error) {
		rec, err := s.deletedRecord(r.Context(), scope)
		if err != nil {
			return rec, err
		}
		return rec, s.Store().Delete(r.Context(), scope)
	})
	if s.adminStoreError(w, r, err) {
		return
	}
	s.Logger().InfoContext(r.Context(), "admin deleted a record", "tenant", scope.Tenant, "tool", scope.Tool, "key_prefix", idempotency.KeyPrefix(scope.Key))
	w.WriteHeader(http.StatusNoContent)
}

// deletedRecord is what the receipts of a deletion name: with receipts on,
// the record as read before it goes (its execution id and step, as the
// console's deletion names them); with them off, the scope alone, and
// nothing is read.
func (s *Server) deletedRecord(ctx context.Context, scope idempotency.Scope) (idempotency.Record, error) {
	if s.ReceiptStore() == nil {
		return idempotency.Record{Scope: scope}, nil
	}
	return s.Store().Get(ctx, scope)
}

// adminStoreError writes the problem for a failed store call; false if err is nil.
func (s *Server) adminStoreError(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, idempotency.ErrNotFound):
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeRecordNotFound, "no record under that path"))
	case errors.Is(err, idempotency.ErrNotResolvable):
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeRecordNotResolvable, "only an UNKNOWN record, or an IN_PROGRESS one whose lease expired, can be resolved"))
	case errors.Is(err, idempotency.ErrInvalidCursor):
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeInvalidAdminRequest, "the cursor (or the filter) is not one this store serves: start again without a cursor"))
	default:
		s.Logger().ErrorContext(r.Context(), "admin: store failed", "error", err)
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "the idempotency store is unreachable").WithRetryAfter(1))
	}
	return true
}
