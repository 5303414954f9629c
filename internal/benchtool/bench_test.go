package benchtool

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/wire"
)

// TestModesAgainstInProcessServers runs each mode briefly against two
// gateway replicas sharing one Redis and against the baseline, and checks
// what the load tool counts, not how fast anything is.
func TestModesAgainstInProcessServers(t *testing.T) {
	servers, err := StartServers(t.Context(), ServersConfig{RedisAddr: redistest.Addr(t), Replicas: 2, AccessLog: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := servers.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	targets := []Target{
		{Name: BaselineName, URLs: []string{servers.BaselineURL}, Tool: servers.Tool},
		{Name: "gateway", URLs: servers.GatewayURLs, RoundTrips: servers.StoreRoundTrips, Tool: servers.Tool},
	}
	run := func(t *testing.T, mode Mode) (baseline, gw TargetReport) {
		t.Helper()
		report, err := RunBench(t.Context(), BenchConfig{
			Targets:  targets,
			Load:     LoadConfig{Mode: mode, Workers: 8, DupK: 4, PoolSize: 40},
			Rounds:   2,
			Duration: 300 * time.Millisecond,
			Warmup:   100 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range report.Targets {
			if tr.Result.Requests == 0 || tr.Result.Errors != 0 || tr.Result.RPS() <= 0 {
				t.Fatalf("%s: %d requests, %d errors, %.0f req/s", tr.Name, tr.Result.Requests, tr.Result.Errors, tr.Result.RPS())
			}
			if p50, p99 := tr.Result.Percentile(0.5), tr.Result.Percentile(0.99); p50 <= 0 || p99 < p50 {
				t.Fatalf("%s: p50 %v, p99 %v", tr.Name, p50, p99)
			}
		}
		if len(report.JSON()) == 0 {
			t.Fatal("empty JSON report")
		}
		return report.Targets[0], report.Targets[1]
	}

	t.Run("fresh", func(t *testing.T) {
		baseline, gw := run(t, ModeFresh)
		for _, tr := range []TargetReport{baseline, gw} {
			if tr.Result.Statuses[http.StatusOK] != tr.Result.Requests || tr.Result.Replayed != 0 {
				t.Errorf("%s: statuses %v, %d replayed; want every answer a fresh 200", tr.Name, tr.Result.Statuses, tr.Result.Replayed)
			}
		}
		if got := gw.Result.RoundTripsPerRequest(); got != TargetFreshTrips {
			t.Errorf("gateway: %.3f store round trips per fresh call, want %v", got, TargetFreshTrips)
		}
	})
	t.Run("replay", func(t *testing.T) {
		_, gw := run(t, ModeReplay)
		if gw.Result.Replayed != gw.Result.Requests || gw.Result.Statuses[http.StatusOK] != gw.Result.Requests {
			t.Errorf("gateway: %d of %d replayed, statuses %v", gw.Result.Replayed, gw.Result.Requests, gw.Result.Statuses)
		}
		if got := gw.Result.RoundTripsPerRequest(); got != TargetReplayTrips {
			t.Errorf("gateway: %.3f store round trips per replay, want %v", got, TargetReplayTrips)
		}
	})
	t.Run("dup", func(t *testing.T) {
		baseline, gw := run(t, ModeDup)
		if gw.Dup == nil || gw.Dup.Steps == 0 || gw.Dup.Duplicated != 0 || gw.Dup.Missing != 0 || gw.Dup.MaxRuns != 1 {
			t.Errorf("gateway behind 2 replicas: dup check %+v, want every step run exactly once", gw.Dup)
		}
		// Without the idempotency layer every copy runs: the check must see it.
		if baseline.Dup == nil || baseline.Dup.Duplicated != baseline.Dup.Steps || baseline.Dup.MaxRuns != 4 {
			t.Errorf("baseline: dup check %+v, want every step run 4 times", baseline.Dup)
		}
		if gw.Result.Statuses[http.StatusOK]+gw.Result.Statuses[http.StatusConflict] != gw.Result.Requests {
			t.Errorf("gateway: statuses %v, want only 200 and 409", gw.Result.Statuses)
		}
	})
}

func TestCloseDeletesTheRunsKeys(t *testing.T) {
	addr := redistest.Addr(t)
	servers, err := StartServers(t.Context(), ServersConfig{RedisAddr: addr})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLoad(LoadConfig{URLs: servers.GatewayURLs, Mode: ModeFresh, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := l.Run(t.Context(), 100*time.Millisecond); err != nil || res.Requests == 0 {
		t.Fatalf("run: %v, %+v", err, res)
	}
	probe := redis.NewClient(&redis.Options{Addr: addr})
	defer probe.Close()
	count := func() int {
		keys, err := probe.Keys(t.Context(), servers.Prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	if count() == 0 {
		t.Fatal("the run wrote no keys under its prefix")
	}
	if err := servers.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("after Close: %d keys left under %s", n, servers.Prefix)
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	r := newResult()
	for i := 100; i >= 1; i-- {
		r.record(200, false, time.Duration(i)*time.Millisecond)
	}
	other := newResult()
	other.record(200, true, 1000*time.Millisecond)
	r.Merge(other)
	cases := map[float64]time.Duration{0.5: 51 * time.Millisecond, 0.99: 100 * time.Millisecond, 1: time.Second, 0: time.Millisecond}
	for p, want := range cases {
		if got := r.Percentile(p); got != want {
			t.Errorf("p%v = %v, want %v", p*100, got, want)
		}
	}
	if r.Requests != 101 || r.Replayed != 1 || r.Statuses[200] != 101 {
		t.Errorf("merged counts: %+v", r)
	}
}

func TestRoundTripsLeaveOutConnectionHandshakes(t *testing.T) {
	counter := &RoundTrips{}
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t), PoolSize: 1})
	defer client.Close()
	client.AddHook(counter)
	ctx := t.Context()
	if err := client.Ping(ctx).Err(); err != nil { // dials: handshake + PING
		t.Fatal(err)
	}
	if _, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Ping(ctx)
		p.Ping(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if counter.Count() != 2 || counter.Setup() < 1 {
		t.Fatalf("counted %d round trips and %d handshakes, want 2 and at least 1", counter.Count(), counter.Setup())
	}
}

func TestRateCapsRequests(t *testing.T) {
	servers, err := StartServers(t.Context(), ServersConfig{RedisAddr: redistest.Addr(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer servers.Close()
	l, err := NewLoad(LoadConfig{URLs: []string{servers.BaselineURL}, Mode: ModeFresh, Workers: 4, Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Run(t.Context(), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// 100/s for 0.5 s is 50, plus the buffer's burst of 8 at most.
	if res.Requests == 0 || res.Requests > 60 {
		t.Fatalf("%d requests at 100/s in 0.5 s", res.Requests)
	}
}

// TestMCPNextToREST loads the same gateway through REST and MCP (go-sdk's
// client, one session per worker) in the same rounds as the baseline, and
// checks what the load tool counts over MCP: every answer verified by its
// _meta and isError, the same store round trips as REST, and the dup
// check on the tool's counters.
func TestMCPNextToREST(t *testing.T) {
	servers, err := StartServers(t.Context(), ServersConfig{
		RedisAddr: redistest.Addr(t), Replicas: 2,
		// Losers of a dup race answer -32001 at once, as REST's get 409.
		MCPInProgressWait: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := servers.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	gw := Target{URLs: servers.GatewayURLs, RoundTrips: servers.StoreRoundTrips, Tool: servers.Tool}
	rest, overMCP := gw, gw
	rest.Name, rest.API = "gateway", APIREST
	overMCP.Name, overMCP.API = "gateway-mcp", APIMCP
	plain := Target{Name: "plain-mcp", API: APIMCP, URLs: []string{servers.PlainMCPURL}, NoIdempotency: true}
	targets := []Target{{Name: BaselineName, URLs: []string{servers.BaselineURL}, Tool: servers.Tool}, rest, overMCP, plain}
	run := func(t *testing.T, mode Mode) TargetReport {
		t.Helper()
		report, err := RunBench(t.Context(), BenchConfig{
			Targets:  targets,
			Load:     LoadConfig{Mode: mode, Workers: 8, DupK: 4, PoolSize: 40},
			Rounds:   2,
			Duration: 300 * time.Millisecond,
			Warmup:   100 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Targets) != 4 {
			t.Fatalf("%d targets reported, want 4", len(report.Targets))
		}
		for _, tr := range report.Targets {
			if tr.Result.Requests == 0 || tr.Result.Errors != 0 {
				t.Fatalf("%s: %d requests, %d errors", tr.Name, tr.Result.Requests, tr.Result.Errors)
			}
		}
		mcpReport := report.Targets[2]
		if plain := report.Targets[3].Result; mode != ModeDup && plain.Statuses[http.StatusOK] != plain.Requests {
			t.Errorf("plain go-sdk server: statuses %v, want every answer a result without isError", plain.Statuses)
		}
		if mcpReport.API != APIMCP || report.Targets[1].API != APIREST || report.Targets[0].API != APIREST {
			t.Fatalf("APIs reported: %s, %s, %s", report.Targets[0].API, report.Targets[1].API, mcpReport.API)
		}
		return mcpReport
	}

	t.Run("fresh", func(t *testing.T) {
		res := run(t, ModeFresh).Result
		if res.Statuses[http.StatusOK] != res.Requests || res.Replayed != 0 {
			t.Errorf("statuses %v, %d replayed; want every answer a fresh result without isError", res.Statuses, res.Replayed)
		}
		if got := res.RoundTripsPerRequest(); got != TargetFreshTrips {
			t.Errorf("%.3f store round trips per fresh call over MCP, want %v", got, TargetFreshTrips)
		}
	})
	t.Run("replay", func(t *testing.T) {
		res := run(t, ModeReplay).Result
		if res.Replayed != res.Requests || res.Statuses[http.StatusOK] != res.Requests {
			t.Errorf("%d of %d replayed, statuses %v", res.Replayed, res.Requests, res.Statuses)
		}
		if got := res.RoundTripsPerRequest(); got != TargetReplayTrips {
			t.Errorf("%.3f store round trips per replay over MCP, want %v", got, TargetReplayTrips)
		}
	})
	t.Run("dup", func(t *testing.T) {
		tr := run(t, ModeDup)
		if tr.Dup == nil || tr.Dup.Steps == 0 || tr.Dup.Duplicated != 0 || tr.Dup.Missing != 0 || tr.Dup.MaxRuns != 1 {
			t.Errorf("over MCP behind 2 replicas: dup check %+v, want every step run exactly once", tr.Dup)
		}
		res := tr.Result
		if res.Statuses[http.StatusOK]+res.Statuses[wire.RPCRequestInProgress] != res.Requests {
			t.Errorf("statuses %v, want only results without isError and -32001", res.Statuses)
		}
		// At most one answer per step ran the tool; the others lost the
		// race (-32001) or came after it finished (a replay). Steps also
		// counts the warm-up's, whose answers are not in the result.
		if ran := res.Statuses[http.StatusOK] - res.Replayed; ran <= 0 || ran > int64(tr.Dup.Steps) {
			t.Errorf("%d answers executed the tool for %d steps", ran, tr.Dup.Steps)
		}
	})
}

func TestUnknownAPIRefused(t *testing.T) {
	if _, err := NewLoad(LoadConfig{URLs: []string{"http://127.0.0.1:1"}, Mode: ModeFresh, API: "grpc"}); err == nil {
		t.Fatal("an unknown API was accepted")
	}
}

// TestMCPAnswersAreVerified sends the load's raw tools/call to servers
// that answer wrongly: each answer that is not the JSON-RPC answer of the
// request sent, or a gateway result without its executionId or replayed
// flag, is counted as an error, never as a success.
func TestMCPAnswersAreVerified(t *testing.T) {
	for name, answer := range map[string]string{
		"other id":       `{"jsonrpc":"2.0","id":999,"result":{"content":[{"type":"text","text":"{}"}],"_meta":{"io.github.toolgateway/executionId":"x","io.github.toolgateway/replayed":false}}}`,
		"no executionId": `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{}"}],"_meta":{"io.github.toolgateway/replayed":false}}}`,
		"no replayed":    `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{}"}],"_meta":{"io.github.toolgateway/executionId":"x"}}}`,
		"no content":     `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.github.toolgateway/executionId":"x","io.github.toolgateway/replayed":false}}}`,
		"not JSON-RPC":   `Bad Request`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, answer)
			}))
			defer srv.Close()
			l, err := NewLoad(LoadConfig{URLs: []string{srv.URL}, Mode: ModeFresh, API: APIMCP, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			res, err := l.Run(t.Context(), 50*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors == 0 || res.Requests != 0 {
				t.Fatalf("%d answers counted, %d errors; want every answer an error", res.Requests, res.Errors)
			}
		})
	}
}
