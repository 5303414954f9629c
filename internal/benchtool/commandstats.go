package benchtool

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisCommandCalls reads how many times the Redis server behind client
// has run each command so far (INFO commandstats; commands a script runs
// are counted under their own names as well as the script's EVALSHA).
// Deltas around a run count the commands a target's calls cost without
// MONITOR, which would slow Redis down; like INFO cpu they are exact only
// when nothing else uses that Redis. The benchmark's own INFO is left out.
func RedisCommandCalls(ctx context.Context, client redis.UniversalClient) (map[string]int64, error) {
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("benchtool: redis commandstats: %w", err)
	}
	calls := make(map[string]int64)
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if name == "info" {
			continue
		}
		for _, field := range strings.Split(stats, ",") {
			if value, found := strings.CutPrefix(field, "calls="); found {
				n, err := strconv.ParseInt(value, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("benchtool: redis commandstats: %s %q: %w", name, value, err)
				}
				calls[name] = n
			}
		}
	}
	return calls, nil
}

// commandDeltas returns after − before, leaving out commands that did not run.
func commandDeltas(before, after map[string]int64) map[string]int64 {
	out := make(map[string]int64)
	for name, n := range after {
		if d := n - before[name]; d > 0 {
			out[name] = d
		}
	}
	return out
}
