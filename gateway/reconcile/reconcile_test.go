package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/reconcile"
	"github.com/toolgateway/toolgateway/tools"
)

const (
	testTool  = "refund"
	every     = 40 * time.Millisecond
	waitLimit = 10 * time.Second
)

func openStore(t *testing.T) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "records.db"), boltstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// owner is the tool's owner as a test endpoint: it counts questions and
// answers each with answer(question, n), n counting from 1.
type owner struct {
	asked   atomic.Int64
	mu      sync.Mutex
	last    reconcile.Question
	answer  func(q reconcile.Question, n int64) (status int, body string)
	release chan struct{} // when set, a question waits for it (a hanging owner)
}

func (o *owner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var q reconcile.Question
	if err := json.Unmarshal(raw, &q); err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad question", http.StatusBadRequest)
		return
	}
	n := o.asked.Add(1)
	o.mu.Lock()
	o.last = q
	o.mu.Unlock()
	if o.release != nil {
		select {
		case <-o.release:
		case <-r.Context().Done():
			return
		}
	}
	status, body := o.answer(q, n)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func answering(body string) *owner {
	return &owner{answer: func(reconcile.Question, int64) (int, string) { return http.StatusOK, body }}
}

// testStore is a store the worker runs on.
type testStore interface {
	idempotency.Store
	reconcile.Store
}

type setup struct {
	store testStore
	reg   *prometheus.Registry
	url   string
}

func newSetup(t *testing.T, o *owner) *setup {
	t.Helper()
	return newSetupOn(t, o, openStore(t))
}

func newSetupOn(t *testing.T, o *owner, store testStore) *setup {
	t.Helper()
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	return &setup{store: store, reg: prometheus.NewRegistry(), url: srv.URL}
}

func (s *setup) target(t *testing.T, attempts int, timeout time.Duration) reconcile.Target {
	t.Helper()
	ask, err := reconcile.NewHTTPAsker(s.url, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return reconcile.Target{Tool: testTool, Ask: ask, Every: every, Attempts: attempts, Timeout: timeout,
		MaxResponseBytes: 1 << 10, ReplayTTL: time.Hour, Abandoned: true}
}

// start runs a worker named name until the test ends (or stop is called).
func (s *setup) start(t *testing.T, name string, reg prometheus.Registerer, targets ...reconcile.Target) (stop func()) {
	t.Helper()
	w, err := reconcile.New(reconcile.Options{Store: s.store, Targets: targets, Owner: name, Registerer: reg})
	if err != nil {
		t.Fatalf("reconcile.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

var keys atomic.Int64

// unknownRecord writes an UNKNOWN record of testTool with arguments.
func unknownRecord(t *testing.T, s idempotency.Store) (idempotency.ClaimRequest, idempotency.Lease) {
	t.Helper()
	req := claimRequest(fmt.Sprintf("key-%d", keys.Add(1)))
	d, err := s.Claim(context.Background(), req)
	if err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim: %v %v", d.Outcome, err)
	}
	if err := s.MarkUnknown(context.Background(), d.Lease, time.Hour); err != nil {
		t.Fatalf("mark unknown: %v", err)
	}
	return req, d.Lease
}

func claimRequest(key string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "acme", Tool: testTool, Key: key},
		Fingerprint: strings.Repeat("a", 64), ExecutionID: "exec-" + key, Owner: "owner-" + key,
		LockTTL: time.Minute, ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown,
		CanonicalArguments: []byte(`{"amount":5,"txn_id":"t1"}`),
	}
}

// eventually polls cond until it holds or waitLimit passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, s idempotency.Store, scope idempotency.Scope) (idempotency.Record, bool) {
	t.Helper()
	rec, err := s.Get(context.Background(), scope)
	if errors.Is(err, idempotency.ErrNotFound) {
		return idempotency.Record{}, false
	}
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	return rec, true
}

func attemptsOf(t *testing.T, s idempotency.Store, scope idempotency.Scope) int {
	t.Helper()
	rec, ok := get(t, s, scope)
	if !ok || rec.Reconciliation == nil {
		return 0
	}
	return rec.Reconciliation.Count
}

func counted(reg prometheus.Gatherer, outcome string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "gateway_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestCommittedCompletesTheRecord(t *testing.T) {
	o := answering(`{"outcome":"committed","status":201,"body":{"refund":"r_1"}}`)
	s := newSetup(t, o)
	req, lease := unknownRecord(t, s.store)
	s.start(t, "replica-a", s.reg, s.target(t, 5, time.Second))
	eventually(t, "the record completed", func() bool {
		rec, ok := get(t, s.store, req.Scope)
		return ok && rec.State == idempotency.StateCompleted
	})
	rec, _ := get(t, s.store, req.Scope)
	if rec.ResolvedBy != idempotency.ResolvedByReconcile || rec.Response.Status != 201 || string(rec.Response.Body) != `{"refund":"r_1"}` {
		t.Fatalf("completed record = %+v (response %+v)", rec, rec.Response)
	}
	if rec.Reconciliation == nil || rec.Reconciliation.Count != 1 || rec.Reconciliation.Attempts[0].Outcome != reconcile.OutcomeCommitted {
		t.Fatalf("reconciliation = %+v, want one committed attempt", rec.Reconciliation)
	}
	// The question carried the contract's fields.
	o.mu.Lock()
	q := o.last
	o.mu.Unlock()
	if q.Tool != testTool || q.UpstreamKey != tools.ScopedKey("acme", testTool, req.Scope.Key) || q.FencingToken != lease.FencingToken ||
		q.ExecutionID != req.ExecutionID || string(q.Arguments) != `{"amount":5,"txn_id":"t1"}` {
		t.Fatalf("question = %+v", q)
	}
	// The retry replays the confirmed outcome under the same execution id.
	retry := claimRequest(req.Scope.Key)
	retry.Owner, retry.ExecutionID = "other", "exec-other"
	d, err := s.store.Claim(context.Background(), retry)
	if err != nil || d.Outcome != idempotency.OutcomeReplay || d.ExecutionID != req.ExecutionID || string(d.Response.Body) != `{"refund":"r_1"}` {
		t.Fatalf("retry = %+v, %v; want the reconciled replay", d, err)
	}
	if got := counted(s.reg, reconcile.OutcomeCommitted); got != 1 {
		t.Fatalf("gateway_reconcile_total{outcome=committed} = %v, want 1", got)
	}
	if n := o.asked.Load(); n != 1 {
		t.Fatalf("owner asked %d times, want 1", n)
	}
}

func TestNotCommittedLetsTheNextCallRun(t *testing.T) {
	o := answering(`{"outcome":"not_committed"}`)
	s := newSetup(t, o)
	req, lease := unknownRecord(t, s.store)
	s.start(t, "replica-a", s.reg, s.target(t, 5, time.Second))
	eventually(t, "the record removed", func() bool { _, ok := get(t, s.store, req.Scope); return !ok })
	d, err := s.store.Claim(context.Background(), claimRequest(req.Scope.Key))
	if err != nil || d.Outcome != idempotency.OutcomeClaimed || d.Lease.FencingToken <= lease.FencingToken {
		t.Fatalf("next call = %+v, %v; want a new claim with a larger fencing token", d, err)
	}
	if got := counted(s.reg, reconcile.OutcomeNotCommitted); got != 1 {
		t.Fatalf("not_committed counted %v, want 1", got)
	}
}

// Every answer that is not committed or not_committed leaves the record
// UNKNOWN, is kept and counted, and is asked again up to attempts times.
func TestUncertainAnswersUseUpTheAttempts(t *testing.T) {
	const attempts = 3
	for _, tc := range []struct {
		name, outcome string
		status        int
		body          string
	}{
		{"unknown", reconcile.OutcomeUnknown, 200, `{"outcome":"unknown"}`},
		{"not JSON", reconcile.OutcomeInvalid, 200, `committed!`},
		{"unknown outcome", reconcile.OutcomeInvalid, 200, `{"outcome":"maybe"}`},
		{"body over max_response_bytes", reconcile.OutcomeInvalid, 200, `{"outcome":"committed","status":200,"body":"` + strings.Repeat("x", 2<<10) + `"}`},
		{"committed without a status", reconcile.OutcomeInvalid, 200, `{"outcome":"committed","body":{}}`},
		{"server error", reconcile.OutcomeError, 500, `{"outcome":"committed","status":200,"body":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &owner{answer: func(reconcile.Question, int64) (int, string) { return tc.status, tc.body }}
			s := newSetup(t, o)
			req, _ := unknownRecord(t, s.store)
			s.start(t, "replica-a", s.reg, s.target(t, attempts, time.Second))
			eventually(t, "the attempts used up", func() bool { return attemptsOf(t, s.store, req.Scope) == attempts })
			eventually(t, "the gave-up gauge", func() bool {
				return gaugeValue(s.reg, "gateway_reconcile_gave_up") == 1
			})
			time.Sleep(10 * every) // no question after the last attempt
			rec, _ := get(t, s.store, req.Scope)
			if rec.State != idempotency.StateUnknown || o.asked.Load() != attempts {
				t.Fatalf("state %s after %d questions; want UNKNOWN after %d", rec.State, o.asked.Load(), attempts)
			}
			for _, a := range rec.Reconciliation.Attempts {
				if a.Outcome != tc.outcome {
					t.Fatalf("attempt %+v, want outcome %s", a, tc.outcome)
				}
			}
			if got := counted(s.reg, tc.outcome); got != attempts {
				t.Fatalf("%s counted %v, want %d", tc.outcome, got, attempts)
			}
		})
	}
}

// gaugeValue reads the single series of the gauge named name.
func gaugeValue(reg prometheus.Gatherer, name string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

func TestHangingOwnerIsBoundedByTheTimeout(t *testing.T) {
	o := answering(`{"outcome":"committed","status":200,"body":{}}`)
	o.release = make(chan struct{}) // never released
	s := newSetup(t, o)
	req, _ := unknownRecord(t, s.store)
	s.start(t, "replica-a", s.reg, s.target(t, 2, 100*time.Millisecond))
	eventually(t, "two timed-out attempts", func() bool { return attemptsOf(t, s.store, req.Scope) == 2 })
	rec, _ := get(t, s.store, req.Scope)
	if rec.State != idempotency.StateUnknown || !strings.Contains(rec.Reconciliation.Attempts[0].Detail, "deadline exceeded") {
		t.Fatalf("record %s, attempts %+v; want UNKNOWN after timeouts", rec.State, rec.Reconciliation.Attempts)
	}
	if got := counted(s.reg, reconcile.OutcomeError); got != 2 {
		t.Fatalf("error counted %v, want 2", got)
	}
}

// An operator resolves the record while the owner is being asked: the
// owner's not_committed is ignored, the operator's outcome stays.
func TestNotCommittedAfterAnOperatorResolvedIsIgnored(t *testing.T) {
	o := answering(`{"outcome":"not_committed"}`)
	o.release = make(chan struct{})
	s := newSetup(t, o)
	req, _ := unknownRecord(t, s.store)
	s.start(t, "replica-a", s.reg, s.target(t, 5, 5*time.Second))
	eventually(t, "the question", func() bool { return o.asked.Load() == 1 })
	operator := idempotency.StoredResponse{Status: 200, ContentType: "application/json", Body: []byte(`{"by":"operator"}`)}
	if _, err := s.store.Resolve(context.Background(), req.Scope, operator, time.Hour); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	close(o.release)
	eventually(t, "the answer counted", func() bool { return counted(s.reg, reconcile.OutcomeNotCommitted) == 1 })
	rec, ok := get(t, s.store, req.Scope)
	if !ok || rec.State != idempotency.StateCompleted || string(rec.Response.Body) != `{"by":"operator"}` || rec.ResolvedBy != "" {
		t.Fatalf("record after the ignored answer = %+v", rec)
	}
}

// An IN_PROGRESS record whose gateway died (lease expired, nobody took it
// over) of a lease_expiry: unknown tool is reconciled too.
func TestAbandonedRecordIsReconciled(t *testing.T) {
	o := answering(`{"outcome":"committed","status":200,"body":{"ok":true}}`)
	s := newSetup(t, o)
	req := claimRequest("abandoned")
	req.LockTTL = 50 * time.Millisecond
	if d, err := s.store.Claim(context.Background(), req); err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim: %+v %v", d, err)
	}
	s.start(t, "replica-a", s.reg, s.target(t, 5, time.Second))
	eventually(t, "the abandoned record completed", func() bool {
		rec, ok := get(t, s.store, req.Scope)
		return ok && rec.State == idempotency.StateCompleted && rec.ResolvedBy == idempotency.ResolvedByReconcile
	})
	if n := o.asked.Load(); n != 1 {
		t.Fatalf("owner asked %d times, want 1", n)
	}
}

// Two replicas on one store: each record is asked about by one of them
// only (attempts: 1, so a second question would show).
func TestTwoReplicasAskOnce(t *testing.T) {
	perKey := sync.Map{}
	o := &owner{answer: func(q reconcile.Question, _ int64) (int, string) {
		n, _ := perKey.LoadOrStore(q.UpstreamKey, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		time.Sleep(20 * time.Millisecond) // overlap the replicas' scans
		return http.StatusOK, `{"outcome":"unknown"}`
	}}
	s := newSetup(t, o)
	var scopes []idempotency.Scope
	for range 20 {
		req, _ := unknownRecord(t, s.store)
		scopes = append(scopes, req.Scope)
	}
	target := s.target(t, 1, time.Second)
	s.start(t, "replica-a", s.reg, target)
	s.start(t, "replica-b", prometheus.NewRegistry(), target)
	eventually(t, "every record asked", func() bool {
		for _, sc := range scopes {
			if attemptsOf(t, s.store, sc) != 1 {
				return false
			}
		}
		return true
	})
	time.Sleep(10 * every)
	perKey.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != 1 {
			t.Errorf("a record was asked about %d times, want 1", n)
		}
		return true
	})
	if n := o.asked.Load(); n != int64(len(scopes)) {
		t.Fatalf("%d questions for %d records", n, len(scopes))
	}
}

// A replica stopped in the middle of a question (its process killed)
// leaves the record UNKNOWN with its reconcile lease; once the lease ran
// out, another replica asks and completes it.
func TestAnotherReplicaTakesOverAfterTheLease(t *testing.T) {
	o := answering(`{"outcome":"committed","status":200,"body":{"ok":1}}`)
	o.release = make(chan struct{})
	s := newSetup(t, o)
	req, _ := unknownRecord(t, s.store)
	target := s.target(t, 5, 200*time.Millisecond) // lease: timeout + 5s margin
	stopA := s.start(t, "replica-a", s.reg, target)
	eventually(t, "replica a asking", func() bool { return o.asked.Load() == 1 })
	stopA()
	close(o.release)
	if rec, _ := get(t, s.store, req.Scope); rec.State != idempotency.StateUnknown || rec.Reconciliation.Owner != "replica-a" || rec.Reconciliation.Count != 0 {
		t.Fatalf("after replica a stopped: %+v", rec.Reconciliation)
	}
	s.start(t, "replica-b", prometheus.NewRegistry(), target)
	eventually(t, "replica b completed it", func() bool {
		rec, ok := get(t, s.store, req.Scope)
		return ok && rec.State == idempotency.StateCompleted
	})
}

// On Redis the worker sees the attempts in its listing too: a record whose
// attempts are used up is counted as given up (so the alert pages) and
// not asked again.
func TestGaveUpOnRedis(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Skipf("no Redis at 127.0.0.1:6379: %v", err)
	}
	prefix := fmt.Sprintf("reconcile-test-%d-%d:", time.Now().UnixNano(), keys.Add(1))
	t.Cleanup(func() {
		ctx := context.Background()
		iter := client.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		_ = client.Close()
	})
	o := answering(`{"outcome":"unknown"}`)
	s := newSetupOn(t, o, redisstore.New(client, redisstore.Options{Prefix: prefix}))
	req, _ := unknownRecord(t, s.store)
	s.start(t, "replica-a", s.reg, s.target(t, 2, time.Second))
	eventually(t, "the attempts used up", func() bool { return attemptsOf(t, s.store, req.Scope) == 2 })
	eventually(t, "the gave-up gauge", func() bool { return gaugeValue(s.reg, "gateway_reconcile_gave_up") == 1 })
	time.Sleep(10 * every)
	if n := o.asked.Load(); n != 2 {
		t.Fatalf("owner asked %d times, want 2", n)
	}
	// Redis lists with SCAN, bounded work per page: a page may come back
	// empty with a cursor (the shared Redis holds other tests' keys), so
	// read every page.
	var records []idempotency.Record
	filter := idempotency.ListFilter{State: idempotency.StateUnknown, Tool: testTool, Limit: 10}
	for {
		page, err := s.store.List(context.Background(), filter)
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
		records = append(records, page.Records...)
		if page.Cursor == "" {
			break
		}
		filter.Cursor = page.Cursor
	}
	if len(records) != 1 || records[0].Reconciliation == nil || records[0].Reconciliation.Count != 2 {
		t.Fatalf("listing: %+v", records)
	}
}
