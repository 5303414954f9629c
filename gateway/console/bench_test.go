package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// BenchmarkApprovalsFirstPage10k renders the Approvals page over 10 000
// pending approvals in the embedded store: the page reads one bounded
// page (PageSize approvals and their arguments), so its cost does not grow
// with the backlog. The brief's budget is 200 ms per render.
func BenchmarkApprovalsFirstPage10k(b *testing.B) {
	f := newFixture(b)
	for i := range 10_000 {
		_, err := f.store.Claim(context.Background(), idempotency.ClaimRequest{
			Scope: idempotency.Scope{Tenant: "acme", Tool: "refund", Key: fmt.Sprintf("bench-%05d", i)}, Fingerprint: fmt.Sprintf("%064x", i),
			ExecutionID: fmt.Sprintf("exec-%05d", i), Owner: "o", LockTTL: time.Minute, ReplayTTL: 48 * time.Hour,
			CanonicalArguments: []byte(fmt.Sprintf(`{"amount":%d,"txn_id":"t-%d"}`, 1000+i, i)),
			Approval:           &idempotency.ApprovalClaim{ID: fmt.Sprintf("01BENCH%05d", i), Rule: 1, Reason: "refunds above 1 000 need finance", Timeout: 24 * time.Hour, UseWithin: time.Hour},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	c := f.browser(b)
	f.signIn(b, c, "alice", adminToken, "/console/approvals")
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Get(f.srv.URL + "/console/approvals")
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Count(string(body), `class="card approval"`) != 50 {
			b.Fatalf("page: %d, %d approvals", resp.StatusCode, strings.Count(string(body), `class="card approval"`))
		}
	}
}
