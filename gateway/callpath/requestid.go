package callpath

import (
	"context"
	"net/http"
	"time"

	"github.com/toolgateway/toolgateway/wire"
)

// requestID mints a new X-Request-Id for every request; a client's value is
// ignored so the id can be trusted in logs. The id is the first thing the
// request's requestInfo holds: the one context value (and request copy)
// the access log and the handlers share.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := &requestInfo{id: newULID(), start: time.Now()}
		w.Header().Set(wire.HeaderRequestID, info.id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info)))
	})
}

// RequestIDFrom returns the request id minted for ctx's request.
func RequestIDFrom(ctx context.Context) string {
	if info := infoFrom(ctx); info != nil {
		return info.id
	}
	return ""
}
