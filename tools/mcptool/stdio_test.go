package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
)

func readLog(t *testing.T, path string) []mcptest.Execution {
	t.Helper()
	execs, err := mcptest.ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	return execs
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestStdioServerIsStartedRestartedAndStopped runs the mcptestserver
// program as a stdio upstream: its stderr reaches the log tagged with the
// server name, a process that dies mid-call fails the call as uncertain
// and is restarted with its tools, and Close stops the process.
func TestStdioServerIsStartedRestartedAndStopped(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "execs.jsonl")
	logs := &testutil.LockedBuffer{}
	reg := tools.NewRegistry()
	m := startManager(t, reg, mcptool.ServerConfig{
		Name: "local", Command: []string{stdioBinary(t), "-log", logPath, "-page-size", "4"}, Prefix: "l_", RecordIsError: true,
	}, mcptool.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if reg.Len() != 8 {
		t.Fatalf("%d tools listed over stdio, want 8", reg.Len())
	}
	call := func(tool, args string) (*tools.Response, error) {
		return lookup(t, reg, tool).Tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(args), Tenant: "acme"})
	}
	resp, err := call("l_create_ticket", `{"title":"first"}`)
	if err != nil || resp.Status != 200 {
		t.Fatalf("call over stdio: %v %+v", err, resp)
	}
	waitFor(t, "stderr line in the log", func() bool {
		return strings.Contains(logs.String(), `"msg":"mcp server stderr","mcp_server":"local","line":"mcptestserver starting`)
	})
	firstPID := readLog(t, logPath)[0].PID

	_, err = call("l_die", `{}`)
	if !errors.Is(err, tools.ErrOutcomeUncertain) {
		t.Fatalf("server died mid-call: %v, want ErrOutcomeUncertain (the request had reached it)", err)
	}
	// Restarted with backoff; the tools work again, in a new process.
	waitFor(t, "a restarted server answering", func() bool {
		resp, err := call("l_create_ticket", `{"title":"after restart"}`)
		return err == nil && resp.Status == 200
	})
	execs := mcptest.Filter(readLog(t, logPath), mcptest.ToolCreate, "done")
	last := execs[len(execs)-1]
	if last.PID == firstPID {
		t.Fatal("the call after the crash ran in the dead process")
	}
	if !alive(last.PID) {
		t.Fatal("restarted server is not running")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server process to be gone after Close", func() bool { return !alive(last.PID) })
}

// TestStdioServerKilledMidCall kills the process while a call runs: the call
// fails at once (no waiting for the timeout) as an uncertain outcome, since
// the server had received it; the server's log shows it started and never
// finished.
func TestStdioServerKilledMidCall(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "execs.jsonl")
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "local", Command: []string{stdioBinary(t), "-log", logPath}, Policy: tools.Policy{Timeout: 20 * time.Second}}, mcptool.Options{})
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := lookup(t, reg, "create_ticket").Tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(`{"title":"slow","delay_ms":15000}`)})
		errc <- err
	}()
	waitFor(t, "the call to start", func() bool { return len(mcptest.Filter(readLog(t, logPath), mcptest.ToolCreate, "start")) == 1 })
	pid := readLog(t, logPath)[0].PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if !errors.Is(err, tools.ErrOutcomeUncertain) || errors.Is(err, tools.ErrUpstreamUnreachable) {
		t.Fatalf("killed mid-call: %v, want ErrOutcomeUncertain", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the call waited %v for a dead server", d)
	}
	if execs := readLog(t, logPath); len(mcptest.Filter(execs, mcptest.ToolCreate, "start")) != 1 || len(mcptest.Filter(execs, mcptest.ToolCreate, "done")) != 0 {
		t.Fatalf("server log: %+v, want one start and no completion", execs)
	}
}
