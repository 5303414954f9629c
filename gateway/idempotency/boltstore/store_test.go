package boltstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

var ctx = context.Background()

func TestClaimThenInProgressThenKeyReused(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	req := claimRequest("k1", "fp1", &idempotency.Step{SessionID: "sess", Index: 1})

	first := mustClaim(t, s, req, idempotency.OutcomeClaimed)
	if first.TakenOver || first.Lease.FencingToken <= 0 || first.Lease.Owner != req.Owner ||
		first.ExecutionID != req.ExecutionID || first.Lease.ExecutionID != req.ExecutionID {
		t.Fatalf("first claim decision %+v", first)
	}

	clock.Advance(10 * time.Second)
	again := claimRequest("k1", "fp1", req.Step)
	d := mustClaim(t, s, again, idempotency.OutcomeInProgress)
	if d.RetryAfter != 20*time.Second || d.ExecutionID != req.ExecutionID {
		t.Fatalf("in-progress decision %+v, want RetryAfter 20s and the first execution id", d)
	}

	mustClaim(t, s, claimRequest("k1", "other-fp", req.Step), idempotency.OutcomeKeyReused)

	rec, err := s.Get(ctx, req.Scope)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if rec.State != idempotency.StateInProgress || rec.Fingerprint != "fp1" || rec.FencingToken != first.Lease.FencingToken ||
		!rec.LeaseExpiresAt.Equal(clock.Now().Add(20*time.Second)) ||
		!rec.ExpiresAt.Equal(rec.LeaseExpiresAt.Add(24*time.Hour)) || rec.Response != nil {
		t.Fatalf("record %+v", rec)
	}
}

func TestCompleteReplaysByteForByte(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	bodies := map[string][]byte{
		"json":    []byte(`{"id": 7,  "name":"x"}` + "\n"),
		"binary":  {0x00, 0xff, 0xfe, '"', '\\', 0x80},
		"empty":   {},
		"unicode": []byte("caf\u00e9 \u2603"),
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			req := claimRequest("replay-"+name, "fp", nil)
			d := mustClaim(t, s, req, idempotency.OutcomeClaimed)
			resp := idempotency.StoredResponse{Status: 201, ContentType: "application/vnd.x+json; charset=utf-8", Body: body}
			if err := s.Complete(ctx, d.Lease, resp, time.Hour); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			r := mustClaim(t, s, claimRequest(req.Scope.Key, "fp", nil), idempotency.OutcomeReplay)
			if r.ExecutionID != req.ExecutionID || r.Response == nil || r.Response.Status != 201 ||
				r.Response.ContentType != resp.ContentType || !bytes.Equal(r.Response.Body, body) {
				t.Fatalf("replay %+v, want %+v", r, resp)
			}
			mustClaim(t, s, claimRequest(req.Scope.Key, "other", nil), idempotency.OutcomeKeyReused)

			rec, err := s.Get(ctx, req.Scope)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if rec.State != idempotency.StateCompleted || !rec.ExpiresAt.Equal(clock.Now().Add(time.Hour)) ||
				rec.Response == nil || !bytes.Equal(rec.Response.Body, body) || !rec.LeaseExpiresAt.IsZero() {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

func TestStepGuard(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	step := &idempotency.Step{SessionID: "sess-1", Index: 4}

	a := claimRequest("key-a", "fp-a", step)
	da := mustClaim(t, s, a, idempotency.OutcomeClaimed)

	b := claimRequest("key-b", "fp-b", step)
	b.Scope.Tool = "other-tool"
	conflict := mustClaim(t, s, b, idempotency.OutcomeStepConflict)
	if conflict.Conflict == nil || conflict.Conflict.Tool != "provision" || conflict.Conflict.ExecutionID != a.ExecutionID {
		t.Fatalf("conflict %+v, want tool provision and execution %s", conflict.Conflict, a.ExecutionID)
	}

	// The step is scoped by tenant: another tenant's agent may reuse the id.
	otherTenant := claimRequest("key-b", "fp-b", step)
	otherTenant.Scope.Tenant = "globex"
	mustClaim(t, s, otherTenant, idempotency.OutcomeClaimed)

	// Another step of the same session is free.
	mustClaim(t, s, claimRequest("key-c", "fp-c", &idempotency.Step{SessionID: "sess-1", Index: 5}), idempotency.OutcomeClaimed)

	// Still held after completion.
	if err := s.Complete(ctx, da.Lease, idempotency.StoredResponse{Status: 200, Body: []byte("{}")}, time.Hour); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	mustClaim(t, s, claimRequest("key-b", "fp-b", step), idempotency.OutcomeStepConflict)

	// Delete frees the step.
	if err := s.Delete(ctx, a.Scope); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	db := mustClaim(t, s, claimRequest("key-b", "fp-b", step), idempotency.OutcomeClaimed)

	// Release frees it too (a 5xx deletes the record).
	if err := s.Release(ctx, db.Lease); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustClaim(t, s, claimRequest("key-d", "fp-d", step), idempotency.OutcomeClaimed)

	// With the guard off the step does not block.
	off := claimRequest("key-e", "fp-e", step)
	off.StepGuard = false
	mustClaim(t, s, off, idempotency.OutcomeClaimed)
}

func TestStepFreedWhenHolderExpires(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	step := &idempotency.Step{SessionID: "s", Index: 0}
	d := mustClaim(t, s, claimRequest("key-a", "fp", step), idempotency.OutcomeClaimed)
	if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200}, time.Minute); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	mustClaim(t, s, claimRequest("key-b", "fp", step), idempotency.OutcomeStepConflict)
	clock.Advance(time.Minute)
	mustClaim(t, s, claimRequest("key-b", "fp", step), idempotency.OutcomeClaimed)
}

func TestTakeoverAfterLeaseExpiry(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	req := claimRequest("k", "fp", &idempotency.Step{SessionID: "s", Index: 1})
	first := mustClaim(t, s, req, idempotency.OutcomeClaimed)

	clock.Advance(30 * time.Second) // the lease ends exactly now
	second := claimRequest("k", "fp", req.Step)
	took := mustClaim(t, s, second, idempotency.OutcomeClaimed)
	if !took.TakenOver || took.Lease.FencingToken <= first.Lease.FencingToken ||
		took.ExecutionID != second.ExecutionID || took.Lease.Owner != second.Owner {
		t.Fatalf("takeover %+v after %+v", took, first)
	}

	// The old owner is fenced off and changes nothing.
	if err := s.Renew(ctx, first.Lease, time.Minute); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Renew by old owner = %v, want ErrLeaseLost", err)
	}
	if err := s.Complete(ctx, first.Lease, idempotency.StoredResponse{Status: 200}, time.Hour); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Complete by old owner = %v, want ErrLeaseLost", err)
	}
	if err := s.Release(ctx, first.Lease); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Release by old owner = %v, want ErrLeaseLost", err)
	}
	rec, err := s.Get(ctx, req.Scope)
	if err != nil || rec.State != idempotency.StateInProgress || rec.ExecutionID != second.ExecutionID {
		t.Fatalf("record after fenced writes: %+v, %v", rec, err)
	}

	// The new owner still holds the step against other keys.
	mustClaim(t, s, claimRequest("other", "fp", req.Step), idempotency.OutcomeStepConflict)
	if err := s.Complete(ctx, took.Lease, idempotency.StoredResponse{Status: 200, Body: []byte("ok")}, time.Hour); err != nil {
		t.Fatalf("Complete by new owner: %v", err)
	}
	r := mustClaim(t, s, claimRequest("k", "fp", nil), idempotency.OutcomeReplay)
	if r.ExecutionID != second.ExecutionID {
		t.Fatalf("replay execution id %s, want %s", r.ExecutionID, second.ExecutionID)
	}
}

func TestLeaseExpiryUnknown(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	req := claimRequest("pay", "fp", nil)
	req.LeaseExpiry = idempotency.LeaseExpiryUnknown
	req.ReplayTTL = time.Hour
	first := mustClaim(t, s, req, idempotency.OutcomeClaimed)

	clock.Advance(31 * time.Second)
	again := claimRequest("pay", "fp", nil)
	again.LeaseExpiry = idempotency.LeaseExpiryUnknown
	again.ReplayTTL = time.Hour
	d := mustClaim(t, s, again, idempotency.OutcomeUnknown)
	if d.ExecutionID != req.ExecutionID {
		t.Fatalf("unknown execution id %s, want %s", d.ExecutionID, req.ExecutionID)
	}
	rec, err := s.Get(ctx, req.Scope)
	if err != nil || rec.State != idempotency.StateUnknown || !rec.ExpiresAt.Equal(clock.Now().Add(time.Hour)) {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if err := s.Complete(ctx, first.Lease, idempotency.StoredResponse{Status: 200}, time.Hour); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Complete of an UNKNOWN record = %v, want ErrLeaseLost", err)
	}
	// UNKNOWN stays, whatever the caller's policy, and other arguments are still refused.
	mustClaim(t, s, claimRequest("pay", "fp", nil), idempotency.OutcomeUnknown)
	mustClaim(t, s, claimRequest("pay", "fp2", nil), idempotency.OutcomeKeyReused)

	clock.Advance(time.Hour)
	if _, err := s.Get(ctx, req.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Get after ReplayTTL = %v, want ErrNotFound", err)
	}
	d = mustClaim(t, s, claimRequest("pay", "fp", nil), idempotency.OutcomeClaimed)
	if d.TakenOver || d.Lease.FencingToken <= first.Lease.FencingToken {
		t.Fatalf("claim after expiry %+v", d)
	}
}

func TestRenewKeepsLeaseAlive(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	req := claimRequest("k", "fp", nil)
	d := mustClaim(t, s, req, idempotency.OutcomeClaimed)
	clock.Advance(25 * time.Second)
	if err := s.Renew(ctx, d.Lease, 30*time.Second); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	clock.Advance(25 * time.Second)
	ip := mustClaim(t, s, claimRequest("k", "fp", nil), idempotency.OutcomeInProgress)
	if ip.RetryAfter != 5*time.Second {
		t.Fatalf("RetryAfter %v, want 5s", ip.RetryAfter)
	}
	rec, err := s.Get(ctx, req.Scope)
	if err != nil || !rec.ExpiresAt.Equal(rec.LeaseExpiresAt.Add(req.ReplayTTL)) {
		t.Fatalf("record %+v, %v: want expiry lease + ReplayTTL", rec, err)
	}
}

func TestExpiredInProgressRecordIsAbsent(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	req := claimRequest("k", "fp", &idempotency.Step{SessionID: "s", Index: 1})
	req.ReplayTTL = time.Minute
	d := mustClaim(t, s, req, idempotency.OutcomeClaimed)

	clock.Advance(30*time.Second + time.Minute)
	if _, err := s.Get(ctx, req.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, req.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Delete = %v, want ErrNotFound", err)
	}
	if err := s.Renew(ctx, d.Lease, time.Minute); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Renew = %v, want ErrLeaseLost", err)
	}
	fresh := mustClaim(t, s, claimRequest("other", "fp", req.Step), idempotency.OutcomeClaimed)
	if fresh.TakenOver {
		t.Fatal("a claim on an expired record is not a takeover")
	}
}

func TestFencingTokenGrowsAcrossDeletion(t *testing.T) {
	clock := newFakeClock() // never advanced: the persisted counter, not the clock, must make tokens grow
	s := openTestStore(t, clock)
	req := claimRequest("k", "fp", nil)
	var last int64
	for i := range 5 {
		d := mustClaim(t, s, claimRequest("k", "fp", nil), idempotency.OutcomeClaimed)
		if d.Lease.FencingToken <= last {
			t.Fatalf("round %d: token %d not larger than %d", i, d.Lease.FencingToken, last)
		}
		last = d.Lease.FencingToken
		if i%2 == 0 {
			err := s.Delete(ctx, req.Scope)
			if err != nil {
				t.Fatalf("Delete: %v", err)
			}
		} else if err := s.Release(ctx, d.Lease); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	if err := s.Delete(ctx, req.Scope); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Delete of a deleted record = %v, want ErrNotFound", err)
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	s := openTestStore(t, newFakeClock())
	a := claimRequest("shared", "fp-a", nil)
	da := mustClaim(t, s, a, idempotency.OutcomeClaimed)
	if err := s.Complete(ctx, da.Lease, idempotency.StoredResponse{Status: 200, Body: []byte("a")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	b := claimRequest("shared", "fp-b", nil)
	b.Scope.Tenant = "globex"
	mustClaim(t, s, b, idempotency.OutcomeClaimed)
	if _, err := s.Get(ctx, idempotency.Scope{Tenant: "initech", Tool: "provision", Key: "shared"}); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Get for a third tenant = %v, want ErrNotFound", err)
	}
}

func TestScopeKeysAreUnambiguous(t *testing.T) {
	pairs := [][2]idempotency.Scope{
		{{Tenant: "ab", Tool: "c", Key: "k"}, {Tenant: "a", Tool: "bc", Key: "k"}},
		{{Tenant: "a", Tool: "b", Key: "c\x00d"}, {Tenant: "a", Tool: "b\x00c", Key: "d"}},
	}
	for _, p := range pairs {
		if bytes.Equal(scopeKey(p[0]), scopeKey(p[1])) {
			t.Fatalf("%+v and %+v encode to the same key", p[0], p[1])
		}
	}
}

func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	s := openTestStore(t, newFakeClock())
	const callers = 16
	outcomes := make(chan idempotency.Outcome, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			d, err := s.Claim(ctx, claimRequest("race", "fp", &idempotency.Step{SessionID: "s", Index: 9}))
			if err != nil {
				t.Errorf("Claim: %v", err)
				return
			}
			outcomes <- d.Outcome
		})
	}
	wg.Wait()
	close(outcomes)
	counts := map[idempotency.Outcome]int{}
	for o := range outcomes {
		counts[o]++
	}
	if counts[idempotency.OutcomeClaimed] != 1 || counts[idempotency.OutcomeInProgress] != callers-1 {
		t.Fatalf("outcomes %v, want 1 claimed and %d in progress", counts, callers-1)
	}
}

func TestSweepRemovesExpiredRecordsAndSteps(t *testing.T) {
	clock := newFakeClock()
	s := openTestStore(t, clock)
	step := &idempotency.Step{SessionID: "s", Index: 1}
	short := mustClaim(t, s, claimRequest("short", "fp", step), idempotency.OutcomeClaimed)
	if err := s.Complete(ctx, short.Lease, idempotency.StoredResponse{Status: 200}, time.Minute); err != nil {
		t.Fatal(err)
	}
	long := mustClaim(t, s, claimRequest("long", "fp", &idempotency.Step{SessionID: "s", Index: 2}), idempotency.OutcomeClaimed)
	if err := s.Complete(ctx, long.Lease, idempotency.StoredResponse{Status: 200}, time.Hour); err != nil {
		t.Fatal(err)
	}

	clock.Advance(2 * time.Minute)
	removed, err := s.Sweep(ctx)
	if err != nil || removed != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 record removed", removed, err)
	}
	records, steps, counters := s.bucketSizes(t)
	// The clock is past both tokens (issued two minutes ago), so both
	// counters go: the live record carries its own token.
	if records != 1 || steps != 1 || counters != 0 {
		t.Fatalf("after sweep: %d records, %d steps, %d counters; want 1, 1, 0", records, steps, counters)
	}
	if _, err := s.Get(ctx, long.Lease.Scope); err != nil {
		t.Fatalf("live record swept: %v", err)
	}
	// Tokens keep growing without the counter.
	d := mustClaim(t, s, claimRequest("short", "fp", nil), idempotency.OutcomeClaimed)
	if d.Lease.FencingToken <= short.Lease.FencingToken {
		t.Fatalf("token %d after sweep, not larger than %d", d.Lease.FencingToken, short.Lease.FencingToken)
	}
}

func TestBackgroundSweeperRuns(t *testing.T) {
	clock := newFakeClock()
	s, err := Open(filepath.Join(t.TempDir(), "gw.db"), Options{SweepInterval: 5 * time.Millisecond, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := mustClaim(t, s, claimRequest("k", "fp", &idempotency.Step{SessionID: "s", Index: 1}), idempotency.OutcomeClaimed)
	if err := s.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200}, time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	deadline := time.Now().Add(5 * time.Second)
	for {
		records, steps, _ := s.bucketSizes(t)
		if records == 0 && steps == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sweeper left %d records and %d steps", records, steps)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOpenCreatesDirectoriesAndCloseIsFinal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "gw.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("file not created: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping after Close succeeded")
	}
	if _, err := s.Claim(ctx, claimRequest("k", "fp", nil)); err == nil {
		t.Fatal("Claim after Close succeeded")
	}
}

func TestClaimRejectsInvalidRequests(t *testing.T) {
	s := openTestStore(t, newFakeClock())
	bad := claimRequest("k", "fp", nil)
	bad.LockTTL = 0
	if _, err := s.Claim(ctx, bad); err == nil {
		t.Fatal("Claim with zero LockTTL succeeded")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Claim(cancelled, claimRequest("k", "fp", nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a cancelled context = %v", err)
	}
}

// A second process on the same file is told another process holds it, not
// a bare "timeout" (a second Open in this process takes the same lock).
func TestSecondOpenSaysAnotherProcessHoldsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.db")
	first, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := Open(path, Options{})
	if err == nil {
		second.Close()
		t.Fatal("a second Open of a held file succeeded")
	}
	if !strings.Contains(err.Error(), "another process") || !strings.Contains(err.Error(), path) {
		t.Fatalf("error = %v; want it to say another process holds %s", err, path)
	}
}

// TestConformance holds the embedded store to the same suite as Redis,
// with the background sweeper running often, so sweeping races with the
// suite's claims. The store's clock is the process's, so the cases run on
// synctest's fake clock: the leases and TTLs they wait out pass exactly,
// however loaded the machine (on the real clock EffectOutlivesLongRun and
// UnknownExpiresAfterReplayTTL flaked when a wait overshot).
func TestConformance(t *testing.T) {
	storetest.RunOnFakeClock(t, func(t *testing.T) idempotency.Store {
		s, err := Open(filepath.Join(t.TempDir(), "gw.db"), Options{SweepInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

// durabilityChildEnv, when set, makes TestCompletedRecordSurvivesKill act
// as the child process: it names the store file to write.
const durabilityChildEnv = "BOLTSTORE_DURABILITY_CHILD_DB"

var durabilityScope = idempotency.Scope{Tenant: "acme", Tool: "provision", Key: "durable-key"}

// durabilityBody has bytes JSON would mangle if stored as text.
var durabilityBody = []byte("{\"id\":\"vm-1\"}\x00\xff\n")

// TestCompletedRecordSurvivesKill runs itself as a child process that
// completes a record and is then killed with SIGKILL before it can close
// the store; the record must be readable afterwards.
func TestCompletedRecordSurvivesKill(t *testing.T) {
	if path := os.Getenv(durabilityChildEnv); path != "" {
		runDurabilityChild(path)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}

	path := filepath.Join(t.TempDir(), "gw.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCompletedRecordSurvivesKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), durabilityChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	var executionID string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if id, ok := strings.CutPrefix(lines.Text(), "done "); ok {
			executionID = id
			break
		}
	}
	if executionID == "" {
		t.Fatalf("child exited without reporting done (scan error %v)", lines.Err())
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	err = cmd.Wait()
	killed = true
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child ended with %v, want killed by SIGKILL", err)
	}

	s, err := Open(path, Options{SweepInterval: -1})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	rec, err := s.Get(context.Background(), durabilityScope)
	if err != nil {
		t.Fatalf("Get after kill: %v", err)
	}
	if rec.State != idempotency.StateCompleted || rec.ExecutionID != executionID || rec.Response == nil ||
		rec.Response.Status != 201 || rec.Response.ContentType != "application/json" ||
		!bytes.Equal(rec.Response.Body, durabilityBody) {
		t.Fatalf("record after kill %+v, want COMPLETED 201 with body %q and execution %s", rec, durabilityBody, executionID)
	}
	d, err := s.Claim(context.Background(), idempotency.ClaimRequest{
		Scope: durabilityScope, Fingerprint: "fp", ExecutionID: "new", Owner: "new",
		LockTTL: time.Second, ReplayTTL: time.Hour,
	})
	if err != nil || d.Outcome != idempotency.OutcomeReplay || !bytes.Equal(d.Response.Body, durabilityBody) {
		t.Fatalf("Claim after kill = %+v, %v; want a byte-exact replay", d, err)
	}
}

// runDurabilityChild completes one record, reports it and waits to be
// killed; it never closes the store.
func runDurabilityChild(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "durability child:", err)
		os.Exit(3)
	}
	s, err := Open(path, Options{SweepInterval: -1})
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	d, err := s.Claim(ctx, idempotency.ClaimRequest{
		Scope: durabilityScope, Fingerprint: "fp", ExecutionID: "exec-durable", Owner: "child",
		LockTTL: time.Minute, ReplayTTL: time.Hour,
	})
	if err != nil {
		fail(err)
	}
	resp := idempotency.StoredResponse{Status: 201, ContentType: "application/json", Body: durabilityBody}
	if err := s.Complete(ctx, d.Lease, resp, time.Hour); err != nil {
		fail(err)
	}
	fmt.Println("done " + d.ExecutionID)
	time.Sleep(time.Minute) // the parent kills us long before this ends
	os.Exit(4)
}

func TestReceiptOutbox(t *testing.T) {
	storetest.RunOutbox(t, func(t *testing.T, outbox bool) idempotency.Store {
		s, err := Open(filepath.Join(t.TempDir(), "gw.db"), Options{SweepInterval: -1, ReceiptOutbox: outbox})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}
