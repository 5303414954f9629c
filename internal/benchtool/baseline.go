package benchtool

import (
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// maxBaselineBody matches the gateway's default body cap.
const maxBaselineBody = 1 << 20

// BaselineHandler serves the tools of reg at the gateway's call path with
// no idempotency layer: read the body, call the tool, write its answer.
// It is what the gateway's overhead is measured against.
func BaselineHandler(reg *tools.Registry) http.Handler {
	r := chi.NewRouter()
	r.Post("/api/tools/v1/{tool}", func(w http.ResponseWriter, r *http.Request) {
		entry, ok := reg.Lookup(chi.URLParam(r, "tool"))
		if !ok {
			http.Error(w, "no such tool", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBaselineBody))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		step, _ := strconv.ParseUint(r.Header.Get(wire.HeaderStepIndex), 10, 64)
		resp, err := entry.Tool.Call(r.Context(), &tools.Request{
			Arguments:      body,
			Tenant:         "anonymous",
			SessionID:      r.Header.Get(wire.HeaderSessionID),
			StepIndex:      step,
			HasStep:        true,
			IdempotencyKey: r.Header.Get(wire.HeaderIdempotencyKey),
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", resp.ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(resp.Body)))
		w.WriteHeader(resp.Status)
		_, _ = w.Write(resp.Body)
	})
	return r
}
