package callpath

import (
	"strconv"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/principal"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/wire"
)

// The receipt stage: every consequential event of a call (executed, denied,
// an approval requested or expired, a record made UNKNOWN) and of an
// operator (an approval granted or denied, a record resolved or deleted)
// leaves a receipt in the tenant's hash chain (package receipts).
//
// The call path only enqueues: a receiptWriter goroutine per Engine appends
// with retries, so writing a receipt never makes a tool wait or run twice.
// The queue is in memory; what is still in it when the process dies
// (kill -9) is recovered from the store's receipt outbox, for an executed
// call, by another gateway's sweep (receiptrecovery.go). Drain flushes the
// queue within its deadline, and every
// receipt the writer gives up on (queue full, store failing past the
// retries, drain deadline) is counted in gateway_receipts_unwritten_total
// and logged with its fields, never dropped silently.

// ReceiptHook is the narrow entry another part of the gateway
// (reconciliation) uses to leave a receipt: it enqueues r for tenant's
// chain and returns at once. Engine.Receipt gives none (nil) when receipts
// are off.
type ReceiptHook func(tenant string, r receipts.Receipt)

// Receipt returns the Engine's [ReceiptHook]: for a record resolved by
// reconciliation ([receipts.EventResolved] with By
// [receipts.ByReconcile]; the call path receipts an effect conflict
// itself). It is nil
// when receipts are off, so a caller can skip gathering what a receipt
// would say.
func (s *Engine) Receipt() ReceiptHook {
	if s.receipts == nil {
		return nil
	}
	return func(tenant string, r receipts.Receipt) { s.receipts.enqueue(tenant, r) }
}

// receipt is the receipt stage: after the stages ended the call, it
// enqueues the receipt of what happened, if it was consequential, after
// that of a record the record stage left UNKNOWN (st.madeUnknown). It
// never ends the call itself.
func (s *Engine) receipt(st *callState) {
	if s.receipts == nil {
		return
	}
	if st.madeUnknown {
		s.receipts.enqueue(st.call.Tenant, s.callReceipt(st, receipts.EventMadeUnknown))
	}
	res := &st.result
	ran := st.exec.resp != nil || st.exec.err != nil // the tool was called under a claim
	var event receipts.Event
	switch {
	case ran && !res.InputRequired, res.Kind == ResultUnkeyed:
		// Whatever it answered, failures included: the tool ran. An
		// unkeyed call (mcp.allow_unkeyed) ran too, without a record.
		event = receipts.EventExecuted
	case res.Problem != nil && res.Problem.Code == wire.CodeCallDenied:
		event = receipts.EventDenied
	case res.Problem != nil && res.Problem.Code == wire.CodeApprovalExpired:
		event = receipts.EventApprovalExpired
	case res.Problem != nil && res.Problem.Code == wire.CodeEffectConflict:
		event = receipts.EventEffectConflict
	default:
		return // replays, refusals before the store, in progress: no receipt
	}
	r := s.callReceipt(st, event)
	if event == receipts.EventExecuted {
		r.Status = res.Status
		if res.Problem != nil {
			r.Status = res.Problem.Status // the tool failed: the answer the client got
		}
	}
	var ref *idempotency.OutboxRef
	if event == receipts.EventExecuted && ran && st.lease.ExecutionID != "" { // its completion may have written the outbox entry
		ref = &idempotency.OutboxRef{Scope: st.lease.Scope, Step: st.lease.Step, ExecutionID: st.lease.ExecutionID}
	}
	s.receipts.enqueueWith(st.call.Tenant, r, ref)
}

// receiptOfApproval is the receipt stage at each claim: the receipt of
// the pending approval the claim just wrote (st.newApproval), enqueued
// before the call waits for its decision, so it comes before the
// decision's in the chain.
func (s *Engine) receiptOfApproval(st *callState) {
	if s.receipts != nil && st.newApproval != nil {
		s.receipts.enqueue(st.call.Tenant, s.callReceipt(st, receipts.EventApprovalRequested))
	}
}

// callReceipt is the receipt of event for the call: its identity and the
// decision taken on it.
func (s *Engine) callReceipt(st *callState, event receipts.Event) receipts.Receipt {
	name := st.call.Entry.Spec.Name
	r := receipts.Receipt{Event: event, Tool: name, ExecutionID: st.lease.ExecutionID, Requester: st.call.Requester.ID}
	if st.unprotected == 0 && st.id.Key != "" {
		r.Key = receipts.KeyHash(st.id.Key)
	}
	if id := st.identity(); id.HasStep {
		r.Session, r.Step = id.SessionID, strconv.FormatUint(id.StepIndex, 10)
	}
	if v := st.verdict; v != nil {
		r.Decision = string(v.Effective())
		if v.Rule >= 0 {
			r.Rule = "decide[" + strconv.Itoa(v.Rule) + "]"
		}
		if v.Observe {
			r.Observe = string(v.Decision)
		}
		r.Policy = s.settings.Load().decisions[name].Digest()
	}
	return r
}

// receiptForRecord enqueues event for a stored record: an operator's
// action or an approval's decision (by names who).
func (s *Engine) receiptForRecord(event receipts.Event, rec idempotency.Record, by, claimedBy string) {
	if s.receipts == nil {
		return
	}
	r := receipts.Receipt{Event: event, Tool: rec.Scope.Tool, Key: receipts.KeyHash(rec.Scope.Key),
		ExecutionID: rec.ExecutionID, By: by, ClaimedBy: claimedBy}
	if rec.Step != nil {
		r.Session, r.Step = rec.Step.SessionID, strconv.FormatUint(rec.Step.Index, 10)
	}
	if rec.Response != nil {
		r.Status = rec.Response.Status
	}
	if rec.Approval != nil && rec.Approval.Rule >= 0 {
		r.Rule = "decide[" + strconv.Itoa(rec.Approval.Rule) + "]"
		r.Decision = string(decide.Approve)
	}
	r.Requester = rec.Requester
	if r.Requester == "" && rec.Approval != nil {
		r.Requester = rec.Approval.Requester // a record written before records kept it
	}
	s.receipts.enqueue(rec.Scope.Tenant, r)
}

// byAdmin is [receipts.Receipt.By] of an admin API action: the admin
// token's principal, token:admin, which names no person.
var byAdmin = principal.Admin.ID

// approvalEvent is the event of an approval's decision.
func approvalEvent(approve bool) receipts.Event {
	if approve {
		return receipts.EventApprovalGranted
	}
	return receipts.EventApprovalDenied
}
