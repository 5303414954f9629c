package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// Claim decides the request with one script; for a request with a step the
// same pipeline records which record key holds the scope (for Get/Delete).
// A claim with an effect then takes the effect's reservation
// (effects.go).
func (s *Store) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Decision, error) {
	if err := validateClaim(req); err != nil {
		return idempotency.Decision{}, err
	}
	c, err := s.claimRecord(ctx, req)
	if err == nil && c.intent != nil { // Redis Cluster: the buckets' step (budgetscluster.go)
		if c.over, err = s.reserveInBuckets(ctx, c.intent, false); err != nil {
			// Give the claim back, so it is not left to expire (and turn
			// UNKNOWN) without ever having run.
			_ = s.Release(ctx, c.d.Lease)
			return idempotency.Decision{}, fmt.Errorf("redisstore: claim %v: %w", req.Scope, err)
		}
	}
	if err == nil && c.over != nil {
		if c.d, err = s.settleBudget(ctx, req, c, c.over); err != nil || c.d.Outcome == idempotency.OutcomeBudgetExceeded {
			return c.d, err
		}
	}
	if err != nil || req.Effect == nil {
		return c.d, err
	}
	switch c.d.Outcome {
	case idempotency.OutcomeClaimed, idempotency.OutcomeAwaitingApproval:
		// A call waiting for approval holds its effect too, as on the
		// other stores: another call of the action waits with it rather
		// than ask a person a second time.
		return s.reserveEffect(ctx, req, c)
	}
	return c.d, nil
}

// recordClaim is the answer of the claim script on one record.
type recordClaim struct {
	d      idempotency.Decision
	record string // the record's key name
	// consumed is the APPROVAL block as stored when the claim consumed an
	// approval record, so a claim that runs nothing can put it back
	// (restore.lua); "" otherwise.
	consumed string
	// step is the step the record was claimed with (its slotStep), and
	// tenant its scope's tenant.
	step   *idempotency.Step
	tenant string
	// newPending is set when the claim wrote a pending approval just now
	// (not one an earlier request wrote).
	newPending bool
	// over is the budget budget.lua found the claim's charges would
	// overspend (budgets.go); nil when reserved or nothing to charge.
	over *idempotency.BudgetExceeded
	// intent is, on Redis Cluster, the charges budget_intent.lua named
	// for the record the request now owns, to reserve in their buckets
	// (budgetscluster.go); nil: nothing to charge.
	intent *budgetIntent
}

// claimRecord is the record's claim: one script, and the record's key name
// (named once: the name costs two hashes).
func (s *Store) claimRecord(ctx context.Context, req idempotency.ClaimRequest) (recordClaim, error) {
	req.Step = s.keys.slotStep(req)
	c, err := s.claimAt(ctx, req, s.keys.record(req.Scope, req.Step), false)
	c.step, c.tenant = req.Step, req.Scope.Tenant
	return c, err
}

// claimAt decides req, whose step is already its slotStep, on its record;
// holderOnly decides on the record holding req's effect (claim.lua's
// holder_only).
func (s *Store) claimAt(ctx context.Context, req idempotency.ClaimRequest, record string, holderOnly bool) (recordClaim, error) {
	if err := s.ready(ctx); err != nil {
		return recordClaim{}, fmt.Errorf("redisstore: claim %v: %w", req.Scope, err)
	}
	keys := []string{record, s.keys.history(record)}
	args := &claimArgs{
		Fingerprint: packID(req.Fingerprint),
		Exec:        packID(req.ExecutionID),
		Owner:       packID(req.Owner),
		LockMS:      millis(req.LockTTL),
		ReplayMS:    millis(req.ReplayTTL),
		LeaseExpiry: string(req.LeaseExpiry),
		StepGuard:   flag(req.StepGuard),
		Tool:        req.Scope.Tool,
		Arguments:   req.CanonicalArguments,
		// The call's decision: approve writes a pending approval.
		approvalClaimArgs: approvalClaimArgsOf(req),
		stepArgs:          s.keys.stepArgs(req.Scope.Tenant),
		HolderOnly:        flag(holderOnly),
		Identity:          req.Identity,
	}
	if req.Step != nil {
		keys = append(keys, s.keys.step(req.Scope.Tenant, *req.Step))
		args.Session = packID(req.Step.SessionID)
		args.StepIndex = strconv.FormatUint(req.Step.Index, 10)
	}
	if len(args.Fingerprint) > 255 || len(args.Exec) > 255 || len(args.Owner) > 255 || len(args.Session) > 65535 || len(args.Approval) > 255 || len(args.Identity) > 65535 {
		return recordClaim{}, fmt.Errorf("redisstore: claim %v: fingerprint, execution id, owner or approval id above 255 bytes, or session id or identity above 65535", req.Scope)
	}
	calls := []redisscript.Call{call(claimScript, keys, args)}
	if s.keys.usesPointer(req.Step) {
		calls = append(calls, call(pointScript, []string{s.keys.pointer(req.Scope)}, pointArgs{Record: record, TTLMS: max(args.LockMS, args.TimeoutMS+args.UseMS) + args.ReplayMS}))
	}
	charging := len(req.Charges) > 0 && !holderOnly
	if charging { // in the same pipeline: no round trip of its own
		bc, err := s.budgetCall(req, record, false)
		if s.keys.sessionSlots {
			bc, err = s.budgetIntentCall(req, record)
		}
		if err != nil {
			return recordClaim{}, fmt.Errorf("redisstore: claim %v: %w", req.Scope, err)
		}
		calls = append(calls, bc)
	}
	cmds, acked, err := s.evalReplicated(ctx, calls...)
	if err != nil {
		return recordClaim{}, fmt.Errorf("redisstore: claim %v: %w", req.Scope, err)
	}
	var d idempotency.Decision
	consumed := ""
	switch v := cmds[0].Val().(type) {
	case int64: // a new claim: its fencing token, negative for a takeover
		d = claimed(req, req.ExecutionID, max(v, -v), v < 0)
	case string:
		d, err = decodeReplay(v)
	default:
		var reply []string
		if reply, err = cmds[0].StringSlice(); err == nil {
			d, err = decodeDecision(req, reply)
		}
		if err == nil && reply[0] == "consumed" {
			consumed = reply[2]
		}
	}
	if err != nil {
		return recordClaim{}, fmt.Errorf("redisstore: claim %v: %w", req.Scope, err)
	}
	if err := s.claimReplicated(ctx, d, acked); err != nil {
		return recordClaim{}, fmt.Errorf("redisstore: claim %v: %w", req.Scope, err)
	}
	if err := s.indexApproval(ctx, req, record, d); err != nil {
		return recordClaim{}, fmt.Errorf("redisstore: claim %v: %w", req.Scope, err)
	}
	newPending := d.Outcome == idempotency.OutcomeAwaitingApproval && d.ExecutionID == req.ExecutionID
	c := recordClaim{d: d, record: record, consumed: consumed, newPending: newPending}
	if charging {
		reply, err := cmds[len(cmds)-1].StringSlice()
		switch {
		case err == nil && s.keys.sessionSlots:
			c.intent, err = intentReply(record, reply)
		case err == nil:
			c.over, err = budgetReply(req, reply)
		}
		if err != nil {
			return recordClaim{}, fmt.Errorf("redisstore: claim %v: budget: %w", req.Scope, err)
		}
	}
	return c, nil
}

func validateClaim(req idempotency.ClaimRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("redisstore: claim: %w", err)
	}
	return nil
}

var errBadReply = errors.New("unexpected script reply")

// claimed is the decision of a claim the caller now owns.
func claimed(req idempotency.ClaimRequest, exec string, fence int64, takenOver bool) idempotency.Decision {
	lease := idempotency.Lease{Scope: req.Scope, Owner: req.Owner, FencingToken: fence, ExecutionID: exec}
	if req.Step != nil {
		step := *req.Step
		lease.Step = &step
	}
	return idempotency.Decision{Outcome: idempotency.OutcomeClaimed, Lease: lease, TakenOver: takenOver, ExecutionID: exec}
}

// decodeReplay turns the COMPLETED record value the claim script answers
// with into a replay. The script has compared the fingerprint, so only
// what a replay answers is unpacked (not the fingerprint, session and step
// a full record read would).
func decodeReplay(value string) (idempotency.Decision, error) {
	p, err := decodePacked(value)
	if err != nil || p.state != 'C' {
		return idempotency.Decision{}, errors.Join(errBadReply, err)
	}
	exec, ok1 := unpackID(p.exec)
	ctype, ok2 := unpackCtype(p.ctype)
	if !ok1 || !ok2 {
		return idempotency.Decision{}, fmt.Errorf("%w: execution id or content type", errBadReply)
	}
	return idempotency.Decision{Outcome: idempotency.OutcomeReplay, ExecutionID: exec,
		Response: &idempotency.StoredResponse{Status: p.status, ContentType: ctype, Body: p.body}}, nil
}

// decodeDecision turns the claim script's other replies into a Decision.
// Execution ids and content types arrive packed (packID, packCtype).
func decodeDecision(req idempotency.ClaimRequest, reply []string) (idempotency.Decision, error) {
	if len(reply) > 0 {
		if d, ok, err := decodeApprovalReply(req, reply); ok {
			return d, err
		}
	}
	want := map[string]int{"claimed": 4, "in_progress": 3, "key_reused": 1, "unknown": 2, "step_conflict": 2, "gone": 1}
	if len(reply) == 0 || want[reply[0]] != len(reply) {
		return idempotency.Decision{}, fmt.Errorf("%w: %d fields", errBadReply, len(reply)) // no raw reply: it may hold the key
	}
	if reply[0] == "step_conflict" { // the step value: packed exec, then tool
		r := &reader{b: []byte(reply[1])}
		exec, ok := unpackID(r.str(r.u8()))
		if r.err != nil || !ok {
			return idempotency.Decision{}, fmt.Errorf("%w: step holder", errBadReply)
		}
		return idempotency.Decision{Outcome: idempotency.OutcomeStepConflict, Conflict: &idempotency.StepHolder{Tool: string(r.b), ExecutionID: exec}}, nil
	}
	if len(reply) > 1 {
		exec, ok := unpackID(reply[1])
		if !ok {
			return idempotency.Decision{}, fmt.Errorf("%w: execution id", errBadReply)
		}
		reply[1] = exec
	}
	switch reply[0] {
	case "claimed":
		fence, err := strconv.ParseInt(reply[2], 10, 64)
		if err != nil {
			return idempotency.Decision{}, fmt.Errorf("%w: fencing token %q", errBadReply, reply[2])
		}
		return claimed(req, reply[1], fence, reply[3] == "1"), nil
	case "in_progress":
		remaining, err := strconv.ParseInt(reply[2], 10, 64)
		if err != nil {
			return idempotency.Decision{}, fmt.Errorf("%w: remaining lease %q", errBadReply, reply[2])
		}
		return idempotency.Decision{Outcome: idempotency.OutcomeInProgress, ExecutionID: reply[1], RetryAfter: time.Duration(remaining) * time.Microsecond}, nil
	case "key_reused":
		return idempotency.Decision{Outcome: idempotency.OutcomeKeyReused}, nil
	case "gone": // holder_only found no record: no outcome (effects.go)
		return idempotency.Decision{}, nil
	default: // unknown
		return idempotency.Decision{Outcome: idempotency.OutcomeUnknown, ExecutionID: reply[1]}, nil
	}
}
