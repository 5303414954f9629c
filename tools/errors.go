package tools

import "errors"

// ErrUpstreamUnreachable is wrapped by the error a tool returns when it could
// not get an answer from its upstream at all (refused connection, DNS failure,
// TLS failure, connection dropped before a response). The gateway answers 502
// upstream_unreachable and deletes the record, so a retry runs the tool again.
var ErrUpstreamUnreachable = errors.New("upstream unreachable")

// ErrResponseTooLarge is wrapped by the error a tool returns when its
// upstream's response exceeds the configured size cap. The gateway answers 502
// upstream_response_too_large and records nothing: an outcome that cannot be
// stored cannot be replayed.
var ErrResponseTooLarge = errors.New("upstream response too large")

// ErrUpstreamUnavailable is wrapped by the error of a tool that is known by
// name but cannot run yet: its MCP server's tools have not been listed since
// the gateway started (the server is not up yet). The gateway answers 503
// upstream_unavailable (retryable) and stores nothing. See Availability.
var ErrUpstreamUnavailable = errors.New("upstream unavailable: its tools are not listed yet")

// ErrToolChanged is wrapped by the error of a tool that is held: its
// upstream (an MCP server) now lists it with a definition (description,
// schemas, annotations) other than the one pinned when it was first seen
// or last accepted (package gateway/pins). The gateway answers 409
// tool_changed (not retryable) and runs nothing until an operator accepts
// the new definition. See Availability.
var ErrToolChanged = errors.New("tool definition changed since it was pinned")

// ErrOutcomeUncertain is wrapped by the error a tool returns when its upstream
// may have acted but no answer came back: an HTTP connection lost after the
// request was written, an MCP session that died with the call in flight. For
// a lease_expiry: rerun tool the gateway treats it like an unreachable
// upstream (released, a retry runs again); for lease_expiry: unknown the
// record becomes UNKNOWN, because running the tool again might repeat it.
var ErrOutcomeUncertain = errors.New("upstream outcome uncertain")

// ErrUpstreamRejected is wrapped by the error a tool returns when its
// upstream was reached and answered the call with an error instead of a
// result (an MCP server's JSON-RPC error). It counts as
// [ErrUpstreamUnreachable] too (errors.Is holds for both), so the gateway
// answers 502 upstream_unreachable while saying what happened: the
// upstream answered. For a lease_expiry: rerun tool nothing is recorded and
// a retry runs the tool again; for lease_expiry: unknown the upstream may
// have acted before it answered, so the record becomes UNKNOWN unless the
// error wraps [ErrNotExecuted] too.
var ErrUpstreamRejected error = upstreamRejected{}

// upstreamRejected is [ErrUpstreamRejected]'s type: its Is makes it an
// [ErrUpstreamUnreachable] as well.
type upstreamRejected struct{}

func (upstreamRejected) Error() string { return "upstream answered with an error, not a result" }

// Is reports ErrUpstreamUnreachable as the same error.
func (upstreamRejected) Is(target error) bool { return target == ErrUpstreamUnreachable }

// ErrNotExecuted is wrapped, next to [ErrUpstreamRejected], by the error of
// a tool whose upstream's error answer proves that it did not act: a
// JSON-RPC protocol refusal (parse error, invalid request, method not
// found, invalid params), or an answer the upstream marked
// wire.OutcomeNotExecuted. The gateway then releases the call of a
// lease_expiry: unknown tool, so a retry runs the tool again.
var ErrNotExecuted = errors.New("upstream did not execute the call")
