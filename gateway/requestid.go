package gateway

import (
	"context"
	"net/http"

	"github.com/toolgateway/toolgateway/wire"
)

type requestIDKey struct{}

// requestID mints a new X-Request-Id for every request; a client's value is
// ignored so the id can be trusted in logs.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newULID()
		w.Header().Set(wire.HeaderRequestID, id)
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// RequestIDFrom returns the request id minted for ctx's request.
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
