package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// scriptCall is one script invocation of a pipeline.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// eval is the one way the store runs its scripts: calls in one pipeline
// (one round trip on a single node) by EVALSHA; evalReplicated adds WAIT
// for the writes that must reach replicas. Script.Run's fallback does not work inside a pipeline,
// whose errors arrive only at Exec, so calls the server answered NOSCRIPT
// (a restarted or flushed Redis) are sent once more with EVAL. A script
// answered NOSCRIPT did not run, so resending it is safe.
//
// The first call is the record's script and decides the result; the others
// (pointer sets, which only help the admin API find a record on a cluster)
// are best effort. Their failure — say their master is restarting — must
// not turn a claim that happened into an error, which would leave an
// IN_PROGRESS record that nobody runs.
func (s *Store) eval(ctx context.Context, calls ...scriptCall) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	_, err := s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		return nil
	})
	if err == nil {
		return cmds, nil
	}
	var unknown []int
	for i, cmd := range cmds {
		switch {
		case cmd.Err() == nil:
		case redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT"):
			unknown = append(unknown, i)
		case i == 0:
			return nil, cmd.Err()
		}
	}
	if len(unknown) == 0 {
		return cmds, nil // only best-effort calls failed
	}
	_, _ = s.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, i := range unknown {
			cmds[i] = calls[i].script.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
		}
		return nil
	})
	if err := cmds[0].Err(); err != nil {
		return nil, err
	}
	return cmds, nil
}

// evalInt runs one script that answers an integer.
func (s *Store) evalInt(ctx context.Context, call scriptCall) (int, error) {
	cmds, err := s.eval(ctx, call)
	if err != nil {
		return 0, err
	}
	return cmds[0].Int()
}

// millis is d in whole milliseconds, rounded up and at least 1: Redis
// expires with millisecond precision, and a TTL of 0 would delete the key.
func millis(d time.Duration) int64 {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return max(int64(ms), 1)
}
