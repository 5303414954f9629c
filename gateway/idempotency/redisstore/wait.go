package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// ErrNotReplicated: fewer replicas than Options.WaitReplicas acknowledged a
// claim or completion within Options.WaitTimeout. The write is on the
// primary, but a failover now could lose it.
var ErrNotReplicated = errors.New("redisstore: write not acknowledged by enough replicas")

// defaultWaitTimeout bounds a WAIT when Options leaves it out: long enough
// for a healthy replica on the same network, short enough that a dead one
// turns into a quick 503 rather than a hung request.
const defaultWaitTimeout = 500 * time.Millisecond

// waitPolicy is Options.WaitReplicas and WaitTimeout.
type waitPolicy struct {
	replicas int
	timeout  time.Duration
}

func newWaitPolicy(opts Options) waitPolicy {
	timeout := opts.WaitTimeout
	if timeout <= 0 {
		timeout = defaultWaitTimeout
	}
	return waitPolicy{replicas: max(opts.WaitReplicas, 0), timeout: timeout}
}

// check turns a WAIT's acknowledgement count into ErrNotReplicated.
func (w waitPolicy) check(acked int64) error {
	if w.replicas > 0 && acked < int64(w.replicas) {
		return fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, acked, w.replicas, w.timeout)
	}
	return nil
}

// evalReplicated runs calls like eval. With WaitReplicas set, the
// first call (the record's script) runs on the master that owns its key and
// is followed by WAIT in the same pipeline: WAIT counts the replicas that
// acknowledged the writes of its own connection, so it must share the
// script's connection. The other calls (pointer sets, which only help the
// admin API find a record) go without WAIT. acked is WAIT's answer (0 when
// not waiting).
func (s *Store) evalReplicated(ctx context.Context, calls ...redisscript.Call) (cmds []*redis.Cmd, acked int64, err error) {
	if s.wait.replicas == 0 {
		cmds, err = s.eval(ctx, calls...)
		return cmds, 0, err
	}
	node, err := s.masterFor(ctx, calls[0].Keys[0])
	if err != nil {
		return nil, 0, err
	}
	first, acked, err := evalThenWait(ctx, node, calls[0], s.wait)
	if err != nil {
		return nil, 0, err
	}
	cmds = []*redis.Cmd{first}
	if len(calls) > 1 {
		// Best effort, as in eval: the record's write happened.
		rest, _ := s.eval(ctx, calls[1:]...)
		cmds = append(cmds, rest...)
	}
	return cmds, acked, nil
}

// masterFor returns the client of the node that owns key.
func (s *Store) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("master for the record's slot: %w", err) // the key name holds the full key
		}
		return node, nil
	}
	return nil, fmt.Errorf("wait_replicas needs a single-node or cluster client, not %T", s.client)
}

// evalThenWait sends the script and WAIT in one pipeline (one connection;
// both resent when the server answered NOSCRIPT, see [redisscript.Run]).
func evalThenWait(ctx context.Context, node *redis.Client, c redisscript.Call, w waitPolicy) (*redis.Cmd, int64, error) {
	var wait *redis.IntCmd
	script := redisscript.Run(ctx, node, func(pipe redis.Pipeliner) {
		wait = redis.NewIntCmd(ctx, "wait", w.replicas, w.timeout.Milliseconds())
		_ = pipe.Process(ctx, wait)
	}, c)[0]
	if err := script.Err(); err != nil {
		return nil, 0, err
	}
	if err := wait.Err(); err != nil {
		return nil, 0, fmt.Errorf("wait for %d replicas: %w", w.replicas, err)
	}
	return script, wait.Val(), nil
}

// claimReplicated enforces WaitReplicas on a new claim: a claim that too
// few replicas hold is given back (best effort) and reported as an error,
// so the gateway answers 503 and runs nothing. Decisions that wrote
// nothing new (replays, in progress, conflicts) need no replicas.
func (s *Store) claimReplicated(ctx context.Context, d idempotency.Decision, acked int64) error {
	if d.Outcome != idempotency.OutcomeClaimed {
		return nil
	}
	err := s.wait.check(acked)
	if err == nil {
		return nil
	}
	if rerr := s.Release(ctx, d.Lease); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}
