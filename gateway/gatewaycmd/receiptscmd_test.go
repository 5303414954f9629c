package gatewaycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
	"github.com/toolgateway/toolgateway/internal/redistest"
	"github.com/toolgateway/toolgateway/internal/tsatest"
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
			if len(lines) != 5 || lines[0] != `{"chain":"anonymous"}` || !strings.Contains(lines[1], `"event":"executed"`) || !strings.Contains(lines[1], `"status":200`) {
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
			if out, err := runCommand(t, "receipts", "export", "-config", path, "-tenant", "anonymous", "-since", future); err != nil || out != `{"chain":"anonymous","filtered":true}`+"\n" {
				t.Fatalf("export -since the future: %v %q", err, out)
			}

			write(strings.Replace(exported, `"status":200`, `"status":201`, 2)) // the first one, altered
			out, err := runCommand(t, "receipts", "verify", file)
			if err == nil || !strings.Contains(out, "FAIL anonymous: altered: seq 1 (line 2)") {
				t.Fatalf("verify of an altered receipt: %v\n%s", err, out)
			}
			write(lines[0] + "\n" + lines[1] + "\n" + lines[3] + "\n" + lines[4] + "\n")
			out, err = runCommand(t, "receipts", "verify", file)
			if err == nil || !strings.Contains(out, "FAIL anonymous: removed: seq 2 is missing") {
				t.Fatalf("verify of a removed receipt: %v\n%s", err, out)
			}
			write(lines[0] + "\n" + lines[1] + "\nnot json\n")
			if _, err := runCommand(t, "receipts", "verify", file); err == nil || !strings.Contains(err.Error(), "line 3") {
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

// TestReceiptsCheckpointsCLI, on each store: a gateway leaves receipts;
// with receipts.signing_key (a key openssl made) and receipts.anchor (a
// real TSA: OpenSSL's) in the config, `receipts checkpoint` signs and
// anchors each chain's head, `receipts keys` prints the JWKS,
// and `receipts verify -keys` passes the export and fails it without its
// newest receipt (truncated below the checkpoint), with a key it was not
// given, or with the checkpoint's seq changed; `-dial` takes the config's
// keys. The third-party recipe of docs/receipts.md (jq, openssl) passes
// the export and fails the altered ones.
func TestReceiptsCheckpointsCLI(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "receipts-key.pem")
	if out, err := exec.CommandContext(t.Context(), "openssl", "genpkey", "-algorithm", "ed25519", "-out", key).CombinedOutput(); err != nil {
		t.Fatalf("openssl genpkey: %v\n%s", err, out)
	}
	recipe := filepath.Join(dir, "verify-receipts.sh")
	if err := os.WriteFile(recipe, docsRecipe(t), 0o700); err != nil {
		t.Fatal(err)
	}
	tsa := tsatest.Start(t, "gatewaycmd test CA")
	for kind, section := range migrateStores(t) {
		t.Run(kind, func(t *testing.T) {
			// The gateway runs without the key (it would sign as it stops:
			// TestGatewaySignsCheckpoints); the commands have it.
			upstream := echoUpstream(t)
			gw := startGateway(t, "listen: 127.0.0.1:0\nstore:\n"+section+upstream)
			configText := "listen: 127.0.0.1:0\nreceipts:\n  signing_key: " + key + "\n  anchor:\n    tsa_url: " + tsa.URL +
				"\n    tsa_roots: " + tsa.RootsFile + "\nstore:\n" + section + upstream
			for step := range uint64(3) {
				resp := call(t, gw.addr, "sess", step, "echo", `{"n":`+itoa(step)+`}`)
				resp.Body.Close()
			}
			gw.cancel()
			if err := <-gw.done; err != nil {
				t.Fatal(err)
			}
			gw.done <- nil
			path := writeConfig(t, configText)
			if out, err := runCommand(t, "receipts", "checkpoint", "-config", path); err != nil || !strings.HasPrefix(out, "ok   anonymous: seq 3 signed") || !strings.HasSuffix(out, "and anchored\n") {
				t.Fatalf("checkpoint: %v\n%s", err, out)
			}
			if out, err := runCommand(t, "receipts", "checkpoint", "-config", path); err != nil || !strings.HasPrefix(out, "ok   anonymous: seq 3 was signed already") {
				t.Fatalf("second checkpoint: %v\n%s", err, out)
			}
			jwks, err := runCommand(t, "receipts", "keys", "-config", path)
			if err != nil || !strings.Contains(jwks, `"crv": "Ed25519"`) {
				t.Fatalf("keys: %v\n%s", err, jwks)
			}
			exported, err := runCommand(t, "receipts", "export", "-config", path)
			if err != nil {
				t.Fatal(err)
			}
			files := t.TempDir()
			write := func(name, text string) string {
				p := filepath.Join(files, name)
				if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			}
			keysFile, whole := write("keys.json", jwks), write("whole.jsonl", exported)
			if out, err := runCommand(t, "receipts", "verify", "-keys", keysFile, whole); err != nil || !strings.Contains(out, "ok   anonymous: 3 receipts, seq 1…3") || !strings.Contains(out, "signed up to seq 3") {
				t.Fatalf("verify: %v\n%s", err, out)
			}
			if out, err := runCommand(t, "receipts", "verify", "-keys", keysFile, "-tsa-roots", tsa.RootsFile, whole); err != nil || !strings.Contains(out, "1 anchored, the latest at") {
				t.Fatalf("verify -tsa-roots: %v\n%s", err, out)
			}
			other := tsatest.Start(t, "not the TSA's CA")
			if out, err := runCommand(t, "receipts", "verify", "-keys", keysFile, "-tsa-roots", other.RootsFile, whole); err == nil || !strings.Contains(out, "FAIL anonymous: bad_anchor") {
				t.Fatalf("verify with another TSA's roots: %v\n%s", err, out)
			}
			if out, err := runCommand(t, "receipts", "verify", "-dial", "-config", path); err != nil || !strings.Contains(out, "signed up to seq 3") || !strings.Contains(out, "1 anchored") {
				t.Fatalf("verify -dial: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(exported), "\n") // header, 3 receipts, checkpoint
			if len(lines) != 5 || !strings.HasPrefix(lines[4], `{"checkpoint":`) {
				t.Fatalf("export:\n%s", exported)
			}
			// The checkpoint again without its anchor, as one signed while
			// the TSA was down (or whose anchor was removed): a warning
			// beside the anchored one, a failure with -require-anchors.
			var cl map[string]map[string]any
			if err := json.Unmarshal([]byte(lines[4]), &cl); err != nil {
				t.Fatal(err)
			}
			delete(cl["checkpoint"], "anchor")
			unanchored, err := json.Marshal(cl)
			if err != nil {
				t.Fatal(err)
			}
			mixed := write("mixed.jsonl", exported+string(unanchored)+"\n")
			if out, err := runCommand(t, "receipts", "verify", "-keys", keysFile, mixed); err != nil || !strings.Contains(out, "warning: anonymous: 1 checkpoints without an anchor, the latest of seq 3") {
				t.Fatalf("verify with an unanchored checkpoint: %v\n%s", err, out)
			}
			if out, err := runCommand(t, "receipts", "verify", "-keys", keysFile, "-require-anchors", mixed); err == nil || !strings.Contains(out, "FAIL anonymous: unanchored: the checkpoint of seq 3 on line 6 has no anchor") {
				t.Fatalf("verify -require-anchors: %v\n%s", err, out)
			}
			truncated := write("truncated.jsonl", strings.Join([]string{lines[0], lines[1], lines[2], lines[4]}, "\n")+"\n")
			if out, err := runCommand(t, "receipts", "verify", "-keys", keysFile, truncated); err == nil || !strings.Contains(out, "FAIL anonymous: truncated: the chain ends before seq 3") {
				t.Fatalf("verify of a truncated chain: %v\n%s", err, out)
			}
			bare := write("bare.jsonl", strings.Join(lines[:3], "\n")+"\n") // truncated, its checkpoint deleted too
			if out, err := runCommand(t, "receipts", "verify", "-keys", keysFile, "-checkpoints", whole, bare); err == nil || !strings.Contains(out, "FAIL anonymous: truncated") {
				t.Fatalf("verify with the checkpoints kept outside: %v\n%s", err, out)
			}
			if out, err := runCommand(t, "receipts", "verify", whole); err == nil || !strings.Contains(out, "FAIL anonymous: unknown_key") {
				t.Fatalf("verify without keys: %v\n%s", err, out)
			}
			reseq := write("reseq.jsonl", strings.Replace(exported, `"seq":3,"hash"`, `"seq":2,"hash"`, 1))
			if out, err := runCommand(t, "receipts", "verify", "-keys", keysFile, reseq); err == nil || !strings.Contains(out, "FAIL anonymous: bad_signature") {
				t.Fatalf("verify of an edited checkpoint: %v\n%s", err, out)
			}

			// The anchor recipe of docs/receipts.md, on the checkpoint line,
			// in a directory holding the TSA's CA as tsa-ca.pem.
			anchorDir := t.TempDir()
			if err := os.Link(tsa.RootsFile, filepath.Join(anchorDir, "tsa-ca.pem")); err != nil {
				t.Fatal(err)
			}
			script := docsBlock(t, "OpenSSL checks an anchor", "```sh\n")
			for name, want := range map[string]bool{lines[4]: true, strings.Replace(lines[4], `"seq":3,"hash"`, `"seq":2,"hash"`, 1): false} {
				cmd := exec.CommandContext(t.Context(), "bash", "-c", "set -e; line=\"$1\"; "+script, "recipe", name)
				cmd.Dir = anchorDir
				out, err := cmd.CombinedOutput()
				if (err == nil) != want || (want && !strings.Contains(string(out), "Verification: OK")) {
					t.Fatalf("anchor recipe on %s: %v (want it to pass: %v)\n%s", name, err, want, out)
				}
			}

			runRecipe := func(file string) (string, error) {
				out, err := exec.CommandContext(t.Context(), "bash", recipe, file, keysFile).CombinedOutput()
				return string(out), err
			}
			if out, err := runRecipe(whole); err != nil || !strings.HasSuffix(out, "ok\n") {
				t.Fatalf("recipe on the export: %v\n%s", err, out)
			}
			for name, file := range map[string]string{"truncated": truncated, "edited checkpoint": reseq,
				"altered receipt": write("altered.jsonl", strings.Replace(exported, `"status":200`, `"status":201`, 1))} {
				if out, err := runRecipe(file); err == nil {
					t.Errorf("recipe passed the %s export:\n%s", name, out)
				}
			}
		})
	}
}

// docsRecipe is the shell recipe of docs/receipts.md: the fenced block
// after its marker.
func docsRecipe(t *testing.T) []byte {
	t.Helper()
	return []byte(docsBlock(t, "<!-- recipe: verify-receipts.sh -->\n", "```bash\n"))
}

// docsBlock is the first fenced block of docs/receipts.md that opens
// with fence after the text after.
func docsBlock(t *testing.T, after, fence string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "receipts.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), after)
	_, rest, opened := strings.Cut(rest, fence)
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !opened || !closed {
		t.Fatalf("docs/receipts.md has no block after %q", after)
	}
	return block
}

// TestGatewaySignsCheckpoints: a running gateway with a signing key and
// checkpoint_every: 2 signs a chain's head once it has 2 receipts (seen
// in the store while it runs); it serves its keys' JWKS without auth,
// signs the third receipt on POST /admin/v1/receipts/checkpoints, lists
// the tenant's checkpoints; the export verifies with the config's keys.
func TestGatewaySignsCheckpoints(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "receipts-key.pem")
	if out, err := exec.CommandContext(t.Context(), "openssl", "genpkey", "-algorithm", "ed25519", "-out", key).CombinedOutput(); err != nil {
		t.Fatalf("openssl genpkey: %v\n%s", err, out)
	}
	client := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	prefix := redistest.Prefix("gwcheckpoints")
	t.Cleanup(func() {
		redistest.CleanPrefix(context.Background(), client, prefix)
		_ = client.Close()
	})
	configText := "listen: 127.0.0.1:0\nadmin:\n  token_sha256: " + tokenHash("ops") + "\n" +
		"receipts:\n  signing_key: " + key + "\n  checkpoint_every: {receipts: 2, interval: 1h}\n" +
		"store:\n  redis_url: redis://" + redistest.Addr(t) + "/0\n  key_prefix: \"" + prefix + "\"\n" + echoUpstream(t)
	gw := startGateway(t, configText)
	store := redisreceipts.New(client, prefix, nil)
	for step := range uint64(2) {
		resp := call(t, gw.addr, "sess", step, "echo", `{"n":`+itoa(step)+`}`)
		resp.Body.Close()
	}
	var signed []receipts.Checkpoint
	for deadline := time.Now().Add(10 * time.Second); len(signed) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint 10 s after 2 receipts")
		}
		var err error
		if signed, err = store.Checkpoints(t.Context(), "anonymous"); err != nil {
			t.Fatal(err)
		}
	}
	if signed[0].Seq != 2 {
		t.Fatalf("first checkpoint %+v, want seq 2", signed[0])
	}
	resp := call(t, gw.addr, "sess", 2, "echo", `{"n":2}`)
	resp.Body.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if last, _, err := store.LastReceipt(t.Context(), "anonymous"); err != nil || last.Seq == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the third receipt was not written within 10 s")
		}
	}

	// The endpoints: the JWKS without auth, a checkpoint signed now, the
	// tenant's checkpoints.
	jwks := get(t, "http://"+gw.addr+receipts.KeysPath)
	keys, err := receipts.ParseJWKS(jwks.body)
	if jwks.status != http.StatusOK || err != nil || keys.Check(signed[0]) != nil {
		t.Fatalf("GET %s: %d %s (%v)", receipts.KeysPath, jwks.status, jwks.body, err)
	}
	admin := func(method, query string) reply {
		req, _ := http.NewRequest(method, "http://"+gw.addr+"/admin/v1/receipts/checkpoints"+query, nil)
		req.Header.Set("Authorization", "Bearer ops")
		return do(t, req)
	}
	now := admin(http.MethodPost, "?tenant=anonymous")
	made, err := receipts.ReadCheckpoints(bytes.NewReader(now.body))
	if now.status != http.StatusOK || err != nil || len(made) != 1 || made[0].Seq != 3 || keys.Check(made[0]) != nil {
		t.Fatalf("POST checkpoints: %d %s (%v)", now.status, now.body, err)
	}
	listed := admin(http.MethodGet, "?tenant=anonymous")
	if all, err := receipts.ReadCheckpoints(bytes.NewReader(listed.body)); listed.status != http.StatusOK || err != nil || len(all) != 2 {
		t.Fatalf("GET checkpoints: %d %s (%v)", listed.status, listed.body, err)
	}
	if r := admin(http.MethodGet, ""); r.status != http.StatusBadRequest {
		t.Fatalf("GET checkpoints without a tenant: %d %s", r.status, r.body)
	}

	gw.cancel()
	if err := <-gw.done; err != nil {
		t.Fatal(err)
	}
	gw.done <- nil
	if signed, _ = store.Checkpoints(t.Context(), "anonymous"); len(signed) != 2 || signed[1].Seq != 3 {
		t.Fatalf("checkpoints after the stop: %+v, want seq 2 and 3", signed)
	}
	out, err := runCommand(t, "receipts", "verify", "-dial", "-config", writeConfig(t, configText))
	if err != nil || !strings.Contains(out, "ok   anonymous: 3 receipts, seq 1…3") || !strings.Contains(out, "signed up to seq 3 (2 checkpoints)") {
		t.Fatalf("verify -dial: %v\n%s", err, out)
	}
}
