package pgstore

import (
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkCommitNotify measures what LISTEN/NOTIFY would add to every
// completion, the alternative to polling for Prefer: wait: concurrent
// single-row commits, as completions are, with and without a pg_notify in
// the same statement. NOTIFY takes a cluster-wide lock while its
// transaction commits, so notifying commits are serialised, WAL flush
// included, whereas plain commits share flushes. (Polling instead costs one
// read-only claim per poll: BenchmarkPollInProgress.)
func BenchmarkCommitNotify(b *testing.B) {
	for _, notify := range []bool{false, true} {
		name := "plain"
		if notify {
			name = "notify"
		}
		b.Run(name, func(b *testing.B) {
			s, pool := newTestStore(b, Options{})
			q := qualifier(s.schema)
			if _, err := pool.Exec(b.Context(), q(`CREATE TABLE @.bench (id bigint PRIMARY KEY, n bigint NOT NULL DEFAULT 0)`)); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(b.Context(), q(`INSERT INTO @.bench (id) SELECT generate_series(0, 1023)`)); err != nil {
				b.Fatal(err)
			}
			update := q(`UPDATE @.bench SET n = n + 1 WHERE id = $1`)
			if notify {
				update = q(`WITH u AS (UPDATE @.bench SET n = n + 1 WHERE id = $1 RETURNING id)
					SELECT pg_notify('gwbench', id::text) FROM u`)
			}
			var next atomic.Int64
			b.SetParallelism(8) // 16 goroutines sharing the pool: concurrent commits
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := next.Add(1) % 1024
					rows, err := pool.Query(b.Context(), update, id)
					if err != nil {
						b.Error(err)
						return
					}
					rows.Close()
					if err := rows.Err(); err != nil {
						b.Error(strconv.Quote(err.Error()))
						return
					}
				}
			})
		})
	}
}
