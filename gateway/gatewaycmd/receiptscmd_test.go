package gatewaycmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCommand runs `gateway args...` and returns its stdout and error.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	err := RunIO(t.Context(), append([]string{"gateway"}, args...), func(string) string { return "" }, nil, &out)
	return out.String(), err
}

// TestReceiptsExportVerify, on each store: calls through a running gateway
// leave receipts; after it stopped (its drain flushed them), `receipts
// export` writes them, `receipts verify` passes the file and the store
// itself (-dial); a receipt altered in the file, or one removed, fails
// verify naming it; a file that is not JSON lines fails naming the line.
func TestReceiptsExportVerify(t *testing.T) {
	for kind, section := range migrateStores(t) {
		t.Run(kind, func(t *testing.T) {
			configText := "listen: 127.0.0.1:0\nstore:\n" + section + echoUpstream(t)
			gw := startGateway(t, configText)
			for step := range uint64(4) {
				resp := call(t, gw.addr, "sess", step, "echo", `{"n":`+itoa(step)+`}`)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("call %d: %d", step, resp.StatusCode)
				}
			}
			gw.cancel()
			if err := <-gw.done; err != nil {
				t.Fatal(err)
			}
			gw.done <- nil // for the cleanup
			path := writeConfig(t, configText)

			exported, err := runCommand(t, "receipts", "export", "-config", path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(exported), "\n")
			if len(lines) != 4 || !strings.Contains(lines[0], `"event":"executed"`) || !strings.Contains(lines[0], `"status":200`) {
				t.Fatalf("export:\n%s", exported)
			}
			file := filepath.Join(t.TempDir(), "receipts.jsonl")
			write := func(text string) {
				if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write(exported)
			if out, err := runCommand(t, "receipts", "verify", file); err != nil || !strings.HasPrefix(out, "ok   anonymous: 4 receipts, seq 1…4") {
				t.Fatalf("verify of the export: %v\n%s", err, out)
			}
			if out, err := runCommand(t, "receipts", "verify", "-dial", "-config", path); err != nil || !strings.HasPrefix(out, "ok   anonymous: 4 receipts") {
				t.Fatalf("verify -dial: %v\n%s", err, out)
			}
			future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			if out, err := runCommand(t, "receipts", "export", "-config", path, "-tenant", "anonymous", "-since", future); err != nil || out != "" {
				t.Fatalf("export -since the future: %v %q", err, out)
			}

			write(strings.Replace(exported, `"status":200`, `"status":201`, 2)) // the first one, altered
			out, err := runCommand(t, "receipts", "verify", file)
			if err == nil || !strings.Contains(out, "FAIL anonymous: altered: seq 1 (line 1)") {
				t.Fatalf("verify of an altered receipt: %v\n%s", err, out)
			}
			write(lines[0] + "\n" + lines[2] + "\n" + lines[3] + "\n")
			out, err = runCommand(t, "receipts", "verify", file)
			if err == nil || !strings.Contains(out, "FAIL anonymous: removed: seq 2 is missing") {
				t.Fatalf("verify of a removed receipt: %v\n%s", err, out)
			}
			write(lines[0] + "\nnot json\n")
			if _, err := runCommand(t, "receipts", "verify", file); err == nil || !strings.Contains(err.Error(), "line 2") {
				t.Fatalf("verify of a file that is not JSON lines: %v", err)
			}
			if _, err := runCommand(t, "receipts", "export", "-config", path, "-since", "yesterday"); err == nil || !strings.Contains(err.Error(), `-since "yesterday"`) {
				t.Fatalf("export -since yesterday: %v", err)
			}
		})
	}
}

// TestReceiptsVerifyJSON: -json prints the report as one object.
func TestReceiptsVerifyJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCommand(t, "receipts", "verify", "-json", file)
	if err != nil || !bytes.Equal([]byte(out), []byte("{\"tenants\":null}\n")) {
		t.Fatalf("verify -json of an empty file: %v %q", err, out)
	}
}
