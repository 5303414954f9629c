package callpath

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// Transactional tools (tools.Spec.Transactional) write in a transaction on
// the store's database, and the call path records their outcome inside it
// (idempotency.TxStore): the effect and the replayable record commit
// together or not at all. So, unlike any other tool:
//   - they are claimed with the rerun policy whatever lease_expiry says: a
//     gateway that died mid-call left no effect, so running again is safe
//     and UNKNOWN is never needed;
//   - an answer the store could not record is not the client's answer: its
//     writes were rolled back with it, so the client is told to retry.

// checkTransactional refuses transactional tools the store cannot run, and
// read-only ones (they run without a claim, so nothing would commit them).
func checkTransactional(reg *tools.Registry, storeCanRun bool) error {
	for _, e := range reg.Entries() {
		if !e.Spec.Transactional {
			continue
		}
		if e.Spec.ReadOnly {
			return fmt.Errorf("gateway: tool %q: a transactional tool cannot be read-only", e.Spec.Name)
		}
		if !storeCanRun {
			return fmt.Errorf("gateway: tool %q is transactional, which needs the PostgreSQL store (store.postgres_url)", e.Spec.Name)
		}
	}
	return nil
}

// beginTx opens the transaction of a transactional call; on failure the
// claim is given back (nothing ran) and the client gets store_unavailable.
func (s *Engine) beginTx(ctx context.Context, name string, lease idempotency.Lease, keeper *leaseKeeper) (idempotency.TxCall, *Problem) {
	beginCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	txc, err := s.txStore.BeginCall(beginCtx, lease)
	if err == nil {
		return txc, nil
	}
	s.log.ErrorContext(ctx, "could not begin the tool's transaction; the tool was not run", "tool", name, "error", err)
	s.release(beginCtx, name, lease, keeper)
	return nil, NewProblem(wire.CodeStoreUnavailable, "the idempotency store is unreachable; the tool was not run").WithRetryAfter(1)
}

// recordTx is the record stage of a transactional call: commit the
// tool's writes with the completion, or roll them back and release.
func (s *Engine) recordTx(ctx, storeCtx context.Context, st *callState) Result {
	x, lease, name := &st.exec, st.lease, st.call.Entry.Spec.Name
	keeper, txc, resp, toolErr := x.keeper, x.txc, x.resp, x.err
	if toolErr != nil || !recordable(resp.Status) {
		s.metrics.countExecution(name, executionReleased, toolErr)
		if err := txc.Rollback(storeCtx); err != nil {
			s.log.WarnContext(ctx, "rollback of the tool's transaction failed", "tool", name, "error", err)
		}
		s.release(storeCtx, name, lease, keeper)
		if toolErr != nil {
			p := s.toolErrorProblem(x.leaseCtx, toolErr)
			s.log.WarnContext(ctx, "tool failed", "tool", name, "execution_id", lease.ExecutionID, "code", p.Code, "error", toolErr)
			return st.failed(p)
		}
		return Result{Kind: ResultExecuted, Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body,
			ExecutionID: lease.ExecutionID, Label: labelForStatus(resp.Status)}
	}
	stored := idempotency.StoredResponse{Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body}
	s.metrics.countExecution(name, executionCompleted, nil)
	// One attempt: a commit cannot be repeated, and the record tells
	// whether a failed one landed.
	_, err := keeper.finishOnce(func() error { return txc.Complete(storeCtx, stored, st.policy.ReplayTTL) },
		func(error) bool { return true })
	switch {
	case err == nil, s.completedBy(storeCtx, lease):
		return Result{Kind: ResultExecuted, Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body,
			ExecutionID: lease.ExecutionID, Label: labelForStatus(resp.Status)}
	case errors.Is(err, idempotency.ErrLeaseLost):
		s.completionNotRecorded(ctx, name, lease, err)
		return st.failed(NewProblem(wire.CodeToolFailed, "the gateway lost the lease on this call while the tool ran; its writes were rolled back; retry to get the outcome"))
	default:
		// Not committed (or not known to be): the writes are not visible
		// unless the record is COMPLETED, which a retry then replays.
		// Release is owner-checked, so it cannot undo a commit that did land.
		s.completionNotRecorded(ctx, name, lease, err)
		if rerr := s.store.Release(storeCtx, lease); rerr != nil && !errors.Is(rerr, idempotency.ErrLeaseLost) {
			s.log.ErrorContext(ctx, "release failed", "tool", name, "execution_id", lease.ExecutionID, "error", rerr)
		}
		return st.failed(NewProblem(wire.CodeStoreUnavailable, "the idempotency store failed while committing the tool's transaction; its writes were rolled back; retry").WithRetryAfter(1))
	}
}
