package storetest

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// Budget reservations as a settlement reads them (BudgetKeeper.Reservations):
// what an operator's resolve or delete, or reconciliation, settles is what
// the record's life holds, so its receipts name each budget and amount.
func budgetCases() []testCase {
	return []testCase{
		{"ReservationsOfARecordUntilItGoes", testReservationsUntilDeleted},
		{"ReservationsOfACallWithoutCharges", testReservationsWithoutCharges},
		{"ReservationsOfANewLife", testReservationsOfANewLife},
	}
}

// budgetKeeper skips a case on a store that keeps no budgets.
func (f *fixture) budgetKeeper() idempotency.BudgetKeeper {
	f.t.Helper()
	k, ok := f.store.(idempotency.BudgetKeeper)
	if !ok || !k.KeepsBudgets() {
		f.t.Skip("store does not keep budgets")
	}
	return k
}

// charge is a calendar-window charge of cost (whole units) to the
// fixture's own bucket of budget.
func (f *fixture) charge(budget string, cost int64) idempotency.Charge {
	now := time.Now()
	return idempotency.Charge{Bucket: budget + "|t:tenant-a|w:" + f.run, Budget: budget,
		Limit: 1000 * 1_000_000, Cost: cost * 1_000_000, At: now, Since: now.Add(-time.Hour), Retain: 25 * time.Hour}
}

// expectReservations fails unless the record under scope holds want (in
// any order).
func (f *fixture) expectReservations(k idempotency.BudgetKeeper, scope idempotency.Scope, when string, want ...idempotency.Reservation) {
	f.t.Helper()
	got, err := k.Reservations(f.ctx, scope)
	if err != nil {
		f.t.Fatalf("Reservations %s: %v", when, err)
	}
	byBudget := func(a, b idempotency.Reservation) int { return strings.Compare(a.Budget, b.Budget) }
	slices.SortFunc(got, byBudget)
	slices.SortFunc(want, byBudget)
	if !slices.Equal(got, want) {
		f.t.Fatalf("Reservations %s = %v, want %v", when, got, want)
	}
}

// testReservationsUntilDeleted: a claim's charges are the record's
// reservations while it runs, once UNKNOWN and once resolved (committed:
// they stay); a deleted record has none to read.
func testReservationsUntilDeleted(f *fixture) {
	k := f.budgetKeeper()
	req := f.request(f.scope("refund", f.id("key")), fingerprintA, nil)
	req.Charges = []idempotency.Charge{f.charge("refunds", 60), f.charge("sends", 1)}
	want := []idempotency.Reservation{{Budget: "refunds", Cost: 60_000_000}, {Budget: "sends", Cost: 1_000_000}}
	lease := f.claimed(req)
	f.expectReservations(k, req.Scope, "while it runs", want...)
	if err := f.store.MarkUnknown(f.ctx, lease, replayTTL); err != nil {
		f.t.Fatalf("MarkUnknown: %v", err)
	}
	f.expectReservations(k, req.Scope, "UNKNOWN", want...)
	f.resolve(req.Scope, jsonResponse(`{"refunded":60}`), replayTTL)
	f.expectReservations(k, req.Scope, "resolved", want...)
	if err := f.store.Delete(f.ctx, req.Scope); err != nil {
		f.t.Fatalf("Delete: %v", err)
	}
	if _, err := k.Reservations(f.ctx, req.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Fatalf("Reservations of a deleted record: %v, want ErrNotFound", err)
	}
}

// testReservationsWithoutCharges: a record that charged nothing holds no
// reservation (and a scope without a record is not found).
func testReservationsWithoutCharges(f *fixture) {
	k := f.budgetKeeper()
	req := f.request(f.scope("lookup", f.id("key")), fingerprintA, nil)
	f.claimed(req)
	f.expectReservations(k, req.Scope, "of a call without charges")
	if _, err := k.Reservations(f.ctx, f.scope("lookup", f.id("key"))); !errors.Is(err, idempotency.ErrNotFound) {
		f.t.Fatalf("Reservations without a record: %v, want ErrNotFound", err)
	}
}

// testReservationsOfANewLife: a record released (its call did not act)
// gave its reservation back; the next record under the key holds only
// what its own claim charged.
func testReservationsOfANewLife(f *fixture) {
	k := f.budgetKeeper()
	req := f.request(f.scope("refund", f.id("key")), fingerprintA, nil)
	req.Charges = []idempotency.Charge{f.charge("refunds", 60)}
	lease := f.claimed(req)
	if err := f.store.Release(f.ctx, lease); err != nil {
		f.t.Fatalf("Release: %v", err)
	}
	again := f.request(req.Scope, fingerprintA, nil)
	again.Charges = []idempotency.Charge{f.charge("refunds", 25)}
	f.claimed(again)
	f.expectReservations(k, req.Scope, "of the next life", idempotency.Reservation{Budget: "refunds", Cost: 25_000_000})
}
