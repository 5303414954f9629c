// Package chaos is the gateway's fault-injection run: N gateway processes
// on one Redis (or a Redis Cluster, or PostgreSQL), an HTTP upstream that
// counts executions per Idempotency-Key, and M agents that replay every
// step (with agentclient over REST, or go-sdk's client over MCP) until they
// get a final answer, while replicas are killed with SIGKILL (or drained by
// SIGTERM) and restarted and the store is killed and restarted (AOF, fsync
// always), at once or after an outage. With Uncertain, the upstream also
// outlives the tool's timeout and drops connections after reading the
// request. Run checks the exactly-once invariants and reports them;
// cmd/chaos is the command, chaos_test.go the short CI run.
package chaos

import (
	"errors"
	"io"
	"time"
)

// Tool names of the run. provision reruns after a lease expires;
// charge must never run twice (lease_expiry: unknown).
const (
	toolRerun   = "provision"
	toolUnknown = "charge"
)

// Config describes one run. Zero fields take the defaults of withDefaults.
type Config struct {
	// GatewayBinary is the gateway program (go build ./cmd/gateway).
	GatewayBinary string
	// WorkDir holds configs, logs and Redis data; it must exist.
	WorkDir string
	// Cluster runs the store on a 3-master Redis Cluster instead of one Redis.
	Cluster bool
	// Postgres runs the store on a private PostgreSQL instead of Redis
	// (RedisRestartEvery then paces its kills and restarts).
	Postgres bool
	// Replicas is the number of gateway processes (at least 2).
	Replicas int
	// Agents is the number of concurrent agents.
	Agents int
	// Duration is how long agents start new steps while faults are injected.
	Duration time.Duration
	// KillEvery is the mean time between two SIGKILLs of a gateway replica.
	KillEvery time.Duration
	// RedisRestartEvery is the mean time between two kill+restarts of the
	// store (a Redis node, or PostgreSQL).
	RedisRestartEvery time.Duration
	// StoreDownFor keeps the store down this long at each kill before it is
	// restarted (0: restarted at once).
	StoreDownFor time.Duration
	// MCP sends about half of the agents' attempts over POST /mcp (go-sdk's
	// client, one session per attempt) and the rest over REST.
	MCP bool
	// Uncertain injects uncertain outcomes: tools time out after 1 s while
	// about 3 % of upstream calls take 1.5 s, about 3 % of upstream calls
	// are read and then dropped without an answer, and half of the replica
	// restarts are SIGTERM drains of 200 ms instead of SIGKILLs.
	Uncertain bool
	// Reconcile gives the unknown tool a reconcile: section whose endpoint
	// (the upstream) knows the truth, and has the agents wait out an
	// outcome_unknown answer until reconciliation resolved it: every step
	// must end with a result, none UNKNOWN.
	Reconcile bool
	// LockTTL is the gateways' idempotency.lock_ttl: short, so takeovers
	// after a kill happen within the run.
	LockTTL time.Duration
	// StepDeadline bounds each step: an agent without a final answer by
	// then counts as a lost request.
	StepDeadline time.Duration
	// Replays is how often each step is sent again after its final answer.
	Replays int
	// Seed makes the agents' and the killer's choices repeatable (0: time).
	Seed uint64
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if c.GatewayBinary == "" || c.WorkDir == "" {
		return c, errors.New("chaos: GatewayBinary and WorkDir are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Cluster && c.Postgres {
		return c, errors.New("chaos: Cluster and Postgres exclude each other")
	}
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.Replicas < 2 {
		return c, errors.New("chaos: at least 2 replicas")
	}
	if c.Agents <= 0 {
		c.Agents = 8
	}
	def(&c.Duration, 20*time.Second)
	def(&c.KillEvery, time.Second)
	def(&c.RedisRestartEvery, 5*time.Second)
	def(&c.LockTTL, time.Second)
	def(&c.StepDeadline, 45*time.Second)
	if c.Replays <= 0 {
		c.Replays = 2
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c, nil
}
