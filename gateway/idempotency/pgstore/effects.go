package pgstore

import "github.com/toolgateway/toolgateway/gateway/idempotency"

// effectHolder is what the claim function answers about an effect's
// holder (by_effect, holder_state, h_key, h_session, h_step).
type effectHolder struct {
	byEffect   *bool
	state, key *string
	session    *string
	index      *int64
}

func (h *effectHolder) dest() []any {
	return []any{&h.byEffect, &h.state, &h.key, &h.session, &h.index}
}

// step is the holder's step (nil: none), for a lease on its record.
func (h *effectHolder) step() *idempotency.Step {
	if h.session == nil || h.index == nil {
		return nil
	}
	return &idempotency.Step{SessionID: *h.session, Index: uint64(*h.index)}
}

// effectArg is the claim function's p_effect: NULL without an effect.
func effectArg(e *idempotency.Effect) *string {
	if e == nil {
		return nil
	}
	return &e.Value
}

var _ idempotency.EffectKeeper = (*Store)(nil)

// KeepsEffects reports that Claim honours idempotency.ClaimRequest.Effect.
func (s *Store) KeepsEffects() bool { return true }

// effectsMigration is schema version 7: effect reservations. The
// reservation is the holder's own row: its effect_key column, unique per
// tenant + tool, so it lives and dies with the record (released, deleted,
// swept) and two rows can never hold one effect. The claim function
// takes the effect as a 20th argument: without a live record under the
// key, and past the step guard, it looks up the effect's row and decides
// on the holder (idempotency.Store.Claim); else the new row carries the
// effect, and of two claims racing for it the insert of the loser
// conflicts on the unique index, so it decides again on the winner's row.
var effectsMigration = `
ALTER TABLE @.records ADD COLUMN IF NOT EXISTS effect_key text;
CREATE UNIQUE INDEX IF NOT EXISTS records_effect ON @.records (tenant, tool, effect_key) WHERE effect_key IS NOT NULL;
DROP FUNCTION IF EXISTS @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint, text,
	text, integer, text, text, bigint, bigint);
` + claimFunctionV7 + `
ALTER FUNCTION @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint, text,
	text, integer, text, text, bigint, bigint, text)
	SET plan_cache_mode = force_custom_plan;`

// claimFunctionV7 is version 6's claim function with the effect
// (p_effect NULL: none). A holder found by its effect answers as its own
// retry would (by_effect true; a takeover returns the holder's key and
// step in h_*), except that another fingerprint is effect_conflict with
// the holder's state, and an approval row answers in progress.
var claimFunctionV7 = mustReplace(claimFunctionV6,
	"\tp_approval_id text, p_rule integer, p_reason text, p_approver text, p_timeout_us bigint, p_use_us bigint,\n",
	"\tp_approval_id text, p_rule integer, p_reason text, p_approver text, p_timeout_us bigint, p_use_us bigint,\n"+
		"\tp_effect text,\n",

	"OUT a_note text, OUT a_use_us bigint)\n",
	"OUT a_note text, OUT a_use_us bigint,\n"+
		"\tOUT by_effect boolean, OUT holder_state text, OUT h_key text, OUT h_session text, OUT h_step bigint)\n",

	"\tholder  @.records%ROWTYPE;\n",
	"\tholder  @.records%ROWTYPE;\n\teholder @.records%ROWTYPE;\n",

	"\t\tnow_ts := clock_timestamp();\n\t\ta_id := NULL;\n",
	"\t\tnow_ts := clock_timestamp();\n\t\ta_id := NULL;\n\t\tby_effect := false;\n",

	"\t\tIF p_approval_id IS NOT NULL THEN\n\t\t\t-- The rules say approve: the call waits, nothing runs.\n",
	effectBlock+"\t\tIF p_approval_id IS NOT NULL THEN\n\t\t\t-- The rules say approve: the call waits, nothing runs.\n",

	"approval_expires_at, approval_use_us)\n",
	"approval_expires_at, approval_use_us, effect_key)\n",

	"now_ts + p_timeout_us * interval '1 microsecond', p_use_us)\n",
	"now_ts + p_timeout_us * interval '1 microsecond', p_use_us, p_effect)\n",

	"replay_us, session_id, step_index, canonical_arguments)\n",
	"replay_us, session_id, step_index, canonical_arguments, effect_key)\n",

	"CASE WHEN bind THEN p_session_id END, CASE WHEN bind THEN p_step_index END, p_arguments)\n",
	"CASE WHEN bind THEN p_session_id END, CASE WHEN bind THEN p_step_index END, p_arguments, p_effect)\n",
)

// effectBlock decides on the effect's holder, between the step guard and
// the insert of a new row.
const effectBlock = `		IF p_effect IS NOT NULL THEN
			IF locking THEN
				SELECT * INTO eholder FROM @.records r
				WHERE r.tenant = p_tenant AND r.tool = p_tool AND r.effect_key = p_effect
				FOR UPDATE;
			ELSE
				SELECT * INTO eholder FROM @.records r
				WHERE r.tenant = p_tenant AND r.tool = p_tool AND r.effect_key = p_effect;
			END IF;
			IF FOUND AND eholder.idempotency_key = p_key THEN
				CONTINUE; -- our own key, committed since the first read: decide on it
			ELSIF FOUND AND eholder.expires_at <= now_ts THEN
				IF NOT locking THEN
					locking := true;
					CONTINUE;
				END IF;
				DELETE FROM @.records r
				WHERE r.tenant = eholder.tenant AND r.tool = eholder.tool AND r.idempotency_key = eholder.idempotency_key;
			ELSIF FOUND THEN
				by_effect := true;
				exec_id := eholder.execution_id;
				IF eholder.fingerprint <> p_fingerprint THEN
					outcome := 'effect_conflict';
					holder_state := eholder.state;
					RETURN;
				ELSIF eholder.state = 'COMPLETED' THEN
					outcome := 'replay';
					resp_status := eholder.status;
					resp_content_type := eholder.content_type;
					resp_body := eholder.body;
					RETURN;
				ELSIF eholder.state = 'UNKNOWN' THEN
					outcome := 'unknown';
					RETURN;
				ELSIF eholder.state <> 'IN_PROGRESS' THEN
					outcome := 'in_progress'; -- another call of the action waits for a human
					remaining_us := 1000000;
					RETURN;
				ELSIF eholder.lease_expires_at > now_ts THEN
					outcome := 'in_progress';
					remaining_us := floor(extract(epoch FROM eholder.lease_expires_at - now_ts) * 1000000)::bigint;
					RETURN;
				ELSIF NOT locking THEN
					locking := true; -- the holder's lease expired: decide on the locked row
					CONTINUE;
				ELSIF p_lease_expiry = 'unknown' THEN
					UPDATE @.records r
					SET state = 'UNKNOWN', owner = NULL, lease_expires_at = NULL,
						expires_at = now_ts + p_replay_us * interval '1 microsecond'
					WHERE r.tenant = eholder.tenant AND r.tool = eholder.tool AND r.idempotency_key = eholder.idempotency_key;
					outcome := 'unknown';
					RETURN;
				END IF;
				-- Takeover of the holder's record, as its own retry would.
				fence := nextval('@.fencing_tokens');
				UPDATE @.records r
				SET execution_id = p_execution_id, owner = p_owner, fencing_token = fence,
					lease_expires_at = lease,
					expires_at = lease + p_replay_us * interval '1 microsecond',
					replay_us = p_replay_us, canonical_arguments = p_arguments
				WHERE r.tenant = eholder.tenant AND r.tool = eholder.tool AND r.idempotency_key = eholder.idempotency_key;
				outcome := 'claimed';
				exec_id := p_execution_id;
				taken_over := true;
				h_key := eholder.idempotency_key;
				h_session := eholder.session_id;
				h_step := eholder.step_index;
				RETURN;
			END IF;
		END IF;
`

// approvalEffectMigration is schema version 9: an approval asked for
// without the call's effect (the tool's effect_key was configured while
// it waited) takes the effect when it is consumed, as a first claim does.
// Version 7's function consumed it without looking at the effect, so the
// approved call ran even while another row held its effect. The signature
// is unchanged; CREATE OR REPLACE drops the function's settings, so
// plan_cache_mode is set again.
var approvalEffectMigration = claimFunctionV9 + `
ALTER FUNCTION @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint, text,
	text, integer, text, text, bigint, bigint, text)
	SET plan_cache_mode = force_custom_plan;`

// claimFunctionV9 is version 7's claim function whose consumption of an
// approval row checks the call's effect first: held by another live row,
// the call answers as that holder (effect_conflict for other arguments, a
// replay, UNKNOWN, or in progress; an expired holder lease is left to a
// call without approval to take over) and the approval stays on its row,
// unused; else the row takes the effect with the claim. A claim racing it
// for a free effect commits first or makes this one fail on the unique
// index (an error: nothing runs, the retry decides again).
var claimFunctionV9 = mustReplace(claimFunctionV7,
	"\t\t\t\t-- Consumed: a first claim of the row, which keeps its step\n",
	`				IF p_effect IS NOT NULL AND rec.effect_key IS DISTINCT FROM p_effect THEN
					SELECT * INTO eholder FROM @.records r
					WHERE r.tenant = p_tenant AND r.tool = p_tool AND r.effect_key = p_effect
					FOR UPDATE;
					IF FOUND AND eholder.expires_at <= now_ts THEN
						DELETE FROM @.records r
						WHERE r.tenant = eholder.tenant AND r.tool = eholder.tool AND r.idempotency_key = eholder.idempotency_key;
					ELSIF FOUND THEN
						by_effect := true;
						exec_id := eholder.execution_id;
						a_id := NULL;
						IF eholder.fingerprint <> p_fingerprint THEN
							outcome := 'effect_conflict';
							holder_state := eholder.state;
						ELSIF eholder.state = 'COMPLETED' THEN
							outcome := 'replay';
							resp_status := eholder.status;
							resp_content_type := eholder.content_type;
							resp_body := eholder.body;
						ELSIF eholder.state = 'UNKNOWN' THEN
							outcome := 'unknown';
						ELSE
							outcome := 'in_progress';
							remaining_us := CASE WHEN eholder.state = 'IN_PROGRESS' AND eholder.lease_expires_at > now_ts
								THEN floor(extract(epoch FROM eholder.lease_expires_at - now_ts) * 1000000)::bigint
								ELSE 1000000 END;
						END IF;
						RETURN;
					END IF;
				END IF;
				-- Consumed: a first claim of the row, which keeps its step
`,
	"\t\t\t\t\treplay_us = p_replay_us, canonical_arguments = p_arguments,\n\t\t\t\t\tapproval_id = NULL,",
	"\t\t\t\t\treplay_us = p_replay_us, canonical_arguments = p_arguments,\n\t\t\t\t\teffect_key = COALESCE(p_effect, r.effect_key),\n\t\t\t\t\tapproval_id = NULL,",
)
