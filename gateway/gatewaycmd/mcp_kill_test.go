package gatewaycmd

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/wire"
)

// replica is one gateway process (the real program) on a fixed address.
type replica struct {
	cmd  *exec.Cmd
	logs *testutil.LockedBuffer
	done chan error // the process's exit
}

// startReplica starts the gateway program with the config at path and
// waits until /readyz answers 200 on addr (the upstream's tools listed).
// The process is killed at the end of the test if it still runs.
func startReplica(t *testing.T, bin, path, addr string) *replica {
	t.Helper()
	r := &replica{logs: &testutil.LockedBuffer{}, done: make(chan error, 1)}
	r.cmd = exec.Command(bin, "-config", path)
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start the gateway: %v", err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() { r.kill() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-r.done:
			r.done = nil
			t.Fatalf("the gateway exited at start: %v\n%s", err, r.output())
		default:
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not become ready:\n%s", r.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL (no drain, no release of leases) and waits for the
// exit; a second kill does nothing.
func (r *replica) kill() {
	if r.done == nil {
		return
	}
	_ = r.cmd.Process.Signal(os.Kill)
	<-r.done
	r.done = nil
}

func (r *replica) output() string {
	return r.logs.String()
}

// freeAddr is a loopback address nobody listens on (so a restarted
// replica can take the same one).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestMCPGatewayKilledMidCall runs the real gateway program in front of
// an MCP upstream, SIGKILLs it while a call made over MCP (go-sdk's
// client) runs, and restarts it on the same embedded store. The same call,
// retried over MCP, follows the lease rules: -32001 request_in_progress
// while the dead gateway's lease lives, then the takeover runs it again
// (lease_expiry: rerun) with a higher fencing token, and a later retry
// replays that execution.
func TestMCPGatewayKilledMidCall(t *testing.T) {
	bin := buildGateway(t)
	up := newMCPUpstream(t)
	addr := freeAddr(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	// lock_ttl is long enough to see the dead owner's lease on a loaded
	// machine, in_progress_wait 0s answers -32001 at once meanwhile.
	if err := os.WriteFile(config, []byte("listen: "+addr+"\nstore:\n  path: "+filepath.Join(dir, "gw.db")+`
idempotency:
  lock_ttl: 4s
mcp:
  in_progress_wait: 0s
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
    lease_expiry: rerun
    timeout: 30s
`), 0o600); err != nil {
		t.Fatal(err)
	}
	const tool, session, step = "t_create_ticket", "killed", 1
	args := `{"title":"survives a kill","delay_ms":1500}`
	starts := func() []mcptest.Execution { return mcptest.Filter(up.srv.All(), mcptest.ToolCreate, "start") }

	first := startReplica(t, bin, config, addr)
	cs := mcpClient(t, addr)
	errc := make(chan error, 1)
	go func() {
		_, err := mcpCallTool(t, cs, tool, args, session, step)
		errc <- err
	}()
	waitFor(t, func() bool { return len(starts()) == 1 })
	first.kill()
	if err := <-errc; err == nil {
		t.Fatal("the call whose gateway was killed got a result")
	}

	startReplica(t, bin, config, addr)
	cs = mcpClient(t, addr)
	inProgress := 0
	var res *mcpResult
	deadline := time.Now().Add(60 * time.Second)
	for res == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no result within 60s of retries (%d answered -32001)", inProgress)
		}
		out, err := mcpCallTool(t, cs, tool, args, session, step)
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == wire.RPCRequestInProgress {
			var data struct {
				Code         string  `json:"code"`
				Retryable    bool    `json:"retryable"`
				RetryAfterMS float64 `json:"retry_after_ms"`
			}
			if err := json.Unmarshal(rpcErr.Data, &data); err != nil || data.Code != wire.CodeRequestInProgress || !data.Retryable || data.RetryAfterMS < 1 {
				t.Fatalf("in progress: data %s (%v), want request_in_progress, retryable, retry_after_ms", rpcErr.Data, err)
			}
			inProgress++
			// As a client should: wait what the gateway says (capped).
			time.Sleep(time.Duration(min(data.RetryAfterMS, 1000)) * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("retry after the restart: %v", err)
		}
		res = &mcpResult{meta: out.Meta, isError: out.IsError}
	}
	t.Logf("%d retries answered -32001 while the dead gateway's lease lived", inProgress)

	all := starts()
	if len(all) != 2 {
		t.Fatalf("the upstream started the call %d times, want 2 (the killed run and the takeover's rerun)", len(all))
	}
	killedID, rerunID := all[0].Meta[wire.MetaExecutionID], all[1].Meta[wire.MetaExecutionID]
	if res.isError || res.meta[wire.MetaReplayed] != false || res.meta[wire.MetaExecutionID] != rerunID || rerunID == killedID {
		t.Fatalf("takeover result _meta %v isError %v: want replayed false and the rerun's execution %v (the killed one was %v)", res.meta, res.isError, rerunID, killedID)
	}
	killedFence, _ := all[0].Meta[wire.MetaFencingToken].(float64)
	rerunFence, _ := all[1].Meta[wire.MetaFencingToken].(float64)
	if !(rerunFence > killedFence && killedFence > 0) {
		t.Fatalf("fencing tokens killed %v, rerun %v: want the takeover's higher", all[0].Meta[wire.MetaFencingToken], all[1].Meta[wire.MetaFencingToken])
	}
	for _, e := range all {
		if e.Meta[wire.MetaSessionID] != session || e.Meta[wire.MetaStepIndex] != float64(step) {
			t.Fatalf("forwarded identity %v", e.Meta)
		}
	}

	replay, err := mcpCallTool(t, cs, tool, args, session, step)
	if err != nil {
		t.Fatal(err)
	}
	if replay.Meta[wire.MetaReplayed] != true || replay.Meta[wire.MetaExecutionID] != rerunID {
		t.Fatalf("replay _meta %v, want replayed true and execution %v", replay.Meta, rerunID)
	}
	if n := len(starts()); n != 2 {
		t.Fatalf("the replay started the tool (%d starts)", n)
	}
	rest := keyedCall(t, addr, session, step, tool, args)
	if rest.header.Get("Idempotent-Replayed") != "true" || rest.header.Get("Tool-Execution-Id") != rerunID {
		t.Fatalf("REST after the takeover: %d %s %v", rest.status, rest.body, rest.header)
	}
}

// mcpResult is what the kill test keeps of a CallToolResult.
type mcpResult struct {
	meta    map[string]any
	isError bool
}
