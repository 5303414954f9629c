package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/pgstore"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/pgreceipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
	"github.com/toolgateway/toolgateway/internal/gatewayproc"
	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// The proof of receipts surviving kill -9: two gateway processes on one
// store (Redis, a Redis Cluster, PostgreSQL), 4 tenants calling (fresh calls, replays, keys reused with other
// arguments) through both, one gateway killed with SIGKILL mid-run. When
// the survivor's sweep has emptied the receipt outbox, every chain
// verifies and every execution whose outcome was recorded has exactly one
// executed receipt; no execution has two, and none ran twice.

const (
	crashTenants          = 4
	crashWorkersPerTenant = 4
	crashLoadBefore       = 1500 * time.Millisecond // load before the kill
	crashLoadAfter        = 1500 * time.Millisecond // load after it
	crashSettle           = 20 * time.Second        // bound on the sweep's work after the load
)

func TestReceiptsSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	bin := gatewayproc.Build(t, "./cmd/gateway")
	t.Run("redis", func(t *testing.T) {
		addr := redistest.Addr(t)
		client := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = client.Close() })
		prefix := redistest.Prefix("gwtest-outbox")
		t.Cleanup(func() { redistest.CleanPrefix(context.Background(), client, prefix) })
		runCrash(t, bin, map[string]any{"redis_url": "redis://" + addr, "key_prefix": prefix},
			redisreceipts.New(client, prefix, nil),
			func(ctx context.Context) (int64, error) { return client.HLen(ctx, prefix+"O{outbox}").Result() })
	})
	t.Run("redis-cluster", func(t *testing.T) {
		cluster := redistest.StartCluster(t, 3)
		client := cluster.Client()
		t.Cleanup(func() { _ = client.Close() })
		prefix := redistest.Prefix("gwtest-outbox")
		runCrash(t, bin, map[string]any{"cluster_addrs": cluster.Addrs(), "key_prefix": prefix},
			redisreceipts.New(client, prefix, nil),
			func(ctx context.Context) (int64, error) { return clusterOutboxLen(ctx, client, prefix) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		schema := pgtest.Schema(t, url)
		pool, err := pgxpool.New(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		store, err := pgreceipts.New(t.Context(), pool, schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		table := pgx.Identifier{schema, "receipt_outbox"}.Sanitize()
		runCrash(t, bin, map[string]any{"postgres_url": url, "postgres_schema": schema}, store,
			func(ctx context.Context) (n int64, err error) {
				err = pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
				return n, err
			})
	})
}

// clusterOutboxLen counts the outbox entries on every master: one hash
// per record tag, <prefix>O{<tag>}.
func clusterOutboxLen(ctx context.Context, client *redis.ClusterClient, prefix string) (int64, error) {
	var mu sync.Mutex
	var total int64
	err := client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, prefix+"O{*", 500).Iterator()
		for iter.Next(ctx) {
			n, err := node.HLen(ctx, iter.Val()).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}
		return iter.Err()
	})
	return total, err
}

// crashUpstream is the HTTP tool: it counts its executions by the
// gateway's Tool-Execution-Id, and takes a few milliseconds, so calls are
// in flight when a gateway dies.
type crashUpstream struct {
	mu         sync.Mutex
	executions map[string]int
}

func (u *crashUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	u.mu.Lock()
	u.executions[r.Header.Get(wire.HeaderExecutionID)]++
	u.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

func (u *crashUpstream) counts() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]int, len(u.executions))
	for k, v := range u.executions {
		out[k] = v
	}
	return out
}

// crashGateway is one gateway process.
type crashGateway struct {
	url     string
	cmd     *exec.Cmd
	logPath string
}

// startCrashGateway starts a gateway on the config's listen address,
// 127.0.0.1:0: the process binds a port the kernel picks and logs it, so
// no port is chosen here and released for it, which another process on a
// busy machine (a Redis Cluster node, an outgoing connection) could take
// meanwhile. It returns once the gateway answers /healthz.
func startCrashGateway(t *testing.T, bin, config, logPath string) *crashGateway {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	cmd := exec.Command(bin, "-config", config)
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR=", "REDIS_URL=", "DATABASE_URL=")
	cmd.Stderr = logFile
	g := &crashGateway{url: gatewayproc.StartLogged(t, cmd, logFile), cmd: cmd, logPath: logPath}
	t.Cleanup(func() { g.logProblems(t) })
	gatewaytest.Eventually(t, 30*time.Second, "gateway healthy", func() bool {
		resp, err := http.Get(g.url + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return g
}

// logProblems logs the gateway's warnings and errors when the test has
// failed, so a failure under load can be read afterwards.
func (g *crashGateway) logProblems(t *testing.T) {
	t.Helper()
	if !t.Failed() {
		return
	}
	raw, err := os.ReadFile(g.logPath)
	if err != nil {
		t.Logf("gateway log %s: %v", filepath.Base(g.logPath), err)
		return
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) || (line != "" && !strings.HasPrefix(line, "{")) {
			t.Logf("%s: %s", filepath.Base(g.logPath), line)
		}
	}
}

// crashConfig writes the gateways' config: 4 tenants, one HTTP tool that
// reruns after a lost lease, a short lease and a short recover_after.
func crashConfig(t *testing.T, store map[string]any, upstream string) (path string, tokens []string) {
	t.Helper()
	var tenants []any
	for i := range crashTenants {
		token := fmt.Sprintf("token-of-tenant-%d-0123456789", i)
		sum := sha256.Sum256([]byte(token))
		tokens = append(tokens, token)
		tenants = append(tenants, map[string]any{"name": fmt.Sprintf("tenant-%d", i), "token_sha256": hex.EncodeToString(sum[:])})
	}
	cfg := map[string]any{
		"listen":      "127.0.0.1:0",
		"log_level":   "info",
		"store":       store,
		"auth":        map[string]any{"tenants": tenants},
		"idempotency": map[string]any{"key_mode": "opaque", "lock_ttl": "1s"},
		"receipts":    map[string]any{"recover_after": "1s"},
		"tools": []any{map[string]any{
			"name": "provision", "description": "counts executions", "lease_expiry": "rerun", "timeout": "5s",
			"input_schema": map[string]any{"type": "object"},
			"http":         map[string]any{"url": upstream},
		}},
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, tokens
}

// crashOutcome is what the clients saw: per execution id, the keys whose
// final answer (a 200, fresh or replayed) named it.
type crashOutcome struct {
	mu       sync.Mutex
	recorded map[string]bool
	calls    int
}

func (o *crashOutcome) add(exec string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.recorded[exec] = true
	o.calls++
}

func runCrash(t *testing.T, bin string, store map[string]any, rs receipts.Store, outboxLen func(context.Context) (int64, error)) {
	up := &crashUpstream{executions: map[string]int{}}
	server := httptest.NewServer(up)
	t.Cleanup(server.Close)
	config, tokens := crashConfig(t, store, server.URL)
	dir := t.TempDir()
	gateways := []*crashGateway{
		startCrashGateway(t, bin, config, filepath.Join(dir, "a.log")),
		startCrashGateway(t, bin, config, filepath.Join(dir, "b.log")),
	}
	out := &crashOutcome{recorded: map[string]bool{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for tenant := range crashTenants {
		for w := range crashWorkersPerTenant {
			wg.Go(func() { crashWorker(t, gateways, tokens[tenant], fmt.Sprintf("t%d-w%d", tenant, w), w%2, stop, out) })
		}
	}
	time.Sleep(crashLoadBefore)
	killed := gateways[0]
	_ = killed.cmd.Process.Kill() // SIGKILL: the receipts in its queue die with it
	_ = killed.cmd.Wait()
	time.Sleep(crashLoadAfter)
	close(stop)
	wg.Wait()

	survivor := gateways[1]
	deadline := time.Now().Add(crashSettle)
	for {
		n, err := outboxLen(t.Context())
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("receipt outbox still holds %d entries (%v) %s after the load", n, err, crashSettle)
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkCrashReceipts(t, rs, up.counts(), out)
	t.Logf("recovered by the survivor's sweep: %s receipts", scrapeMetric(t, survivor.url, "gateway_receipts_recovered_total"))
}

// crashWorker calls until stop: a fresh key each step, every third step a
// replay of the previous key and every fifth the previous key with other
// arguments (422, nothing runs). A step retries (the other gateway when
// one is gone, 409 while the dead gateway's lease runs) until it has a
// final answer.
func crashWorker(t *testing.T, gateways []*crashGateway, token, name string, prefer int, stop <-chan struct{}, out *crashOutcome) {
	client := &http.Client{Timeout: 10 * time.Second}
	gw := prefer
	var prevKey, prevArgs string
	for step := 0; ; step++ {
		select {
		case <-stop:
			return
		default:
		}
		key, args := fmt.Sprintf("%s-key-%d", name, step), fmt.Sprintf(`{"n":%d}`, step)
		switch {
		case step%5 == 4 && prevKey != "":
			key, args = prevKey, `{"other":true}`
		case step%3 == 2 && prevKey != "":
			key, args = prevKey, prevArgs
		}
		for attempt := 0; ; attempt++ {
			if attempt > 500 {
				t.Errorf("%s: key %s never got a final answer", name, key)
				return
			}
			req, _ := http.NewRequest(http.MethodPost, gateways[gw].url+"/api/tools/v1/provision", bytes.NewReader([]byte(args)))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(wire.HeaderIdempotencyKey, key)
			req.Header.Set(wire.HeaderSessionID, name)
			req.Header.Set(wire.HeaderStepIndex, strconv.Itoa(step))
			resp, err := client.Do(req)
			if err != nil { // that gateway is gone: go to the other
				gw = 1 - gw
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				out.add(resp.Header.Get(wire.HeaderExecutionID))
				break
			}
			if resp.StatusCode == http.StatusUnprocessableEntity {
				break // a key reused with other arguments: refused, nothing ran
			}
			time.Sleep(50 * time.Millisecond) // 409 in progress, 503: retry
		}
		if key != prevKey {
			prevKey, prevArgs = key, args
		}
	}
}

// checkCrashReceipts: every chain verifies; every execution a client got
// as its answer has exactly one executed receipt; no execution has more
// than one, ran more than once, or has a receipt without having run.
func checkCrashReceipts(t *testing.T, rs receipts.Store, upstream map[string]int, out *crashOutcome) {
	t.Helper()
	var buf bytes.Buffer
	if err := receipts.Export(t.Context(), rs, &buf); err != nil {
		t.Fatalf("export: %v", err)
	}
	export := buf.Bytes()
	rep, err := receipts.Verify(bytes.NewReader(export))
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v, %+v", err, rep)
	}
	if len(rep.Tenants) != crashTenants {
		t.Fatalf("%d chains, want %d", len(rep.Tenants), crashTenants)
	}
	executed := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(export))
	for dec.More() {
		var r receipts.Receipt
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Event == receipts.EventExecuted {
			executed[r.ExecutionID]++
		}
	}
	for exec, n := range upstream {
		if n != 1 {
			t.Errorf("execution %s ran %d times at the upstream", exec, n)
		}
	}
	for exec, n := range executed {
		if n != 1 {
			t.Errorf("execution %s has %d executed receipts", exec, n)
		}
		if upstream[exec] == 0 {
			t.Errorf("execution %s has a receipt and never ran", exec)
		}
	}
	for exec := range out.recorded {
		if executed[exec] != 1 {
			t.Errorf("execution %s was answered to a client and has %d executed receipts", exec, executed[exec])
		}
	}
	// An execution the killed gateway ran and could not record (it died
	// before the completion) has no receipt: its call was taken over and
	// ran again under another execution id, which has one.
	unrecorded := 0
	for exec := range upstream {
		if executed[exec] == 0 {
			unrecorded++
		}
	}
	if unrecorded > crashTenants*crashWorkersPerTenant {
		t.Errorf("%d executions without a receipt, more than the %d calls that can be in flight at the kill", unrecorded, crashTenants*crashWorkersPerTenant)
	}
	t.Logf("%d client calls answered 200, %d executions at the upstream, %d executed receipts, %d executions cut short by the kill (no completion, so no receipt)",
		out.calls, len(upstream), len(executed), unrecorded)
}

var metricLine = regexp.MustCompile(`(?m)^(\w+) (\S+)$`)

// scrapeMetric reads an unlabelled metric from the gateway's /metrics.
func scrapeMetric(t *testing.T, url, name string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, m := range metricLine.FindAllStringSubmatch(string(body), -1) {
		if m[1] == name {
			return m[2]
		}
	}
	return "absent"
}

// outboxStore opens a fresh store of kind whose completions write the
// receipt outbox (receipts on, as the program opens it).
func outboxStore(t *testing.T, kind storeKind) idempotency.Store {
	t.Helper()
	switch kind {
	case gatewaytest.Redis:
		client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
		prefix := redistest.Prefix("gwtest-outbox")
		t.Cleanup(func() {
			redistest.CleanPrefix(context.Background(), client, prefix)
			_ = client.Close()
		})
		return redisstore.New(client, redisstore.Options{Prefix: prefix, ReceiptOutbox: true})
	case gatewaytest.Embedded:
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "gw.db"), boltstore.Options{ReceiptOutbox: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	url := pgtest.URL(t)
	s, err := pgstore.Open(t.Context(), url, pgstore.Options{Schema: pgtest.Schema(t, url), SweepInterval: -1, ReceiptOutbox: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestReceiptRecoveredFromTheOutbox: a completion whose gateway died
// before its receipt was written (the completion alone, straight on the
// store) gets its executed receipt from the next gateway's sweep, once;
// a call through that gateway gets its own receipt once, and its outbox
// entry is cleared by the writer.
func TestReceiptRecoveredFromTheOutbox(t *testing.T) {
	gatewaytest.ForEachStore(t, func(t *testing.T, kind storeKind) {
		store := outboxStore(t, kind)
		rs := receiptsBeside(t, store)
		outbox := store.(idempotency.ReceiptOutbox)
		scope := idempotency.Scope{Tenant: callpath.AnonymousTenant, Tool: "refund", Key: "dead-gateway-key"}
		d, err := store.Claim(t.Context(), idempotency.ClaimRequest{Scope: scope, Fingerprint: strings.Repeat("a", 64),
			Step: &idempotency.Step{SessionID: "s", Index: 7}, ExecutionID: "01JDEADGATEWAYEXECUTION000", Owner: "dead",
			LockTTL: time.Minute, ReplayTTL: time.Hour})
		if err != nil || d.Outcome != idempotency.OutcomeClaimed {
			t.Fatalf("claim: %v, %v", d.Outcome, err)
		}
		if err := store.Complete(t.Context(), d.Lease, idempotency.StoredResponse{Status: 201, ContentType: "application/json", Body: []byte(`{}`)}, time.Hour); err != nil {
			t.Fatal(err)
		}
		tool := gatewaytest.NewTool("refund")
		h := gatewaytest.New(t, kind, []tools.Tool{tool}, withStore(store), func(o *callpath.Options) {
			o.Receipts, o.ReceiptRecoverAfter = rs, 200*time.Millisecond
		})
		chain := chainOf(t, rs, callpath.AnonymousTenant, 1)
		got := chain[0]
		if got.Event != receipts.EventExecuted || got.ExecutionID != d.Lease.ExecutionID || got.Status != 201 ||
			got.Key != receipts.KeyHash(scope.Key) || got.Session != "s" || got.Step != "7" || got.Tool != "refund" {
			t.Fatalf("recovered receipt: %+v", got)
		}
		r := h.Do(refund("s", 8, "50"))
		if r.Status != http.StatusOK {
			t.Fatalf("call: %d %s", r.Status, r.Body)
		}
		chainOf(t, rs, callpath.AnonymousTenant, 2)
		gatewaytest.Eventually(t, 10*time.Second, "outbox cleared", func() bool {
			pending, err := outbox.PendingReceipts(t.Context(), time.Now().Add(time.Hour), 10)
			return err == nil && len(pending) == 0
		})
		time.Sleep(500 * time.Millisecond) // sweeps run meanwhile: nothing is appended twice
		chain = chainOf(t, rs, callpath.AnonymousTenant, 2)
		if len(chain) != 2 || chain[1].ExecutionID != r.Header.Get(wire.HeaderExecutionID) || tool.Total.Load() != 1 {
			t.Fatalf("chain %+v after the call (tool ran %d times), want the recovered receipt and the call's", chain, tool.Total.Load())
		}
		if v := scrapeMetric(t, h.Srv.URL, "gateway_receipts_recovered_total"); v != "1" {
			t.Fatalf("gateway_receipts_recovered_total = %s, want 1", v)
		}
	})
}
