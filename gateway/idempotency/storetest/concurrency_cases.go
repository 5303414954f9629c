package storetest

import (
	"fmt"
	"sync"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

func concurrencyCases() []testCase {
	return []testCase{
		{"ConcurrentClaims", testConcurrentClaims},
		{"ConcurrentStepClaims", testConcurrentStepClaims},
		{"ConcurrentTakeover", testConcurrentTakeover},
	}
}

// race runs claim for every request at once (released together by a start
// signal) and returns the decisions in request order.
func (f *fixture) race(reqs []idempotency.ClaimRequest, afterClaim func(idempotency.Decision) error) []idempotency.Decision {
	f.t.Helper()
	decisions := make([]idempotency.Decision, len(reqs))
	errs := make([]error, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			<-start
			d, err := f.store.Claim(f.ctx, req)
			if err == nil && afterClaim != nil {
				err = afterClaim(d)
			}
			decisions[i], errs[i] = d, err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			f.t.Fatalf("request %d: %v", i, err)
		}
	}
	return decisions
}

// onlyWinner is the execution id of the one request of a race that
// claimed what (say "the step"); none or two fail the case.
func (f *fixture) onlyWinner(reqs []idempotency.ClaimRequest, decisions []idempotency.Decision, what string) string {
	f.t.Helper()
	winner := ""
	for i, d := range decisions {
		if d.Outcome == idempotency.OutcomeClaimed {
			if winner != "" {
				f.t.Fatalf("%s claimed twice: by %q and %q", what, winner, reqs[i].ExecutionID)
			}
			winner = reqs[i].ExecutionID
		}
	}
	if winner == "" {
		f.t.Fatalf("nobody claimed %s: %+v", what, decisions)
	}
	return winner
}

func testConcurrentClaims(f *fixture) {
	const keys, claimants = 50, 10
	var reqs []idempotency.ClaimRequest
	completeAtOnce := map[idempotency.Scope]bool{}
	for k := range keys {
		var step *idempotency.Step
		if k%2 == 0 {
			step = f.step("race", uint64(k))
		}
		base := f.request(f.scope("tool", fmt.Sprintf("race-%d", k)), fingerprintA, step)
		completeAtOnce[base.Scope] = k%3 == 0
		for range claimants {
			reqs = append(reqs, f.fresh(base))
		}
	}
	// Winners of every third key complete at once, so the losers see a mix
	// of in-progress and replay.
	decisions := f.race(reqs, func(d idempotency.Decision) error {
		if d.Outcome == idempotency.OutcomeClaimed && completeAtOnce[d.Lease.Scope] {
			return f.store.Complete(f.ctx, d.Lease, jsonResponse(`{}`), replayTTL)
		}
		return nil
	})

	for k := range keys {
		winner := ""
		for i := k * claimants; i < (k+1)*claimants; i++ {
			if decisions[i].Outcome == idempotency.OutcomeClaimed {
				if winner != "" {
					f.t.Errorf("key %d claimed twice: by %q and %q", k, winner, reqs[i].ExecutionID)
				}
				winner = reqs[i].ExecutionID
			}
		}
		if winner == "" {
			f.t.Errorf("key %d: nobody claimed it", k)
			continue
		}
		for i := k * claimants; i < (k+1)*claimants; i++ {
			d := decisions[i]
			switch d.Outcome {
			case idempotency.OutcomeClaimed:
			case idempotency.OutcomeInProgress, idempotency.OutcomeReplay:
				if d.ExecutionID != winner {
					f.t.Errorf("key %d: %v names execution %q, want the winner %q", k, d.Outcome, d.ExecutionID, winner)
				}
			default:
				f.t.Errorf("key %d: outcome %v, want claimed, in_progress or replay", k, d.Outcome)
			}
		}
	}
}

func testConcurrentStepClaims(f *fixture) {
	const claimants = 10
	step := f.step("step-race", 1)
	var reqs []idempotency.ClaimRequest
	for i := range claimants {
		reqs = append(reqs, f.request(f.scope("tool", fmt.Sprintf("candidate-%d", i)), fingerprintA, step))
	}
	decisions := f.race(reqs, nil)
	winner := f.onlyWinner(reqs, decisions, "the step")
	for _, d := range decisions {
		if d.Outcome == idempotency.OutcomeClaimed {
			continue
		}
		if d.Outcome != idempotency.OutcomeStepConflict || d.Conflict == nil || d.Conflict.ExecutionID != winner {
			f.t.Errorf("loser decision = %v %+v, want step_conflict naming %q", d.Outcome, d.Conflict, winner)
		}
	}
}

func testConcurrentTakeover(f *fixture) {
	const claimants = 10
	req := f.request(f.scope("tool", "takeover-race"), fingerprintA, f.step("takeover-race", 1))
	req.LockTTL = shortLease
	dead := f.claimed(req)
	time.Sleep(expireWait)

	var reqs []idempotency.ClaimRequest
	for range claimants {
		r := f.fresh(req)
		r.LockTTL = longLease
		reqs = append(reqs, r)
	}
	decisions := f.race(reqs, nil)
	var winner *idempotency.Decision
	for i, d := range decisions {
		switch d.Outcome {
		case idempotency.OutcomeClaimed:
			if winner != nil {
				f.t.Fatalf("expired lease taken over twice: by %q and %q", winner.ExecutionID, d.ExecutionID)
			}
			if !d.TakenOver {
				f.t.Errorf("takeover by %q: TakenOver = false", reqs[i].ExecutionID)
			}
			winner = &decisions[i]
		case idempotency.OutcomeInProgress:
		default:
			f.t.Errorf("outcome %v, want claimed or in_progress", d.Outcome)
		}
	}
	if winner == nil {
		f.t.Fatalf("nobody took the expired lease over")
	}
	for _, d := range decisions {
		if d.Outcome == idempotency.OutcomeInProgress && d.ExecutionID != winner.ExecutionID {
			f.t.Errorf("in_progress names %q, want the new owner %q", d.ExecutionID, winner.ExecutionID)
		}
	}
	if winner.Lease.FencingToken <= dead.FencingToken {
		f.t.Errorf("takeover fencing token %d, want > %d", winner.Lease.FencingToken, dead.FencingToken)
	}
}
