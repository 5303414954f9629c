package redisstore

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// commandLog is a go-redis hook that records the names of the commands sent.
type commandLog struct {
	mu    sync.Mutex
	names []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			l.add(cmd)
		}
		return next(ctx, cmds)
	}
}

func (l *commandLog) add(cmd redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, strings.ToLower(cmd.Name()))
}

func (l *commandLog) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, got := range l.names {
		if got == name {
			n++
		}
	}
	return n
}

// startPrimaryAndReplica starts a primary and one replica of it, and waits
// until the replica's link is up.
func startPrimaryAndReplica(t *testing.T) (primary, replica *redistest.Server) {
	t.Helper()
	// No diskless-sync delay: the replica links at once, not after 5 s.
	primary = redistest.Start(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica = redistest.Start(t, redistest.WithArgs("--replicaof", host, port))
	probe := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer probe.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := probe.Info(t.Context(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return primary, replica
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never linked: %q, %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitClaim(prefix string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: "acme", Tool: "charge", Key: prefix + "k1"},
		Fingerprint: "fp",
		Step:        &idempotency.Step{SessionID: "s1", Index: 0},
		StepGuard:   true,
		ExecutionID: "exec-1",
		Owner:       "owner-1",
		LockTTL:     10 * time.Second,
		ReplayTTL:   time.Hour,
		LeaseExpiry: idempotency.LeaseExpiryUnknown,
	}
}

// TestWaitReplicasPutsClaimAndCompletionOnTheReplica: with WaitReplicas 1
// the store sends WAIT with the claim and with the completion, and when
// each call returns the replica already holds its write; that is what a
// failover to the replica would keep.
func TestWaitReplicasPutsClaimAndCompletionOnTheReplica(t *testing.T) {
	primary, replica := startPrimaryAndReplica(t)
	client := redis.NewClient(&redis.Options{Addr: primary.Addr})
	t.Cleanup(func() { _ = client.Close() })
	log := &commandLog{}
	client.AddHook(log)
	onReplica := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { _ = onReplica.Close() })

	store := New(client, Options{Prefix: "w:", WaitReplicas: 1, WaitTimeout: 5 * time.Second})
	ctx := t.Context()
	req := waitClaim("")
	record := store.keys.record(req.Scope, req.Step)

	d, err := store.Claim(ctx, req)
	if err != nil || d.Outcome != idempotency.OutcomeClaimed {
		t.Fatalf("claim: %v, %v", d.Outcome, err)
	}
	// Twice when the first EVALSHA met NOSCRIPT and the pair was resent.
	afterClaim := log.count("wait")
	if afterClaim == 0 {
		t.Fatal("no WAIT sent with the claim")
	}
	if v, err := onReplica.Get(ctx, record).Result(); err != nil || v[0] != 'P' {
		t.Fatalf("replica's record right after Claim = %q, %v, want IN_PROGRESS", v, err)
	}

	resp := idempotency.StoredResponse{Status: 201, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
	if err := store.Complete(ctx, d.Lease, resp, time.Hour); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if log.count("wait") == afterClaim {
		t.Fatal("no WAIT sent with the completion")
	}
	v, err := onReplica.Get(ctx, record).Result()
	if err != nil {
		t.Fatalf("read replica: %v", err)
	}
	got, err := recordOf(req.Scope, v, time.Time{})
	if err != nil || got.State != idempotency.StateCompleted || got.Response.Status != 201 || string(got.Response.Body) != `{"ok":true}` {
		t.Fatalf("replica's record right after Complete = %+v, %v, want COMPLETED 201 {\"ok\":true}", got, err)
	}
}

// TestWaitReplicasFailsClosedWithoutReplica: when no replica acknowledges,
// the claim is an error (so the gateway runs nothing) and is given back.
func TestWaitReplicasFailsClosedWithoutReplica(t *testing.T) {
	primary, replica := startPrimaryAndReplica(t)
	replica.Kill()
	client := redis.NewClient(&redis.Options{Addr: primary.Addr})
	t.Cleanup(func() { _ = client.Close() })
	store := New(client, Options{Prefix: "w:", WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	ctx := t.Context()
	req := waitClaim("")

	_, err := store.Claim(ctx, req)
	if !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("claim without a replica: %v, want ErrNotReplicated", err)
	}
	if n := client.Exists(ctx, store.keys.record(req.Scope, req.Step)).Val(); n != 0 {
		t.Fatal("the unreplicated claim was left in place")
	}
}

// TestNoWaitByDefault: without WaitReplicas the store never sends WAIT.
func TestNoWaitByDefault(t *testing.T) {
	client := testClient(t)
	log := &commandLog{}
	client.AddHook(log)
	store := New(client, Options{Prefix: uniquePrefix(t, client)})
	ctx := t.Context()
	req := waitClaim(strconv.FormatInt(time.Now().UnixNano(), 10))
	d, err := store.Claim(ctx, req)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if err := store.Complete(ctx, d.Lease, idempotency.StoredResponse{Status: 200, Body: []byte("{}")}, time.Hour); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if n := log.count("wait"); n != 0 {
		t.Fatalf("WAIT sent %d times without WaitReplicas", n)
	}
}
