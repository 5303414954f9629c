package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/internal/pgtest"
)

// TestChaosTransactional is the proof for transactional tools: two
// ordersgateway replicas (examples/orders: place-order writes its row in
// the transaction that records the call) on PostgreSQL, agents placing one
// order per step, and a killer that SIGKILLs a replica at random instants
// (or, every other time, drains it with SIGTERM and a 50 ms drain_timeout,
// which cancels the calls in flight: an uncertain outcome that a
// transactional call survives by rolling back) and restarts it. Afterwards every step is called once more, and the
// orders table must hold exactly one row per step, written by the
// execution the agent was answered with (no duplicate, no orphan), with no
// UNKNOWN record: a crash leaves the effect and the record together or
// neither. TOOLGATEWAY_TXCHAOS_DURATION (a Go duration) runs it longer.
func TestChaosTransactional(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run skipped in -short mode")
	}
	duration := 6 * time.Second
	if v := os.Getenv("TOOLGATEWAY_TXCHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TOOLGATEWAY_TXCHAOS_DURATION: %v", err)
		}
		duration = d
	}
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	table := schema + ".orders"
	dir := t.TempDir()
	bin := filepath.Join(dir, "ordersgateway")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/toolgateway/toolgateway/examples/orders/ordersgateway").CombinedOutput(); err != nil {
		t.Fatalf("go build ordersgateway: %v\n%s", err, out)
	}
	config := filepath.Join(dir, "gateway.json")
	cfg := fmt.Sprintf(`{"listen": "127.0.0.1:0", "drain_timeout": "50ms", "log_level": "warn",
		"store": {"postgres_schema": %q},
		"idempotency": {"lock_ttl": "1500ms"}}`, schema)
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", url)
	t.Setenv("ORDERS_TABLE", table)

	var replicas []*replica
	var addrs []string
	for i := range 2 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{name: "tx" + strconv.Itoa(i), addr: fmt.Sprintf("127.0.0.1:%d", port), binary: bin, config: config}
		if r.log, err = os.Create(filepath.Join(dir, r.name+".log")); err != nil {
			t.Fatal(err)
		}
		if err := r.start(t.Context()); err != nil {
			t.Fatalf("%v\n%s", err, readFile(filepath.Join(dir, r.name+".log")))
		}
		t.Cleanup(r.stop)
		replicas = append(replicas, r)
		addrs = append(addrs, r.addr)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	httpClient := &http.Client{Transport: &balancer{addrs: addrs, base: http.DefaultTransport, rng: rng}, Timeout: 10 * time.Second}
	client := agentclient.New("http://"+addrs[0], agentclient.WithHTTPClient(httpClient), agentclient.WithRetryBudget(30*time.Second))

	ctx := t.Context()
	stop := time.Now().Add(duration)
	const agents = 4
	steps := make([]uint64, agents) // steps each agent started
	var wg sync.WaitGroup
	for a := range agents {
		wg.Go(func() {
			session := client.Session(fmt.Sprintf("txchaos-%d", a))
			for step := uint64(0); time.Now().Before(stop); step++ {
				steps[a] = step + 1
				// Errors are expected while replicas die; the final pass
				// below settles every step.
				_, _ = session.Call(ctx, step, "place-order", map[string]any{"sku": fmt.Sprintf("sku-%d-%d", a, step)})
			}
		})
	}
	kills, drains := 0, 0
	var killerErr error
	wg.Go(func() {
		killRNG := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
		for time.Now().Before(stop) {
			time.Sleep(200*time.Millisecond + time.Duration(killRNG.IntN(500))*time.Millisecond)
			r := replicas[killRNG.IntN(len(replicas))]
			if killRNG.IntN(2) == 0 {
				r.term()
				drains++
			} else {
				r.kill()
				kills++
			}
			if err := r.start(ctx); err != nil {
				killerErr = err
				return
			}
		}
	})
	wg.Wait()
	if killerErr != nil {
		t.Fatalf("restart after a kill: %v", killerErr)
	}

	// Settle: every step once more, now without kills. Each answer is the
	// step's recorded outcome (a replay) or, for a step whose every attempt
	// died, its first completed execution.
	want := map[string]string{} // "session/step" → execution id answered
	total := 0
	for a := range agents {
		session := client.Session(fmt.Sprintf("txchaos-%d", a))
		for step := range steps[a] {
			res, err := session.Call(ctx, step, "place-order", map[string]any{"sku": fmt.Sprintf("sku-%d-%d", a, step)})
			if err != nil {
				t.Fatalf("settling agent %d step %d: %v", a, step, err)
			}
			if res.Status != http.StatusCreated {
				t.Fatalf("settling agent %d step %d: status %d %s", a, step, res.Status, res.Body)
			}
			want[fmt.Sprintf("txchaos-%d/%d", a, step)] = res.ExecutionID
			total++
		}
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT session_id, step_index, execution_id FROM `+table)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for rows.Next() {
		var session, exec string
		var step int64
		if err := rows.Scan(&session, &step, &exec); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("%s/%d", session, step)
		got[k] = append(got[k], exec)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	violations := 0
	for k, exec := range want {
		if len(got[k]) != 1 || got[k][0] != exec {
			violations++
			t.Errorf("step %s: order rows by executions %v, want exactly one by %s (the one answered)", k, got[k], exec)
		}
	}
	for k, execs := range got {
		if _, ok := want[k]; !ok {
			violations++
			t.Errorf("orphaned order rows for step %s (never answered): %v", k, execs)
		}
	}
	var unknown int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.records WHERE state = 'UNKNOWN'`).Scan(&unknown); err != nil {
		t.Fatal(err)
	}
	if unknown != 0 {
		t.Errorf("%d UNKNOWN records; a transactional call never needs one", unknown)
	}
	t.Logf("transactional chaos: %v, %d agents, %d steps, %d kills, %d drains, %d order rows, %d violations, %d UNKNOWN",
		duration, agents, total, kills, drains, len(got), violations, unknown)
	if kills == 0 || drains == 0 || total == 0 {
		t.Fatalf("the run proved nothing: %d kills, %d drains, %d steps", kills, drains, total)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
