package pgreceipts

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/receiptstest"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestConformance(t *testing.T) {
	receiptstest.Run(t, func(t *testing.T) receiptstest.Backend {
		url := pgtest.URL(t)
		schema := pgtest.Schema(t, url)
		var replicas [2]receipts.Store
		pool := newPool(t, url)
		for i := range replicas { // two pools: two replicas
			s, err := New(t.Context(), newPool(t, url), schema, nil)
			if err != nil {
				t.Fatal(err)
			}
			replicas[i] = s
		}
		open := func(t *testing.T) receipts.Store {
			s, err := New(t.Context(), newPool(t, url), schema, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return receiptstest.Backend{Replicas: replicas, Open: open, Raw: raw{pool, qualifier(schema)}}
	})
}

// raw writes the receipts table directly (the line only: what an editor
// of the stored receipt changes).
type raw struct {
	pool *pgxpool.Pool
	q    func(string) string
}

// Put replaces the row's line, or inserts a row (time_ns from the line,
// as a careful attacker would write it).
func (r raw) Put(t *testing.T, tenant string, seq int64, line []byte) {
	rec, err := receipts.Decode(line)
	if err != nil {
		t.Fatal(err)
	}
	r.exec(t, `INSERT INTO @.receipts (tenant, seq, time_ns, line) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, seq) DO UPDATE SET line = excluded.line`, tenant, seq, rec.Time.UnixNano(), string(line))
}

func (r raw) Delete(t *testing.T, tenant string, seq int64) {
	tag, err := r.pool.Exec(t.Context(), r.q(`DELETE FROM @.receipts WHERE tenant = $1 AND seq = $2`), tenant, seq)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("delete seq %d: %v rows, %v", seq, tag.RowsAffected(), err)
	}
}

func (r raw) SetHead(t *testing.T, tenant string, h receipts.Head) {
	if h == (receipts.Head{}) {
		r.exec(t, `DELETE FROM @.receipt_heads WHERE tenant = $1`, tenant)
		return
	}
	r.exec(t, `UPDATE @.receipt_heads SET seq = $2, hash = $3 WHERE tenant = $1`, tenant, h.Seq, h.Hash)
}

// Unlist deletes the head row (if still there): PostgreSQL lists the
// head rows.
func (r raw) Unlist(t *testing.T, tenant string) {
	if _, err := r.pool.Exec(t.Context(), r.q(`DELETE FROM @.receipt_heads WHERE tenant = $1`), tenant); err != nil {
		t.Fatal(err)
	}
}

func (r raw) PutCheckpoint(t *testing.T, c receipts.Checkpoint) {
	line, err := receipts.EncodeCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	r.exec(t, `INSERT INTO @.receipt_checkpoints (tenant, seq, hash, key_id, line) VALUES ($1, $2, $3, $4, $5)`,
		c.Tenant, c.Seq, c.Hash, c.KeyID, string(line))
}

// exec runs one statement that must change one row.
func (r raw) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	tag, err := r.pool.Exec(t.Context(), r.q(sql), args...)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("%s: %d rows, %v", sql, tag.RowsAffected(), err)
	}
}
