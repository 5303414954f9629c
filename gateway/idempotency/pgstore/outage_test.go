package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

func claimRequest(key string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "t", Tool: "tool", Key: key},
		Fingerprint: "fp", Step: &idempotency.Step{SessionID: "s-" + key, Index: 0}, StepGuard: true, StepBoundKey: true,
		ExecutionID: "exec-" + key, Owner: "owner-" + key,
		LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryRerun,
	}
}

// openPrivate opens a store on a private server that the test may kill.
func openPrivate(t *testing.T, srv *pgtest.Server) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(t.Context(), srv.Pool(t), pgstore.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// waitUp waits until the store answers again after a restart (the pool
// drops connections the crash broke as it meets them).
func waitUp(t *testing.T, s idempotency.Store) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for s.Ping(t.Context()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("store did not answer after the restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKilledMidClaim kills a private PostgreSQL with SIGKILL while a claim
// is inside the claim function (about to take over an expired lease,
// blocked on the row lock another connection holds), then restarts it. The claim in flight fails with a store error
// and leaves nothing behind; while the server is down every operation
// fails with a store error (never a verdict such as ErrLeaseLost, which
// the gateway would act on); after the restart the store works again
// without being reopened, and everything committed before the crash is
// still there: the completed record replays and the open lease completes.
func TestKilledMidClaim(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	s := openPrivate(t, srv)
	ctx := t.Context()

	done, err := s.Claim(ctx, claimRequest("done"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, done.Lease, idempotency.StoredResponse{Status: 201, ContentType: "application/json", Body: []byte(`{"id":1}`)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// A lease that runs out: a competing claim must then take the row
	// over, which it decides on the locked row.
	openReq := claimRequest("open")
	openReq.LockTTL = 100 * time.Millisecond
	open, err := s.Claim(ctx, openReq)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)

	// Hold the "open" row so that the competing claim blocks inside the
	// claim function.
	locker, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM toolgateway.records WHERE idempotency_key = 'open' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	midClaim := make(chan error, 1)
	competitor := claimRequest("open")
	competitor.Owner, competitor.ExecutionID = "owner-competitor", "exec-competitor"
	go func() { _, err := s.Claim(ctx, competitor); midClaim <- err }()
	waitForLockWait(t, srv.URL)

	srv.Kill()
	// The lock holder must stay reachable until the kill: a collected
	// connection closes its socket, and its backend then rolls back and
	// lets the competitor through.
	runtime.KeepAlive(tx)
	runtime.KeepAlive(locker)
	select {
	case err := <-midClaim:
		if err == nil || isVerdict(err) {
			t.Fatalf("claim in flight when the server died = %v, want a store error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("claim in flight did not return after the server died")
	}

	for _, op := range []struct {
		name string
		err  error
	}{
		{"Claim", func() error { _, err := s.Claim(ctx, claimRequest("down")); return err }()},
		{"Renew", s.Renew(ctx, open.Lease, time.Minute)},
		{"Complete", s.Complete(ctx, open.Lease, idempotency.StoredResponse{Status: 200}, time.Hour)},
		{"Release", s.Release(ctx, open.Lease)},
		{"Get", func() error { _, err := s.Get(ctx, done.Lease.Scope); return err }()},
		{"Delete", s.Delete(ctx, done.Lease.Scope)},
		{"Ping", s.Ping(ctx)},
	} {
		if op.err == nil || isVerdict(op.err) {
			t.Errorf("%s while PostgreSQL is down = %v, want a store error", op.name, op.err)
		}
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitUp(t, s)
	replay, err := s.Claim(ctx, claimRequest("done"))
	if err != nil || replay.Outcome != idempotency.OutcomeReplay || string(replay.Response.Body) != `{"id":1}` || replay.Response.Status != 201 {
		t.Fatalf("replay of the completion committed before the crash: %+v, %v", replay, err)
	}
	rec, err := s.Get(ctx, open.Lease.Scope)
	if err != nil || rec.ExecutionID != "exec-open" || rec.FencingToken != open.Lease.FencingToken {
		t.Fatalf("the open record after the crash = %+v, %v; want it unchanged (the competing claim never committed)", rec, err)
	}
	if err := s.Complete(ctx, open.Lease, idempotency.StoredResponse{Status: 200, Body: []byte("late")}, time.Hour); err != nil {
		t.Fatalf("completing the lease held across the crash: %v", err)
	}
	after, err := s.Claim(ctx, claimRequest("after"))
	if err != nil || after.Outcome != idempotency.OutcomeClaimed || after.Lease.FencingToken <= open.Lease.FencingToken {
		t.Fatalf("claim after the restart: %+v, %v (fencing must keep growing)", after, err)
	}
}

// waitForLockWait waits until some backend of the server waits for a lock.
func waitForLockWait(t *testing.T, url string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the competing claim never blocked on the row lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isVerdict(err error) bool {
	return errors.Is(err, idempotency.ErrLeaseLost) || errors.Is(err, idempotency.ErrNotFound)
}

// countingTool counts its executions.
type countingTool struct{ runs atomic.Int64 }

func (c *countingTool) Spec() tools.Spec { return tools.Spec{Name: "provision"} }

func (c *countingTool) Call(context.Context, *tools.Request) (*tools.Response, error) {
	n := c.runs.Add(1)
	return tools.JSON(200, map[string]int64{"run": n})
}

// TestGatewayWhilePostgresDown runs the gateway on a private PostgreSQL
// and kills it: calls get 503 store_unavailable with Retry-After and the
// tool does not run; /readyz is 503; after the restart the same gateway
// serves again, and a retry of the call completed before the crash is
// replayed, not run again.
func TestGatewayWhilePostgresDown(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	store := openPrivate(t, srv)
	tool := &countingTool{}
	registry, err := tools.NewRegistryOf(tool)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.NewServer(callpath.Options{Store: store, Tools: registry})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gw)
	t.Cleanup(hs.Close)

	call := func(step uint64) *http.Response {
		t.Helper()
		args := []byte(`{"size":1}`)
		key, err := keyderive.Key("session", step, "provision", args)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/tools/v1/provision", bytes.NewReader(args))
		req.Header.Set("Content-Type", wire.MediaTypeJSON)
		req.Header.Set(wire.HeaderIdempotencyKey, key)
		req.Header.Set(wire.HeaderSessionID, "session")
		req.Header.Set(wire.HeaderStepIndex, strconv.FormatUint(step, 10))
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	readyz := func() int {
		resp, err := hs.Client().Get(hs.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	first := call(1)
	firstBody, _ := io.ReadAll(first.Body)
	if first.StatusCode != 200 {
		t.Fatalf("before the crash: %d %s", first.StatusCode, firstBody)
	}
	srv.Kill()
	for step := uint64(2); step < 5; step++ {
		resp := call(step)
		var problem struct {
			Code string `json:"code"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&problem)
		if resp.StatusCode != 503 || problem.Code != wire.CodeStoreUnavailable || resp.Header.Get(wire.HeaderRetryAfter) == "" {
			t.Fatalf("while PostgreSQL is down: %d %q Retry-After %q, want 503 %s with Retry-After",
				resp.StatusCode, problem.Code, resp.Header.Get(wire.HeaderRetryAfter), wire.CodeStoreUnavailable)
		}
	}
	if code := readyz(); code != 503 {
		t.Fatalf("/readyz while PostgreSQL is down: %d", code)
	}
	if n := tool.runs.Load(); n != 1 {
		t.Fatalf("tool ran %d times; it must not run while the store is down", n)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitUp(t, store)
	retry := call(1)
	retryBody, _ := io.ReadAll(retry.Body)
	if retry.StatusCode != 200 || retry.Header.Get(wire.HeaderReplayed) != "true" || !bytes.Equal(retryBody, firstBody) {
		t.Fatalf("retry of the call completed before the crash: %d replayed=%q %s, want the replay of %s",
			retry.StatusCode, retry.Header.Get(wire.HeaderReplayed), retryBody, firstBody)
	}
	if resp := call(2); resp.StatusCode != 200 {
		t.Fatalf("after the restart: %d", resp.StatusCode)
	}
	if code := readyz(); code != 200 {
		t.Fatalf("/readyz after the restart: %d", code)
	}
	if n := tool.runs.Load(); n != 2 {
		t.Fatalf("tool ran %d times, want 2 (step 1 once, step 2 once)", n)
	}
}

// TestStartWhileDown: a store opened while its database is down is not an
// error; its operations fail (503) until the database answers, and the
// first one after that creates the schema and works.
func TestStartWhileDown(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	srv.Kill()
	s := openPrivate(t, srv)
	ctx := t.Context()
	if _, err := s.Claim(ctx, claimRequest("early")); err == nil || isVerdict(err) {
		t.Fatalf("claim before the database is up = %v, want a store error", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping before the database is up succeeded")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitUp(t, s)
	d, err := s.Claim(ctx, claimRequest("early"))
	if err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim once the database is up: %+v, %v", d, err)
	}
}
