// Package storetest is the conformance suite of idempotency.Store: every
// backend runs Run against fresh instances of itself, so the Redis store and
// the embedded store are held to exactly the same semantics.
package storetest

import (
	"testing"
	"testing/synctest"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

type testCase struct {
	name string
	run  func(f *fixture)
}

// Run runs the whole conformance suite against stores made by newStore,
// which returns a fresh, isolated store for one subtest (its own key prefix
// or its own file); Run closes it when the subtest ends.
// Subtests run in parallel (each on its own store), so the lease waits of
// the time-dependent cases overlap and the suite finishes in a few seconds.
func Run(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	t.Helper()
	run(t, newStore, false)
}

// RunOnFakeClock is Run with each case inside a testing/synctest bubble:
// for a store whose clock is the process's (the embedded store), a lease or
// TTL the case waits out passes on the bubble's fake clock, exactly and at
// once, however loaded the machine. The store must be opened inside the
// bubble (newStore is called there) and reach nothing outside the process:
// the bubble cannot fake the clock of a Redis or PostgreSQL server, and
// time stands still while a goroutine waits on a socket.
func RunOnFakeClock(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	t.Helper()
	run(t, newStore, true)
}

// requiring makes each of cases fail first unless the store implements
// T (named name in the failure).
func requiring[T any](cases []testCase, name string) []testCase {
	for i, tc := range cases {
		cases[i].run = func(f *fixture) {
			if _, ok := f.store.(T); !ok {
				f.t.Fatalf("%T does not implement %s", f.store, name)
			}
			tc.run(f)
		}
	}
	return cases
}

func run(t *testing.T, newStore func(t *testing.T) idempotency.Store, fakeClock bool) {
	t.Helper()
	var cases []testCase
	cases = append(cases, claimCases()...)
	cases = append(cases, stepCases()...)
	cases = append(cases, leaseCases()...)
	cases = append(cases, recordCases()...)
	cases = append(cases, outcomeCases()...)
	cases = append(cases, argumentsCases()...)
	cases = append(cases, concurrencyCases()...)
	cases = append(cases, adminCases()...)
	cases = append(cases, approvalCases()...)
	cases = append(cases, reconcileCases()...)
	cases = append(cases, effectCases()...)
	cases = append(cases, effectLifeCases()...)
	cases = append(cases, identityCases()...)
	cases = append(cases, budgetCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runCase := func(t *testing.T) {
				store := newStore(t)
				t.Cleanup(func() {
					if err := store.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
				tc.run(newFixture(t, store))
			}
			if fakeClock {
				synctest.Test(t, runCase)
			} else {
				runCase(t)
			}
		})
	}
}
