package pgreceipts

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// schemaSQL creates the store's tables in @ (the schema). receipt_heads
// outlives retention, so a chain whose receipts all expired continues.
// time_ns is the receipt's time in Unix nanoseconds (exact, where
// timestamptz keeps microseconds), for expiry; filters read the line.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS @.receipt_heads (
	tenant text PRIMARY KEY,
	seq    bigint NOT NULL,
	hash   text NOT NULL
);
CREATE TABLE IF NOT EXISTS @.receipts (
	tenant  text NOT NULL,
	seq     bigint NOT NULL,
	time_ns bigint NOT NULL,
	line    text NOT NULL,
	PRIMARY KEY (tenant, seq)
);
CREATE TABLE IF NOT EXISTS @.receipt_checkpoints (
	tenant text NOT NULL,
	seq    bigint NOT NULL,
	hash   text NOT NULL,
	key_id text NOT NULL,
	line   text NOT NULL,
	PRIMARY KEY (tenant, seq, hash, key_id)
);
CREATE TABLE IF NOT EXISTS @.receipt_executions (
	tenant       text NOT NULL,
	execution_id text NOT NULL,
	time_ns      bigint NOT NULL,
	PRIMARY KEY (tenant, execution_id)
);
`

// qualifier writes the quoted schema name where a statement says @.
func qualifier(schema string) func(string) string {
	return strings.NewReplacer("@.", pgx.Identifier{schema}.Sanitize()+".").Replace
}

// statements are the store's SQL texts, schema written in.
type statements struct {
	// $1 tenant, $2 seq, $3 hash, $4 time_ns, $5 line.
	// appendFirst creates the head of an empty chain; appendNext moves a
	// head that is still $7 seq, $8 hash. Each is one statement: the
	// receipt is inserted only if the head row was written, and a
	// concurrent writer of the same head waits for the row lock and then
	// finds the head moved (READ COMMITTED re-checks the condition).
	appendFirst, appendNext string
	head, tenants, list     string
	// restoreHead writes $1's head row from its last receipt when the
	// row is missing (deleted by hand): the chain continues instead of
	// failing every append on the receipts' primary key.
	restoreHead string
	// putCheckpoint: $1 tenant, $2 seq, $3 hash, $4 key id, $5 line.
	putCheckpoint, checkpoints, latestCheckpoints, checkpointTenants, last string
	expire, expireIndex                                                    string
	// expireCheckpoints drops the checkpoints below each chain's last
	// expired receipt (the one before its first kept receipt), whose own
	// checkpoint vouches for the kept chain's anchor.
	expireCheckpoints string
	// duplicates: $1 tenant, $2 execution ids: those already indexed.
	duplicates string
}

func newStatements(schema string) statements {
	q := qualifier(schema)
	// $1 tenant, $2 and $3 the run's last seq and hash (the new head),
	// $4 the run's times (ns), $5 its lines, $6 its seqs; appendNext's
	// $7 and $8 are the expected head. $9 and $10 are the run's
	// execution ids to index and their times (ns): the head is written
	// only if none is indexed yet (any concurrent append moves the head
	// first, so the check never misses one committed meanwhile; the
	// primary key backs it).
	const noDuplicate = ` AND NOT EXISTS (SELECT 1 FROM @.receipt_executions d
			WHERE d.tenant = $1 AND d.execution_id = ANY($9::text[]))`
	const insert = `, x AS (INSERT INTO @.receipt_executions (tenant, execution_id, time_ns)
			SELECT $1, e.id, e.time_ns FROM h, unnest($9::text[], $10::bigint[]) AS e(id, time_ns))
		INSERT INTO @.receipts (tenant, seq, time_ns, line)
		SELECT $1, u.seq, u.time_ns, u.line FROM h,
			unnest($6::bigint[], $4::bigint[], $5::text[]) AS u(seq, time_ns, line)`
	return statements{
		appendFirst: q(`WITH h AS (INSERT INTO @.receipt_heads (tenant, seq, hash)
			SELECT $1, $2, $3 WHERE $7::bigint IS NULL AND $8::text IS NULL` + noDuplicate + `
				AND NOT EXISTS (SELECT 1 FROM @.receipts WHERE tenant = $1)
			ON CONFLICT (tenant) DO NOTHING RETURNING 1)` + insert),
		appendNext: q(`WITH h AS (UPDATE @.receipt_heads SET seq = $2, hash = $3
			WHERE tenant = $1 AND seq = $7 AND hash = $8` + noDuplicate + ` RETURNING 1)` + insert),
		duplicates: q(`SELECT execution_id FROM @.receipt_executions WHERE tenant = $1 AND execution_id = ANY($2::text[])`),
		// $1 before (ns): the index is kept as long as the receipts.
		expireIndex: q(`DELETE FROM @.receipt_executions WHERE time_ns < $1`),
		expireCheckpoints: q(`DELETE FROM @.receipt_checkpoints c
			WHERE c.seq < (SELECT min(r.seq) FROM @.receipts r WHERE r.tenant = c.tenant) - 1`),
		// The head and its receipt's time (0: gone), read together so the
		// next receipt is dated no earlier without another statement.
		head: q(`SELECT h.seq, h.hash, COALESCE((SELECT r.time_ns FROM @.receipts r
			WHERE r.tenant = h.tenant AND r.seq = h.seq), 0) FROM @.receipt_heads h WHERE h.tenant = $1`),
		restoreHead: q(`INSERT INTO @.receipt_heads (tenant, seq, hash)
			SELECT tenant, seq, line::jsonb->>'hash' FROM @.receipts WHERE tenant = $1
			ORDER BY seq DESC LIMIT 1 ON CONFLICT (tenant) DO NOTHING`),
		putCheckpoint: q(`INSERT INTO @.receipt_checkpoints (tenant, seq, hash, key_id, line)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`),
		checkpoints: q(`SELECT line FROM @.receipt_checkpoints WHERE tenant = $1 ORDER BY seq, line`),
		latestCheckpoints: q(`SELECT line FROM @.receipt_checkpoints WHERE tenant = $1
			AND seq = (SELECT max(seq) FROM @.receipt_checkpoints WHERE tenant = $1) ORDER BY line`),
		checkpointTenants: q(`SELECT DISTINCT tenant FROM @.receipt_checkpoints ORDER BY tenant`),
		last:              q(`SELECT line FROM @.receipts WHERE tenant = $1 ORDER BY seq DESC LIMIT 1`),
		tenants:           q(`SELECT tenant FROM @.receipt_heads ORDER BY tenant`),
		// $1 tenant, $2 after, $3 limit + 1.
		list: q(`SELECT seq, line FROM @.receipts WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3`),
		// $1 before (ns): per tenant, every receipt below the first one
		// that is not old, so what stays is a contiguous chain even when
		// writers' clocks disagree. The first kept receipt is found
		// walking the (tenant, seq) key from the oldest: work in proportion
		// to what expires, not to what stays.
		expire: q(`DELETE FROM @.receipts r USING @.receipt_heads h
			WHERE r.tenant = h.tenant AND r.seq < COALESCE(
				(SELECT k.seq FROM @.receipts k WHERE k.tenant = h.tenant AND k.time_ns >= $1
					ORDER BY k.seq LIMIT 1),
				h.seq + 1)`),
	}
}
