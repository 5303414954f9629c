package pgstore

import "github.com/toolgateway/toolgateway/gateway/idempotency"

// KeepsPrincipals: the store keeps approvals' requesters, quorums,
// bindings and approvers, and decide_approval counts a quorum
// (idempotency.PrincipalKeeper).
func (s *Store) KeepsPrincipals() bool { return true }

// principalsMigration is schema version 11: a consumed approval stays on
// its row as history; a record keeps its
// requester (the call's principal, which is also its approval's); an
// approval keeps its quorum, binding (the hash of the tool's decide
// config and definition), the principals who approved so far, in order,
// and the name claimed beside a token:admin decision. The claim function
// takes requester, quorum and binding as three more arguments (23; the
// 20-argument one is dropped) and answers them with the approval;
// decide_approval decides on the locked row, counting a quorum.
var principalsMigration = `
ALTER TABLE @.records
	ADD COLUMN IF NOT EXISTS requester          text,
	ADD COLUMN IF NOT EXISTS approval_quorum    integer,
	ADD COLUMN IF NOT EXISTS approval_binding   text,
	ADD COLUMN IF NOT EXISTS approved_by        text[],
	ADD COLUMN IF NOT EXISTS claimed_by         text;
DROP FUNCTION IF EXISTS @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint, text,
	text, integer, text, text, bigint, bigint, text);
` + claimFunctionV11 + `
ALTER FUNCTION @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint, text,
	text, integer, text, text, bigint, bigint, text, text, integer, text)
	SET plan_cache_mode = force_custom_plan;
` + decideApprovalFunction

// claimFunctionV11 is version 9's claim function that writes the
// requester on every new row and a pending approval's quorum and binding,
// and answers an approval row's principals with its outcome. An approval
// row is one in an approval state (a row that ran keeps its approval
// columns): the consuming claim leaves them on the row as history
// (CONSUMED in the approval views, idempotency.ApprovalView).
var claimFunctionV11 = mustReplace(claimFunctionV9,
	"\tp_effect text,\n",
	"\tp_effect text, p_requester text, p_quorum integer, p_binding text,\n",

	"OUT a_note text, OUT a_use_us bigint,\n",
	"OUT a_note text, OUT a_use_us bigint,\n"+
		"\tOUT a_requester text, OUT a_quorum integer, OUT a_binding text, OUT a_approved_by text[], OUT a_claimed_by text,\n",

	"\t\t\t\ta_note := rec.decision_note; a_use_us := rec.approval_use_us;\n",
	"\t\t\t\ta_note := rec.decision_note; a_use_us := rec.approval_use_us;\n"+
		"\t\t\t\ta_requester := rec.requester; a_quorum := rec.approval_quorum; a_binding := rec.approval_binding;\n"+
		"\t\t\t\ta_approved_by := rec.approved_by; a_claimed_by := rec.claimed_by;\n",

	"\t\t\tELSIF rec.approval_id IS NOT NULL THEN\n",
	"\t\t\tELSIF rec.state IN ('AWAITING_APPROVAL', 'APPROVED', 'DENIED') THEN\n",

	"\t\t\t\t\teffect_key = COALESCE(p_effect, r.effect_key),\n"+
		"\t\t\t\t\tapproval_id = NULL, approval_rule = NULL, approval_reason = NULL, approver = NULL,\n"+
		"\t\t\t\t\tapproval_requested_at = NULL, approval_expires_at = NULL, approval_use_us = NULL,\n"+
		"\t\t\t\t\tdecided_by = NULL, decided_at = NULL, decision_note = NULL\n",
	"\t\t\t\t\teffect_key = COALESCE(p_effect, r.effect_key)\n",

	"approval_expires_at, approval_use_us, effect_key)\n",
	"approval_expires_at, approval_use_us, effect_key, requester, approval_quorum, approval_binding)\n",

	"replay_us, session_id, step_index, canonical_arguments, effect_key)\n",
	"replay_us, session_id, step_index, canonical_arguments, effect_key, requester)\n",

	"CASE WHEN bind THEN p_session_id END, CASE WHEN bind THEN p_step_index END, p_arguments, p_effect)\n",
	"CASE WHEN bind THEN p_session_id END, CASE WHEN bind THEN p_step_index END, p_arguments, p_effect, p_requester)\n",

	"now_ts + p_timeout_us * interval '1 microsecond', p_use_us, p_effect)\n",
	"now_ts + p_timeout_us * interval '1 microsecond', p_use_us, p_effect, p_requester, p_quorum, p_binding)\n",

	"\t\t\t\ta_use_us := p_use_us;\n",
	"\t\t\t\ta_use_us := p_use_us;\n"+
		"\t\t\t\ta_requester := p_requester; a_quorum := p_quorum; a_binding := p_binding;\n",
)

// decideApprovalFunction decides a pending approval on its locked row
// (see idempotency.Approvals.DecideApproval), returning the row as
// decided, or no row when it is not pending (gone, decided, expired: the
// caller reads it again to say why). An approve adds its principal to
// approved_by (a principal already there changes nothing); below the
// quorum the row stays pending with its life unchanged; at the quorum it
// is APPROVED, usable for its use-within from now and living its replay
// TTL past that. A deny is final at once: DENIED, keeping its approval's
// expiry, living its replay TTL from now. FOR UPDATE makes a second
// decider wait and decide on the first one's row.
const decideApprovalFunction = `
CREATE OR REPLACE FUNCTION @.decide_approval(p_id text, p_approve boolean, p_by text, p_claimed_by text, p_note text)
RETURNS SETOF @.records LANGUAGE plpgsql AS $$
DECLARE
	rec       @.records%ROWTYPE;
	now_ts    timestamptz := clock_timestamp();
	approvers text[];
BEGIN
	SELECT * INTO rec FROM @.records r WHERE r.approval_id = p_id AND r.expires_at > now_ts FOR UPDATE;
	IF NOT FOUND OR rec.state <> 'AWAITING_APPROVAL' OR rec.approval_expires_at <= now_ts THEN
		RETURN;
	END IF;
	approvers := COALESCE(rec.approved_by, '{}');
	IF p_approve AND p_by = ANY (approvers) THEN
		RETURN NEXT rec; -- counted already
		RETURN;
	END IF;
	IF p_approve THEN
		approvers := approvers || p_by;
	END IF;
	IF p_approve AND cardinality(approvers) < GREATEST(COALESCE(rec.approval_quorum, 0), 1) THEN
		UPDATE @.records r SET approved_by = approvers
		WHERE r.tenant = rec.tenant AND r.tool = rec.tool AND r.idempotency_key = rec.idempotency_key
		RETURNING r.* INTO rec;
	ELSIF p_approve THEN
		UPDATE @.records r
		SET state = 'APPROVED', approved_by = approvers, decided_by = p_by, claimed_by = p_claimed_by,
			decision_note = p_note, decided_at = now_ts,
			approval_expires_at = now_ts + r.approval_use_us * interval '1 microsecond',
			expires_at = now_ts + (r.approval_use_us + r.replay_us) * interval '1 microsecond'
		WHERE r.tenant = rec.tenant AND r.tool = rec.tool AND r.idempotency_key = rec.idempotency_key
		RETURNING r.* INTO rec;
	ELSE
		UPDATE @.records r
		SET state = 'DENIED', decided_by = p_by, claimed_by = p_claimed_by, decision_note = p_note, decided_at = now_ts,
			expires_at = now_ts + r.replay_us * interval '1 microsecond'
		WHERE r.tenant = rec.tenant AND r.tool = rec.tool AND r.idempotency_key = rec.idempotency_key
		RETURNING r.* INTO rec;
	END IF;
	RETURN NEXT rec;
END
$$;
`

// principalArgs are the claim function's $21 … $23: the call's
// requester (NULL: none; the approval's when the request names none), its
// approval's quorum and binding (NULL for a call the rules allow).
func principalArgs(req idempotency.ClaimRequest) []any {
	requester := req.Requester
	if a := req.Approval; a != nil {
		if requester == "" {
			requester = a.Requester
		}
		return []any{nullable(requester), a.Quorum, a.Binding}
	}
	return []any{nullable(requester), nil, nil}
}

// nullable is s, or NULL for "".
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
