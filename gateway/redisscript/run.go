package redisscript

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Call is one script invocation: the script, its KEYS and its ARGV (in the
// order the script's header names them; see [CheckHeader]).
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
}

// Pipeliner is what Run sends on: a *redis.Client (one connection per
// pipeline), a *redis.ClusterClient or any redis.UniversalClient.
type Pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Run sends calls in one pipeline (one round trip on a single node) by
// EVALSHA, followed by whatever then queues (nil for nothing; WAIT, for
// example, which counts the replicas that acknowledged its own connection's
// writes and so must share the scripts' pipeline). Script.Run's fallback
// does not work inside a pipeline, whose errors arrive only at Exec, so the
// calls the server answered NOSCRIPT (a restarted or flushed Redis) are
// sent once more by EVAL, followed by then again. A script answered
// NOSCRIPT did not run, so resending it is safe.
//
// Run returns one command per call, in order; each carries its own result
// or error (a connection error marks them all), which the caller reads:
// whether a failed call fails the whole depends on the caller.
func Run(ctx context.Context, p Pipeliner, then func(redis.Pipeliner), calls ...Call) []*redis.Cmd {
	if sc, ok := p.(redis.Scripter); ok && len(calls) == 1 && then == nil {
		// One script alone is one command, not a pipeline: the same round
		// trip with less client work (a replay's one call, most claims and
		// completions). Script.Run falls back to EVAL on NOSCRIPT itself.
		c := calls[0]
		return []*redis.Cmd{c.Script.Run(ctx, sc, c.Keys, c.Args...)}
	}
	cmds := make([]*redis.Cmd, len(calls))
	_, err := p.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = c.Script.EvalSha(ctx, pipe, c.Keys, c.Args...)
		}
		if then != nil {
			then(pipe)
		}
		return nil
	})
	if err == nil {
		return cmds
	}
	var unknown []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			unknown = append(unknown, i)
		}
	}
	if len(unknown) == 0 {
		return cmds
	}
	_, _ = p.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, i := range unknown {
			cmds[i] = calls[i].Script.Eval(ctx, pipe, calls[i].Keys, calls[i].Args...)
		}
		if then != nil {
			then(pipe)
		}
		return nil
	})
	return cmds
}

// RunOne runs one call (see [Run]) and returns its command.
func RunOne(ctx context.Context, p Pipeliner, call Call) *redis.Cmd {
	return Run(ctx, p, nil, call)[0]
}
