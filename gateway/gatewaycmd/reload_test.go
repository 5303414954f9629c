package gatewaycmd

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/tools"
)

// reloadPlugin answers at once, or with {"mode":"gate"} waits for release,
// or with {"mode":"hang"} waits for its context (so only its timeout ends it).
type reloadPlugin struct{ release chan struct{} }

func (p *reloadPlugin) Spec() tools.Spec {
	return tools.Spec{Name: "reloadtest", Description: "the reload tests' tool"}
}

func (p *reloadPlugin) Call(ctx context.Context, req *tools.Request) (*tools.Response, error) {
	var args struct{ Mode string }
	_ = json.Unmarshal(req.Arguments, &args)
	switch args.Mode {
	case "gate":
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "hang":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return tools.JSON(200, map[string]any{"exec": req.ExecutionID, "tenant": req.Tenant})
}

var reloadTool = &reloadPlugin{release: make(chan struct{})}

func init() { tools.Register(reloadTool) }

// reloading is a gateway run by serveReloading, with its config file and
// the channel its SIGHUPs arrive on.
type reloading struct {
	*started
	path    string
	reloads chan os.Signal
}

func startReloading(t *testing.T, configText string) *reloading {
	t.Helper()
	return startReloadingAt(t, writeConfig(t, configText))
}

// startReloadingAt is startReloading of the config file at path.
func startReloadingAt(t *testing.T, path string) *reloading {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &reloading{started: &started{logs: &testutil.LockedBuffer{}, cancel: cancel, done: make(chan error, 1)},
		path: path, reloads: make(chan os.Signal, 1)}
	go func() {
		g.done <- serveReloading(ctx, []string{"gateway", "-config", path}, func(string) string { return "" }, g.logs, g.reloads)
	}()
	waitFor(t, func() bool {
		for _, l := range g.logs.JSONLines() {
			if l["msg"] == "gateway listening" {
				g.addr, _ = l["addr"].(string)
			}
		}
		return g.addr != ""
	})
	t.Cleanup(func() {
		cancel()
		if err := <-g.done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	return g
}

// reloadLines are the log lines of the reloads so far.
func (g *reloading) reloadLines() []map[string]any {
	var out []map[string]any
	for _, l := range g.logs.JSONLines() {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "config reload") {
			out = append(out, l)
		}
	}
	return out
}

// reload writes text over the config file, sends a SIGHUP and returns the
// reload's log line.
func (g *reloading) reload(t *testing.T, text string) map[string]any {
	t.Helper()
	if err := os.WriteFile(g.path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	before := len(g.reloadLines())
	g.reloads <- syscall.SIGHUP
	var lines []map[string]any
	waitFor(t, func() bool { lines = g.reloadLines(); return len(lines) > before })
	if len(lines) != before+1 {
		t.Fatalf("one reload logged %d lines: %v", len(lines)-before, lines[before:])
	}
	return lines[before]
}

// callAs calls tool as the holder of token ("" sends none).
func callAs(t *testing.T, addr, token, session string, step uint64, tool, args string) (int, http.Header, []byte) {
	t.Helper()
	st, h, body, err := tryCallAs(addr, token, session, step, tool, args)
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	return st, h, body
}

// tryCallAs is callAs for goroutines other than the test's.
func tryCallAs(addr, token, session string, step uint64, tool, args string) (int, http.Header, []byte, error) {
	req, err := keyedRequest(addr, session, step, tool, args)
	if err != nil {
		return 0, nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body, err
}

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// strs is a log line's list attribute as strings.
func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func storeSection(t *testing.T) string {
	return "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\n"
}

// A reload adds a tenant, removes one, and gives a tenant a rate: the new
// token works, the removed one gets 401, the new rate answers 429, and the
// log line lists the changes without a token or a hash.
func TestReloadSwapsTenantsTokensAndRateLimits(t *testing.T) {
	base := storeSection(t)
	g := startReloading(t, base+"auth:\n  tenants:\n    - name: acme\n      token_sha256: "+tokenHash("acme-token")+"\n")
	if st, _, body := callAs(t, g.addr, "acme-token", "s", 1, "reloadtest", `{}`); st != 200 {
		t.Fatalf("acme before the reload: %d %s", st, body)
	}
	if st, _, _ := callAs(t, g.addr, "beta-token", "s", 1, "reloadtest", `{}`); st != 401 {
		t.Fatalf("beta before the reload: %d, want 401", st)
	}

	line := g.reload(t, base+"auth:\n  tenants:\n    - name: beta\n      token_sha256: "+tokenHash("beta-token")+
		"\n      rate: 2/h\n    - name: gamma\n      token_sha256: "+tokenHash("gamma-token")+"\n")
	if line["msg"] != "config reloaded" {
		t.Fatalf("reload: %v", line)
	}
	changed := strings.Join(strs(line["changed"]), ",")
	for _, want := range []string{"auth.tenants[beta] added", "auth.tenants[gamma] added", "auth.tenants[acme] removed"} {
		if !strings.Contains(changed, want) {
			t.Fatalf("changed = %s; want %q in it", changed, want)
		}
	}

	if st, _, _ := callAs(t, g.addr, "acme-token", "s", 2, "reloadtest", `{}`); st != 401 {
		t.Fatalf("removed tenant acme: %d, want 401", st)
	}
	for step := uint64(1); step <= 2; step++ {
		if st, _, body := callAs(t, g.addr, "beta-token", "s", step, "reloadtest", `{}`); st != 200 {
			t.Fatalf("beta call %d: %d %s", step, st, body)
		}
	}
	st, h, body := callAs(t, g.addr, "beta-token", "s", 3, "reloadtest", `{}`)
	if st != 429 || h.Get("Retry-After") == "" || !strings.Contains(string(body), "rate_limited") {
		t.Fatalf("beta's third call at 2/h: %d %s, want 429 rate_limited with Retry-After", st, body)
	}
	for step := uint64(1); step <= 3; step++ {
		if st, _, body := callAs(t, g.addr, "gamma-token", "s", step, "reloadtest", `{}`); st != 200 {
			t.Fatalf("gamma (no rate) call %d: %d %s", step, st, body)
		}
	}

	// gamma gets a rate: it applies from the next call.
	line = g.reload(t, base+"auth:\n  tenants:\n    - name: beta\n      token_sha256: "+tokenHash("beta-token")+
		"\n      rate: 2/h\n    - name: gamma\n      token_sha256: "+tokenHash("gamma-token")+"\n      rate: 1/h\n")
	if line["msg"] != "config reloaded" || strings.Join(strs(line["changed"]), ",") != "auth.tenants[gamma].rate" {
		t.Fatalf("reload: %v", line)
	}
	if st, _, body := callAs(t, g.addr, "gamma-token", "s", 4, "reloadtest", `{}`); st != 200 {
		t.Fatalf("gamma's first call at 1/h: %d %s", st, body)
	}
	if st, _, _ := callAs(t, g.addr, "gamma-token", "s", 5, "reloadtest", `{}`); st != 429 {
		t.Fatalf("gamma's second call at 1/h: %d, want 429", st)
	}

	raw, _ := json.Marshal(g.logs.JSONLines())
	for _, secret := range []string{"acme-token", "beta-token", tokenHash("acme-token"), tokenHash("beta-token"), tokenHash("gamma-token")} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the logs hold a token or its hash (%s...)", secret[:6])
		}
	}
}

// A changed tool timeout applies to the calls that start after the
// reload, while a call in flight across the reload keeps its own, finishes
// and is recorded.
func TestReloadChangesToolTimeoutAndKeepsCallsInFlight(t *testing.T) {
	base := storeSection(t)
	g := startReloading(t, base+"tools:\n  - name: reloadtest\n    timeout: 1h\n")

	type answer struct {
		status int
		header http.Header
		body   []byte
	}
	inFlight := make(chan answer, 1)
	go func() {
		st, h, body := callAs(t, g.addr, "", "flight", 1, "reloadtest", `{"mode":"gate"}`)
		inFlight <- answer{st, h, body}
	}()
	waitFor(t, func() bool {
		r, err := http.Get("http://" + g.addr + "/metrics")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return strings.Contains(string(b), `gateway_tools_in_flight{tool="reloadtest"} 1`)
	})

	line := g.reload(t, base+"tools:\n  - name: reloadtest\n    timeout: 100ms\n")
	if line["msg"] != "config reloaded" || !strings.Contains(strings.Join(strs(line["changed"]), ","), "tools[reloadtest].timeout") {
		t.Fatalf("reload: %v", line)
	}
	// A new call runs under the new timeout (under the old one it would
	// hang for an hour).
	if st, _, body := callAs(t, g.addr, "", "hang", 1, "reloadtest", `{"mode":"hang"}`); st != http.StatusGatewayTimeout || !strings.Contains(string(body), "tool_timeout") {
		t.Fatalf("call after the reload: %d %s, want 504 tool_timeout", st, body)
	}

	// The call in flight has run far longer than 100ms: it kept its hour.
	reloadTool.release <- struct{}{}
	first := <-inFlight
	if first.status != 200 || first.header.Get("Idempotent-Replayed") != "false" {
		t.Fatalf("call in flight across the reload: %d %s", first.status, first.body)
	}
	st, h, body := callAs(t, g.addr, "", "flight", 1, "reloadtest", `{"mode":"gate"}`)
	if st != 200 || h.Get("Idempotent-Replayed") != "true" || string(body) != string(first.body) {
		t.Fatalf("retry of the call in flight: %d replayed=%q %s, want its recorded outcome", st, h.Get("Idempotent-Replayed"), body)
	}
}

// toolDescription is what discovery says of tool.
func toolDescription(t *testing.T, addr, tool string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/tools/v1/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Tools []struct{ Name, Description string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Tools {
		if e.Name == tool {
			return e.Description
		}
	}
	t.Fatalf("discovery does not list %s", tool)
	return ""
}

// A file that changes a field fixed at start, or that is invalid, is
// refused with one log line, and nothing of it applies: the description
// it also changes stays the old one.
func TestReloadRefusesFixedFieldsAndInvalidFiles(t *testing.T) {
	dir := t.TempDir()
	store := "store:\n  path: " + filepath.Join(dir, "gw.db") + "\n"
	tool := "tools:\n  - name: reloadtest\n    description: %s\n"
	g := startReloading(t, "listen: 127.0.0.1:0\n"+store+fmt.Sprintf(tool, "before"))

	cases := []struct {
		name, text string
		fields     []string // the fields the refusal names
		errorHas   string   // or the error it logs
	}{
		{"listen", "listen: 127.0.0.1:1\n" + store, []string{"listen"}, ""},
		{"store", "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(dir, "other.db") + "\n", []string{"store.path"}, ""},
		{"listen and store", "listen: 127.0.0.1:1\nstore:\n  redis_url: redis://127.0.0.1:6379/0\n  path: " + filepath.Join(dir, "gw.db") + "\n", []string{"listen", "store.redis_url"}, ""},
		{"key mode", "listen: 127.0.0.1:0\n" + store + "idempotency:\n  key_mode: opaque\n", []string{"idempotency.key_mode"}, ""},
		{"auth on", "listen: 127.0.0.1:0\n" + store + "auth:\n  tenants:\n    - name: acme\n      token_sha256: " + tokenHash("t") + "\n", []string{"auth (turning auth on or off)"}, ""},
		{"mcp endpoint", "listen: 127.0.0.1:0\n" + store + "mcp:\n  enabled: false\n", []string{"mcp.enabled"}, ""},
		{"receipts", "listen: 127.0.0.1:0\n" + store + "receipts:\n  checkpoint_every: 5m\n", []string{"receipts.checkpoint_every"}, ""},
		{"unknown field", "listen: 127.0.0.1:0\n" + store + "stroe: {}\n", nil, "unknown field stroe"},
		{"bad duration", "listen: 127.0.0.1:0\ndrain_timeout: soon\n" + store, nil, "bad duration"},
		{"unknown tool", "listen: 127.0.0.1:0\n" + store, nil, "tools[1] (nosuchtool)"},
		{"bad log level", "listen: 127.0.0.1:0\nlog_level: loud\n" + store, nil, "log_level"},
	}
	for step, c := range cases {
		text := c.text + fmt.Sprintf(tool, "after "+c.name)
		if c.name == "unknown tool" {
			text += "  - name: nosuchtool\n"
		}
		line := g.reload(t, text)
		msg, _ := line["msg"].(string)
		if line["level"] != "ERROR" || !strings.HasPrefix(msg, "config reload refused; nothing applied") {
			t.Fatalf("%s: %v, want the refusal", c.name, line)
		}
		if c.fields != nil && strings.Join(strs(line["fields"]), ",") != strings.Join(c.fields, ",") {
			t.Fatalf("%s: fields %v, want %v", c.name, line["fields"], c.fields)
		}
		if c.errorHas != "" && !strings.Contains(fmt.Sprint(line["error"]), c.errorHas) {
			t.Fatalf("%s: error %v, want it to say %q", c.name, line["error"], c.errorHas)
		}
		if d := toolDescription(t, g.addr, "reloadtest"); d != "before" {
			t.Fatalf("%s: description %q after a refused reload, want the old one", c.name, d)
		}
		if st, _, body := callAs(t, g.addr, "", "refused", uint64(step+1), "reloadtest", `{}`); st != 200 {
			t.Fatalf("%s: the old config stopped serving: %d %s", c.name, st, body)
		}
	}

	// The same file with only the description changed reloads.
	line := g.reload(t, "listen: 127.0.0.1:0\n"+store+fmt.Sprintf(tool, "after"))
	if line["msg"] != "config reloaded" || strings.Join(strs(line["changed"]), ",") != "tools[reloadtest].description" {
		t.Fatalf("reload: %v", line)
	}
	if d := toolDescription(t, g.addr, "reloadtest"); d != "after" {
		t.Fatalf("description %q after the reload", d)
	}
}

// upstream is an HTTP tool's upstream that answers with its own name.
func upstream(t *testing.T, name string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"upstream":%q,"header":%q}`, name, r.Header.Get("X-Team"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// HTTP tools are added, removed and repointed (url, headers) by a reload;
// the admin token rotates.
func TestReloadAddsRemovesAndRepointsHTTPTools(t *testing.T) {
	one, two := upstream(t, "one"), upstream(t, "two")
	base := storeSection(t) + "admin:\n  token_sha256: %s\n"
	g := startReloading(t, fmt.Sprintf(base, tokenHash("admin-1"))+"tools:\n  - name: up-a\n    http:\n      url: "+one+"\n  - name: up-b\n    http:\n      url: "+one+"\n")
	if st, _, body := callAs(t, g.addr, "", "s", 1, "up-a", `{}`); st != 200 || !strings.Contains(string(body), `"one"`) {
		t.Fatalf("up-a before: %d %s", st, body)
	}

	line := g.reload(t, fmt.Sprintf(base, tokenHash("admin-2"))+"tools:\n  - name: up-a\n    http:\n      url: "+two+"\n      headers:\n        X-Team: red\n  - name: up-c\n    http:\n      url: "+one+"\n")
	changed := strings.Join(strs(line["changed"]), ",")
	if line["msg"] != "config reloaded" || changed != "admin.token_sha256,tools[up-a].http,tools[up-c] added,tools[up-b] removed" {
		t.Fatalf("reload: %v", line)
	}
	if st, _, body := callAs(t, g.addr, "", "s", 2, "up-a", `{}`); st != 200 || string(body) != `{"upstream":"two","header":"red"}` {
		t.Fatalf("up-a after: %d %s, want the new url and header", st, body)
	}
	// A call recorded before the reload replays as it was.
	if st, h, body := callAs(t, g.addr, "", "s", 1, "up-a", `{}`); st != 200 || h.Get("Idempotent-Replayed") != "true" || !strings.Contains(string(body), `"one"`) {
		t.Fatalf("up-a replay: %d %s", st, body)
	}
	if st, _, _ := callAs(t, g.addr, "", "b", 1, "up-b", `{}`); st != 404 {
		t.Fatalf("removed up-b: %d, want 404", st)
	}
	if st, _, body := callAs(t, g.addr, "", "c", 1, "up-c", `{}`); st != 200 {
		t.Fatalf("added up-c: %d %s", st, body)
	}
	for token, want := range map[string]int{"admin-1": 401, "admin-2": 404} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/records/anonymous/up-a/nokey", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("admin API with %s: %d, want %d", token, resp.StatusCode, want)
		}
	}
}

// A reload reads the TLS files again: after the certificate is renewed in
// place, new connections get the new one.
func TestReloadRereadsTheTLSCertificate(t *testing.T) {
	dir := t.TempDir()
	first := writeSelfSigned(t, dir, "cert.pem", "key.pem")
	text := "listen: 127.0.0.1:0\nstore:\n  path: gw.db\ntls:\n  cert_file: " + filepath.Join(dir, "cert.pem") +
		"\n  key_file: " + filepath.Join(dir, "key.pem") + "\n"
	g := startReloading(t, text)
	trusting := func(cert *x509.Certificate) error {
		roots := x509.NewCertPool()
		roots.AddCert(cert)
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
		defer client.CloseIdleConnections()
		resp, err := client.Get("https://" + g.addr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := trusting(first); err != nil {
		t.Fatalf("before the renewal: %v", err)
	}

	second := writeSelfSigned(t, dir, "cert.pem", "key.pem")
	line := g.reload(t, text)
	if line["msg"] != "config reloaded" || strings.Join(strs(line["changed"]), ",") != "tls certificate (files re-read)" {
		t.Fatalf("reload: %v", line)
	}
	if err := trusting(second); err != nil {
		t.Fatalf("the renewed certificate is not served: %v", err)
	}
	if err := trusting(first); err == nil {
		t.Fatal("the old certificate is still served after the reload")
	}

	// A key that no longer matches its certificate is refused; the renewed
	// pair keeps serving.
	other := t.TempDir()
	writeSelfSigned(t, other, "cert.pem", "key.pem")
	keyPEM, _ := os.ReadFile(filepath.Join(other, "key.pem"))
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if line := g.reload(t, text); !strings.Contains(fmt.Sprint(line["error"]), "private key does not match public key") {
		t.Fatalf("mismatched pair: %v", line)
	}
	if err := trusting(second); err != nil {
		t.Fatalf("after a refused reload: %v", err)
	}
}

// Calls keep being answered while the config is reloaded under them: every
// call of a tenant present in every version gets its 200.
func TestReloadUnderLoadDropsNoCall(t *testing.T) {
	base := storeSection(t) + "auth:\n  tenants:\n    - name: acme\n      token_sha256: " + tokenHash("acme-token") + "\n"
	versions := []string{
		base + "tools:\n  - name: reloadtest\n    description: one\n",
		base + "    - name: beta\n      token_sha256: " + tokenHash("beta-token") + "\n      rate: 1000/s\n" +
			"tools:\n  - name: reloadtest\n    description: two\n    timeout: 10s\n",
	}
	g := startReloading(t, versions[0])
	stop := make(chan struct{})
	var answered atomic.Int64
	failures := make(chan string, 4)
	for w := range 4 {
		go func() {
			for step := uint64(1); ; step++ {
				select {
				case <-stop:
					failures <- ""
					return
				default:
				}
				st, _, body, err := tryCallAs(g.addr, "acme-token", fmt.Sprintf("load-%d", w), step, "reloadtest", `{}`)
				if err != nil || st != 200 {
					failures <- fmt.Sprintf("worker %d step %d: %d %s %v", w, step, st, body, err)
					return
				}
				answered.Add(1)
			}
		}()
	}
	for i := range 6 {
		before := answered.Load()
		if line := g.reload(t, versions[(i+1)%2]); line["msg"] != "config reloaded" {
			t.Fatalf("reload %d: %v", i, line)
		}
		// Calls are answered between every two reloads.
		waitFor(t, func() bool { return answered.Load() > before+8 })
	}
	close(stop)
	for range 4 {
		if f := <-failures; f != "" {
			t.Fatalf("a call during the reloads: %s", f)
		}
	}
}

// Token rotation without a window of 401s: a reload makes the new token
// current and keeps the old one as previous_token_sha256, both work (the
// log line of a call with the old one says so), and a second reload that
// drops previous_token_sha256 ends the old token. The same for the admin.
func TestTokenRotationByReload(t *testing.T) {
	base := storeSection(t)
	tenant := func(current, previous string) string {
		s := "auth:\n  tenants:\n    - name: acme\n      token_sha256: " + tokenHash(current) + "\n"
		if previous != "" {
			s += "      previous_token_sha256: " + tokenHash(previous) + "\n"
		}
		return s
	}
	admin := func(current, previous string) string {
		s := "admin:\n  token_sha256: " + tokenHash(current) + "\n"
		if previous != "" {
			s += "  previous_token_sha256: " + tokenHash(previous) + "\n"
		}
		return s
	}
	adminStatus := func(g *reloading, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+"/admin/v1/records?state=UNKNOWN", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	g := startReloading(t, base+tenant("old", "")+admin("adm-old", ""))

	line := g.reload(t, base+tenant("new", "old")+admin("adm-new", "adm-old"))
	if line["msg"] != "config reloaded" || strings.Join(strs(line["changed"]), ",") != "admin.token_sha256,admin.previous_token_sha256,auth.tenants[acme].token_sha256,auth.tenants[acme].previous_token_sha256" {
		t.Fatalf("rotation start: %v", line)
	}
	for step, token := range []string{"new", "old"} {
		if st, _, body := callAs(t, g.addr, token, "rot", uint64(step+1), "reloadtest", `{}`); st != 200 {
			t.Fatalf("tenant token %q during the rotation: %d %s", token, st, body)
		}
	}
	for _, token := range []string{"adm-new", "adm-old"} {
		if st := adminStatus(g, token); st != 200 {
			t.Fatalf("admin token %q during the rotation: %d", token, st)
		}
	}
	// The access log tells who still uses an old token, and names the admin.
	var previous, adminLines int
	for _, l := range g.logs.JSONLines() {
		if l["msg"] != "request" {
			continue
		}
		if l["token"] == "previous" {
			previous++
		}
		if l["route"] == "/admin/v1/records" {
			adminLines++
			if l["tenant"] != "(admin)" {
				t.Fatalf("admin request logged as tenant %v", l["tenant"])
			}
		}
	}
	if previous != 2 || adminLines != 2 {
		t.Fatalf("%d lines with token=previous (want 2: one tenant call, one admin call), %d admin lines", previous, adminLines)
	}

	line = g.reload(t, base+tenant("new", "")+admin("adm-new", ""))
	if line["msg"] != "config reloaded" {
		t.Fatalf("rotation end: %v", line)
	}
	if st, _, _ := callAs(t, g.addr, "old", "rot", 3, "reloadtest", `{}`); st != 401 {
		t.Fatalf("old tenant token after the rotation: %d, want 401", st)
	}
	if st, _, body := callAs(t, g.addr, "new", "rot", 3, "reloadtest", `{}`); st != 200 {
		t.Fatalf("new tenant token after the rotation: %d %s", st, body)
	}
	if st := adminStatus(g, "adm-old"); st != 401 {
		t.Fatalf("old admin token after the rotation: %d, want 401", st)
	}

	// A previous token equal to the current one, or to another caller's,
	// is refused and changes nothing.
	for _, bad := range []string{base + tenant("new", "new") + admin("adm-new", ""), base + tenant("new", "adm-new") + admin("adm-new", "")} {
		if line := g.reload(t, bad); line["level"] != "ERROR" {
			t.Fatalf("reload %q: %v, want a refusal", bad, line)
		}
	}
}
