package callpath

import (
	"github.com/toolgateway/toolgateway/tools"
)

// MultiRoundTrip is what a call carries of an MCP multi round-trip request
// (SEP-2322, protocol 2026-07-28): whether the client can answer an
// upstream's input requests, and its answers on a continuation. An MCP
// upstream tool that asks for input returns a Response with InputRequired:
// not an outcome, so the call path records nothing and releases the claim
// (the continuation, a new call with the same identity, claims again), and
// the adapter hands the input_required result to the client without the
// execution's _meta.
type MultiRoundTrip struct {
	// AcceptsInputRequests: the client can answer input requests (MCP,
	// protocol 2026-07-28 or later). REST cannot.
	AcceptsInputRequests bool
	// Continuation is the client's inputResponses and requestState; nil on
	// a first round.
	Continuation *tools.Continuation
}

// labelInputRequired is the metrics outcome of a call answered with an
// upstream's request for client input: nothing ran to an outcome.
const labelInputRequired = "input_required"

// labelForResponse is the metrics outcome of a tool's answer.
func labelForResponse(resp *tools.Response) string {
	if resp.InputRequired {
		return labelInputRequired
	}
	return labelForStatus(resp.Status)
}

// handOn copies the call's multi round-trip fields into the tool's request.
func (m MultiRoundTrip) handOn(req *tools.Request) {
	req.AcceptsInputRequests = m.AcceptsInputRequests
	req.Continuation = m.Continuation
}
