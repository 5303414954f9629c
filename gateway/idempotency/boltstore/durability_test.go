package boltstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

// durabilityChildEnv, when set, makes TestCompletedRecordSurvivesKill act
// as the child process: it names the store file to write.
const durabilityChildEnv = "BOLTSTORE_DURABILITY_CHILD_DB"

var durabilityScope = idempotency.Scope{Tenant: "acme", Tool: "provision", Key: "durable-key"}

// durabilityBody has bytes JSON would mangle if stored as text.
var durabilityBody = []byte("{\"id\":\"vm-1\"}\x00\xff\n")

// TestCompletedRecordSurvivesKill runs itself as a child process that
// completes a record and is then killed with SIGKILL before it can close
// the store; the record must be readable afterwards.
func TestCompletedRecordSurvivesKill(t *testing.T) {
	if path := os.Getenv(durabilityChildEnv); path != "" {
		runDurabilityChild(path)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}

	path := filepath.Join(t.TempDir(), "gw.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCompletedRecordSurvivesKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), durabilityChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	var executionID string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if id, ok := strings.CutPrefix(lines.Text(), "done "); ok {
			executionID = id
			break
		}
	}
	if executionID == "" {
		t.Fatalf("child exited without reporting done (scan error %v)", lines.Err())
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	err = cmd.Wait()
	killed = true
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child ended with %v, want killed by SIGKILL", err)
	}

	s, err := Open(path, Options{SweepInterval: -1})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	rec, err := s.Get(context.Background(), durabilityScope)
	if err != nil {
		t.Fatalf("Get after kill: %v", err)
	}
	if rec.State != idempotency.StateCompleted || rec.ExecutionID != executionID || rec.Response == nil ||
		rec.Response.Status != 201 || rec.Response.ContentType != "application/json" ||
		!bytes.Equal(rec.Response.Body, durabilityBody) {
		t.Fatalf("record after kill %+v, want COMPLETED 201 with body %q and execution %s", rec, durabilityBody, executionID)
	}
	d, err := s.Claim(context.Background(), idempotency.ClaimRequest{
		Scope: durabilityScope, Fingerprint: "fp", ExecutionID: "new", Owner: "new",
		LockTTL: time.Second, ReplayTTL: time.Hour,
	})
	if err != nil || d.Outcome != idempotency.OutcomeReplay || !bytes.Equal(d.Response.Body, durabilityBody) {
		t.Fatalf("Claim after kill = %+v, %v; want a byte-exact replay", d, err)
	}
}

// runDurabilityChild completes one record, reports it and waits to be
// killed; it never closes the store.
func runDurabilityChild(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "durability child:", err)
		os.Exit(3)
	}
	s, err := Open(path, Options{SweepInterval: -1})
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	d, err := s.Claim(ctx, idempotency.ClaimRequest{
		Scope: durabilityScope, Fingerprint: "fp", ExecutionID: "exec-durable", Owner: "child",
		LockTTL: time.Minute, ReplayTTL: time.Hour,
	})
	if err != nil {
		fail(err)
	}
	resp := idempotency.StoredResponse{Status: 201, ContentType: "application/json", Body: durabilityBody}
	if err := s.Complete(ctx, d.Lease, resp, time.Hour); err != nil {
		fail(err)
	}
	fmt.Println("done " + d.ExecutionID)
	time.Sleep(time.Minute) // the parent kills us long before this ends
	os.Exit(4)
}
