package benchtool

import (
	"net/http"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/redistest"
)

// TestFloorIsExactlyOnceInTheGatewaysRoundTrips loads the floor in each
// mode: it replays byte for byte what it ran, runs no step twice when
// identical calls race, and makes the store round trips a gateway call
// makes (two per fresh call, one per replay), so a throughput ratio to it
// measures what the gateway adds beyond the protocol.
func TestFloorIsExactlyOnceInTheGatewaysRoundTrips(t *testing.T) {
	servers, err := StartServers(t.Context(), ServersConfig{RedisAddr: redistest.Addr(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := servers.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	targets := []Target{
		{Name: FloorName, URLs: []string{servers.FloorURL}, RoundTrips: servers.FloorRoundTrips, Tool: servers.Tool},
		{Name: "gateway", URLs: servers.GatewayURLs, RoundTrips: servers.StoreRoundTrips, Tool: servers.Tool},
	}
	run := func(t *testing.T, mode Mode) *Report {
		t.Helper()
		report, err := RunBench(t.Context(), BenchConfig{
			Targets: targets, Rounds: 1, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond,
			Load: LoadConfig{Mode: mode, Workers: 8, DupK: 4, PoolSize: 40},
		})
		if err != nil {
			t.Fatal(err)
		}
		return report
	}
	checks := func(r *Report) map[string]Check {
		byName := map[string]Check{}
		for _, c := range r.Checks() {
			byName[c.Name] = c
		}
		return byName
	}

	t.Run("fresh", func(t *testing.T) {
		r := run(t, ModeFresh)
		floor := r.target(FloorName).Result
		if floor.Requests == 0 || floor.Statuses[http.StatusOK] != floor.Requests || floor.Replayed != 0 {
			t.Fatalf("floor: %d requests, statuses %v, %d replayed; want every answer a fresh 200", floor.Requests, floor.Statuses, floor.Replayed)
		}
		c := checks(r)
		if trips := c["floor store round trips per fresh call"]; !trips.Pass {
			t.Errorf("floor: %.3f round trips per fresh call, want %v", trips.Got, TargetFreshTrips)
		}
		if _, ok := c["gateway fresh throughput / floor"]; !ok {
			t.Errorf("no gateway / floor check in %v", c)
		}
		if _, ok := c["floor fresh throughput / baseline"]; ok {
			t.Error("the floor is a reference, not checked against the baseline")
		}
	})
	t.Run("replay", func(t *testing.T) {
		r := run(t, ModeReplay)
		floor := r.target(FloorName).Result
		if floor.Requests == 0 || floor.Replayed != floor.Requests || floor.Statuses[http.StatusOK] != floor.Requests {
			t.Fatalf("floor: %d of %d replayed, statuses %v", floor.Replayed, floor.Requests, floor.Statuses)
		}
		if trips := checks(r)["floor store round trips per replay"]; !trips.Pass {
			t.Errorf("floor: %.3f round trips per replay, want %v", trips.Got, TargetReplayTrips)
		}
	})
	t.Run("dup", func(t *testing.T) {
		r := run(t, ModeDup)
		dup := r.target(FloorName).Dup
		if dup == nil || dup.Steps == 0 || dup.Duplicated != 0 || dup.Missing != 0 {
			t.Fatalf("floor dup check: %+v; want steps, none run twice, none missing", dup)
		}
	})
}
