package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

// oversizedAlongsideNormal runs, on one shared session, a call whose
// result is over the cap (tenant acme) while another tenant's slow call is
// in flight: the oversized call fails alone with ErrResponseTooLarge, the
// other one succeeds, and a call after both works. It returns the number
// of create_ticket and big_result completions the server counted.
func oversizedAlongsideNormal(t *testing.T, reg *tools.Registry, counted func(tool string) int) {
	t.Helper()
	ctx := context.Background()
	call := func(tool, tenant, args string) (*tools.Response, error) {
		return lookup(t, reg, tool).Tool.Call(ctx, &tools.Request{Arguments: json.RawMessage(args), Tenant: tenant})
	}
	type result struct {
		resp *tools.Response
		err  error
	}
	other := make(chan result, 1)
	go func() {
		resp, err := call("create_ticket", "globex", `{"title":"other tenant","delay_ms":800}`)
		other <- result{resp, err}
	}()
	waitFor(t, "the other tenant's call to start", func() bool { return counted(mcptest.ToolCreate+":start") == 1 })
	_, err := call("big_result", "acme", `{"bytes":300000}`)
	if !errors.Is(err, tools.ErrResponseTooLarge) {
		t.Fatalf("oversized result: %v, want ErrResponseTooLarge", err)
	}
	if !strings.Contains(err.Error(), "65536") {
		t.Fatalf("the error does not name the cap: %v", err)
	}
	r := <-other
	if r.err != nil || r.resp.Status != 200 || !strings.Contains(string(r.resp.Body), "other tenant") {
		t.Fatalf("the other tenant's call on the same session: %v %+v", r.err, r.resp)
	}
	if n := counted(mcptest.ToolCreate); n != 1 {
		t.Fatalf("create_ticket ran %d times, want 1", n)
	}
	if n := counted(mcptest.ToolBig); n != 1 {
		t.Fatalf("big_result ran %d times, want 1", n)
	}
	// Under the cap the same tool answers.
	resp, err := call("big_result", "acme", `{"bytes":60000}`)
	if err != nil || resp.Status != 200 {
		t.Fatalf("result under the cap: %v", err)
	}
}

// TestOversizedStdioResultFailsAloneOnTheSharedSession: over stdio, one
// process and one session carry both tenants' calls; the oversized result
// does not end it (same process before and after).
func TestOversizedStdioResultFailsAloneOnTheSharedSession(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "execs.jsonl")
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{
		Name: "local", Command: []string{stdioBinary(t), "-log", logPath}, MaxResponseBytes: 64 << 10, RecordIsError: true,
	}, mcptool.Options{})
	counted := func(what string) int {
		tool, event, _ := strings.Cut(what, ":")
		if event == "" {
			event = "done"
		}
		return len(mcptest.Filter(readLog(t, logPath), tool, event))
	}
	oversizedAlongsideNormal(t, reg, counted)
	pids := map[int]bool{}
	for _, e := range readLog(t, logPath) {
		pids[e.PID] = true
	}
	if len(pids) != 1 {
		t.Fatalf("the calls ran in %d processes: the session was restarted", len(pids))
	}
}

// TestOversizedURLResultFailsAloneOnTheSharedSession: over Streamable HTTP,
// with SSE and with JSON answers, one session carries both tenants' calls;
// the oversized answer is not read past the cap and the session goes on
// (no new handshake).
func TestOversizedURLResultFailsAloneOnTheSharedSession(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("json_response=%v", jsonResponse), func(t *testing.T) {
			up := newHTTPUpstreamWith(t, mcptest.Options{}, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
			reg := tools.NewRegistry()
			startManager(t, reg, mcptool.ServerConfig{
				Name: "remote", URL: up.http.URL, Sessions: 1, MaxResponseBytes: 64 << 10, RecordIsError: true,
			}, mcptool.Options{})
			sessions := up.srv.Initialized()
			counted := func(what string) int {
				tool, event, _ := strings.Cut(what, ":")
				if event == "" {
					event = "done"
				}
				return len(mcptest.Filter(up.srv.All(), tool, event))
			}
			oversizedAlongsideNormal(t, reg, counted)
			if n := up.srv.Initialized(); n != sessions {
				t.Fatalf("%d handshakes after the oversized answer, %d before: the session was replaced", n, sessions)
			}
		})
	}
}

// TestStdioResultOverGoSDKLineLimit: a 17 MiB result, over go-sdk's own
// 16 MiB line limit (which used to end the session), under the default
// cap of 4 MiB: the call fails with ErrResponseTooLarge and the same
// process serves the next call.
func TestStdioResultOverGoSDKLineLimit(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "execs.jsonl")
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "local", Command: []string{stdioBinary(t), "-log", logPath}, RecordIsError: true}, mcptool.Options{})
	call := func(tool, args string) (*tools.Response, error) {
		return lookup(t, reg, tool).Tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(args), Tenant: "acme"})
	}
	_, err := call("big_result", `{"bytes":17825792}`)
	if !errors.Is(err, tools.ErrResponseTooLarge) || !strings.Contains(err.Error(), fmt.Sprint(mcptool.DefaultMaxResponseBytes)) {
		t.Fatalf("17 MiB result: %v, want ErrResponseTooLarge naming the default cap", err)
	}
	if resp, err := call("create_ticket", `{"title":"next"}`); err != nil || resp.Status != 200 {
		t.Fatalf("the next call: %v", err)
	}
	pids := map[int]bool{}
	for _, e := range readLog(t, logPath) {
		pids[e.PID] = true
	}
	if len(pids) != 1 {
		t.Fatalf("the calls ran in %d processes: the session was restarted", len(pids))
	}
}
