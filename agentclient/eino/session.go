package eino

import "context"

// sessionKey is the context key of the run's session id.
type sessionKey struct{}

// WithSession returns ctx carrying the run's session id: the thread id the
// application resumes the run with (compose.WithCheckPointID), never an id
// minted per node execution, attempt, model turn or tool call. Pass the
// returned context to the graph's Invoke or Stream.
func WithSession(ctx context.Context, sessionID string) context.Context {
	return context.WithValue(ctx, sessionKey{}, sessionID)
}

// SessionFrom returns the session id WithSession put in ctx.
func SessionFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(sessionKey{}).(string)
	return id, ok && id != ""
}
