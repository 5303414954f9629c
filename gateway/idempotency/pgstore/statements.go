package pgstore

// clock is the database's clock at the statement, as c.now.
const clock = `(SELECT clock_timestamp() AS now) c`

// claimColumns are the claim function's columns (schema.go), in the order
// Store.Claim scans them; claimCall calls it with the claim's arguments.
const (
	claimColumns = `outcome, exec_id, fence, taken_over, remaining_us, resp_status, resp_content_type, resp_body, holder_tool,
		a_id, a_rule, a_reason, a_approver, a_requested, a_expires, a_by, a_decided, a_note,
		a_requester, a_quorum, a_binding, a_approved_by, a_claimed_by, a_use_us,
		by_effect, holder_state, h_key, h_session, h_step`
	claimCall = `@.claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)`
)

// statements are the SQL texts of the store's operations, with the schema
// written in. Each is one statement, sent in one round trip. Owner-checked
// statements match the record by scope, state, owner and fencing token, and
// only while the record has not expired, so a lease that was taken over,
// completed, released or deleted changes nothing. A lease that merely ran
// out still matches (the record lives its replay TTL past the lease): the
// owner may complete it until another claim takes it over. Times come from
// clock_timestamp(), the database's clock at the statement.
type statements struct {
	claim, claimCharged, budgetUsage, reservations, renew, complete, markUnknown, release, get, delete, sweep string
	// Receipt outbox statements (outbox.go).
	completeOutbox, pendingReceipts, clearReceipts string
	// Admin statements (admin.go).
	findExecution, resolve string
	// Approval statements (approvals.go).
	getApproval, decideApproval string
	// Reconciler statements (reconcile.go).
	reconcile reconcileStatements
	// keepIdentity writes a claim's identity (identity.go).
	keepIdentity string
}

func newStatements(schema string) statements {
	q := qualifier(schema)
	const owned = `r.tenant = $1 AND r.tool = $2 AND r.idempotency_key = $3
		AND r.state = 'IN_PROGRESS' AND r.owner = $4 AND r.fencing_token = $5 AND r.expires_at > c.now`
	// keptArguments is what a completion does with the record's
	// arguments: keeps them when $10 (Lease.KeepArguments) says so, for
	// `gateway policy replay`, and drops them otherwise.
	const keptArguments = `canonical_arguments = CASE WHEN $10::boolean THEN r.canonical_arguments END`
	getApproval, decideApproval := approvalStatements(q)
	return statements{
		getApproval: getApproval, decideApproval: decideApproval,
		reconcile:    newReconcileStatements(q),
		keepIdentity: q(keepIdentity),
		claim:        q(`SELECT ` + claimColumns + ` FROM ` + claimCall),
		claimCharged: q(claimCharged),
		budgetUsage:  q(budgetUsage),
		reservations: q(reservations),
		// $6: the new lease in µs; the record then lives the claim's replay
		// TTL past it, so an expired lease stays visible for takeover.
		renew: q(`UPDATE @.records r
			SET lease_expires_at = c.now + $6 * interval '1 microsecond',
				expires_at = c.now + ($6 + r.replay_us) * interval '1 microsecond'
			FROM ` + clock + ` WHERE ` + owned),
		// $6 ttl µs, $7 status, $8 content type, $9 body, $10 whether
		// the record keeps its canonical arguments (Lease.KeepArguments).
		complete: q(`UPDATE @.records r
			SET state = 'COMPLETED', owner = NULL, lease_expires_at = NULL,
				expires_at = c.now + $6 * interval '1 microsecond',
				status = $7, content_type = $8, body = $9, ` + keptArguments + `
			FROM ` + clock + ` WHERE ` + owned),
		// complete, and in the same statement the execution's receipt
		// outbox entry: $11 the entry, $12 when (the gateway's clock).
		// The entry is written only if the record was: its count is the
		// statement's.
		completeOutbox: q(`WITH u AS (UPDATE @.records r
				SET state = 'COMPLETED', owner = NULL, lease_expires_at = NULL,
					expires_at = c.now + $6 * interval '1 microsecond',
					status = $7, content_type = $8, body = $9, ` + keptArguments + `
				FROM ` + clock + ` WHERE ` + owned + ` RETURNING r.execution_id)
			INSERT INTO @.receipt_outbox (execution_id, completed_at, entry)
			SELECT u.execution_id, $12, $11 FROM u
			ON CONFLICT (execution_id) DO UPDATE SET completed_at = EXCLUDED.completed_at, entry = EXCLUDED.entry`),
		// $1 before, $2 limit.
		pendingReceipts: q(`SELECT execution_id, entry FROM @.receipt_outbox WHERE completed_at < $1 ORDER BY completed_at LIMIT $2`),
		// $1 execution ids.
		clearReceipts: q(`DELETE FROM @.receipt_outbox WHERE execution_id = ANY($1::text[])`),
		// $6 ttl µs: the same row the claim function writes for an
		// expired lease under lease_expiry 'unknown'.
		markUnknown: q(`UPDATE @.records r
			SET state = 'UNKNOWN', owner = NULL, lease_expires_at = NULL,
				expires_at = c.now + $6 * interval '1 microsecond'
			FROM ` + clock + ` WHERE ` + owned),
		release: q(releaseCharges(`DELETE FROM @.records r USING ` + clock + ` WHERE ` + owned)),
		get: q(`SELECT ` + recordColumns + `
			FROM @.records r, ` + clock + `
			WHERE r.tenant = $1 AND r.tool = $2 AND r.idempotency_key = $3 AND r.expires_at > c.now`),
		findExecution: q(`SELECT ` + recordColumns + `
			FROM @.records r, ` + clock + `
			WHERE r.execution_id = $1 AND r.expires_at > c.now
			ORDER BY r.created_at DESC LIMIT 1`),
		// $4 ttl µs, $5 status, $6 content type, $7 body. cur tells a
		// missing record (no row at all) from one in a state that may not be
		// resolved (a row, but no update); the update re-checks its
		// condition on the locked row, so a claim racing it wins or loses
		// cleanly.
		resolve: q(`WITH c AS (SELECT clock_timestamp() AS now),
			cur AS (SELECT r.state FROM @.records r, c
				WHERE r.tenant = $1 AND r.tool = $2 AND r.idempotency_key = $3 AND r.expires_at > c.now),
			upd AS (UPDATE @.records r
				SET state = 'COMPLETED', owner = NULL, lease_expires_at = NULL,
					expires_at = c.now + $4 * interval '1 microsecond',
					status = $5, content_type = $6, body = $7, canonical_arguments = NULL
				FROM c
				WHERE r.tenant = $1 AND r.tool = $2 AND r.idempotency_key = $3 AND r.expires_at > c.now
					AND (r.state = 'UNKNOWN' OR (r.state = 'IN_PROGRESS' AND r.lease_expires_at <= c.now))
				RETURNING ` + recordColumns + `)
			SELECT cur.state IS NOT NULL, upd.* FROM (SELECT 1) one
				LEFT JOIN cur ON true LEFT JOIN upd ON true`),
		delete: q(releaseCharges(`DELETE FROM @.records r USING ` + clock + `
			WHERE r.tenant = $1 AND r.tool = $2 AND r.idempotency_key = $3 AND r.expires_at > c.now`)),
		// $1 batch size. SKIP LOCKED: rows another sweeper (or a claim
		// deleting an expired row) holds are left to it, so sweepers on
		// every replica never wait for each other.
		sweep: q(`DELETE FROM @.records WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM @.records WHERE expires_at <= clock_timestamp()
			ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED))`),
	}
}

// recordColumns are the columns scanRecord reads, in its order. The state
// is as idempotency.ApprovalState shows it: a pending or approved
// approval past its expiry reads EXPIRED.
const recordColumns = `r.tenant, r.tool, r.idempotency_key,
	CASE WHEN r.state IN ('AWAITING_APPROVAL', 'APPROVED') AND r.approval_expires_at <= clock_timestamp()
		THEN 'EXPIRED' ELSE r.state END AS state,
	r.fingerprint, r.execution_id,
	r.fencing_token, r.created_at, r.lease_expires_at, r.expires_at, r.session_id, r.step_index,
	r.status, r.content_type, r.body, r.canonical_arguments,
	r.approval_id, r.approval_rule, r.approval_reason, r.approver, r.approval_requested_at,
	r.approval_expires_at, r.decided_by, r.decided_at, r.decision_note,
	r.requester, r.approval_quorum, r.approval_binding, r.approved_by, r.claimed_by, r.approval_use_us, ` + reconcileColumns + `, ` + identityColumn
