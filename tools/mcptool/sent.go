package mcptool

import (
	"context"
	"sync/atomic"
)

// sendMark records, for one forwarded call, whether its request left the
// gateway: written whole to a stdio server's stdin, or written to a
// Streamable HTTP server's connection. A call that then fails without an
// answer may have been carried out (tools.ErrOutcomeUncertain); one whose
// request was never written was not (tools.ErrUpstreamUnreachable).
type sendMark struct {
	written atomic.Bool
	// refused: the HTTP server answered the request with an error status
	// that proves it did not act (refusal), so the call's outcome is not
	// "uncertain".
	refused atomic.Bool
}

type sendMarkKey struct{}

// withSendMark returns ctx carrying a new mark; the transports find it in
// the context go-sdk hands them with the request.
func withSendMark(ctx context.Context) (context.Context, *sendMark) {
	m := &sendMark{}
	return context.WithValue(ctx, sendMarkKey{}, m), m
}

func sendMarkFrom(ctx context.Context) *sendMark {
	m, _ := ctx.Value(sendMarkKey{}).(*sendMark)
	return m
}

// markWritten notes that the request of ctx's call was written.
func markWritten(ctx context.Context) {
	if m := sendMarkFrom(ctx); m != nil {
		m.written.Store(true)
	}
}

// mayHaveRun reports whether the call's request reached the server without
// a refusal in return.
func (m *sendMark) mayHaveRun() bool {
	return m.written.Load() && !m.refused.Load()
}
