package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgateway/toolgateway/agentclient"
)

// Run performs one chaos run and returns its report; an error means the
// run itself could not be set up (a violated invariant is in the report).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	logf := lineLogger(cfg.Log)

	up := newUpstream(cfg.Uncertain)
	up.reconcile = cfg.Reconcile
	defer up.close()
	redis, err := startBackend(cfg.WorkDir, cfg.Cluster, cfg.Postgres)
	if err != nil {
		return nil, err
	}
	defer redis.kill()
	replicas, err := startReplicas(ctx, cfg, redis, up)
	defer func() {
		for _, r := range replicas {
			r.stop()
		}
	}()
	if err != nil {
		return nil, err
	}
	logf("%d gateways up on %s; logs in %s", len(replicas), redis.describe(), cfg.WorkDir)

	report := &Report{Store: redis.describe(), Replicas: cfg.Replicas, Agents: cfg.Agents,
		Duration: cfg.Duration, Seed: cfg.Seed}
	lb := &balancer{base: &http.Transport{MaxIdleConnsPerHost: 16}, rng: rand.New(rand.NewPCG(cfg.Seed, 1))}
	for _, r := range replicas {
		lb.addrs = append(lb.addrs, r.addr)
	}
	var mcpAttempts atomic.Int64
	agents := newAgents(cfg, lb, &mcpAttempts)
	outages, err := runUnderFaults(ctx, cfg, report, agents, replicas, redis, logf)
	if err != nil {
		return nil, err
	}
	report.RedisRestarts = len(outages)
	for _, o := range outages {
		report.StoreDown += o.To.Sub(o.From)
	}
	logf("faults stopped (%d kills, %d drains, %d store restarts); replaying every step once more", report.Kills, report.Drains, report.RedisRestarts)
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.verify(ctx)
		}()
	}
	wg.Wait()

	report.Requests, report.MCPAttempts = lb.attempts.Load(), mcpAttempts.Load()
	tally(report, cfg, agents, replicas, up, outages)
	report.Elapsed = time.Since(began)
	return report, nil
}

// lineLogger writes one timestamped line per call to w; the killers log
// concurrently, and w need not be safe for that.
func lineLogger(w io.Writer) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%s chaos: "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

// startReplicas starts cfg.Replicas gateways on the backend; it returns
// the ones it made even on error, for the caller to stop.
func startReplicas(ctx context.Context, cfg Config, redis *backend, up *upstream) ([]*replica, error) {
	var replicas []*replica
	for i := range cfg.Replicas {
		r, err := newReplica(cfg.WorkDir, cfg.GatewayBinary, "g"+strconv.Itoa(i+1), redis.store(), up, cfg.LockTTL)
		if err != nil {
			return replicas, err
		}
		replicas = append(replicas, r)
	}
	for _, r := range replicas {
		if err := r.start(ctx); err != nil {
			return replicas, err
		}
	}
	return replicas, nil
}

// newAgents makes cfg.Agents agents calling through lb.
func newAgents(cfg Config, lb *balancer, mcpAttempts *atomic.Int64) []*agent {
	client := agentclient.New("http://gateway.invalid",
		agentclient.WithHTTPClient(&http.Client{Transport: lb, Timeout: 15 * time.Second}),
		agentclient.WithRetry(50*time.Millisecond, time.Second),
		agentclient.WithPreferWait(2*time.Second))
	agents := make([]*agent, cfg.Agents)
	for i := range agents {
		agents[i] = &agent{id: i, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+2)),
			session: client.Session(fmt.Sprintf("chaos-%d-agent-%d", cfg.Seed, i)),
			addrs:   lb.addrs, mcpAttempts: mcpAttempts, mcpHTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 15 * time.Second}}
	}
	return agents
}

// runUnderFaults runs the agents for cfg.Duration while replicas are
// killed and the store restarted, and returns the store's outages.
func runUnderFaults(ctx context.Context, cfg Config, report *Report, agents []*agent, replicas []*replica, redis *backend, logf func(string, ...any)) ([]outage, error) {
	stop := time.Now().Add(cfg.Duration)
	faultsCtx, stopFaults := context.WithCancel(ctx)
	var faults sync.WaitGroup
	var faultErr error
	var faultMu sync.Mutex
	fail := func(err error) {
		faultMu.Lock()
		defer faultMu.Unlock()
		faultErr = errors.Join(faultErr, err)
	}
	var outages []outage
	faults.Add(2)
	go func() {
		defer faults.Done()
		report.Kills, report.Drains = killReplicas(faultsCtx, cfg, replicas, logf, fail)
	}()
	go func() {
		defer faults.Done()
		outages = restartRedis(faultsCtx, cfg, redis, logf, fail)
	}()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.run(ctx, stop)
		}()
	}
	wg.Wait()
	stopFaults()
	faults.Wait()
	return outages, faultErr
}

// tally counts what the upstream ran and checks the invariants.
func tally(report *Report, cfg Config, agents []*agent, replicas []*replica, up *upstream, outages []outage) {
	var steps []*step
	for _, a := range agents {
		steps = append(steps, a.steps...)
	}
	execs, total := up.snapshot()
	kills := map[string][]time.Time{}
	for _, r := range replicas {
		kills[r.name] = r.killTimes()
	}
	report.Executions = total
	for _, runs := range execs {
		for _, e := range runs {
			if e.Uncertain {
				report.UncertainInjected++
			}
		}
	}
	check(report, steps, execs, kills, outages, cfg.LockTTL)
	if cfg.Reconcile {
		checkReconciled(report, up)
	}
}

// killReplicas SIGKILLs a random replica every ~cfg.KillEvery (with
// cfg.Uncertain, half the time drains it with SIGTERM instead) and starts
// it again after 50–400 ms, until ctx ends; one replica is down at a time.
func killReplicas(ctx context.Context, cfg Config, replicas []*replica, logf func(string, ...any), fail func(error)) (kills, drains int) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	for sleepCtx(ctx, jitter(rng, cfg.KillEvery)) == nil {
		victim := replicas[rng.IntN(len(replicas))]
		if cfg.Uncertain && rng.IntN(2) == 0 {
			victim.term()
			drains++
			logf("drained %s (SIGTERM)", victim.name)
		} else {
			victim.kill()
			kills++
			logf("killed %s", victim.name)
		}
		time.Sleep(time.Duration(50+rng.IntN(351)) * time.Millisecond)
		// Restart even when ctx has ended: the verification pass needs it.
		if err := victim.start(context.WithoutCancel(ctx)); err != nil {
			fail(err)
			return kills, drains
		}
	}
	return kills, drains
}

// restartRedis SIGKILLs the store (a Redis node, or PostgreSQL) every
// ~cfg.RedisRestartEvery and starts it again after cfg.StoreDownFor (AOF,
// fsync always: nothing acknowledged is lost); it returns the outages.
func restartRedis(ctx context.Context, cfg Config, b *backend, logf func(string, ...any), fail func(error)) []outage {
	rng := rand.New(rand.NewPCG(cfg.Seed, 3))
	var outages []outage
	for sleepCtx(ctx, jitter(rng, cfg.RedisRestartEvery)) == nil {
		addr, out, err := b.restartOne(context.WithoutCancel(ctx), rng, cfg.StoreDownFor)
		if !out.From.IsZero() {
			outages = append(outages, out)
		}
		if err != nil {
			fail(err)
			return outages
		}
		logf("killed the store at %s and restarted it %v later", addr, out.To.Sub(out.From).Round(time.Millisecond))
	}
	return outages
}

// jitter returns d scaled by a random factor in [0.5, 1.5).
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return d/2 + time.Duration(rng.Int64N(int64(d)))
}
