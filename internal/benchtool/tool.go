package benchtool

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// DefaultToolName is the name the benchmark tool is served under.
const DefaultToolName = "bench-incr"

// counterTTL bounds how long a run's counters outlive it if the run dies
// before cleaning up: the Redis is shared.
const counterTTL = time.Hour

// CounterTool is a mutating tool whose only side effect is one Redis write:
// INCR of a counter per idempotency key (with its expiry, in the same
// pipeline, so still one round trip). The counters tell how many times each
// call really ran, which is what the dup check reads. It is safe for
// concurrent use.
type CounterTool struct {
	client redis.UniversalClient
	name   string
	prefix string
}

var _ tools.Tool = (*CounterTool)(nil)

// NewCounterTool returns a CounterTool called name whose counters live
// under prefix. The caller keeps ownership of client.
func NewCounterTool(client redis.UniversalClient, name, prefix string) *CounterTool {
	return &CounterTool{client: client, name: name, prefix: prefix}
}

// Spec describes the tool: arguments are any object.
func (t *CounterTool) Spec() tools.Spec {
	return tools.Spec{
		Name:        t.name,
		Description: "Benchmark tool: counts its executions per idempotency key in Redis.",
		InputSchema: []byte(`{"type":"object","properties":{"seq":{"type":"integer","minimum":0},"op":{"type":"string"},"payload":{"type":"string"}},"required":["seq","op"]}`),
	}
}

// Call counts one execution of the call's key and answers 200 with the count.
func (t *CounterTool) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	n, err := t.incr(ctx, req.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	body := make([]byte, 0, 32)
	body = append(body, `{"ok":true,"n":`...)
	body = strconv.AppendInt(body, n, 10)
	body = append(body, '}')
	return &tools.Response{Status: http.StatusOK, ContentType: "application/json", Body: body}, nil
}

func (t *CounterTool) incr(ctx context.Context, key string) (int64, error) {
	counter := t.prefix + "n:" + key
	var incr *redis.IntCmd
	_, err := t.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		incr = pipe.Incr(ctx, counter)
		pipe.Expire(ctx, counter, counterTTL)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("benchtool: count execution: %w", err)
	}
	return incr.Val(), nil
}

// Counts returns how many times the tool ran for each key, in order.
func (t *CounterTool) Counts(ctx context.Context, keys []string) ([]int64, error) {
	out := make([]int64, 0, len(keys))
	const batch = 1000
	for start := 0; start < len(keys); start += batch {
		chunk := keys[start:min(start+batch, len(keys))]
		names := make([]string, len(chunk))
		for i, k := range chunk {
			names[i] = t.prefix + "n:" + k
		}
		values, err := t.client.MGet(ctx, names...).Result()
		if err != nil {
			return nil, fmt.Errorf("benchtool: read counters: %w", err)
		}
		for _, v := range values {
			s, _ := v.(string) // nil: the key never ran
			n, _ := strconv.ParseInt(s, 10, 64)
			out = append(out, n)
		}
	}
	return out, nil
}

// Clean deletes the tool's counters.
func (t *CounterTool) Clean(ctx context.Context) {
	deletePrefix(ctx, t.client, t.prefix+"n:")
}

// RedisCPU reads the CPU time (user + system) the Redis server behind
// client has used so far, from INFO cpu.
func RedisCPU(ctx context.Context, client redis.UniversalClient) (time.Duration, error) {
	info, err := client.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("benchtool: redis cpu: %w", err)
	}
	var total time.Duration
	for _, line := range strings.Split(info, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_user" && name != "used_cpu_sys") {
			continue
		}
		seconds, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, fmt.Errorf("benchtool: redis cpu: %s %q: %w", name, value, err)
		}
		total += time.Duration(seconds * float64(time.Second))
	}
	return total, nil
}

// deletePrefix deletes every key under prefix with SCAN and DEL: the Redis
// is shared, so it is never flushed.
func deletePrefix(ctx context.Context, client redis.UniversalClient, prefix string) {
	iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	batch := make([]string, 0, 1000)
	flush := func() {
		if len(batch) > 0 {
			client.Del(ctx, batch...)
			batch = batch[:0]
		}
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			flush()
		}
	}
	flush()
}

// UpstreamHandler serves the tool as a gateway HTTP upstream (contract
// section 4): the gateway POSTs the arguments with the Idempotency-Key
// header, and the tool's answer goes back unchanged. An external gateway
// pointed at it lets the dup check read the counters of its calls.
func (t *CounterTool) UpstreamHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		resp, err := t.Call(r.Context(), &tools.Request{IdempotencyKey: r.Header.Get(wire.HeaderIdempotencyKey)})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", resp.ContentType)
		w.WriteHeader(resp.Status)
		_, _ = w.Write(resp.Body)
	})
}
