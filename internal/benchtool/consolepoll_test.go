package benchtool

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/redistest"
)

// TestConsolePollsBesideTheGateway loads the gateway alone and while a
// console, signed in through the sign-in form over real pending approvals,
// polls what the Approvals page polls: both targets answer, the console
// polled in every run and got only 200s.
func TestConsolePollsBesideTheGateway(t *testing.T) {
	servers, err := StartServers(t.Context(), ServersConfig{RedisAddr: redistest.Addr(t), Console: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := servers.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	poller, err := NewConsolePoller(ConsolePollConfig{AdminURL: servers.AdminURLs[0], AdminToken: servers.AdminToken,
		GatewayURL: servers.GatewayURLs[0], Pending: 60, Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	gw := Target{Name: "gateway", URLs: servers.GatewayURLs, RoundTrips: servers.StoreRoundTrips, Tool: servers.Tool}
	withConsole := gw
	withConsole.Name, withConsole.Companion, withConsole.Beside = ConsoleName, poller, "gateway"
	report, err := RunBench(t.Context(), BenchConfig{
		Targets: []Target{gw, withConsole},
		Load:    LoadConfig{Mode: ModeFresh, Workers: 4}, Rounds: 2, Duration: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range report.Targets {
		if tr.Result.Requests == 0 || tr.Result.Statuses[http.StatusOK] != tr.Result.Requests {
			t.Errorf("%s: %d requests, statuses %v", tr.Name, tr.Result.Requests, tr.Result.Statuses)
		}
	}
	if report.Targets[0].Result.Companion != nil {
		t.Error("the plain gateway target measured a console")
	}
	polls := report.Targets[1].Result.Companion
	// At least one poll per run (the first is at once), two runs.
	if polls == nil || polls.Requests < 2 || polls.Statuses[http.StatusOK] != polls.Requests || polls.Errors != 0 {
		t.Fatalf("console polls: %+v", polls)
	}
	// The first poll, at least, meets the pending approvals (later ones
	// scan a keyspace the load keeps growing, one bounded page a poll).
	if polls.Listed == 0 {
		t.Error("no poll showed a pending approval")
	}
	var names []string
	for _, c := range report.Checks() {
		names = append(names, c.Name)
		if c.Correctness && !c.Pass {
			t.Errorf("check failed: %+v", c)
		}
	}
	joined := strings.Join(names, "\n")
	for _, want := range []string{"gateway+console console polls answered 200", "gateway+console fresh throughput / gateway"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no check %q in %q", want, joined)
		}
	}
	var text strings.Builder
	report.WriteText(&text)
	if !strings.Contains(text.String(), "console beside gateway+console:") {
		t.Errorf("the report names no console line:\n%s", text.String())
	}
}

// TestConsoleWithAWrongTokenFailsToPrepare: the sign-in form refuses the
// token, and the run does not start with a console that cannot poll.
func TestConsoleWithAWrongTokenFailsToPrepare(t *testing.T) {
	servers, err := StartServers(t.Context(), ServersConfig{RedisAddr: redistest.Addr(t), Console: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = servers.Close() })
	poller, err := NewConsolePoller(ConsolePollConfig{AdminURL: servers.AdminURLs[0], AdminToken: "not-the-token",
		GatewayURL: servers.GatewayURLs[0], Pending: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := poller.Prepare(t.Context()); err == nil || !strings.Contains(err.Error(), "sign in") {
		t.Fatalf("prepare with a wrong token: %v", err)
	}
	if _, err := NewConsolePoller(ConsolePollConfig{AdminURL: servers.AdminURLs[0]}); err == nil {
		t.Fatal("a poller without token and gateway URL was accepted")
	}
}
