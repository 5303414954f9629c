package gateway

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/wire"
)

// The receipt chains' checkpoints over HTTP (docs/receipts.md): their
// public keys, each tenant's checkpoints, and a checkpoint signed now.

// handleReceiptKeys answers the JWKS of the checkpoints' keys.
func (s *Server) handleReceiptKeys(w http.ResponseWriter, _ *http.Request) {
	if len(s.opts.ReceiptKeys) == 0 {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeNotFound, "no receipts signing key is configured"))
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.opts.ReceiptKeys.JWKS())
}

// handleAdminCheckpoints answers a tenant's checkpoints as JSON lines of
// the export's checkpoint lines (what `receipts verify -checkpoints` reads).
func (s *Server) handleAdminCheckpoints(w http.ResponseWriter, r *http.Request) {
	if s.ReceiptStore() == nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeAdminUnsupported, "this gateway keeps no receipts (receipts.enabled is false)"))
		return
	}
	tenant := r.URL.Query().Get("tenant")
	if tenant == "" {
		badAdminRequest(w, "tenant is required: a tenant's checkpoints are listed")
		return
	}
	checkpoints, err := s.opts.Receipts.Checkpoints(r.Context(), tenant)
	if err != nil {
		s.Logger().ErrorContext(r.Context(), "admin: receipts store failed", "error", err)
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "the receipts store is unreachable").WithRetryAfter(1))
		return
	}
	writeCheckpoints(w, checkpoints)
}

// handleAdminCheckpointNow signs the head of ?tenant='s chain (every
// chain without it) now and answers the chains' latest checkpoints.
func (s *Server) handleAdminCheckpointNow(w http.ResponseWriter, r *http.Request) {
	if s.opts.ReceiptCheckpoints == nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeAdminUnsupported, "this gateway signs no checkpoints (no receipts.signing_key)"))
		return
	}
	checkpoints, err := s.opts.ReceiptCheckpoints.Now(r.Context(), r.URL.Query().Get("tenant"))
	switch {
	case errors.Is(err, receipts.ErrChainDiverged):
		s.Logger().ErrorContext(r.Context(), "admin: receipt chain diverged from its checkpoint", "error", err)
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeChainDiverged, err.Error()))
		return
	case err != nil:
		s.Logger().ErrorContext(r.Context(), "admin: checkpoint failed", "error", err)
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "the checkpoint could not be signed and stored").WithRetryAfter(1))
		return
	}
	writeCheckpoints(w, checkpoints)
}

// writeCheckpoints answers checkpoints as JSON lines.
func writeCheckpoints(w http.ResponseWriter, checkpoints []receipts.Checkpoint) {
	var body []byte
	for _, c := range checkpoints {
		line, err := json.Marshal(receipts.CheckpointLine{Checkpoint: c})
		if err != nil { // strings, an int and a time
			callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "a stored checkpoint could not be encoded"))
			return
		}
		body = append(append(body, line...), '\n')
	}
	w.Header().Set("Content-Type", receiptsContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
