package pgstore

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions, in order: migrations[i] takes the
// schema from version i to version i+1. A released migration is never
// edited; a change of schema appends one. Every statement is idempotent
// (IF NOT EXISTS, OR REPLACE), so a migration interrupted by a crash is
// simply run again. "@." stands for the store's schema, quoted.
var migrations = []string{
	// Version 1: records, the fencing sequence and the decision functions.
	`
CREATE TABLE IF NOT EXISTS @.records (
	tenant           text        NOT NULL,
	tool             text        NOT NULL,
	idempotency_key  text        NOT NULL,
	state            text        NOT NULL CHECK (state IN ('IN_PROGRESS', 'COMPLETED', 'UNKNOWN')),
	fingerprint      text        NOT NULL,
	execution_id     text        NOT NULL,
	owner            text,                 -- IN_PROGRESS only
	fencing_token    bigint      NOT NULL,
	created_at       timestamptz NOT NULL,
	lease_expires_at timestamptz,          -- IN_PROGRESS only
	expires_at       timestamptz NOT NULL, -- the row is dead from then on, whether swept yet or not
	replay_us        bigint      NOT NULL, -- the claim's replay TTL, so Renew can push expires_at
	session_id       text,                 -- the step the record holds (NULL: none)
	step_index       bigint,
	status           integer,              -- COMPLETED only
	content_type     text,
	body             bytea,
	PRIMARY KEY (tenant, tool, idempotency_key),
	CHECK ((session_id IS NULL) = (step_index IS NULL))
);

-- The step guard: one record per tenant + session + step.
CREATE UNIQUE INDEX IF NOT EXISTS records_step ON @.records (tenant, session_id, step_index)
	WHERE session_id IS NOT NULL;
-- The sweep finds expired rows without scanning the table.
CREATE INDEX IF NOT EXISTS records_expires_at ON @.records (expires_at);

-- Fencing tokens come from one sequence: it never goes back, so a token is
-- larger than every earlier token of the same scope even after the record
-- was deleted, released or swept.
CREATE SEQUENCE IF NOT EXISTS @.fencing_tokens;

-- claim decides one request (see idempotency.Store.Claim) and writes what
-- it decided, in one call. Durations are microseconds; times are the
-- database's clock, so gateway replicas with skewed clocks agree on leases.
-- A row whose expires_at passed counts as absent (the sweep has not got to
-- it yet) and is deleted on the way.
--
-- Decisions that write nothing (replay, in progress, unknown, key reused,
-- step conflict, a resent claim) are taken on a plain read, so they lock
-- no row and commit no transaction id (no WAL flush): each is a valid
-- answer at the instant of that read. Only when the decision must write
-- (a takeover, UNKNOWN, deleting an expired row) does the function read
-- again under FOR UPDATE and decide on the locked row. A new record is
-- inserted with ON CONFLICT DO NOTHING: of two requests racing for a key
-- or a step, the loser decides again and sees the winner's row.
` + claimFunctionV1,
	// Version 2: the admin API's lookups. Listings page on (created_at,
	// tenant, tool, idempotency_key) newest first; each filter has an index
	// that starts with it, so a page is an index range scan. UNKNOWN and
	// IN_PROGRESS records are few, so their index is partial and small (a
	// COMPLETED listing walks records_created, where nearly every row
	// matches). Sessions use records_step, tenant first.
	`
CREATE INDEX IF NOT EXISTS records_created ON @.records (created_at, tenant, tool, idempotency_key);
CREATE INDEX IF NOT EXISTS records_tenant_created ON @.records (tenant, created_at, tool, idempotency_key);
CREATE INDEX IF NOT EXISTS records_tool_created ON @.records (tool, created_at);
CREATE INDEX IF NOT EXISTS records_open_state ON @.records (state, created_at) WHERE state <> 'COMPLETED';
CREATE INDEX IF NOT EXISTS records_execution ON @.records (execution_id);
`,
	// Version 3: the tenants' rate limits and in-flight slots (Limiter,
	// limits.go). A step of its own, touching no earlier object.
	limitsMigration,
	// Version 4: claim plans its statements for each call's arguments.
	// PL/pgSQL otherwise switches to a cached generic plan after a few
	// calls, and one cached while the table was still small kept a plan
	// that grew with the table: BenchmarkBytesPerCall's claims fell to 18
	// per second at 76 000 rows, and ran at 1 073 per second once this was
	// set on the same table. Planning a claim's few index lookups costs far
	// less than that risk.
	`ALTER FUNCTION @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint)
	SET plan_cache_mode = force_custom_plan;`,
	// Version 5: operator context. IN_PROGRESS and UNKNOWN records keep the
	// call's canonical arguments (JCS text), so an operator can check the
	// effect before resolving; completion and resolve drop them. claim
	// takes them as a 13th argument (the 12-argument function is dropped).
	`
ALTER TABLE @.records ADD COLUMN IF NOT EXISTS canonical_arguments text;
DROP FUNCTION IF EXISTS @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint);
` + claimFunctionV5 + `
ALTER FUNCTION @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint, text)
	SET plan_cache_mode = force_custom_plan;`,
	// Version 6: approval records (approvals.go); claim takes the call's
	// decision as six more arguments (19; the 13-argument one is dropped).
	approvalsMigration,
	// Version 7: effect reservations (effects.go); claim takes the effect
	// as a 20th argument (the 19-argument one is dropped).
	effectsMigration,
	// Version 8: reconciliation (reconcile.go): the reconcile lease,
	// attempts and resolved_by as columns of the record's row; and the
	// receipt outbox (outbox.go). Version 8 is unreleased, so it is
	// extended in place.
	reconcileMigration + outboxMigration,
	// Version 9: the consumption of an approval checks the call's effect
	// (effects.go, approvalEffectMigration); claim's signature is unchanged.
	approvalEffectMigration,
	// Version 10: budget reservations (budgets.go): the budget_charges
	// table and the charge function; claim's signature is unchanged.
	budgetsMigration,
	// Version 11: approvals keep their principals (principals.go): the
	// requester, quorum, binding, approved_by and claimed_by columns, a
	// 23-argument claim and the decide_approval function.
	principalsMigration,
	// Version 12: the records' identity column (identity.go); claim's
	// signature is unchanged.
	identityMigration,
	// Version 13: one settled-row dispatch in claim (settled.go): the
	// settled_answer function; claim's signature is unchanged.
	settledMigration,
}

// claimFunctionV1 is the claim function as version 1 installed it.
const claimFunctionV1 = `CREATE OR REPLACE FUNCTION @.claim(
	p_tenant text, p_tool text, p_key text, p_fingerprint text,
	p_execution_id text, p_owner text, p_lock_us bigint, p_replay_us bigint,
	p_lease_expiry text, p_step_guard boolean, p_session_id text, p_step_index bigint,
	OUT outcome text, OUT exec_id text, OUT fence bigint, OUT taken_over boolean,
	OUT remaining_us bigint, OUT resp_status integer, OUT resp_content_type text,
	OUT resp_body bytea, OUT holder_tool text)
LANGUAGE plpgsql AS $fn$
DECLARE
	now_ts  timestamptz;
	lease   timestamptz;
	rec     @.records%ROWTYPE;
	holder  @.records%ROWTYPE;
	bind    boolean;
	locking boolean := false;
BEGIN
	taken_over := false;
	FOR attempt IN 1..8 LOOP
		now_ts := clock_timestamp();
		lease := now_ts + p_lock_us * interval '1 microsecond';

		IF locking THEN
			SELECT * INTO rec FROM @.records r
			WHERE r.tenant = p_tenant AND r.tool = p_tool AND r.idempotency_key = p_key
			FOR UPDATE;
		ELSE
			SELECT * INTO rec FROM @.records r
			WHERE r.tenant = p_tenant AND r.tool = p_tool AND r.idempotency_key = p_key;
		END IF;
		IF FOUND AND rec.expires_at > now_ts THEN
			exec_id := rec.execution_id;
			IF rec.fingerprint <> p_fingerprint THEN
				outcome := 'key_reused';
				exec_id := NULL;
				RETURN;
			ELSIF rec.state = 'COMPLETED' THEN
				outcome := 'replay';
				resp_status := rec.status;
				resp_content_type := rec.content_type;
				resp_body := rec.body;
				RETURN;
			ELSIF rec.state = 'UNKNOWN' THEN
				outcome := 'unknown';
				RETURN;
			ELSIF rec.owner = p_owner THEN
				-- The same claim again (its caller lost the answer): it
				-- already owns the record and gets its claim back.
				outcome := 'claimed';
				fence := rec.fencing_token;
				RETURN;
			ELSIF rec.lease_expires_at > now_ts THEN
				outcome := 'in_progress';
				remaining_us := floor(extract(epoch FROM rec.lease_expires_at - now_ts) * 1000000)::bigint;
				RETURN;
			ELSIF NOT locking THEN
				locking := true; -- the lease expired: decide on the locked row
				CONTINUE;
			ELSIF p_lease_expiry = 'unknown' THEN
				UPDATE @.records r
				SET state = 'UNKNOWN', owner = NULL, lease_expires_at = NULL,
					expires_at = now_ts + p_replay_us * interval '1 microsecond'
				WHERE r.tenant = p_tenant AND r.tool = p_tool AND r.idempotency_key = p_key;
				outcome := 'unknown';
				RETURN;
			ELSE
				-- Takeover: the owner's gateway died. The record keeps its
				-- step and creation time.
				fence := nextval('@.fencing_tokens');
				UPDATE @.records r
				SET execution_id = p_execution_id, owner = p_owner, fencing_token = fence,
					lease_expires_at = lease,
					expires_at = lease + p_replay_us * interval '1 microsecond',
					replay_us = p_replay_us
				WHERE r.tenant = p_tenant AND r.tool = p_tool AND r.idempotency_key = p_key;
				outcome := 'claimed';
				exec_id := p_execution_id;
				taken_over := true;
				RETURN;
			END IF;
		ELSIF FOUND THEN
			IF NOT locking THEN
				locking := true;
				CONTINUE;
			END IF;
			DELETE FROM @.records r
			WHERE r.tenant = p_tenant AND r.tool = p_tool AND r.idempotency_key = p_key;
		END IF;

		-- No live record under the key: the step guard decides.
		bind := p_session_id IS NOT NULL;
		IF bind THEN
			IF locking THEN
				SELECT * INTO holder FROM @.records r
				WHERE r.tenant = p_tenant AND r.session_id = p_session_id AND r.step_index = p_step_index
				FOR UPDATE;
			ELSE
				SELECT * INTO holder FROM @.records r
				WHERE r.tenant = p_tenant AND r.session_id = p_session_id AND r.step_index = p_step_index;
			END IF;
			IF FOUND AND holder.tool = p_tool AND holder.idempotency_key = p_key THEN
				CONTINUE; -- our own key, committed since the first read: decide on it
			ELSIF FOUND AND holder.expires_at <= now_ts THEN
				IF NOT locking THEN
					locking := true;
					CONTINUE;
				END IF;
				DELETE FROM @.records r
				WHERE r.tenant = holder.tenant AND r.tool = holder.tool AND r.idempotency_key = holder.idempotency_key;
			ELSIF FOUND AND p_step_guard THEN
				outcome := 'step_conflict';
				holder_tool := holder.tool;
				exec_id := holder.execution_id;
				RETURN;
			ELSIF FOUND THEN
				bind := false; -- unguarded: the step stays with its holder
			END IF;
		END IF;

		fence := nextval('@.fencing_tokens');
		INSERT INTO @.records (tenant, tool, idempotency_key, state, fingerprint, execution_id, owner,
			fencing_token, created_at, lease_expires_at, expires_at, replay_us, session_id, step_index)
		VALUES (p_tenant, p_tool, p_key, 'IN_PROGRESS', p_fingerprint, p_execution_id, p_owner,
			fence, now_ts, lease, lease + p_replay_us * interval '1 microsecond', p_replay_us,
			CASE WHEN bind THEN p_session_id END, CASE WHEN bind THEN p_step_index END)
		ON CONFLICT DO NOTHING;
		IF FOUND THEN
			outcome := 'claimed';
			exec_id := p_execution_id;
			RETURN;
		END IF;
		fence := NULL;
	END LOOP;
	RAISE EXCEPTION 'toolgateway claim did not settle: the record or its step keeps changing';
END
$fn$;
`

// claimFunctionV5 is version 1's claim function that also stores the
// call's canonical arguments (p_arguments) with a new or taken-over claim.
var claimFunctionV5 = strings.NewReplacer(
	"p_session_id text, p_step_index bigint,\n", "p_session_id text, p_step_index bigint, p_arguments text,\n",
	"\t\t\t\t\treplay_us = p_replay_us\n", "\t\t\t\t\treplay_us = p_replay_us, canonical_arguments = p_arguments\n",
	"replay_us, session_id, step_index)\n", "replay_us, session_id, step_index, canonical_arguments)\n",
	"CASE WHEN bind THEN p_session_id END, CASE WHEN bind THEN p_step_index END)\n", "CASE WHEN bind THEN p_session_id END, CASE WHEN bind THEN p_step_index END, p_arguments)\n",
).Replace(claimFunctionV1)

// schemaVersionTable creates the schema and its version table, before any
// migration.
const schemaVersionTable = `
CREATE SCHEMA IF NOT EXISTS @@;
CREATE TABLE IF NOT EXISTS @.schema_version (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
`

// currentVersion is the schema version this code writes and expects.
var currentVersion = len(migrations)

// migrationLockKey is the first half of the advisory lock taken while
// migrating; the second half is a hash of the schema's name, so stores in
// different schemas migrate independently.
const migrationLockKey = 0x7467 // "tg"

// migrate creates or upgrades the schema to currentVersion in one
// transaction, under a transaction-scoped advisory lock: replicas starting
// together queue on the lock, and the first one does the work while the
// others find the schema current. A schema newer than this code is refused
// is left alone: the store's layout guard refuses to decide on it.
// It returns the version found before.
func migrate(ctx context.Context, db beginner, schema string) (int, error) {
	return migrateTo(ctx, db, schema, currentVersion)
}

// migrateTo is migrate up to version target (tests build old schemas).
func migrateTo(ctx context.Context, db beginner, schema string, target int) (have int, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstore: migrate schema %s: %w", schema, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q := qualifier(schema)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", migrationLockKey, schema); err != nil {
		return 0, fmt.Errorf("pgstore: migrate schema %s: advisory lock: %w", schema, err)
	}
	if _, err := tx.Exec(ctx, q(schemaVersionTable)); err != nil {
		return 0, fmt.Errorf("pgstore: migrate schema %s: %w", schema, err)
	}
	if err := tx.QueryRow(ctx, q("SELECT coalesce(max(version), 0) FROM @.schema_version")).Scan(&have); err != nil {
		return 0, fmt.Errorf("pgstore: migrate schema %s: read version: %w", schema, err)
	}
	for v := have; v < target; v++ {
		if _, err := tx.Exec(ctx, q(migrations[v])); err != nil {
			return have, fmt.Errorf("pgstore: migrate schema %s to version %d: %w", schema, v+1, err)
		}
		if _, err := tx.Exec(ctx, q("INSERT INTO @.schema_version (version) VALUES ($1)"), v+1); err != nil {
			return have, fmt.Errorf("pgstore: migrate schema %s: record version %d: %w", schema, v+1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return have, fmt.Errorf("pgstore: migrate schema %s: commit: %w", schema, err)
	}
	return have, nil
}

// beginner starts transactions (a pool or a connection).
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// qualifier returns a function that writes the quoted schema name into SQL
// text: "@@" is the schema itself, "@." a name inside it. The name was
// checked by ValidateSchema, so it is also safe inside a string literal (the
// sequence's name in nextval).
func qualifier(schema string) func(sql string) string {
	quoted := pgx.Identifier{schema}.Sanitize()
	r := strings.NewReplacer("@@", quoted, "@.", quoted+".")
	return r.Replace
}

// schemaName is what a schema name may look like: a plain lowercase SQL
// identifier, so it never needs escaping beyond the double quotes.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidateSchema checks a schema name for Options.Schema: a lowercase SQL
// identifier of at most 63 characters.
func ValidateSchema(schema string) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("schema %q: want a lowercase identifier matching %s", schema, schemaName)
	}
	return nil
}
