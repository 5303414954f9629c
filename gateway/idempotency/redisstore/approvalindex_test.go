package redisstore

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// TestPendingApprovalsAmongManyRecords: pending approvals are found by
// their index, not by a keyspace walk. 50 pending approvals among 20 000
// completed records (a bounded SCAN saw about 800 of them per page and
// listed almost none) all come on the first page, oldest first; decided
// ones leave the pending listing and show in theirs; the index entries
// of deleted records are dropped by the listing that finds them.
func TestPendingApprovalsAmongManyRecords(t *testing.T) {
	testPendingAmongMany(t, testClient(t))
}

// TestPendingApprovalsAmongManyRecordsOnCluster is the same through a
// ClusterClient, the index sets and pointers in other slots than the
// records.
func TestPendingApprovalsAmongManyRecordsOnCluster(t *testing.T) {
	testPendingAmongMany(t, oneNodeCluster(t))
}

const (
	manyOthers   = 20000
	manyPending  = 50
	manyApproved = 10
	manyDeleted  = 5
)

func testPendingAmongMany(t *testing.T, client redis.UniversalClient) {
	store := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	completeMany(t, store, manyOthers/2)
	var pending []idempotency.ClaimRequest
	var ids []string
	for i := range manyPending {
		req := approvalRequest(fmt.Sprintf("pending-%d", i))
		d, err := store.Claim(ctx, req)
		if err != nil || d.Outcome != idempotency.OutcomeAwaitingApproval {
			t.Fatalf("claim %d: %v %v", i, d.Outcome, err)
		}
		pending, ids = append(pending, req), append(ids, d.Approval.ID)
	}
	completeMany(t, store, manyOthers/2)

	awaiting := idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval, Limit: 100}
	first := listPage(t, store, awaiting)
	if got := approvalIDs(first.Records); !slices.Equal(got, ids) || first.Cursor != "" {
		t.Fatalf("first page of pending: %d approvals, cursor %q; want all %d oldest first, no cursor", len(got), first.Cursor, len(ids))
	}

	for _, id := range ids[:manyApproved] {
		if _, err := store.DecideApproval(ctx, id, idempotency.ApprovalDecision{Approve: true, By: "op"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := approvalIDs(listPage(t, store, awaiting).Records); !slices.Equal(got, ids[manyApproved:]) {
		t.Fatalf("pending after approving %d: %d approvals, want the other %d", manyApproved, len(got), manyPending-manyApproved)
	}
	approved := listPage(t, store, idempotency.ApprovalFilter{State: idempotency.StateApproved, Limit: 100})
	newestFirst := slices.Clone(ids[:manyApproved])
	slices.Reverse(newestFirst)
	if got := approvalIDs(approved.Records); !slices.Equal(got, newestFirst) {
		t.Fatalf("approved: %v, want %v (newest first)", got, newestFirst)
	}

	deleted := pending[manyApproved : manyApproved+manyDeleted]
	for _, req := range deleted {
		if err := store.Delete(ctx, req.Scope); err != nil {
			t.Fatal(err)
		}
	}
	left := ids[manyApproved+manyDeleted:]
	if got := approvalIDs(listAllApprovals(t, store, idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval, Limit: 7})); !slices.Equal(got, left) {
		t.Fatalf("pending in pages of 7 after deleting %d: %d approvals, want %d oldest first", manyDeleted, len(got), len(left))
	}
	if got := listAllApprovals(t, store, idempotency.ApprovalFilter{Limit: 3}); len(got) != manyPending-manyDeleted {
		t.Fatalf("all approvals in pages of 3: %d, want %d", len(got), manyPending-manyDeleted)
	}
	for _, set := range []string{store.keys.pendingIndex(), store.keys.allIndex()} {
		members, err := client.ZRange(ctx, set, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := manyPending - manyDeleted
		if set == store.keys.pendingIndex() {
			want -= manyApproved
		}
		if len(members) != want {
			t.Errorf("%s holds %d entries after the listings, want %d", set[len(store.keys.prefix):], len(members), want)
		}
		for _, m := range members {
			if _, id, _ := parseMember(m); slices.Contains(ids[manyApproved:manyApproved+manyDeleted], id) {
				t.Errorf("%s still holds the deleted record's approval %s", set[len(store.keys.prefix):], id)
			}
		}
	}
}

// completeMany writes n completed records through the store, 16 callers
// at once.
func completeMany(t *testing.T, store *Store, n int) {
	t.Helper()
	const callers = 16
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += callers {
				req := idempotency.ClaimRequest{
					Scope:       idempotency.Scope{Tenant: "t", Tool: "lookup", Key: ulid.Make().String()},
					Fingerprint: "fp", ExecutionID: ulid.Make().String(), Owner: ulid.Make().String(),
					LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown,
				}
				d, err := store.Claim(t.Context(), req)
				if err == nil {
					err = store.Complete(t.Context(), d.Lease, idempotency.StoredResponse{Status: 200, Body: []byte(`{}`)}, time.Hour)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("writing completed records: %v", err)
	}
}

func listPage(t *testing.T, store *Store, filter idempotency.ApprovalFilter) idempotency.Page {
	t.Helper()
	page, err := store.ListApprovals(t.Context(), filter)
	if err != nil {
		t.Fatalf("ListApprovals(%+v): %v", filter, err)
	}
	for _, r := range page.Records {
		if filter.State != "" && r.State != filter.State {
			t.Fatalf("ListApprovals(%+v) shows a record in %s", filter, r.State)
		}
	}
	return page
}

// listAllApprovals follows the cursor to the end; it fails on a listing
// that does not end or repeats an approval.
func listAllApprovals(t *testing.T, store *Store, filter idempotency.ApprovalFilter) []idempotency.Record {
	t.Helper()
	var all []idempotency.Record
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("ListApprovals(%+v) did not end", filter)
		}
		page := listPage(t, store, filter)
		if len(page.Records) > filter.Limit {
			t.Fatalf("page of %d above the limit %d", len(page.Records), filter.Limit)
		}
		all = append(all, page.Records...)
		if page.Cursor == "" {
			break
		}
		filter.Cursor = page.Cursor
	}
	ids := approvalIDs(all)
	if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
		t.Fatalf("ListApprovals(%+v) repeated an approval: %v", filter, ids)
	}
	return all
}

func approvalIDs(recs []idempotency.Record) []string {
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		ids = append(ids, r.Approval.ID)
	}
	return ids
}

// TestApprovalListCursor: a cursor this store did not hand out is
// refused with ErrInvalidCursor; an empty set lists nothing, no cursor.
func TestApprovalListCursor(t *testing.T) {
	client := testClient(t)
	store := New(client, Options{Prefix: uniquePrefix(t, client)})
	for _, bad := range []string{"x", "not-a-cursor-at-all", "zzzzzzzzzzzzzzzz01H", "0000000000000001"} {
		_, err := store.ListApprovals(t.Context(), idempotency.ApprovalFilter{Limit: 10, Cursor: bad})
		if !errors.Is(err, idempotency.ErrInvalidCursor) {
			t.Errorf("cursor %q: %v, want ErrInvalidCursor", bad, err)
		}
	}
	page := listPage(t, store, idempotency.ApprovalFilter{Limit: 10})
	if len(page.Records) != 0 || page.Cursor != "" {
		t.Errorf("empty index: %+v", page)
	}
}

// TestApprovalIndexEntryWithoutPointer: an index entry whose pointer is
// missing is kept while its pointer may still be on its way (a Cluster
// pipeline can write the set first) and dropped once it is older than
// pointerGrace; neither is listed.
func TestApprovalIndexEntryWithoutPointer(t *testing.T) {
	client := testClient(t)
	store := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	req := approvalRequest("live")
	d, err := store.Claim(ctx, req)
	if err != nil || d.Outcome != idempotency.OutcomeAwaitingApproval {
		t.Fatalf("claim: %v %v", d.Outcome, err)
	}
	fresh := stampOf(time.Now()) + ulid.Make().String()
	old := stampOf(time.Now().Add(-2*pointerGrace)) + ulid.Make().String()
	for _, m := range []string{fresh, old} {
		if err := client.ZAdd(ctx, store.keys.pendingIndex(), redis.Z{Member: m}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	page := listPage(t, store, idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval, Limit: 10})
	if got := approvalIDs(page.Records); !slices.Equal(got, []string{d.Approval.ID}) {
		t.Fatalf("listed %v, want only %s", got, d.Approval.ID)
	}
	members, err := client.ZRange(ctx, store.keys.pendingIndex(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{fresh, indexMember(d.Approval)}; !slices.Equal(slices.Sorted(slices.Values(members)), slices.Sorted(slices.Values(want))) {
		t.Errorf("pending set after listing = %v, want the fresh entry kept and the old one dropped: %v", members, want)
	}
}

// BenchmarkPendingApprovalsFirstPage10k: the console's first page of the
// Approvals list on Redis with 10 000 pending approvals: one page of 50,
// oldest first, read from the pending set (its work bounded by the page,
// not the backlog).
func BenchmarkPendingApprovalsFirstPage10k(b *testing.B) {
	client := testClient(b)
	store := New(client, Options{Prefix: uniquePrefix(b, client)})
	const backlog = 10_000
	var wg sync.WaitGroup
	for w := range 16 { // the backlog is made by 16 callers at once
		wg.Go(func() {
			for i := w; i < backlog; i += 16 {
				if d, err := store.Claim(b.Context(), approvalRequest(fmt.Sprintf("backlog-%05d", i))); err != nil || d.Outcome != idempotency.OutcomeAwaitingApproval {
					b.Errorf("claim %d: %v %v", i, d.Outcome, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	filter := idempotency.ApprovalFilter{State: idempotency.StateAwaitingApproval, Limit: 50}
	for b.Loop() {
		page, err := store.ListApprovals(b.Context(), filter)
		if err != nil || len(page.Records) != 50 || page.Cursor == "" {
			b.Fatalf("first page: %d approvals, cursor %q, %v; want 50 and a next page", len(page.Records), page.Cursor, err)
		}
	}
}
