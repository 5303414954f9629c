package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
)

// storeCallTimeout bounds each completion or release, which run on a
// context detached from the client so they happen even if it has gone.
const storeCallTimeout = 5 * time.Second

// errLeaseLost is the cause of a tool context cancelled because the gateway
// lost its lease (another request may be running the tool now).
var errLeaseLost = errors.New("gateway: lease on the idempotency record lost")

// execute runs the tool under the lease the claim gave, renewing it, and
// records the outcome: 2xx–4xx (except 408, 425, 429) is completed for
// replay; everything else releases the record so a retry runs the tool again.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, c *call, lease idempotency.Lease) {
	ctx := r.Context()
	name := c.entry.Spec.Name
	leave, ok := s.enter(name)
	if !ok {
		// Draining: the tool must not start now. Give the claim back so a
		// retry (on another replica) runs it.
		storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		defer cancel()
		if err := s.store.Release(storeCtx, lease); err != nil {
			s.log.WarnContext(ctx, "release while draining failed", "tool", name, "error", err)
		}
		setOutcome(ctx, name, outcomeToolError)
		setExecutionHeaders(w.Header(), false, lease.ExecutionID)
		writeProblem(w, newProblem(http.StatusInternalServerError, CodeToolFailed, "the gateway is shutting down and did not run the tool; retry"))
		return
	}
	defer leave()

	// The tool runs detached from the client: a client that hangs up must not
	// abort a tool half-way; its retry gets 409 and then the replay.
	toolCtx, cancel := context.WithTimeoutCause(s.baseCtx, c.policy.Timeout, context.DeadlineExceeded)
	defer cancel()
	leaseCtx, cancelLease := context.WithCancelCause(toolCtx)
	defer cancelLease(nil)
	// The keeper renews until the outcome is written (not just until the
	// tool returns): a completion retried through a store restart must not
	// let another replica take the call over meanwhile.
	// Its context outlives the tool's deadline and a drain's cancel: only
	// finish and stop end the renewals.
	keeper := s.keepLease(context.WithoutCancel(ctx), lease, func() { cancelLease(errLeaseLost) })
	defer func() {
		if keeper.stop() {
			s.metrics.leasesLost.WithLabelValues(name).Inc()
		}
	}()

	resp, err := s.callTool(leaseCtx, c.entry, &tools.Request{
		Arguments:      c.body,
		Tenant:         c.tenant,
		SessionID:      c.headers.sessionID,
		StepIndex:      c.headers.stepIndex,
		HasStep:        c.headers.hasStep,
		IdempotencyKey: c.headers.key,
		ExecutionID:    lease.ExecutionID,
		FencingToken:   lease.FencingToken,
	})

	// Recording gets at least a whole lease to ride out a store restart
	// (Redis answers LOADING while it replays its AOF).
	storeCtx, cancelStore := context.WithTimeout(context.WithoutCancel(ctx), max(storeCallTimeout, s.opts.LockTTL))
	defer cancelStore()
	switch {
	case err == nil && recordable(resp.Status):
		stored := idempotency.StoredResponse{Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body}
		cerr := keeper.finish(storeCtx, func() error { return s.store.Complete(storeCtx, lease, stored, c.policy.ReplayTTL) })
		if errors.Is(cerr, idempotency.ErrLeaseLost) && s.completedBy(storeCtx, lease) {
			cerr = nil // an earlier attempt landed and only its reply was lost
		}
		if cerr != nil {
			s.outcomeNotRecorded(ctx, name, lease, cerr)
		}
		setOutcome(ctx, name, outcomeExecuted)
		writeToolResponse(w, resp.Status, resp.ContentType, resp.Body, false, lease.ExecutionID)
	case err == nil:
		// 408, 425, 429 and 5xx: nothing (reliable) was done; forget the call.
		s.release(storeCtx, name, lease, keeper)
		outcome := outcomeExecuted
		if resp.Status >= 500 {
			outcome = outcomeToolError
		}
		setOutcome(ctx, name, outcome)
		writeToolResponse(w, resp.Status, resp.ContentType, resp.Body, false, lease.ExecutionID)
	default:
		s.release(storeCtx, name, lease, keeper)
		p := s.toolErrorProblem(leaseCtx, err)
		s.log.WarnContext(ctx, "tool failed", "tool", name, "execution_id", lease.ExecutionID, "code", p.Code, "error", err)
		setOutcome(ctx, name, outcomeToolError)
		setExecutionHeaders(w.Header(), false, lease.ExecutionID)
		writeProblem(w, p)
	}
}

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
		return newProblem(http.StatusInternalServerError, CodeToolFailed, "the gateway lost the lease on this call while the tool ran; retry to get the outcome")
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return newProblem(http.StatusGatewayTimeout, CodeToolTimeout, "the tool did not finish within its timeout")
	case errors.Is(err, tools.ErrUpstreamUnreachable):
		return newProblem(http.StatusBadGateway, CodeUpstreamUnreachable, "the tool's upstream could not be reached")
	case errors.Is(err, tools.ErrResponseTooLarge):
		return newProblem(http.StatusInternalServerError, CodeToolFailed, "the tool's upstream answered with a body over the configured cap")
	case errors.Is(context.Cause(ctx), context.Canceled):
		return newProblem(http.StatusInternalServerError, CodeToolFailed, "the gateway was shutting down and cancelled the tool; retry")
	default:
		return newProblem(http.StatusInternalServerError, CodeToolFailed, "the tool failed; retrying runs it again")
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

// completedBy reports whether the record holds lease's own completion: a
// retried completion meets it as "not the owner any more".
func (s *Server) completedBy(ctx context.Context, lease idempotency.Lease) bool {
	rec, err := s.store.Get(ctx, lease.Scope)
	return err == nil && rec.State == idempotency.StateCompleted &&
		rec.ExecutionID == lease.ExecutionID && rec.FencingToken == lease.FencingToken
}

// outcomeNotRecorded logs and counts a completion that did not land. The
// client still gets the tool's real answer; a retry will not replay it.
func (s *Server) outcomeNotRecorded(ctx context.Context, tool string, lease idempotency.Lease, err error) {
	s.metrics.unrecorded.WithLabelValues(tool).Inc()
	if errors.Is(err, idempotency.ErrLeaseLost) {
		s.log.ErrorContext(ctx, "outcome not recorded: lease lost to another owner", "tool", tool, "execution_id", lease.ExecutionID, "fencing_token", lease.FencingToken)
		return
	}
	s.log.ErrorContext(ctx, "outcome not recorded: store failed", "tool", tool, "execution_id", lease.ExecutionID, "error", err)
}

// leaseKeeper renews a lease every LockTTL/3 while a tool runs. It is a
// self-rescheduling timer rather than a goroutine with a ticker: most tools
// finish before the first renewal, and then the keeper costs nothing.
type leaseKeeper struct {
	s        *Server
	ctx      context.Context
	lease    idempotency.Lease
	onLost   func()
	interval time.Duration

	// mu is held during a renewal and during the final write (complete or
	// release), so no renewal runs after the record left IN_PROGRESS — it
	// would read as a lost lease.
	mu         sync.Mutex
	timer      *time.Timer
	validUntil time.Time
	stopped    bool
	lost       bool
}

// keepLease starts renewing lease. onLost is called (once) when the store
// says the lease is gone, or when no renewal has succeeded for a whole
// LockTTL: from then on another gateway may legitimately take over.
func (s *Server) keepLease(ctx context.Context, lease idempotency.Lease, onLost func()) *leaseKeeper {
	k := &leaseKeeper{s: s, ctx: ctx, lease: lease, onLost: onLost, interval: s.opts.LockTTL / 3,
		validUntil: time.Now().Add(s.opts.LockTTL)}
	k.mu.Lock()
	k.timer = time.AfterFunc(k.interval, k.renew)
	k.mu.Unlock()
	return k
}

// renew runs on the timer's goroutine.
func (k *leaseKeeper) renew() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped || k.ctx.Err() != nil {
		return
	}
	ttl := k.s.opts.LockTTL
	renewCtx, cancel := context.WithTimeout(k.ctx, k.interval)
	start := time.Now()
	err := k.s.store.Renew(renewCtx, k.lease, ttl)
	cancel()
	switch {
	case err == nil:
		k.validUntil = start.Add(ttl)
		k.timer.Reset(k.interval)
		return
	case errors.Is(err, idempotency.ErrLeaseLost):
	case time.Now().Before(k.validUntil):
		k.s.log.WarnContext(k.ctx, "lease renewal failed; retrying", "tool", k.lease.Scope.Tool, "error", err)
		// Try again, at the latest just after the lease runs out, so its
		// loss is noticed when it happens, not a renewal interval later.
		k.timer.Reset(min(k.interval, time.Until(k.validUntil)+time.Millisecond))
		return
	}
	k.s.log.ErrorContext(k.ctx, "lease lost; cancelling the tool", "tool", k.lease.Scope.Tool, "execution_id", k.lease.ExecutionID, "error", err)
	k.lost, k.stopped = true, true
	k.onLost()
}

// finish makes the final write of the record (complete or release),
// retrying while the store fails (unreachable, or restarting: Redis answers
// LOADING while it replays its AOF) with backoff until ctx ends. Renewals
// may still run between attempts, so the lease holds meanwhile; none runs
// after the write landed. The store's verdicts (lease lost, not found) are
// final. A retry is safe: the writes are owner-checked, so repeating one
// that landed answers "lease lost" and changes nothing.
func (k *leaseKeeper) finish(ctx context.Context, write func() error) error {
	delay := 50 * time.Millisecond
	for {
		k.mu.Lock()
		err := write()
		final := err == nil || errors.Is(err, idempotency.ErrLeaseLost) || errors.Is(err, idempotency.ErrNotFound) || ctx.Err() != nil
		if final {
			k.stopped = true
			k.timer.Stop()
		}
		k.mu.Unlock()
		if final {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// stop ends the renewals and reports whether the lease was lost.
func (k *leaseKeeper) stop() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	k.timer.Stop()
	return k.lost
}
