package console_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/console"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/boltreceipts"
)

// receiptsBackend serves receipts from a real receipts store; the chain
// states are given by the test (verification itself is package receipts').
type receiptsBackend struct {
	storeBackend
	receipts *boltreceipts.Store
	chains   []console.ChainState
}

func (b receiptsBackend) Receipts(ctx context.Context, f receipts.Filter) ([]receipts.Receipt, int64, error) {
	return b.receipts.List(ctx, f)
}

func (b receiptsBackend) ReceiptChains(context.Context) ([]console.ChainState, error) {
	return b.chains, nil
}

func TestReceiptsTimelineFiltersAndChainState(t *testing.T) {
	f := newFixture(t)
	db, err := bolt.Open(filepath.Join(t.TempDir(), "receipts.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rs, err := boltreceipts.New(db, f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, r := range []receipts.Receipt{
		{Event: receipts.EventApprovalRequested, Tool: "refund", Session: "s-1", Step: "3", Decision: "approve", Rule: "decide[1]"},
		{Event: receipts.EventApprovalGranted, Tool: "refund", By: xss},
		{Event: receipts.EventExecuted, Tool: "refund", Status: 201, ExecutionID: "exec-refund"},
		{Event: receipts.EventExecuted, Tool: "lookup", Status: 200, ExecutionID: "exec-lookup"},
	} {
		r.Time = f.clock.Now().Add(time.Duration(i) * time.Minute)
		if _, err := rs.Append(ctx, "acme", r); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256([]byte(adminToken))
	srv := httptest.NewServer(console.New(receiptsBackend{storeBackend: storeBackend{f.store}, receipts: rs, chains: []console.ChainState{
		{Tenant: "acme", Receipts: 4, Verified: true},
		{Tenant: "globex", Receipts: 9, Problem: "altered: seq 7 (line 7): its hash does not match its content"},
	}}, console.Options{
		Authenticate: func(token string) bool { return sha256.Sum256([]byte(token)) == sum },
		SessionKeys:  func() [][]byte { return [][]byte{testSessionKey} },
		Now:          f.clock.Now,
	}))
	t.Cleanup(srv.Close)
	f.srv = srv
	c := f.browser(t)
	f.signIn(t, c, "alice", adminToken, "/console/receipts")

	resp, page := get(t, c, srv.URL+"/console/receipts")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("receipts: %d", resp.StatusCode)
	}
	for _, want := range []string{"intact", "broken</span>: altered: seq 7", "approval_requested", "decide[1]", "exec-refund", "exec-lookup", "&lt;script&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("receipts page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>alert") {
		t.Error("a receipt's by is rendered as HTML")
	}
	_, page = get(t, c, srv.URL+"/console/receipts?tenant=acme&tool=refund&event=executed")
	if !strings.Contains(page, "exec-refund") || strings.Contains(page, "exec-lookup") || strings.Contains(page, "approval_granted</td>") {
		t.Errorf("filtered by tool and event:\n%s", page)
	}
	since := f.clock.Now().Add(3 * time.Minute).UTC().Format("2006-01-02T15:04")
	_, page = get(t, c, srv.URL+"/console/receipts?tenant=acme&since="+since)
	if strings.Contains(page, "exec-refund") || !strings.Contains(page, "exec-lookup") {
		t.Errorf("filtered by since %s:\n%s", since, page)
	}
	if _, page = get(t, c, srv.URL+"/console/receipts?tenant=acme&since=yesterday"); !strings.Contains(page, "Since and until take a date") {
		t.Error("a bad since is not explained")
	}
}
