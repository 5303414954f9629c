// Package receiptstest is the conformance suite of receipts.Store: every
// backend runs [Run] against fresh instances of itself, so the Redis,
// PostgreSQL and embedded stores keep chains with the same semantics and
// the same tamper evidence.
package receiptstest

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// Backend is one fresh, isolated backend (its own key prefix, schema or
// file) as a test sees it.
type Backend struct {
	// Replicas are two stores over the same backend, as two gateway
	// replicas would hold them: separate clients, separate head caches.
	Replicas [2]receipts.Store
	// Open returns another store over the same backend, as a gateway
	// started afresh holds it (no head cached).
	Open func(t *testing.T) receipts.Store
	// Raw writes to the backend behind the stores' back.
	Raw Raw
}

// Raw is direct write access to a backend's stored receipts, as an
// attacker with store access has it: what the tamper cases use.
type Raw interface {
	// Put stores line as the receipt at seq of tenant's chain, replacing
	// what was there, without touching the chain's head.
	Put(t *testing.T, tenant string, seq int64, line []byte)
	// Delete removes the receipt at seq of tenant's chain.
	Delete(t *testing.T, tenant string, seq int64)
	// SetHead sets tenant's head to h (the zero Head: removes it).
	SetHead(t *testing.T, tenant string, h receipts.Head)
	// Unlist removes tenant from the store's listing of chains (Redis:
	// the tenants set; PostgreSQL and bbolt: the head, which lists it).
	Unlist(t *testing.T, tenant string)
	// PutCheckpoint stores c beside c.Tenant's chain, as the store keeps
	// checkpoints.
	PutCheckpoint(t *testing.T, c receipts.Checkpoint)
}

type testCase struct {
	name string
	run  func(t *testing.T, b Backend)
}

// Run runs the whole suite; newBackend returns a fresh backend for one
// subtest and cleans it up when the subtest ends.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	t.Helper()
	var cases []testCase
	cases = append(cases, appendCases()...)
	cases = append(cases, listCases()...)
	cases = append(cases, expireCases()...)
	cases = append(cases, tamperCases()...)
	cases = append(cases, dedupeCases()...)
	cases = append(cases, checkpointCases()...)
	cases = append(cases, windowCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newBackend(t))
		})
	}
}
