package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

var _ idempotency.Approvals = (*Store)(nil)

// approvalsMigration is schema version 6: approval records. A call whose
// rules say approve is a row in state AWAITING_APPROVAL under its own
// scope, with the approval in the approval_* columns; deciding makes it
// APPROVED or DENIED; the claim that consumes an APPROVED row makes it
// IN_PROGRESS and clears them. EXPIRED is never stored: a pending or
// approved row whose approval_expires_at passed reads as EXPIRED
// (recordColumns, the list conditions, the claim function). The claim
// function takes the call's decision as six more arguments and answers
// the approval with its outcome, so deciding, writing and consuming stay
// one call.
var approvalsMigration = `
ALTER TABLE @.records DROP CONSTRAINT IF EXISTS records_state_check;
ALTER TABLE @.records ADD CONSTRAINT records_state_check
	CHECK (state IN ('IN_PROGRESS', 'COMPLETED', 'UNKNOWN', 'AWAITING_APPROVAL', 'APPROVED', 'DENIED'));
ALTER TABLE @.records
	ADD COLUMN IF NOT EXISTS approval_id           text,        -- approval states only
	ADD COLUMN IF NOT EXISTS approval_rule         integer,
	ADD COLUMN IF NOT EXISTS approval_reason       text,
	ADD COLUMN IF NOT EXISTS approver              text,
	ADD COLUMN IF NOT EXISTS approval_requested_at timestamptz,
	ADD COLUMN IF NOT EXISTS approval_expires_at   timestamptz, -- pending: timeout; approved: use-within
	ADD COLUMN IF NOT EXISTS approval_use_us       bigint,
	ADD COLUMN IF NOT EXISTS decided_by            text,
	ADD COLUMN IF NOT EXISTS decided_at            timestamptz,
	ADD COLUMN IF NOT EXISTS decision_note         text;
CREATE UNIQUE INDEX IF NOT EXISTS records_approval ON @.records (approval_id) WHERE approval_id IS NOT NULL;
DROP FUNCTION IF EXISTS @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint, text);
` + claimFunctionV6 + `
ALTER FUNCTION @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint, text,
	text, integer, text, text, bigint, bigint)
	SET plan_cache_mode = force_custom_plan;`

// claimFunctionV6 is version 5's claim function with the call's decision
// (p_approval_id NULL: allowed) and the approval rows of
// idempotency.Store.Claim. An approval row the call may run (approved, or
// pending under rules that now allow it) is decided on the locked row,
// like a takeover; the other answers come from the plain read.
var claimFunctionV6 = mustReplace(claimFunctionV5,
	"p_session_id text, p_step_index bigint, p_arguments text,\n",
	"p_session_id text, p_step_index bigint, p_arguments text,\n"+
		"\tp_approval_id text, p_rule integer, p_reason text, p_approver text, p_timeout_us bigint, p_use_us bigint,\n",

	"\tOUT resp_body bytea, OUT holder_tool text)\n",
	"\tOUT resp_body bytea, OUT holder_tool text,\n"+
		"\tOUT a_id text, OUT a_rule integer, OUT a_reason text, OUT a_approver text, OUT a_requested timestamptz,\n"+
		"\tOUT a_expires timestamptz, OUT a_by text, OUT a_decided timestamptz, OUT a_note text, OUT a_use_us bigint)\n",

	"\t\tnow_ts := clock_timestamp();\n",
	"\t\tnow_ts := clock_timestamp();\n\t\ta_id := NULL;\n",

	"\t\t\tELSIF rec.state = 'UNKNOWN' THEN\n\t\t\t\toutcome := 'unknown';\n\t\t\t\tRETURN;\n",
	"\t\t\tELSIF rec.state = 'UNKNOWN' THEN\n\t\t\t\toutcome := 'unknown';\n\t\t\t\tRETURN;\n"+`			ELSIF rec.approval_id IS NOT NULL THEN
				a_id := rec.approval_id; a_rule := rec.approval_rule; a_reason := rec.approval_reason;
				a_approver := rec.approver; a_requested := rec.approval_requested_at;
				a_expires := rec.approval_expires_at; a_by := rec.decided_by; a_decided := rec.decided_at;
				a_note := rec.decision_note; a_use_us := rec.approval_use_us;
				IF rec.state = 'DENIED' THEN
					outcome := 'approval_denied';
					RETURN;
				ELSIF rec.approval_expires_at <= now_ts THEN
					outcome := 'approval_expired';
					RETURN;
				ELSIF rec.state = 'AWAITING_APPROVAL' AND p_approval_id IS NOT NULL THEN
					outcome := 'awaiting_approval';
					RETURN;
				ELSIF NOT locking THEN
					locking := true; -- it runs now: decide on the locked row
					CONTINUE;
				END IF;
				-- Consumed: a first claim of the row, which keeps its step
				-- and creation time; the approval goes with the answer.
				fence := nextval('@.fencing_tokens');
				UPDATE @.records r
				SET state = 'IN_PROGRESS', execution_id = p_execution_id, owner = p_owner, fencing_token = fence,
					lease_expires_at = lease,
					expires_at = lease + p_replay_us * interval '1 microsecond',
					replay_us = p_replay_us, canonical_arguments = p_arguments,
					approval_id = NULL, approval_rule = NULL, approval_reason = NULL, approver = NULL,
					approval_requested_at = NULL, approval_expires_at = NULL, approval_use_us = NULL,
					decided_by = NULL, decided_at = NULL, decision_note = NULL
				WHERE r.tenant = p_tenant AND r.tool = p_tool AND r.idempotency_key = p_key;
				outcome := 'claimed';
				exec_id := p_execution_id;
				RETURN;
`,

	"\t\tfence := nextval('@.fencing_tokens');\n\t\tINSERT INTO",
	`		IF p_approval_id IS NOT NULL THEN
			-- The rules say approve: the call waits, nothing runs.
			INSERT INTO @.records (tenant, tool, idempotency_key, state, fingerprint, execution_id,
				fencing_token, created_at, expires_at, replay_us, session_id, step_index, canonical_arguments,
				approval_id, approval_rule, approval_reason, approver, approval_requested_at,
				approval_expires_at, approval_use_us)
			VALUES (p_tenant, p_tool, p_key, 'AWAITING_APPROVAL', p_fingerprint, p_execution_id,
				0, now_ts, now_ts + (p_timeout_us + p_replay_us) * interval '1 microsecond', p_replay_us,
				CASE WHEN bind THEN p_session_id END, CASE WHEN bind THEN p_step_index END, p_arguments,
				p_approval_id, p_rule, p_reason, p_approver, now_ts,
				now_ts + p_timeout_us * interval '1 microsecond', p_use_us)
			ON CONFLICT DO NOTHING;
			IF FOUND THEN
				outcome := 'awaiting_approval';
				exec_id := p_execution_id;
				a_id := p_approval_id; a_rule := p_rule; a_reason := p_reason; a_approver := p_approver;
				a_requested := now_ts; a_expires := now_ts + p_timeout_us * interval '1 microsecond';
				a_use_us := p_use_us;
				RETURN;
			END IF;
			CONTINUE;
		END IF;
		fence := nextval('@.fencing_tokens');
		INSERT INTO`,
)

// mustReplace replaces each old text of pairs (old, new, old, new, …),
// which must occur exactly once in s: a claim function derived from an
// earlier one fails at start-up, not silently, if that one changes.
func mustReplace(s string, pairs ...string) string {
	for i := 0; i < len(pairs); i += 2 {
		if n := strings.Count(s, pairs[i]); n != 1 {
			panic(fmt.Sprintf("pgstore: claim function text %q found %d times, want once", pairs[i], n))
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

// approvalArgs are the claim function's decision arguments ($14 … $19):
// all NULL for a call the rules allow.
func approvalArgs(a *idempotency.ApprovalClaim) []any {
	if a == nil {
		return []any{nil, nil, nil, nil, nil, nil}
	}
	return []any{a.ID, a.Rule, a.Reason, string(a.Approver.OrDefault()), micros(a.Timeout), micros(a.UseWithin)}
}

// scannedApproval receives the claim function's a_* columns.
type scannedApproval struct {
	id, reason, approver, by, note *string
	rule                           *int32
	requested, expires, decided    *time.Time
	requester, binding, claimedBy  *string
	quorum                         *int32
	approvedBy                     []string
}

func (a *scannedApproval) dest() []any {
	return []any{&a.id, &a.rule, &a.reason, &a.approver, &a.requested, &a.expires, &a.by, &a.decided, &a.note,
		&a.requester, &a.quorum, &a.binding, &a.approvedBy, &a.claimedBy}
}

// approval is the scanned approval, nil when the row carried none.
func (a *scannedApproval) approval(useUS *int64) *idempotency.Approval {
	if a.id == nil {
		return nil
	}
	return &idempotency.Approval{
		ID: *a.id, Rule: int(deref(a.rule)), Reason: deref(a.reason), Approver: idempotency.Approver(deref(a.approver)),
		RequestedAt: deref(a.requested), ExpiresAt: deref(a.expires), UseWithin: time.Duration(deref(useUS)) * time.Microsecond,
		DecidedBy: deref(a.by), DecidedAt: deref(a.decided), Note: deref(a.note),
		Requester: deref(a.requester), Quorum: int(deref(a.quorum)), Binding: deref(a.binding),
		ApprovedBy: a.approvedBy, ClaimedBy: deref(a.claimedBy),
	}
}

// approvalOutcomes are the claim function's approval answers.
var approvalOutcomes = map[string]idempotency.Outcome{
	"awaiting_approval": idempotency.OutcomeAwaitingApproval,
	"approval_denied":   idempotency.OutcomeApprovalDenied,
	"approval_expired":  idempotency.OutcomeApprovalExpired,
}

// GetApproval returns the live row carrying approval id (records_approval),
// as idempotency.ApprovalView shows it.
func (s *Store) GetApproval(ctx context.Context, id string) (idempotency.Record, error) {
	rec, err := s.queryRecord(ctx, "get approval", s.sql.getApproval, id)
	return idempotency.ApprovalView(rec), err
}

// ListApprovals is List over the rows carrying an approval, newest first.
func (s *Store) ListApprovals(ctx context.Context, filter idempotency.ApprovalFilter) (idempotency.Page, error) {
	if err := filter.Validate(); err != nil {
		return idempotency.Page{}, fmt.Errorf("pgstore: list approvals: %w", err)
	}
	return s.list(ctx, filter.ListFilter(), true)
}

// DecideApproval decides a pending approval with decide_approval, which
// locks the row and counts a quorum on it: of two deciders, the second
// decides on the first one's row. A refusal reads the row again to say
// why.
func (s *Store) DecideApproval(ctx context.Context, id string, decision idempotency.ApprovalDecision) (idempotency.Record, error) {
	if err := decision.Validate(); err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: decide approval: %w", err)
	}
	if err := s.ready(ctx); err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: decide approval: %w", err)
	}
	var r scannedRecord
	err := s.pool.QueryRow(ctx, s.sql.decideApproval, id, decision.Approve, decision.By, decision.ClaimedBy, decision.Note).Scan(r.dest()...)
	if err == nil {
		return r.record(true), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return idempotency.Record{}, fmt.Errorf("pgstore: decide approval: %w", err)
	}
	current, err := s.GetApproval(ctx, id)
	if err != nil {
		return idempotency.Record{}, err
	}
	return idempotency.Record{}, idempotency.NotPending(current.State, current.Approval)
}

// approvalStatements are the approval statements' texts (statements.go
// holds them with the others).
func approvalStatements(q func(string) string) (getApproval, decideApproval string) {
	getApproval = q(`SELECT ` + recordColumns + ` FROM @.records r
		WHERE r.approval_id = $1 AND r.expires_at > clock_timestamp()`)
	// $1 id, $2 approve, $3 by, $4 claimed by, $5 note: decide_approval
	// (principals.go) decides on the locked row, counting a quorum.
	decideApproval = q(`SELECT ` + recordColumns + ` FROM @.decide_approval($1, $2, $3, $4, $5) r`)
	return getApproval, decideApproval
}

// listState is List's condition for an approval state (as
// idempotency.ApprovalState shows it, on the database's clock).
func listState(state idempotency.State) string {
	switch state {
	case idempotency.StateExpired:
		return "r.state IN ('AWAITING_APPROVAL', 'APPROVED') AND r.approval_expires_at <= clock_timestamp()"
	case idempotency.StateAwaitingApproval, idempotency.StateApproved:
		return "r.state = '" + string(state) + "' AND r.approval_expires_at > clock_timestamp()"
	case idempotency.StateConsumed: // a row that ran, still carrying its approval
		return "r.state IN ('IN_PROGRESS', 'COMPLETED', 'UNKNOWN') AND r.approval_id IS NOT NULL"
	}
	return "r.state = '" + string(state) + "'"
}
