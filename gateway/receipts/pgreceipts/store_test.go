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
		return receiptstest.Backend{Replicas: replicas, Raw: raw{pool, qualifier(schema)}}
	})
}

// raw writes the receipts table directly (the line only: what an editor
// of the stored receipt changes).
type raw struct {
	pool *pgxpool.Pool
	q    func(string) string
}

func (r raw) Put(t *testing.T, tenant string, seq int64, line []byte) {
	tag, err := r.pool.Exec(t.Context(), r.q(`UPDATE @.receipts SET line = $3 WHERE tenant = $1 AND seq = $2`), tenant, seq, string(line))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("put seq %d: %v rows, %v", seq, tag.RowsAffected(), err)
	}
}

func (r raw) Delete(t *testing.T, tenant string, seq int64) {
	tag, err := r.pool.Exec(t.Context(), r.q(`DELETE FROM @.receipts WHERE tenant = $1 AND seq = $2`), tenant, seq)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("delete seq %d: %v rows, %v", seq, tag.RowsAffected(), err)
	}
}
