package callpath

import (
	"context"
	"time"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/tools"
)

// What happens to a tool call, whatever door it came in by.
//
// An adapter (REST in rest.go, MCP over POST /mcp) does the checks only its
// transport knows (auth, tool lookup, method, content type, body size),
// parses the call's identity from its own carriers (HTTP headers, MCP
// _meta) and hands the call path a Call. Engine.Call then runs it through
// the stages listed in call, in the contract's order, one file each:
//
//	check:  I-JSON → identity (adapter's parse) → derived key → schema →
//	        availability → rate (check.go)
//	effect: the effect key's value, which the claim holds (effect.go)
//	budget: the call's budget charges, each cost from the arguments, which
//	        the claim reserves in its atomic step (budget.go)
//	decide: the tool's decide rules (they see the budgets the call
//	        charges): allow, approve (the claim writes or consumes the
//	        approval), deny (decide.go)
//	claim:  one atomic store decision (claim.go), and, when it wrote a
//	        pending approval, its notification (notify.go) and receipt
//	        (receipt.go); a call that waits for a duplicate in flight or
//	        an approval's decision polls (wait.go): decide and claim run
//	        again at each poll
//	answer: the claim's last decision: run, replay, in progress, reused,
//	        step conflict, unknown (claim.go)
//	approval: a record whose approval is pending, denied or expired, as
//	        the claim found it (decide.go)
//	run:    the tool, detached from the client, under a renewed, fenced
//	        lease; a call with no record (read-only, unkeyed) as it is (run.go)
//	record: complete (2xx–4xx but 408/425/429); UNKNOWN for an uncertain
//	        outcome of a lease_expiry: unknown tool; release (everything
//	        else) (record.go)
//	receipt: after whichever stage ended the call, its consequential event
//	        (executed, denied, approval expired; a record made UNKNOWN
//	        before it) handed to the receipt writer, never waited for
//	        (receipt.go)
//
// A stage learns what earlier stages found from the call state
// (callState), never by calling them: the claim leaves a new approval in
// callState.newApproval for notify and receipt, the record stage leaves
// callState.madeUnknown for the receipt, and a poll's decide reads
// callState.waited. The call path returns a Result the adapter
// renders (an HTTP response, or an MCP CallToolResult / JSON-RPC
// error). Nothing here knows about
// http.ResponseWriter. Drain accounting, metrics, the request's log fields
// and the takeover and lease logs all live on this path, so both adapters
// get them alike.
//
// Words: the store's *decision* (idempotency.Decision, its Outcome field),
// the tool's *answer* (status, content type, body), the call path's
// *Result*, and the metrics *label* (the "outcome" label and log field).

// API names the door a call came in by: the "api" field of the access log
// and label of the request metrics.
type API string

// The doors.
const (
	APIREST API = "rest"
	APIMCP  API = "mcp"
)

// Identity is a call's idempotency identity as an adapter parsed it.
type Identity struct {
	// Key is the unquoted Idempotency-Key. In derived mode it may be empty
	// when the transport makes it optional (MCP): the call path derives it.
	Key       string
	SessionID string
	StepIndex uint64
	// HasStep: session id and step index were both sent and well-formed.
	HasStep bool
	// HostMeta and HostCallID: the call carried none of the above but a
	// host's own id of the call in _meta member HostMeta (MCP's
	// mcp.host_call_ids); the key is derived from it (identity.go).
	HostMeta, HostCallID string
	// FingerprintPrincipal and WindowStart: the call carried no identity
	// and no host call id, and its tool keys such calls on their
	// fingerprint (MCP's identityless: fingerprint): the key is derived
	// from the person's principal, the tool, the arguments and the start
	// of the dedupe window the call fell in (identity.go).
	FingerprintPrincipal string
	WindowStart          time.Time
	// Window is the length of the dedupe window WindowStart starts.
	Window time.Duration
}

// Call is one tool call as an adapter hands it to Engine.Call.
type Call struct {
	API    API
	Tenant string
	// Requester is the call's principal (gateway/principal); zero takes
	// the request's (PrincipalFrom, set by the tool API's auth), which
	// stays zero without auth.
	Requester principal.Principal
	Entry     *tools.Entry
	// Arguments are the raw argument bytes, exactly as the client sent them
	// (an HTTP upstream receives these bytes).
	Arguments []byte

	// Identity is the parsed identity. For a read-only tool only its
	// session id and step index are used (handed to the tool when HasStep).
	Identity Identity
	// IdentityProblem is what was wrong with the identity (missing or
	// malformed key, session or step; conflicting carriers). The call path
	// reports it only after the JSON checks, in the contract's order, and
	// never for a read-only tool.
	IdentityProblem *Problem
	// NoIdentity: the client sent none of key, session id and step index.
	NoIdentity bool
	// AllowUnkeyed runs a mutating call with NoIdentity on every call,
	// without a record (MCP's mcp.allow_unkeyed), instead of reporting
	// IdentityProblem; the Result says it ran unprotected.
	AllowUnkeyed bool

	// Wait is how long a duplicate of a call in flight waits for its outcome
	// before the answer is "in progress" (REST: Prefer: wait=N; MCP:
	// mcp.in_progress_wait). Zero answers at once.
	Wait time.Duration
	// WaitForApproval: Wait also waits for a pending approval's decision
	// (REST: Prefer: approval beside wait=N). Without it a call held for
	// an approval answers approval_pending at once.
	WaitForApproval bool
	// Received is when the request arrived, for the latency histogram; zero
	// means when Engine.Call started.
	Received time.Time
	// Traceparent and Tracestate are a W3C trace context the transport
	// carried inside the call (MCP: params._meta "traceparent" and
	// "tracestate"); set, they win over the HTTP headers' (tracing.go).
	Traceparent, Tracestate string
	// MultiRoundTrip carries an MCP client's ability to answer an
	// upstream's input requests, and its answers (multiroundtrip.go).
	MultiRoundTrip MultiRoundTrip
}

// ResultKind says what became of a call.
type ResultKind int

// Result kinds.
const (
	// ResultExecuted: the tool ran under a claim; Status, ContentType and
	// Body are its answer (recorded for replay when recordable).
	ResultExecuted ResultKind = iota + 1
	// ResultReplayed: a stored answer, byte for byte; the tool did not run.
	ResultReplayed
	// ResultReadOnly: a read-only tool ran; nothing is stored.
	ResultReadOnly
	// ResultUnkeyed: a mutating tool ran without a record (AllowUnkeyed);
	// the adapter must mark it unprotected.
	ResultUnkeyed
	// ResultInProgress: a duplicate of a call still running; Problem is
	// request_in_progress with its Retry-After.
	ResultInProgress
	// ResultUnknown: the record is UNKNOWN; Problem is outcome_unknown.
	ResultUnknown
	// ResultProblem: any other refusal or failure; Problem says which.
	ResultProblem
)

// Result is what the call path answers; adapters render it.
type Result struct {
	Kind ResultKind
	// Status, ContentType and Body are the tool's answer (Executed,
	// Replayed, ReadOnly, Unkeyed).
	Status      int
	ContentType string
	Body        []byte
	// ExecutionID is set when the call reached a claim (executed, replayed,
	// or a tool failure after the claim): REST sends it with
	// Idempotent-Replayed, MCP in _meta.
	ExecutionID string
	Replayed    bool
	// EffectReplayed: the replay is another call's with the same effect
	// key value (REST: Effect-Key-Replayed: true).
	EffectReplayed bool
	// Problem is set for InProgress, Unknown and Problem.
	Problem *Problem
	// Waited: the call waited for a duplicate in flight (REST answers
	// Preference-Applied).
	Waited bool
	// Label is the metrics outcome label the call was counted under.
	Label string
	// InputRequired: Body is an upstream's request for client input (MCP
	// multi round-trip), not an outcome; nothing was recorded.
	InputRequired bool
}

// Call runs c through the call path's stages: checks, store decision,
// execution and recording. It never writes to a transport; see the comment
// at the top of this file.
func (s *Engine) Call(ctx context.Context, c *Call) Result {
	if c.Received.IsZero() {
		c.Received = time.Now()
	}
	if c.Requester.IsZero() {
		c.Requester = PrincipalFrom(ctx)
	}
	ctx, endSpan := s.startCallSpan(ctx, c)
	res := s.call(ctx, c)
	if res.Problem != nil && res.Kind == 0 {
		res.Kind = ResultProblem
	}
	endSpan(res)
	s.count(ctx, c, res.Label)
	return res
}

// call is the call path without the bookkeeping: its stages, in order.
// Each stage either passes the call on to the next (false) or ends it with
// its Result (true, the Result in callState.result); the first that ends
// it ends the switch. A new stage is a file of its own and one line here.
func (s *Engine) call(ctx context.Context, c *Call) Result {
	st := callState{call: c}
	defer st.finish(s)
	switch {
	case s.check(ctx, &st): // check.go: I-JSON, identity, key, schema, availability, rate
	case s.effect(ctx, &st): // effect.go: the effect key's value, held by the claim
	case s.budget(ctx, &st): // budget.go: the call's budget charges, reserved by the claim
	case s.decideAndClaim(ctx, &st): // decide.go, claim.go, wait.go: rules, store decision, polls
	case s.answer(ctx, &st): // claim.go: the claim's last decision
	case s.approval(ctx, &st): // decide.go: a record's approval, pending, denied or expired
	case s.run(ctx, &st): // run.go: the tool, under the claim's lease
	case s.record(ctx, &st): // record.go: the outcome, for replay or not
	}
	s.receipt(&st) // receipt.go: the event's receipt, enqueued
	st.result.Waited = st.waited
	return st.result
}

// decideAndClaim runs decide (decide.go) and, for a call with a record,
// the claim (claim.go) with what it tells of a new approval (notify.go,
// receipt.go); while the call waits (wait.go) it runs them again at each
// poll, so the rules of now decide each claim that may consume an
// approval. It ends the call only with decide's deny.
func (s *Engine) decideAndClaim(ctx context.Context, st *callState) bool {
	if s.decide(ctx, st) {
		return true
	}
	if st.unprotected != 0 {
		return false // nothing to claim: run.go runs it as it is
	}
	ctx, endSpan := s.childSpan(ctx, "store decision")
	for {
		s.claim(ctx, st)
		s.notify(ctx, st)
		s.receiptOfApproval(st)
		if !s.wait(ctx, st) {
			endSpan(st.claimErr)
			return false
		}
		if s.decide(ctx, st) {
			endSpan(nil)
			return true
		}
	}
}

// callState is one call on its way through the stages: what a stage found
// out that a later one needs, the Result that ended the call, and what the
// stages hold until it ended (finish lets go of it). It lives on call's
// stack: a stage keeps no pointer to it beyond its own return.
type callState struct {
	call *Call
	// result is the call's answer, set by the stage that ended it (end).
	result Result

	// Set by check. unprotected is ResultReadOnly or ResultUnkeyed for a
	// call that runs without a record (claim passes it by, run ends it); the
	// rest is for a call with a record.
	unprotected ResultKind
	id          Identity // with the derived key filled in
	fingerprint string
	canonical   []byte // JCS of the arguments, kept with open records for operators
	policy      tools.Policy
	// owner owns the claim: the request id is unique per request, and a
	// wait of the same request that takes over reuses it.
	owner string
	// effect is the call's effect key value (effect.go); nil without one.
	effect *idempotency.Effect

	// Set by decide: the approval the claim writes or consumes (nil when
	// the rules allow the call), and whether the tool has rules at all.
	approval *idempotency.ApprovalClaim
	decided  bool
	// verdict is the decision taken (nil: no rules), for the receipt.
	verdict *decide.Verdict
	// decisionCounted: gateway_decisions_total counted the call's verdict
	// (once per call: metrics.go's countDecision).
	decisionCounted bool

	// Set by budget: the charges the claim reserves, and the budgets as
	// decide's rules see them (nil: none).
	charges []idempotency.Charge
	budgets func() map[string]decide.Budget

	// Set by claim, at each poll: the store's decision (or why there is
	// none), and the pending approval it wrote (nil: none), which notify
	// and receipt tell of.
	decision    idempotency.Decision
	claimErr    error
	newApproval *idempotency.Approval
	// Set by wait: whether the call waited for a duplicate in flight or an
	// approval's decision, and when it polls again.
	waited bool
	wait   waiting

	// Set by answer: the claim's lease and the in-flight slot it holds; or
	// that the store's decision is the record's approval's answer to the
	// call (pending, denied, expired), for the approval stage. A flag, not
	// a pointer to decision: a pointer into the call state would move it to
	// the heap (a 1 KiB allocation per call).
	lease           idempotency.Lease
	leaveSlot       func()
	approvalOutcome bool

	// Set by run: the tool's answer and what holds the claim until record
	// has written the outcome.
	exec execution
	// Set by record: the record was left UNKNOWN, which the receipt tells
	// before the execution.
	madeUnknown bool
}

// end ends the call with res; a stage returns its value.
func (st *callState) end(res Result) bool {
	st.result = res
	return true
}

// refuse ends the call with a refusal, counted under its code's label.
func (st *callState) refuse(p *Problem) bool {
	return st.end(problemResult(p))
}

// failed is the Result of a claimed call that failed: it reached a claim,
// so it carries the execution id.
func (st *callState) failed(p *Problem) Result {
	return Result{Kind: ResultProblem, Problem: p, ExecutionID: st.lease.ExecutionID, Label: p.label()}
}

// finish lets go of what the stages held, the last taken first: the lease
// keeper (counting a lost lease), the tool's contexts, the drain's count
// of the tool in flight, the in-flight slot.
func (st *callState) finish(s *Engine) {
	x := &st.exec
	if x.keeper != nil && x.keeper.stop() {
		s.metrics.leasesLost.WithLabelValues(st.call.Entry.Spec.Name).Inc()
	}
	if x.cancelLease != nil {
		x.cancelLease(nil)
	}
	if x.cancelTool != nil {
		x.cancelTool()
	}
	if x.leaveDrain != nil {
		x.leaveDrain()
	}
	if st.leaveSlot != nil {
		st.leaveSlot()
	}
}

// count records the call's metrics and its access-log fields.
func (s *Engine) count(ctx context.Context, c *Call, label string) {
	name := c.Entry.Spec.Name
	setLabel(ctx, name, label)
	setAPI(ctx, c.API)
	s.metrics.observeRequest(c.API, name, label, time.Since(c.Received))
	markCounted(ctx)
}

// problemResult is a refusal, counted under its code's label.
func problemResult(p *Problem) Result {
	return Result{Kind: ResultProblem, Problem: p, Label: p.label()}
}

// storeCallTimeout bounds each claim, completion or release, which run on
// a context detached from the client so they happen even if it has gone.
const storeCallTimeout = 5 * time.Second
