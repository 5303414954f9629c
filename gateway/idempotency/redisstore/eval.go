package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// call is one script invocation with its typed ARGV.
func call(script *redis.Script, keys []string, args redisscript.Args) redisscript.Call {
	return redisscript.Call{Script: script, Keys: keys, Args: args.Argv()}
}

// eval is the one way the store runs its scripts: calls in one pipeline
// by EVALSHA, resent by EVAL where the server answered NOSCRIPT
// ([redisscript.Run]); evalReplicated adds WAIT for the writes that must
// reach replicas.
//
// The first call is the record's script and decides the result; the others
// (pointer sets, which only help the admin API find a record on a cluster)
// are best effort. Their failure — say their master is restarting — must
// not turn a claim that happened into an error, which would leave an
// IN_PROGRESS record that nobody runs.
func (s *Store) eval(ctx context.Context, calls ...redisscript.Call) ([]*redis.Cmd, error) {
	cmds := redisscript.Run(ctx, s.client, nil, calls...)
	if err := cmds[0].Err(); err != nil {
		return nil, err
	}
	return cmds, nil
}

// evalInt runs one script that answers an integer.
func (s *Store) evalInt(ctx context.Context, c redisscript.Call) (int, error) {
	cmds, err := s.eval(ctx, c)
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
