package redisreceipts_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
)

// A page read while the writer seals segments is one moment of the
// chain: the log and the segments are read in one transaction, so a line
// the sealing moved from the log into a segment is read once, from one of
// them — never twice (a repeated seq reads as a broken chain to verify)
// and never not at all. (Two pipelined reads rarely let a compaction in
// between them — Redis mostly runs one client's pipeline together — so
// this test is a guard on the reader's paging more than a reproduction.)
func TestPagesReadWhileSegmentsSeal(t *testing.T) {
	c := newClient(t)
	prefix := newPrefix(t, c)
	writer := redisreceipts.New(c, prefix, nil)
	reader := redisreceipts.New(c, prefix, nil)
	const total = 4 * redisreceipts.SegmentSize
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	pages := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				for after := int64(0); ctx.Err() == nil; {
					lines, next, err := reader.Lines(ctx, "acme", after, 64)
					if err != nil {
						if ctx.Err() == nil {
							mu.Lock()
							failures = append(failures, err.Error())
							mu.Unlock()
						}
						return
					}
					prev := after
					for _, l := range lines {
						r, err := receipts.Decode(l)
						if err == nil && r.Seq != prev+1 {
							mu.Lock()
							failures = append(failures, fmt.Sprintf("page after seq %d: seq %d follows %d", after, r.Seq, prev))
							mu.Unlock()
						}
						prev = r.Seq
					}
					mu.Lock()
					pages++
					mu.Unlock()
					if next == 0 {
						break
					}
					after = next
				}
			}
		}()
	}
	for i := range total {
		if _, err := writer.AppendRun(t.Context(), "acme", []receipts.Receipt{receipt(i)}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	wg.Wait()
	if segments := c.ZCard(t.Context(), prefix+"{receipts:acme}:segments").Val(); segments < 3 {
		t.Fatalf("%d segments sealed during the test, want at least 3", segments)
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d pages were not one moment of the chain; first: %s", len(failures), pages, failures[0])
	}
	t.Logf("%d pages read while %d receipts were appended", pages, total)
}
