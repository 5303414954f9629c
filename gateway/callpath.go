package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// What happens to a tool call, whatever door it came in by.
//
// An adapter (REST in rest.go, MCP over POST /mcp) does the checks only its
// transport knows (auth, tool lookup, method, content type, body size),
// parses the call's identity from its own carriers (HTTP headers, MCP
// _meta) and hands the call path a Call. Server.Call then reads, top to
// bottom:
//
//	check:  I-JSON → identity (adapter's parse) → derived key → schema
//	claim:  one atomic store decision (run, replay, in progress, reused,
//	        step conflict, unknown), with an optional wait for a duplicate
//	run:    the tool, detached from the client, under a renewed, fenced lease
//	record: complete (2xx–4xx but 408/425/429); UNKNOWN for an uncertain
//	        outcome of a lease_expiry: unknown tool; release (everything else)
//
// and returns a Result the adapter renders (an HTTP response, or an MCP
// CallToolResult / JSON-RPC error). Nothing here knows about
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
}

// Call is one tool call as an adapter hands it to Server.Call.
type Call struct {
	API    API
	Tenant string
	Entry  *tools.Entry
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
	// Received is when the request arrived, for the latency histogram; zero
	// means when Server.Call started.
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

// Call runs c: checks, store decision, execution and recording. It never
// writes to a transport; see the comment at the top of this file.
func (s *Server) Call(ctx context.Context, c *Call) Result {
	if c.Received.IsZero() {
		c.Received = time.Now()
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

// count records the call's metrics and its access-log fields.
func (s *Server) count(ctx context.Context, c *Call, label string) {
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

// call is Call without the bookkeeping: the checks, then the store's
// decision and what follows from it.
func (s *Server) call(ctx context.Context, c *Call) Result {
	cl, res := s.check(ctx, c)
	if cl == nil {
		return res
	}
	decideCtx, endDecide := s.childSpan(ctx, "store decision")
	d, waited, err := s.decide(decideCtx, cl)
	endDecide(err)
	if err != nil {
		s.log.ErrorContext(ctx, "store claim failed", "tool", c.Entry.Spec.Name, "error", err)
		return s.storeUnavailable("the idempotency store is unreachable; the tool was not run", waited)
	}
	res = s.answer(ctx, cl, d)
	res.Waited = waited
	return res
}

// check runs the checks before the store decision: I-JSON, identity,
// derived key, schema, availability, rate. It returns the claim to put to
// the store, or (nil and) the call's final Result: a refusal, or the run
// of a call that needs no record (read-only, or unkeyed where allowed).
func (s *Server) check(ctx context.Context, c *Call) (*claim, Result) {
	name := c.Entry.Spec.Name

	// The value tree is the canonical one: the schema judges the very
	// values the key is derived from. A tool whose schema accepts any
	// object needs no tree: the canonical form's first byte says whether
	// the arguments are an object.
	var (
		value     arguments
		canonical []byte
		err       error
	)
	if c.Entry.AcceptsAnyObject() {
		canonical, err = keyderive.Canonicalize(c.Arguments)
		value.object = err == nil && canonical[0] == '{'
	} else {
		var tree any
		tree, canonical, err = keyderive.DecodeCanonical(c.Arguments)
		value = treeArguments(tree)
	}
	if res, ok := s.retiredCall(ctx, c, canonical, err); ok {
		return nil, res // retired.go
	}
	if err != nil {
		return nil, problemResult(newProblem(wire.CodeInvalidJSON, invalidJSONDetail(err)))
	}
	if c.Entry.Spec.ReadOnly {
		if p := validateArguments(c.Entry, value); p != nil {
			return nil, problemResult(p)
		}
		if p := unavailable(c.Entry); p != nil {
			return nil, problemResult(p)
		}
		return nil, s.runUnprotected(ctx, c, ResultReadOnly)
	}
	if c.IdentityProblem != nil {
		if c.AllowUnkeyed && c.NoIdentity {
			if p := validateArguments(c.Entry, value); p != nil {
				return nil, problemResult(p)
			}
			return nil, s.runUnprotected(ctx, c, ResultUnkeyed)
		}
		return nil, problemResult(c.IdentityProblem)
	}
	id := c.Identity
	if id.HostMeta != "" {
		id.Key = hostCallKey(id.HostMeta, id.HostCallID, name, canonical)
	} else if s.opts.KeyMode == KeyModeDerived {
		want, err := keyderive.KeyFromCanonical(id.SessionID, id.StepIndex, name, canonical)
		if id.Key == "" && err == nil {
			id.Key = want // the transport let the client leave it to us
		}
		if err != nil || want != id.Key {
			setKey(ctx, id.Key)
			p := newProblem(wire.CodeIdempotencyKeyMismatch,
				"Idempotency-Key must be SHA-256(session:step:tool:JCS(arguments)) in lowercase hex; expected_key is the key derived from canonical_arguments; see docs/keys.md")
			// What the client needs to find its own mistake: the key the
			// gateway derived and the JCS text it hashed (it can compute
			// both from what it sent, so they disclose nothing new).
			p.ExpectedKey, p.CanonicalArguments = want, string(canonical)
			return nil, problemResult(p)
		}
	}
	setKey(ctx, id.Key)
	if p := validateArguments(c.Entry, value); p != nil {
		return nil, problemResult(p)
	}
	if p := unavailable(c.Entry); p != nil {
		return nil, problemResult(p)
	}
	if p := s.admitRate(ctx, c); p != nil {
		return nil, problemResult(p)
	}
	cl := &claim{
		call:        c,
		id:          id,
		fingerprint: keyderive.Fingerprint(canonical),
		canonical:   canonical,
		policy:      s.policy(c.Entry),
		owner:       RequestIDFrom(ctx),
	}
	if cl.owner == "" {
		cl.owner = newULID()
	}
	return cl, Result{}
}

// answer acts on the store's decision: run the claimed call, or answer
// the replay, the duplicate in flight, the reused key, the step conflict,
// the UNKNOWN record.
func (s *Server) answer(ctx context.Context, cl *claim, d idempotency.Decision) Result {
	c, name := cl.call, cl.call.Entry.Spec.Name
	switch d.Outcome {
	case idempotency.OutcomeClaimed:
		if d.TakenOver {
			s.metrics.takeovers.WithLabelValues(name).Inc()
			s.log.WarnContext(ctx, "took over an expired lease; running the tool again", "tool", name, "execution_id", d.Lease.ExecutionID)
		}
		leaveSlot, p := s.takeSlot(ctx, c, d.Lease.ExecutionID)
		if p != nil {
			s.giveBackClaim(ctx, d.Lease)
			return problemResult(p)
		}
		defer leaveSlot()
		return s.runClaimed(ctx, cl, d.Lease)
	case idempotency.OutcomeReplay:
		return Result{Kind: ResultReplayed, Status: d.Response.Status, ContentType: d.Response.ContentType, Body: d.Response.Body,
			ExecutionID: d.ExecutionID, Replayed: true, Label: labelReplayed}
	case idempotency.OutcomeInProgress:
		p := newProblem(wire.CodeRequestInProgress, "a request with this key is still running; retry after Retry-After seconds, or send Prefer: wait=N").
			withRetryAfter(min(ceilSeconds(d.RetryAfter), maxInProgressRetryAfter))
		return Result{Kind: ResultInProgress, Problem: p, Label: labelInProgress}
	case idempotency.OutcomeKeyReused:
		return problemResult(newProblem(wire.CodeIdempotencyKeyReused, "this Idempotency-Key was first used with other arguments"))
	case idempotency.OutcomeStepConflict:
		if cl.id.HostMeta != "" { // the host id's entry holds other arguments
			return problemResult(newProblem(wire.CodeIdempotencyKeyReused, "this host call id ("+cl.id.HostMeta+") was first used with other arguments"))
		}
		p := newProblem(wire.CodeStepConflict, "this session step already made another call; give each tool call its own step index")
		if d.Conflict != nil {
			p.Tool, p.ExecutionID = d.Conflict.Tool, d.Conflict.ExecutionID
		}
		return problemResult(p)
	case idempotency.OutcomeUnknown:
		p := newProblem(wire.CodeOutcomeUnknown, "the outcome of this call is unknown (its gateway died or its tool gave no certain answer); an operator must check the side effect and resolve the record")
		return Result{Kind: ResultUnknown, Problem: p, Label: labelOutcomeUnknown}
	default:
		s.log.ErrorContext(ctx, "store returned an invalid decision", "tool", name, "outcome", d.Outcome.String())
		return s.storeUnavailable("the idempotency store gave an invalid answer", false)
	}
}

// storeUnavailable is the fail-closed answer when the store cannot decide.
func (s *Server) storeUnavailable(detail string, waited bool) Result {
	res := problemResult(newProblem(wire.CodeStoreUnavailable, detail).withRetryAfter(1))
	res.Waited = waited
	return res
}

// claim is a checked call on its way to the store.
type claim struct {
	call        *Call
	id          Identity // with the derived key filled in
	fingerprint string
	canonical   []byte // JCS of the arguments, kept with open records for operators
	policy      tools.Policy
	// owner owns the claim: the request id is unique per request, and a
	// wait of the same request that takes over reuses it.
	owner string
}

// decide asks the store, in one atomic step, what to do with the call; a
// duplicate of a call in flight waits up to Call.Wait for its outcome.
// waited reports that it did wait.
func (s *Server) decide(ctx context.Context, cl *claim) (d idempotency.Decision, waited bool, err error) {
	d, err = s.claimOnce(ctx, cl)
	if err == nil && d.Outcome == idempotency.OutcomeInProgress && cl.call.Wait > 0 {
		d, err = s.awaitDuplicate(ctx, cl, cl.call.Wait, d)
		waited = true
	}
	return d, waited, err
}

// claimOnce runs one store decision on a context detached from the client:
// a client that hangs up while its claim is on the wire must not leave a
// claimed record that nobody runs (for a lease_expiry: unknown tool it would
// turn UNKNOWN without the tool ever running).
func (s *Server) claimOnce(ctx context.Context, cl *claim) (idempotency.Decision, error) {
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	req := s.claimRequest(cl)
	s.settlePending(ctx, req.Scope)
	return s.store.Claim(claimCtx, req)
}

// claimRequest builds the store request with a fresh execution id (used
// only if the claim succeeds).
func (s *Server) claimRequest(cl *claim) idempotency.ClaimRequest {
	req := idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: cl.call.Tenant, Tool: cl.call.Entry.Spec.Name, Key: cl.id.Key},
		Fingerprint: cl.fingerprint,
		StepGuard:   !s.opts.StepGuardOff,
		// In derived mode the key is a hash of the session and step.
		StepBoundKey: s.opts.KeyMode == KeyModeDerived,
		ExecutionID:  newULID(),
		Owner:        cl.owner,
		LockTTL:      s.opts.LockTTL,
		ReplayTTL:    cl.policy.ReplayTTL,
		LeaseExpiry:  cl.policy.LeaseExpiry,

		CanonicalArguments: cl.canonical,
	}
	if cl.call.Entry.Spec.Transactional {
		req.LeaseExpiry = idempotency.LeaseExpiryRerun // see txcall.go
	}
	if cl.id.HasStep {
		req.Step = &idempotency.Step{SessionID: cl.id.SessionID, Index: cl.id.StepIndex}
	}
	if cl.id.HostMeta != "" {
		// The host id's own entry (identity.go), always guarded: it is how
		// the same host id with other arguments is found. The key is
		// derived from the host id, so it is bound to that entry.
		session, index := hostCallStep(cl.id.HostMeta, cl.id.HostCallID, cl.call.Entry.Spec.Name)
		req.Step = &idempotency.Step{SessionID: session, Index: index}
		req.StepGuard, req.StepBoundKey = true, true
	}
	return req
}

// awaitDuplicate polls the store until the running call finishes, its lease
// expires (and this request takes over), ctx ends or wait passes. Polling
// keeps replicas independent of any pub/sub channel and costs one round
// trip per poll.
func (s *Server) awaitDuplicate(ctx context.Context, cl *claim, wait time.Duration, last idempotency.Decision) (idempotency.Decision, error) {
	deadline := time.Now().Add(wait)
	delay := 20 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return last, nil
		}
		timer.Reset(min(delay, left))
		select {
		case <-ctx.Done():
			return last, nil
		case <-s.waitCtx.Done(): // shutting down: answer "in progress", take nothing over
			return last, nil
		case <-timer.C:
		}
		d, err := s.claimOnce(ctx, cl)
		if err != nil || d.Outcome != idempotency.OutcomeInProgress {
			return d, err
		}
		last = d
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// runClaimed runs the tool under the lease the claim gave, renewing it, and
// records the outcome: 2xx–4xx (except 408, 425, 429) is completed for
// replay; everything else releases the record so a retry runs the tool again.
func (s *Server) runClaimed(ctx context.Context, cl *claim, lease idempotency.Lease) Result {
	c := cl.call
	name := c.Entry.Spec.Name
	failed := func(p *Problem) Result {
		return Result{Kind: ResultProblem, Problem: p, ExecutionID: lease.ExecutionID, Label: p.label()}
	}
	leave, ok := s.enter(name)
	if !ok {
		// Draining: the tool must not start now. Give the claim back so a
		// retry (on another replica) runs it.
		storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		defer cancel()
		if err := s.store.Release(storeCtx, lease); err != nil {
			s.log.WarnContext(ctx, "release while draining failed", "tool", name, "error", err)
		}
		return failed(newProblem(wire.CodeToolFailed, "the gateway is shutting down and did not run the tool; retry"))
	}
	defer leave()

	// run: detached from the client (one that hangs up must not abort a
	// tool half-way; its retry gets "in progress" and then the replay).
	toolCtx, cancel := context.WithTimeoutCause(s.baseCtx, cl.policy.Timeout, context.DeadlineExceeded)
	defer cancel()
	leaseCtx, cancelLease := context.WithCancelCause(toolCtx)
	defer cancelLease(nil)
	// The keeper renews until the outcome is written (not just until the
	// tool returns): a completion retried through a store restart must not
	// let another replica take the call over meanwhile. Its context
	// outlives the tool's deadline and a drain's cancel: only finish and
	// stop end the renewals.
	detached := context.WithoutCancel(ctx) // one for the keeper and the record
	keeper := s.keepLease(detached, lease, func() { cancelLease(errLeaseLost) })
	defer func() {
		if keeper.stop() {
			s.metrics.leasesLost.WithLabelValues(name).Inc()
		}
	}()
	req := &tools.Request{
		Arguments:      c.Arguments,
		Tenant:         c.Tenant,
		SessionID:      cl.id.SessionID,
		StepIndex:      cl.id.StepIndex,
		HasStep:        cl.id.HasStep,
		IdempotencyKey: cl.id.Key,
		ScopedKey:      keyderive.ScopedKey(c.Tenant, name, cl.id.Key),
		ExecutionID:    lease.ExecutionID,
		FencingToken:   lease.FencingToken,
	}
	c.MultiRoundTrip.handOn(req)
	var txc idempotency.TxCall
	if c.Entry.Spec.Transactional {
		var p *Problem
		if txc, p = s.beginTx(ctx, name, lease, keeper); p != nil {
			return failed(p)
		}
		req.Tx = txc.Tx()
	}
	spanCtx, endTool := s.toolSpan(ctx, leaseCtx, name)
	resp, err := s.callTool(spanCtx, c.Entry, req)
	endTool(err)

	// record: at least a whole lease to ride out a store restart (Redis
	// answers LOADING while it replays its AOF).
	storeCtx, cancelStore := context.WithTimeout(detached, max(storeCallTimeout, s.opts.LockTTL))
	defer cancelStore()
	storeCtx, endCompletion := s.childSpan(storeCtx, "completion")
	defer endCompletion(nil)
	if txc != nil {
		return s.recordTx(ctx, storeCtx, leaseCtx, cl, lease, keeper, txc, resp, err)
	}
	if err != nil {
		return failed(s.recordFailure(ctx, storeCtx, leaseCtx, cl, lease, keeper, err))
	}
	if recordable(resp.Status) && !resp.InputRequired {
		stored := idempotency.StoredResponse{Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body}
		s.recordCompletion(ctx, storeCtx, cl, lease, keeper, stored)
	} else {
		// 408, 425, 429 and 5xx: nothing (reliable) was done; forget the
		// call. So too for a request for client input: the continuation
		// is a new call with the same identity.
		s.release(storeCtx, name, lease, keeper)
	}
	return Result{Kind: ResultExecuted, Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body,
		ExecutionID: lease.ExecutionID, Label: labelForResponse(resp), InputRequired: resp.InputRequired}
}

// runUnprotected runs a call that has no record: a read-only tool, or an
// unkeyed call the adapter allows. Every call runs.
func (s *Server) runUnprotected(ctx context.Context, c *Call, kind ResultKind) Result {
	name := c.Entry.Spec.Name
	if p := s.admitRate(ctx, c); p != nil {
		return problemResult(p)
	}
	leaveSlot, p := s.takeSlot(ctx, c, newULID())
	if p != nil {
		return problemResult(p)
	}
	defer leaveSlot()
	leave, ok := s.enter(name)
	if !ok {
		return problemResult(newProblem(wire.CodeToolFailed, "the gateway is shutting down; retry"))
	}
	defer leave()

	parent := ctx
	if kind == ResultUnkeyed {
		// A mutating tool must not be aborted half-way by a client that
		// hangs up, record or not.
		parent = context.WithoutCancel(ctx)
	}
	// A read-only call has no record to protect, so the client's own
	// cancellation may stop it; a drain's cancel stops both.
	toolCtx, cancel := context.WithTimeoutCause(parent, s.policy(c.Entry).Timeout, context.DeadlineExceeded)
	defer cancel()
	stop := context.AfterFunc(s.baseCtx, cancel)
	defer stop()

	req := &tools.Request{Arguments: c.Arguments, Tenant: c.Tenant}
	if c.Identity.HasStep {
		req.SessionID, req.StepIndex, req.HasStep = c.Identity.SessionID, c.Identity.StepIndex, true
	}
	c.MultiRoundTrip.handOn(req)
	spanCtx, endTool := s.toolSpan(ctx, toolCtx, name)
	resp, err := s.callTool(spanCtx, c.Entry, req)
	endTool(err)
	if err != nil {
		p := s.toolErrorProblem(toolCtx, err)
		s.log.WarnContext(ctx, "unprotected tool call failed", "tool", name, "code", p.Code, "error", err)
		return problemResult(p)
	}
	return Result{Kind: kind, Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body, Label: labelForResponse(resp),
		InputRequired: resp.InputRequired}
}

// labelForStatus is the metrics label of a tool's answer.
func labelForStatus(status int) string {
	if status >= 500 {
		return labelToolError
	}
	return labelExecuted
}

// invalidJSONDetail says whether the body is not JSON at all or JSON that
// is not I-JSON, then the parser's specific reason.
func invalidJSONDetail(err error) string {
	reason := strings.TrimPrefix(err.Error(), "keyderive: ")
	if errors.Is(err, keyderive.ErrSyntax) {
		return "the body is not JSON (send the arguments as one JSON object): " + reason
	}
	return "the body is JSON but not I-JSON (RFC 7493): " + reason
}

// arguments is what the schema step needs of a call's arguments.
type arguments struct {
	object bool // the arguments are one JSON object
	// validate: the schema must judge tree (the canonical value tree);
	// false when it accepts any object and no tree was built.
	validate bool
	tree     any
}

// treeArguments is the schema step's view of a value tree.
func treeArguments(tree any) arguments {
	_, object := tree.(map[string]any)
	return arguments{object: object, validate: true, tree: tree}
}

// validateArguments checks that the arguments are one JSON object valid
// against the tool's schema (the contract's schema step: after the key
// checks, so a non-object body is invalid_arguments only once the identity
// is right).
func validateArguments(entry *tools.Entry, args arguments) *Problem {
	if !args.object {
		p := newProblem(wire.CodeInvalidArguments, "the arguments must be one JSON object")
		p.Errors = []wire.Violation{{Location: "", Message: "expected a JSON object"}}
		return p
	}
	if !args.validate {
		return nil // the schema accepts any object
	}
	violations := entry.Validate(args.tree)
	if len(violations) == 0 {
		return nil
	}
	p := newProblem(wire.CodeInvalidArguments, fmt.Sprintf("%d schema violation(s); see errors", len(violations)))
	p.Errors = make([]wire.Violation, len(violations))
	for i, v := range violations {
		p.Errors[i] = wire.Violation{Location: v.Location, Message: v.Message}
	}
	return p
}

// storeCallTimeout bounds each completion or release, which run on a
// context detached from the client so they happen even if it has gone.
const storeCallTimeout = 5 * time.Second

// errLeaseLost is the cause of a tool context cancelled because the gateway
// lost its lease (another request may be running the tool now).
var errLeaseLost = errors.New("gateway: lease on the idempotency record lost")

// recordable reports whether a tool status is stored for replay: 2xx–4xx,
// except the transient 408, 425 and 429 (the tool did nothing).
func recordable(status int) bool {
	if status < 200 || status > 499 {
		return false
	}
	return status != http.StatusRequestTimeout && status != http.StatusTooEarly && status != http.StatusTooManyRequests
}

// callTool calls the tool, turning a panic, a missing response or an
// invalid status into an error; a response without a content type gets
// application/json.
func (s *Server) callTool(ctx context.Context, entry *tools.Entry, req *tools.Request) (resp *tools.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.ErrorContext(ctx, "tool panicked", "tool", entry.Spec.Name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("tool panicked: %v", p)
		}
	}()
	resp, err = entry.Tool.Call(ctx, req)
	switch {
	case err != nil:
		return nil, err
	case resp == nil:
		return nil, errors.New("tool returned neither a response nor an error")
	case resp.Status < 100 || resp.Status > 599:
		return nil, fmt.Errorf("tool returned invalid status %d", resp.Status)
	case resp.ContentType == "":
		resp.ContentType = "application/json"
	}
	return resp, nil
}

// toolErrorProblem maps a tool error to the contract's problem.
func (s *Server) toolErrorProblem(ctx context.Context, err error) *Problem {
	switch {
	case errors.Is(context.Cause(ctx), errLeaseLost):
		return newProblem(wire.CodeToolFailed, "the gateway lost the lease on this call while the tool ran; retry to get the outcome")
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return newProblem(wire.CodeToolTimeout, "the tool did not finish within its timeout")
	case errors.Is(err, tools.ErrUpstreamRejected): // before ErrUpstreamUnreachable, which it counts as
		return newProblem(wire.CodeUpstreamUnreachable, "the tool's upstream answered with an error instead of a result; retrying runs it again")
	case errors.Is(err, tools.ErrUpstreamUnreachable):
		return newProblem(wire.CodeUpstreamUnreachable, "the tool's upstream could not be reached")
	case errors.Is(err, tools.ErrOutcomeUncertain):
		return newProblem(wire.CodeUpstreamUnreachable, "the connection to the tool's upstream was lost after the request was sent, before its answer")
	case errors.Is(err, tools.ErrUpstreamUnavailable):
		return newProblem(wire.CodeUpstreamUnavailable, "the tool's MCP server has not been listed yet; retry").withRetryAfter(1)
	case errors.Is(err, tools.ErrResponseTooLarge):
		return newProblem(wire.CodeUpstreamResponseTooLarge, "the tool's upstream answered with a result over the configured cap (max_response_bytes)")
	case errors.Is(context.Cause(ctx), context.Canceled):
		return newProblem(wire.CodeToolFailed, "the gateway was shutting down and cancelled the tool; retry")
	default:
		return newProblem(wire.CodeToolFailed, "the tool failed; retrying runs it again")
	}
}

// recordFailure is the record step of a tool that gave no answer, and the
// problem the client gets. An uncertain outcome (outcomeUncertain) of a
// lease_expiry: unknown tool leaves the record UNKNOWN: the effect may have
// happened, so no retry may run the tool again; the answer keeps its code
// but is not retryable. Every other failure releases the record, so a
// retry runs the tool again.
func (s *Server) recordFailure(ctx, storeCtx, leaseCtx context.Context, cl *claim, lease idempotency.Lease, keeper *leaseKeeper, toolErr error) *Problem {
	name := cl.call.Entry.Spec.Name
	p := s.toolErrorProblem(leaseCtx, toolErr)
	if cl.policy.LeaseExpiry != tools.LeaseExpiryUnknown || !outcomeUncertain(leaseCtx, toolErr) {
		s.release(storeCtx, name, lease, keeper)
		s.log.WarnContext(ctx, "tool failed", "tool", name, "execution_id", lease.ExecutionID, "code", p.Code, "error", toolErr)
		return p
	}
	s.markUnknown(storeCtx, name, lease, keeper, cl.policy.ReplayTTL)
	s.log.ErrorContext(ctx, "tool outcome uncertain; the record is left UNKNOWN for an operator (lease_expiry: unknown)",
		"tool", name, "execution_id", lease.ExecutionID, "code", p.Code, "error", toolErr)
	p.Detail = "the tool gave no certain outcome (" + p.Code + ") and may have acted; its policy is lease_expiry: unknown, " +
		"so the record is UNKNOWN: do not retry (every retry answers outcome_unknown) until an operator checks the side effect and resolves the record"
	return p.withoutRetry()
}

// outcomeUncertain reports whether a tool error leaves open whether the
// tool acted: its timeout, its cancellation by a drain, an upstream that
// took the request and gave no answer (tools.ErrOutcomeUncertain), or one
// that answered with a result over its cap (tools.ErrResponseTooLarge: it
// acted, but the gateway cannot store what it said). A lost lease is not:
// another owner holds the record, and the store decides.
func outcomeUncertain(toolCtx context.Context, err error) bool {
	cause := context.Cause(toolCtx)
	switch {
	case errors.Is(cause, errLeaseLost):
		return false
	case errors.Is(err, tools.ErrOutcomeUncertain), errors.Is(err, tools.ErrResponseTooLarge),
		errors.Is(err, context.DeadlineExceeded), errors.Is(cause, context.DeadlineExceeded),
		errors.Is(cause, context.Canceled):
		return true
	}
	return false
}

// markUnknown turns the caller's IN_PROGRESS record UNKNOWN for ttl. When
// the store does not take it, the record stays IN_PROGRESS until its lease
// expires, and then lease_expiry: unknown makes it UNKNOWN all the same.
func (s *Server) markUnknown(ctx context.Context, tool string, lease idempotency.Lease, keeper *leaseKeeper, ttl time.Duration) {
	err := keeper.finish(ctx, func() error { return s.store.MarkUnknown(ctx, lease, ttl) })
	switch {
	case err == nil:
	case errors.Is(err, idempotency.ErrLeaseLost):
		// Not the owner any more: the lease expired, and its policy made the
		// record UNKNOWN (or an earlier attempt landed and only its reply
		// was lost).
		s.log.WarnContext(ctx, "mark unknown skipped: lease already lost", "tool", tool, "execution_id", lease.ExecutionID)
	default:
		s.log.ErrorContext(ctx, "mark unknown failed; the record becomes UNKNOWN when its lease expires", "tool", tool, "execution_id", lease.ExecutionID, "error", err)
	}
}

// release deletes the record so a retry runs the tool again.
func (s *Server) release(ctx context.Context, tool string, lease idempotency.Lease, keeper *leaseKeeper) {
	err := keeper.finish(ctx, func() error { return s.store.Release(ctx, lease) })
	switch {
	case err == nil:
	case errors.Is(err, idempotency.ErrLeaseLost):
		s.log.WarnContext(ctx, "release skipped: lease already lost", "tool", tool, "execution_id", lease.ExecutionID)
	default:
		// The record stays IN_PROGRESS until its lease expires; then the
		// tool's lease_expiry policy decides (rerun or UNKNOWN).
		s.log.ErrorContext(ctx, "release failed", "tool", tool, "execution_id", lease.ExecutionID, "error", err)
	}
}

// maxInProgressRetryAfter caps the Retry-After of request_in_progress. The
// remaining lease is only an upper bound (a live owner renews it and may
// finish any moment), so a client should not be sent away for all of it.
const maxInProgressRetryAfter = 5

// unavailable answers 503 upstream_unavailable, before anything is stored,
// for a tool whose MCP server has not been listed yet (its stand-in entry
// says so); nil when the tool can run.
func unavailable(entry *tools.Entry) *Problem {
	if err := entry.Available(); err != nil {
		return newProblem(wire.CodeUpstreamUnavailable,
			"the tool's MCP server has not been listed yet; retry").withRetryAfter(1)
	}
	return nil
}
