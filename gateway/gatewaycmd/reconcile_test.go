package gatewaycmd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/pgtest"
	"github.com/toolgateway/toolgateway/keyderive"
)

// refundUpstream acts (counts an execution) and then answers too late for
// the tool's timeout: the gateway cannot tell whether it acted, and a
// lease_expiry: unknown tool's record turns UNKNOWN. Its owner endpoint
// knows the truth: committed once it acted, not_committed before.
type refundUpstream struct {
	executions atomic.Int64
	questions  atomic.Int64
	delay      time.Duration
}

func (u *refundUpstream) act(w http.ResponseWriter, r *http.Request) {
	u.executions.Add(1)
	select {
	case <-time.After(u.delay):
	case <-r.Context().Done():
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"refund":"r_1"}`)
}

func (u *refundUpstream) owner(w http.ResponseWriter, r *http.Request) {
	u.questions.Add(1)
	var q struct {
		Tool         string `json:"tool"`
		UpstreamKey  string `json:"upstream_key"`
		FencingToken int64  `json:"fencing_token"`
		ExecutionID  string `json:"execution_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || q.Tool != "refund" || len(q.UpstreamKey) != 64 || q.FencingToken <= 0 || q.ExecutionID == "" {
		http.Error(w, "bad question", http.StatusBadRequest)
		return
	}
	if u.executions.Load() > 0 {
		_, _ = io.WriteString(w, `{"outcome":"committed","status":201,"body":{"refund":"r_1"}}`)
		return
	}
	_, _ = io.WriteString(w, `{"outcome":"not_committed"}`)
}

// reconcileConfig is a gateway on the store section store (indented
// under store:) with one reconciled tool.
func reconcileConfig(store, upstream, owner string) (config, adminToken string) {
	adminToken = "admin-token-for-reconcile"
	sum := sha256.Sum256([]byte(adminToken))
	return fmt.Sprintf(`listen: 127.0.0.1:0
store:
%s
admin:
  token_sha256: %s
tools:
  - name: refund
    timeout: 200ms
    lease_expiry: unknown
    http: {url: %q}
    reconcile:
      http: {url: %q}
      every: 100ms
      attempts: 3
`, store, hex.EncodeToString(sum[:]), upstream, owner), adminToken
}

// A call whose outcome the gateway could not know (the upstream acted, its
// answer came after the timeout) is completed by reconciliation with the
// outcome the owner confirms: the agent's retry replays it, the tool ran
// once, and the admin record says who resolved it.
func TestReconcileConfirmsAnUncertainCall(t *testing.T) {
	confirmsAnUncertainCall(t, "  path: "+filepath.Join(t.TempDir(), "gw.db"))
}

// The same on the PostgreSQL store (its reconcile lease and attempts are
// columns of the record's row, schema version 8).
func TestReconcileConfirmsAnUncertainCallOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	confirmsAnUncertainCall(t, "  postgres_url: "+url+"\n  postgres_schema: "+pgtest.Schema(t, url))
}

// confirmsAnUncertainCall runs TestReconcileConfirmsAnUncertainCall on
// the store section store.
func confirmsAnUncertainCall(t *testing.T, store string) {
	t.Helper()
	u := &refundUpstream{delay: time.Second}
	mux := http.NewServeMux()
	mux.HandleFunc("/refund", u.act)
	mux.HandleFunc("/status", u.owner)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	config, adminToken := reconcileConfig(store, srv.URL+"/refund", srv.URL+"/status")
	g := startGateway(t, config)

	args := `{"txn_id":"t1","amount":5}`
	first := call(t, g.addr, "s1", 1, "refund", args)
	first.Body.Close()
	if first.StatusCode < 500 {
		t.Fatalf("first call answered %d; want the timeout's uncertain outcome", first.StatusCode)
	}
	var body []byte
	waitFor(t, func() bool {
		resp := call(t, g.addr, "s1", 1, "refund", args)
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusCreated && resp.Header.Get("Idempotent-Replayed") == "true"
	})
	if string(body) != `{"refund":"r_1"}` || u.executions.Load() != 1 || u.questions.Load() != 1 {
		t.Fatalf("replayed %s after %d executions and %d questions; want the confirmed outcome, one execution, one question", body, u.executions.Load(), u.questions.Load())
	}

	key, _ := keyderive.Key("s1", 1, "refund", []byte(args))
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/records/anonymous/refund/"+url.PathEscape(key), nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rec struct {
		State          string `json:"state"`
		ResolvedBy     string `json:"resolved_by"`
		Reconciliation struct {
			Attempts int `json:"attempts"`
			Answers  []struct {
				Outcome string `json:"outcome"`
			} `json:"answers"`
		} `json:"reconciliation"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &rec); err != nil || resp.StatusCode != 200 {
		t.Fatalf("admin record: %d %s", resp.StatusCode, raw)
	}
	if rec.State != "COMPLETED" || rec.ResolvedBy != "reconcile" || rec.Reconciliation.Attempts != 1 || rec.Reconciliation.Answers[0].Outcome != "committed" {
		t.Fatalf("admin record = %s", raw)
	}
	metrics := getText(t, "http://"+g.addr+"/metrics")
	if !strings.Contains(metrics, `gateway_reconcile_total{outcome="committed",tool="refund"} 1`) {
		t.Fatalf("/metrics lacks the committed reconciliation:\n%s", grepLines(metrics, "gateway_reconcile"))
	}
	// The receipts: made UNKNOWN, then resolved by reconcile with the
	// owner's status (written by the receipt writer: wait for it).
	var receiptLines string
	waitFor(t, func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/receipts?tenant=anonymous&event=resolved", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		receiptLines = string(b)
		return strings.Contains(receiptLines, `"by":"reconcile"`)
	})
	if !strings.Contains(receiptLines, `"event":"resolved"`) || !strings.Contains(receiptLines, `"status":201`) {
		t.Fatalf("resolved receipt: %s", receiptLines)
	}
}

func getText(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(text, needle string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, needle) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Malformed reconcile: sections are refused at check (and start, which
// runs the same checks), naming the field.
func TestReconcileConfigRefused(t *testing.T) {
	base := "listen: 127.0.0.1:0\nstore:\n  path: %s\ntools:\n  - name: refund\n    http: {url: \"http://127.0.0.1:1/r\"}\n    reconcile:\n%s"
	for _, tc := range []struct{ name, section, want string }{
		{"no url", "      every: 1s\n", "tools[0] (refund).reconcile.http.url: required"},
		{"bad url", "      http: {url: \"ftp://x\"}\n", "tools[0] (refund).reconcile.http.url"},
		{"tool on an http tool", "      tool: status\n", "tools[0] (refund).reconcile.tool"},
		{"negative attempts", "      http: {url: \"http://127.0.0.1:1/s\"}\n      attempts: -1\n", "tools[0] (refund).reconcile.attempts"},
		{"bad every", "      http: {url: \"http://127.0.0.1:1/s\"}\n      every: soon\n", "bad duration"},
		{"unknown field", "      http: {url: \"http://127.0.0.1:1/s\"}\n      tries: 3\n", "unknown field tries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, fmt.Sprintf(base, filepath.Join(t.TempDir(), "gw.db"), tc.section))
			_, err := Check(path, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("check: %v; want an error naming %q", err, tc.want)
			}
		})
	}
}

// The reconcile worker starts with the gateway: a reload that changes a
// tool's reconcile: section is refused naming it, and nothing is applied.
func TestReloadRefusesReconcileChanges(t *testing.T) {
	store := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\n"
	tool := "tools:\n  - name: reloadtest\n    description: %s\n"
	g := startReloading(t, store+fmt.Sprintf(tool, "before"))
	line := g.reload(t, store+fmt.Sprintf(tool, "after")+"    reconcile:\n      http: {url: \"http://127.0.0.1:1/status\"}\n")
	msg, _ := line["msg"].(string)
	if line["level"] != "ERROR" || !strings.HasPrefix(msg, "config reload refused; nothing applied") ||
		strings.Join(strs(line["fields"]), ",") != "tools[].reconcile" {
		t.Fatalf("reload adding reconcile: %v, want it refused naming tools[].reconcile", line)
	}
	if d := toolDescription(t, g.addr, "reloadtest"); d != "before" {
		t.Fatalf("description %q after a refused reload", d)
	}
}
