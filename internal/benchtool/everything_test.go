package benchtool

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/redistest"
)

// TestEverythingProfile loads the everything gateways with each tool
// choice: calls without a token, or with a token of the right issuer
// signed by another key, run nothing (401); with the issuer's tokens
// every fresh call runs the tool once and leaves one receipt, and
// replays run nothing and make one store round trip.
func TestEverythingProfile(t *testing.T) {
	for _, tool := range []string{EverythingToolInProcess, EverythingToolMCP} {
		t.Run(tool, func(t *testing.T) {
			servers, err := StartServers(t.Context(), ServersConfig{RedisAddr: redistest.Addr(t), Everything: true, EverythingTool: tool})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = servers.Close() })
			if len(servers.EverythingURLs) != 1 || len(servers.EverythingTokens) != everythingTokens {
				t.Fatalf("%d gateways, %d tokens", len(servers.EverythingURLs), len(servers.EverythingTokens))
			}
			other, err := StartIssuer()
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			forger := *other
			forger.URL = servers.everything.issuer.URL
			forged, err := forger.Token(EverythingAudience, EverythingTenant, "mallory", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			for name, tokens := range map[string][]string{"no token": nil, "forged token": {forged}} {
				l, err := NewLoad(LoadConfig{URLs: servers.EverythingURLs, Mode: ModeFresh, Workers: 2, BearerTokens: tokens})
				if err != nil {
					t.Fatal(err)
				}
				res, err := l.Run(t.Context(), 100*time.Millisecond)
				_ = l.Close()
				if err != nil {
					t.Fatal(err)
				}
				if res.Requests == 0 || res.Statuses[http.StatusUnauthorized] != res.Requests {
					t.Errorf("%s: statuses %v of %d requests, want all 401", name, res.Statuses, res.Requests)
				}
			}
			if n := servers.EverythingReceiptCounts().Executed; n != 0 {
				t.Fatalf("refused calls ran the tool %d times", n)
			}

			counts := func(context.Context) (ReceiptCounts, error) { return servers.EverythingReceiptCounts(), nil }
			target := Target{Name: EverythingName, URLs: servers.EverythingURLs, BearerTokens: servers.EverythingTokens,
				RoundTrips: servers.EverythingRoundTripsCount, Profile: "everything",
				Settle:   func(ctx context.Context) error { return WaitReceipts(ctx, counts) },
				Receipts: func(context.Context) (int64, error) { return servers.EverythingReceiptCounts().Written, nil }}
			overMCP := target
			overMCP.Name, overMCP.API = EverythingMCPName, APIMCP
			for _, tg := range []Target{target, overMCP} {
				for _, mode := range []Mode{ModeFresh, ModeReplay} {
					checkEverythingRun(t, servers, tg, mode)
				}
			}
		})
	}
}

// checkEverythingRun loads tg in mode: every answer 200; fresh calls run
// the tool once and leave one receipt each; replays run nothing and make
// one store round trip.
func checkEverythingRun(t *testing.T, servers *Servers, tg Target, mode Mode) {
	t.Helper()
	before := servers.EverythingReceiptCounts().Executed
	report, err := RunBench(t.Context(), BenchConfig{Targets: []Target{tg},
		Load: LoadConfig{Mode: mode, Workers: 4, PoolSize: 20}, Rounds: 1, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res := report.Targets[0].Result
	if res.Requests == 0 || res.Errors != 0 || res.Statuses[http.StatusOK] != res.Requests {
		t.Fatalf("%s %s: statuses %v, %d errors of %d requests", tg.Name, mode, res.Statuses, res.Errors, res.Requests)
	}
	executed := servers.EverythingReceiptCounts().Executed - before
	switch mode {
	case ModeFresh:
		if executed != res.Requests || res.Receipts != res.Requests {
			t.Errorf("%s fresh: %d requests ran the tool %d times and left %d receipts; want one each", tg.Name, res.Requests, executed, res.Receipts)
		}
	case ModeReplay:
		// The pool's 20 steps ran once each while the load was prepared;
		// the replays ran nothing.
		if executed != 20 || res.Replayed != res.Requests || res.RoundTripsPerRequest() != 1 {
			t.Errorf("%s replay: the tool ran %d times, %d of %d replayed, %.2f round trips per replay; want 20 (the pool), all, 1",
				tg.Name, executed, res.Replayed, res.Requests, res.RoundTripsPerRequest())
		}
	}
}
