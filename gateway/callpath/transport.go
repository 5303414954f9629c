package callpath

import (
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/toolgateway/toolgateway/wire"
)

// closeChunked closes the connection after any request with a
// Transfer-Encoding. net/http drops the Content-Length of a chunked request
// before a handler sees it, so a request that sent both (a request
// smuggling shape behind a proxy that trusts Content-Length) cannot be told
// apart; it is processed by Transfer-Encoding alone, and RFC 9112 §6.1
// then requires closing the connection.
func closeChunked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// lingerBeforeClose is how long a connection closed by CloseNow stays open
// for reading after its write side is shut: closing at once with unread
// request bytes in the kernel would send a reset that can destroy the
// response before the client reads it (net/http waits the same way).
const lingerBeforeClose = 500 * time.Millisecond

// CloseNow sends the response written so far and ends the connection
// without reading the rest of the request body: after a 413 a client
// that keeps sending (or stalls) must not hold the connection until the
// read timeout, which net/http's own close would (it first drains up to
// 256 KiB of the body). HTTP/2 cannot be hijacked; there the stream ends
// with the response anyway.
func CloseNow(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		return
	}
	if half, ok := conn.(interface{ CloseWrite() error }); ok && half.CloseWrite() == nil {
		time.AfterFunc(lingerBeforeClose, func() { _ = conn.Close() })
		return
	}
	_ = conn.Close()
}

// NewRouter is a router with the middleware every endpoint has. Order:
// the request id comes first so every response (errors included) carries
// it; the access log and metrics wrap everything below.
func (s *Engine) NewRouter() *chi.Mux {
	r := chi.NewRouter()
	r.Use(requestID)
	r.Use(s.extractTrace)
	r.Use(closeChunked)
	r.Use(s.accessLog)
	// HEAD is served wherever GET is (health checks often use it).
	r.Use(middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, NewProblem(wire.CodeNotFound, "no such endpoint"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		p := NewProblem(wire.CodeMethodNotAllowed, "method not allowed on this endpoint")
		p.allow = allowedMethods(r, req.URL.Path)
		WriteProblem(w, p)
	})

	return r
}

// allowedMethods lists the methods router serves on path, for the Allow
// header of a 405 (chi leaves it to custom handlers).
func allowedMethods(router chi.Routes, path string) string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if router.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
			if m == http.MethodGet {
				allowed = append(allowed, http.MethodHead) // middleware.GetHead
			}
		}
	}
	return strings.Join(allowed, ", ")
}
