// Package gatewayproc builds and starts the gateway's programs (cmd/gateway,
// examples/orders/ordersgateway) as real processes for tests, including
// tests of modules nested in this repository (agentclient/eino).
package gatewayproc

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// startTimeout bounds the wait for a program to start listening.
const startTimeout = 60 * time.Second

// Build compiles the main package pkg of the gateway module ("./cmd/gateway",
// a path relative to the repository's root) into a temporary directory and
// returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = RepoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Start starts cmd (a gateway program; its stdout must be unset), waits
// for its "gateway listening" log line and returns its base URL. The
// process is killed when the test ends. If it ends before listening, the
// test fails with its stderr.
func Start(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	return StartLogged(t, cmd, io.Discard)
}

// StartLogged is Start copying each of the program's log lines (its
// stdout) to log, for a test that reads them afterwards.
func StartLogged(t testing.TB, cmd *exec.Cmd, log io.Writer) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		defer close(addr)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			_, _ = log.Write(append(lines.Bytes(), '\n'))
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(lines.Bytes(), &line) == nil && line.Msg == "gateway listening" {
				addr <- line.Addr
			}
		}
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("%s ended before listening: %s", filepath.Base(cmd.Path), stderr.String())
		}
		return "http://" + a
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // stderr is complete once Wait returns
		t.Fatalf("%s did not start listening within %s: %s", filepath.Base(cmd.Path), startTimeout, stderr.String())
		return ""
	}
}

// RepoRoot is the repository's root directory (the gateway module's).
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("gatewayproc: no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
