package redisscript

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/internal/redistest"
)

// incrScript adds ARGV[1] to KEYS[1] and answers the new value.
var incrScript = redis.NewScript(`
local counter = KEYS[1]
local by = tonumber(ARGV[1])
return redis.call('INCRBY', counter, by)
`)

// commandLog counts the commands a client sends, by name.
type commandLog struct {
	mu    sync.Mutex
	count map[string]int
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.mu.Lock()
		l.count[cmd.Name()]++
		l.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.mu.Lock()
		for _, c := range cmds {
			l.count[c.Name()]++
		}
		l.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (l *commandLog) sent(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count[name]
}

var _ redis.Hook = (*commandLog)(nil)

// TestRunResendsNoscriptByEval: on a server that does not know the script
// (a private one, flushed), Run's EVALSHA meets NOSCRIPT, each call is sent
// again by EVAL and runs exactly once, and then's commands follow both
// times; once the server knows the script, one EVALSHA pipeline does.
func TestRunResendsNoscriptByEval(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	ctx := t.Context()
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	log := &commandLog{count: map[string]int{}}
	client.AddHook(log)

	var echoes []*redis.StringCmd
	then := func(pipe redis.Pipeliner) { echoes = append(echoes, pipe.Echo(ctx, "after")) }
	cmds := Run(ctx, client, then,
		Call{Script: incrScript, Keys: []string{"a"}, Args: []any{1}},
		Call{Script: incrScript, Keys: []string{"b"}, Args: []any{10}})
	for i, want := range []int64{1, 10} {
		if got, err := cmds[i].Int64(); err != nil || got != want {
			t.Errorf("call %d = %d, %v, want %d", i, got, err, want)
		}
	}
	if a, b := client.Get(ctx, "a").Val(), client.Get(ctx, "b").Val(); a != "1" || b != "10" {
		t.Errorf("a, b = %s, %s after one Run, want 1, 10 (each script ran once)", a, b)
	}
	if sha, eval := log.sent("evalsha"), log.sent("eval"); sha != 2 || eval != 2 {
		t.Errorf("sent %d EVALSHA and %d EVAL, want 2 and 2 (the NOSCRIPT calls resent)", sha, eval)
	}
	if len(echoes) != 2 || echoes[1].Val() != "after" {
		t.Errorf("then ran %d times (last answer %v), want twice, after each pipeline", len(echoes), echoes)
	}

	cmd := RunOne(ctx, client, Call{Script: incrScript, Keys: []string{"a"}, Args: []any{1}})
	if got, err := cmd.Int64(); err != nil || got != 2 {
		t.Errorf("RunOne once the script is known = %d, %v, want 2", got, err)
	}
	if sha, eval := log.sent("evalsha"), log.sent("eval"); sha != 3 || eval != 2 {
		t.Errorf("sent %d EVALSHA and %d EVAL in all, want 3 and 2 (no resend for a known script)", sha, eval)
	}

	// One call alone goes as one command, with the same fallback.
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cmd = RunOne(ctx, client, Call{Script: incrScript, Keys: []string{"a"}, Args: []any{1}})
	if got, err := cmd.Int64(); err != nil || got != 3 {
		t.Errorf("RunOne on a flushed server = %d, %v, want 3 (ran once)", got, err)
	}
	if sha, eval := log.sent("evalsha"), log.sent("eval"); sha != 4 || eval != 3 {
		t.Errorf("sent %d EVALSHA and %d EVAL in all, want 4 and 3 (the one NOSCRIPT call resent)", sha, eval)
	}
}

// TestRunReportsEachCallsError: a script error stays on its own call's
// command; the other calls of the pipeline still run.
func TestRunReportsEachCallsError(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	ctx := t.Context()
	if err := client.Set(ctx, "text", "not a number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cmds := Run(ctx, client, nil,
		Call{Script: incrScript, Keys: []string{"text"}, Args: []any{1}},
		Call{Script: incrScript, Keys: []string{"n"}, Args: []any{5}})
	if cmds[0].Err() == nil {
		t.Error("INCRBY of a string: no error on its call")
	}
	if got, err := cmds[1].Int64(); err != nil || got != 5 {
		t.Errorf("the other call = %d, %v, want 5", got, err)
	}
}
