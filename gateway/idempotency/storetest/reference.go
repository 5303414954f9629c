package storetest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// ReferenceCalls is how many completed calls the stores' bytes-per-call
// benchmarks store: the figure is measured over at least 100 000.
const ReferenceCalls = 100_000

// ReferenceBody is the 120-byte JSON response the bytes-per-call figures
// are measured with.
var ReferenceBody = []byte(`{"result":"ok","id":"` + strings.Repeat("x", 120-len(`{"result":"ok","id":""}`)) + `"}`)

// ReferenceArguments are the canonical arguments of every reference call
// (104 bytes, a payment's): stored with the open record, dropped when it
// completes.
var ReferenceArguments = []byte(`{"amount":4200,"currency":"EUR","customer":"cus_0000000000000123","description":"order 123, 2 items"}`)

// ReferenceCall is the i-th call of the stores' cost benchmarks, the same
// for every store so their figures compare: a derived 64-hex key and
// fingerprint, ULID execution id and owner, and a 36-character session id
// of its own (one session per call, the worst case for step entries), and
// ReferenceArguments.
func ReferenceCall(i int) idempotency.ClaimRequest {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	n := strconv.Itoa(i)
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "acme", Tool: "payments.charge", Key: sum("key" + n)},
		Fingerprint: sum("args" + n), Step: &idempotency.Step{SessionID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), Index: 3},
		StepGuard: true, StepBoundKey: true,
		ExecutionID: ulid.MustNew(ulid.Now(), rand.Reader).String(), Owner: ulid.MustNew(ulid.Now(), rand.Reader).String(),
		LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
		CanonicalArguments: ReferenceArguments,
	}
}

// ForEachReferenceCall runs op(i) for every i below ReferenceCalls, spread
// over workers goroutines, and returns the first error any of them met (a
// worker stops at its first error).
func ForEachReferenceCall(workers int, op func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < ReferenceCalls; i += workers {
				if err := op(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
