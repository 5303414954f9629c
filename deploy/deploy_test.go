// Package deploy_test checks the deployment files in deploy/ against the
// gateway they deploy: every file parses, every embedded config passes
// `gateway check`, the compose config serves, the dashboard and the alert
// rules use metrics the gateway really exports, and the tools that exist
// on this machine (promtool, systemd-analyze) accept the files. Docker and
// Kubernetes themselves are not run here (docs/deploy.md).
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	// The stock binary's tools, as in cmd/gateway.
	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/gatewaycmd"
	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/keyderive"
	_ "github.com/toolgateway/toolgateway/tools/builtin"
)

// TestEveryFileParses decodes every JSON and YAML file (all documents of
// a multi-document YAML file).
func TestEveryFileParses(t *testing.T) {
	var checked int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch filepath.Ext(path) {
		case ".json":
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			checked++
		case ".yaml", ".yml":
			docs := yamlDocs(t, path)
			if len(docs) == 0 {
				t.Errorf("%s: no YAML document", path)
			}
			checked++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d JSON/YAML files found", checked)
	}
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if err == io.EOF {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, doc)
	}
}

// dig walks nested maps and lists: dig(doc, "spec", "template", 0, "name").
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: not a map", p)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("at %v: not a list that long", p)
			}
			v = l[k]
		}
	}
	return v
}

// configs are the gateway configs the deployment files carry.
func configs(t *testing.T) map[string]string {
	t.Helper()
	compose := yamlDocs(t, "compose.yaml")[0]
	configMap := yamlDocs(t, "kubernetes/configmap.yaml")[0]
	postgresConfigMap := yamlDocs(t, "kubernetes-postgres/configmap.yaml")[0]
	image, err := os.ReadFile("gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	systemd, err := os.ReadFile("systemd/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"compose":             dig(t, compose, "configs", "gateway_config", "content").(string),
		"kubernetes":          dig(t, configMap, "data", "gateway.yaml").(string),
		"kubernetes-postgres": dig(t, postgresConfigMap, "data", "gateway.yaml").(string),
		"image":               string(image),
		"systemd":             string(systemd),
	}
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEmbeddedConfigsPassCheck runs `gateway check` on each config.
func TestEmbeddedConfigsPassCheck(t *testing.T) {
	wantTools := map[string]string{"compose": "open-ticket", "kubernetes": "provision-infra", "kubernetes-postgres": "provision-infra", "image": "echo", "systemd": "echo"}
	for name, text := range configs(t) {
		t.Run(name, func(t *testing.T) {
			path := writeConfig(t, text)
			report, err := gatewaycmd.Check(path, func(string) string { return "" })
			if err != nil {
				t.Fatalf("gateway check: %v", err)
			}
			if !slices.ContainsFunc(report.Tools, func(c gatewaycmd.CheckedTool) bool { return c.Name == wantTools[name] }) {
				t.Fatalf("tools %+v lack %s", report.Tools, wantTools[name])
			}
			// And through the command line, as a CI pipeline would run it.
			var out bytes.Buffer
			if err := gatewaycmd.RunIO(context.Background(), []string{"gateway", "check", "-config", path}, func(string) string { return "" }, strings.NewReader(""), &out); err != nil {
				t.Fatalf("gateway check -config: %v", err)
			}
			if !strings.Contains(out.String(), ": OK") {
				t.Fatalf("check output:\n%s", out.String())
			}
		})
	}
}

// drainTimeout reads drain_timeout from a config.
func drainTimeout(t *testing.T, text string) time.Duration {
	t.Helper()
	var cfg struct {
		DrainTimeout string `yaml:"drain_timeout"`
	}
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.DrainTimeout == "" {
		return 30 * time.Second // the default
	}
	d, err := time.ParseDuration(cfg.DrainTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startGateway runs the program with a config and environment until the
// test ends and returns its address.
func startGateway(t *testing.T, configText string, env map[string]string) string {
	t.Helper()
	path := writeConfig(t, configText)
	env["GATEWAY_ADDR"] = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testutil.LockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- gatewaycmd.Run(ctx, []string{"gateway", "-config", path}, func(k string) string { return env[k] }, logs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if addr, _ := logs.Find("gateway listening")["addr"].(string); addr != "" {
			return addr
		}
		select {
		case err := <-done:
			t.Fatalf("gateway exited at start: %v", err)
		default:
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("gateway did not start")
	return ""
}

// TestComposeConfigServes starts the gateway with the compose file's
// config on this machine's Redis (REDIS_URL, as compose sets it) and
// checks /readyz, through the image's own HEALTHCHECK command.
func TestComposeConfigServes(t *testing.T) {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second)
	if err != nil {
		t.Skipf("no Redis on 127.0.0.1:6379: %v", err)
	}
	conn.Close()
	addr := startGateway(t, configs(t)["compose"], map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/0"})
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
	}

	// The Dockerfile's HEALTHCHECK command, pointed at this gateway.
	probe := healthcheckCommand(t)
	if probe[0] != "/gateway" || probe[1] != "health" {
		t.Fatalf("HEALTHCHECK runs %v, want /gateway health ...", probe)
	}
	args := []string{"gateway"}
	for _, a := range probe[1:] {
		args = append(args, strings.Replace(a, "127.0.0.1:8080", addr, 1))
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		var out bytes.Buffer
		a := slices.Clone(args)
		for i := range a {
			a[i] = strings.Replace(a[i], "/healthz", path, 1)
		}
		if err := gatewaycmd.RunIO(context.Background(), a, func(string) string { return "" }, strings.NewReader(""), &out); err != nil {
			t.Fatalf("%v: %v", a, err)
		}
	}
}

// healthcheckCommand is the exec form of the Dockerfile's HEALTHCHECK CMD.
func healthcheckCommand(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^HEALTHCHECK .*?CMD (\[.*\])\s*$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("no HEALTHCHECK ... CMD [...] in the Dockerfile")
	}
	var cmd []string
	if err := json.Unmarshal([]byte(m[1]), &cmd); err != nil {
		t.Fatalf("HEALTHCHECK CMD: %v", err)
	}
	return cmd
}

// TestDockerfile checks what the image promises: a multi-stage build of a
// static binary, a non-root user, a HEALTHCHECK. (No engine runs here to
// build it: docs/deploy.md.)
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(text, -1)); n < 2 {
		t.Fatalf("%d FROM lines: want a multi-stage build", n)
	}
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/gateway", "USER 65532:65532", "HEALTHCHECK", `ENTRYPOINT ["/gateway"]`} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^USER (root|0)\b`).MatchString(text) {
		t.Error("Dockerfile runs as root")
	}
	// Every COPY of the build context names a file that exists.
	for _, m := range regexp.MustCompile(`(?m)^COPY (deploy/\S+)`).FindAllStringSubmatch(text, -1) {
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("COPY %s: %v", m[1], err)
		}
	}
}

// TestComposeFile checks the compose topology: two gateways on one Redis
// with AOF, each given more stop time than its drain.
func TestComposeFile(t *testing.T) {
	doc := yamlDocs(t, "compose.yaml")[0]
	services := dig(t, doc, "services").(map[string]any)
	var gateways []string
	for name, s := range services {
		svc := s.(map[string]any)
		if env, ok := svc["environment"].(map[string]any); ok && env["REDIS_URL"] != nil {
			gateways = append(gateways, name)
			// Both replicas take the console's session key from the shell
			// (compose refuses to start without it), never from the file.
			if key, _ := env[gateway.ConsoleSessionKeyEnv].(string); !strings.HasPrefix(key, "${"+gateway.ConsoleSessionKeyEnv+":?") {
				t.Errorf("%s: %s is %q, want it required from the environment", name, gateway.ConsoleSessionKeyEnv, key)
			}
			grace, err := time.ParseDuration(svc["stop_grace_period"].(string))
			if err != nil || grace <= drainTimeout(t, configs(t)["compose"]) {
				t.Errorf("%s: stop_grace_period %v must exceed drain_timeout", name, svc["stop_grace_period"])
			}
		}
	}
	if len(gateways) != 2 {
		t.Fatalf("gateway services %v, want 2", gateways)
	}
	redisArgs := strings.Join(anyStrings(dig(t, services, "redis", "command")), " ")
	if !strings.Contains(redisArgs, "--appendonly yes") || !strings.Contains(redisArgs, "--maxmemory-policy noeviction") {
		t.Fatalf("redis command %q: want AOF and noeviction", redisArgs)
	}
	if _, ok := services["upstream"]; !ok {
		t.Fatal("no example upstream service")
	}
	if !strings.Contains(configs(t)["compose"], "http://upstream:9000/tickets") {
		t.Fatal("the compose config does not call the upstream service")
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestKubernetesManifests checks the manifests fit together: probes,
// grace period, disruption budget, config and secret references.
func TestKubernetesManifests(t *testing.T) {
	byKind := map[string]map[string]any{}
	kustomization := yamlDocs(t, "kubernetes/kustomization.yaml")[0]
	for _, f := range anyStrings(kustomization["resources"]) {
		for _, doc := range yamlDocs(t, filepath.Join("kubernetes", f)) {
			byKind[doc["kind"].(string)] = doc
		}
	}
	for _, kind := range []string{"Namespace", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"} {
		if byKind[kind] == nil {
			t.Fatalf("no %s among the kustomization's resources", kind)
		}
	}
	// The Secret is created by hand before `apply -k`, which must not
	// overwrite it with the example's placeholders.
	if byKind["Secret"] != nil {
		t.Fatal("the kustomization applies a Secret: it would overwrite the real one")
	}
	byKind["Secret"] = yamlDocs(t, "kubernetes/secret.example.yaml")[0]
	dep := byKind["Deployment"]
	if r := dig(t, dep, "spec", "replicas"); r != 3 {
		t.Errorf("replicas %v, want 3", r)
	}
	pod := dig(t, dep, "spec", "template", "spec").(map[string]any)
	c := dig(t, pod, "containers", 0).(map[string]any)
	if p := dig(t, c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readiness probe %v", p)
	}
	if p := dig(t, c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("liveness probe %v", p)
	}
	// The operations endpoints are on admin_listen's port, which the
	// probes, the scrape annotation and the NetworkPolicy name.
	var cfg struct {
		Listen      string `yaml:"listen"`
		AdminListen string `yaml:"admin_listen"`
	}
	if err := yaml.Unmarshal([]byte(configs(t)["kubernetes"]), &cfg); err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{}
	for i := range c["ports"].([]any) {
		ports[dig(t, c, "ports", i, "name").(string)] = strings.TrimPrefix(fmt.Sprint(dig(t, c, "ports", i, "containerPort")), "")
	}
	if _, port, _ := net.SplitHostPort(cfg.AdminListen); port == "" || ports["ops"] != port {
		t.Errorf("admin_listen %q, container port ops %q", cfg.AdminListen, ports["ops"])
	}
	if _, port, _ := net.SplitHostPort(cfg.Listen); ports["http"] != port {
		t.Errorf("listen %q, container port http %q", cfg.Listen, ports["http"])
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		if p := dig(t, c, probe, "httpGet", "port"); p != "ops" {
			t.Errorf("%s on port %v, want ops (admin_listen)", probe, p)
		}
	}
	if p := dig(t, dep, "spec", "template", "metadata", "annotations", "prometheus.io/port"); p != ports["ops"] {
		t.Errorf("scrape port %v, want %s", p, ports["ops"])
	}
	np := byKind["NetworkPolicy"]
	if p := dig(t, np, "spec", "ingress", 1, "ports", 0, "port"); p != "ops" {
		t.Errorf("NetworkPolicy's second rule opens %v, want ops", p)
	}
	// GOMEMLIMIT beside the memory limit, below it.
	var memLimit string
	for i := range c["env"].([]any) {
		if dig(t, c, "env", i, "name") == "GOMEMLIMIT" {
			memLimit = dig(t, c, "env", i, "value").(string)
		}
	}
	limit := dig(t, c, "resources", "limits", "memory").(string)
	goLimit, _ := strconv.Atoi(strings.TrimSuffix(memLimit, "MiB"))
	podLimit, _ := strconv.Atoi(strings.TrimSuffix(limit, "Mi"))
	if goLimit == 0 || podLimit == 0 || goLimit >= podLimit || goLimit < podLimit*8/10 {
		t.Errorf("GOMEMLIMIT %q beside the memory limit %q: want 80-99%% of it", memLimit, limit)
	}
	drain := drainTimeout(t, configs(t)["kubernetes"])
	preStop := time.Duration(dig(t, c, "lifecycle", "preStop", "sleep", "seconds").(int)) * time.Second
	grace := time.Duration(pod["terminationGracePeriodSeconds"].(int)) * time.Second
	if grace <= preStop+drain {
		t.Errorf("terminationGracePeriodSeconds %v must exceed preStop %v + drain_timeout %v", grace, preStop, drain)
	}
	if dig(t, c, "securityContext", "readOnlyRootFilesystem") != true || dig(t, pod, "securityContext", "runAsNonRoot") != true {
		t.Error("the container must run non-root on a read-only root filesystem")
	}
	// Every variable from the Secret names a key secret.example.yaml has;
	// the console's session key is one of them, so the replicas share it.
	var fromSecret []string
	for i := range c["env"].([]any) {
		ref, ok := dig(t, c, "env", i).(map[string]any)["valueFrom"].(map[string]any)
		if !ok {
			continue
		}
		secretName := dig(t, ref, "secretKeyRef", "name")
		secretKey := dig(t, ref, "secretKeyRef", "key").(string)
		if secretName != dig(t, byKind["Secret"], "metadata", "name") || dig(t, byKind["Secret"], "stringData", secretKey) == nil {
			t.Errorf("env references secret %v key %s, not in secret.example.yaml", secretName, secretKey)
		}
		fromSecret = append(fromSecret, dig(t, c, "env", i, "name").(string))
	}
	if !slices.Equal(fromSecret, []string{"REDIS_URL", gateway.ConsoleSessionKeyEnv}) {
		t.Errorf("variables from the Secret %v, want REDIS_URL and %s", fromSecret, gateway.ConsoleSessionKeyEnv)
	}
	// The example's session key is a placeholder the gateway refuses, so a
	// copied example never signs sessions with a key anyone can read.
	placeholder := dig(t, byKind["Secret"], "stringData", gateway.ConsoleSessionKeyEnv).(string)
	_, err := gatewaycmd.Check(writeConfig(t, configs(t)["kubernetes"]), func(k string) string {
		return map[string]string{gateway.ConsoleSessionKeyEnv: placeholder}[k]
	})
	if err == nil || !strings.Contains(err.Error(), gateway.ConsoleSessionKeyEnv) {
		t.Errorf("check with the example's session key: %v, want it refused naming %s", err, gateway.ConsoleSessionKeyEnv)
	}
	if dig(t, pod, "volumes", 0, "configMap", "name") != dig(t, byKind["ConfigMap"], "metadata", "name") {
		t.Error("the config volume does not mount the ConfigMap")
	}
	if !slices.Equal(anyStrings(c["args"]), []string{"-config", dig(t, c, "volumeMounts", 0, "mountPath").(string) + "/gateway.yaml"}) {
		t.Errorf("args %v do not point at the mounted gateway.yaml", c["args"])
	}
	podLabels := dig(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
	for _, sel := range []any{
		dig(t, byKind["PodDisruptionBudget"], "spec", "selector", "matchLabels"),
		dig(t, byKind["Service"], "spec", "selector"),
	} {
		for k, v := range sel.(map[string]any) {
			if podLabels[k] != v {
				t.Errorf("selector %v does not select the pods (%v)", sel, podLabels)
			}
		}
	}
	if m := dig(t, byKind["PodDisruptionBudget"], "spec", "minAvailable").(int); m < 1 || m >= 3 {
		t.Errorf("minAvailable %d: want at least 1 and below the replicas", m)
	}
}

// metricNames are the gateway_* series an expression uses.
var metricName = regexp.MustCompile(`\bgateway_[a-z0-9_]+`)

// usedMetrics collects the metric names of the dashboard and the rules.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	var dash struct {
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	raw, err := os.ReadFile("grafana/toolgateway-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		// A stat of counters that exist only after their first event
		// shows 0 on a healthy gateway, not "No data".
		if p.Type == "stat" && !strings.Contains(p.Targets[0].Expr, "or vector(0)") {
			t.Errorf("stat panel %q: %s lacks `or vector(0)`", p.Title, p.Targets[0].Expr)
		}
		for _, q := range p.Targets {
			for _, m := range metricName.FindAllString(q.Expr, -1) {
				used[m] = append(used[m], "dashboard: "+p.Title)
			}
		}
	}
	rules := yamlDocs(t, "prometheus/alerts.yaml")[0]
	for _, g := range rules["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			for _, m := range metricName.FindAllString(rule["expr"].(string), -1) {
				used[m] = append(used[m], "alert: "+rule["alert"].(string))
			}
		}
	}
	return used
}

// TestDashboardAndAlertsUseExportedMetrics scrapes real gateways: one after
// a call on the embedded store, one after a call refused because its Redis
// is down (store errors only exist once one happened). Every gateway_*
// name the dashboard and the rules use must be in those scrapes, except
// the counters of events this test cannot cause cheaply, which must at
// least be registered under that name in gateway/callpath/metrics.go.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":1}`)
	}))
	defer upstream.Close()
	tool := "tools:\n  - name: open-ticket\n    http:\n      url: " + upstream.URL + "\n"
	// The healthy one reconciles the tool, so the reconcile series exist.
	reconciled := tool + "    reconcile:\n      http: {url: " + upstream.URL + "}\n"
	// ... and charges a budget, so the budget gauges exist.
	charged := reconciled + "    charges: [{budget: tickets, cost: \"1\"}]\nbudgets:\n  - {name: tickets, limit: 100, window: {calendar: day}, scope: tenant}\n"
	healthy := startGateway(t, "store:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+"\n"+charged, map[string]string{})
	down := startGateway(t, "store:\n  redis_url: redis://"+closedAddr(t)+"/0?dial_timeout=200ms&max_retries=-1\n"+tool, map[string]string{})

	exported := map[string]bool{}
	for addr, wantStatus := range map[string]int{healthy: http.StatusCreated, down: http.StatusServiceUnavailable} {
		if status := callTool(t, addr, "open-ticket", `{"title":"disk full"}`); status != wantStatus {
			t.Fatalf("call on %s: %d, want %d", addr, status, wantStatus)
		}
		for name := range scrape(t, addr) {
			exported[name] = true
		}
	}
	source, err := os.ReadFile("../gateway/callpath/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	onlyAfterTheirEvent := map[string]bool{"gateway_lease_takeovers_total": true, "gateway_outcomes_unrecorded_total": true, "gateway_rate_limited_total": true}
	used := usedMetrics(t)
	if len(used) < 6 {
		t.Fatalf("only %d metrics used: %v", len(used), used)
	}
	for name, where := range used {
		switch {
		case exported[name]:
		case onlyAfterTheirEvent[name] && bytes.Contains(source, []byte(`Name: "`+name+`"`)):
		default:
			t.Errorf("%s (used by %v) is not exported by the gateway", name, where)
		}
	}
}

func callTool(t *testing.T, addr, tool, args string) int {
	t.Helper()
	key, err := keyderive.Key("deploy-test", 0, tool, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/tools/v1/"+tool, strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", "deploy-test")
	req.Header.Set("Agent-Step-Index", "0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// scrape returns the metric names of a gateway's /metrics, histogram
// series (_bucket, _sum, _count) included as written.
func scrape(t *testing.T, addr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		names[name] = true
	}
	return names
}

func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestAlertRulesWithPromtool runs promtool's syntax check and the rules'
// unit tests (prometheus/alerts_test.yaml) when promtool is installed.
func TestAlertRulesWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	for _, args := range [][]string{
		{"check", "rules", "prometheus/alerts.yaml"},
		{"test", "rules", "prometheus/alerts_test.yaml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// TestSystemdUnit runs systemd-analyze (when installed) on the unit with
// its binary path pointed at a real gateway binary: verify must print no
// warning, and the offline security analysis must rate it 2.5 or better.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	unit, err := os.ReadFile("systemd/toolgateway.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/gateway -config /etc/toolgateway/gateway.yaml") {
		t.Fatal("unexpected ExecStart")
	}
	var stop time.Duration
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "TimeoutStopSec="); ok {
			stop, _ = time.ParseDuration(v + "s")
		}
	}
	systemdConfig, _ := os.ReadFile("systemd/gateway.yaml")
	if stop <= drainTimeout(t, string(systemdConfig)) {
		t.Fatalf("TimeoutStopSec %v must exceed drain_timeout", stop)
	}
	dir := t.TempDir()
	binary := filepath.Join(dir, "gateway")
	if out, err := exec.Command("go", "build", "-o", binary, "../cmd/gateway").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "toolgateway.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/gateway"), []byte(binary)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=true", "--threshold=25", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Overall exposure level for toolgateway.service: 1.") {
		t.Fatalf("exposure level 2 or above:\n%s", out[max(0, len(out)-300):])
	}
}

// TestKustomizeBuilds renders both variants of the Kubernetes manifests
// with kustomize (offline; no cluster is needed or contacted; .ci/run
// installs it from the Go proxy) and checks every object lands in the
// namespace, the Secret is not among them, and the PostgreSQL variant
// reads DATABASE_URL instead of REDIS_URL, which its config then uses.
func TestKustomizeBuilds(t *testing.T) {
	kustomize, err := exec.LookPath("kustomize")
	if err != nil {
		t.Skip("kustomize not installed (go install sigs.k8s.io/kustomize/kustomize/v5)")
	}
	for _, dir := range []string{"kubernetes", "kubernetes-postgres"} {
		t.Run(dir, func(t *testing.T) { checkRendered(t, kustomize, dir) })
	}
}

func checkRendered(t *testing.T, kustomize, dir string) {
	out, err := exec.Command(kustomize, "build", dir).Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	var kinds []string
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		kind := obj["kind"].(string)
		kinds = append(kinds, kind)
		if ns := dig(t, obj, "metadata", "namespace"); kind != "Namespace" && ns != "toolgateway" {
			t.Errorf("%s in namespace %v", kind, ns)
		}
		if kind == "Deployment" {
			var env []string
			for _, e := range dig(t, obj, "spec", "template", "spec", "containers", 0, "env").([]any) {
				env = append(env, e.(map[string]any)["name"].(string))
			}
			want := map[string][]string{
				"kubernetes":          {"REDIS_URL", gateway.ConsoleSessionKeyEnv, "GOMEMLIMIT"},
				"kubernetes-postgres": {"DATABASE_URL", gateway.ConsoleSessionKeyEnv, "GOMEMLIMIT"},
			}[dir]
			if !slices.Equal(env, want) {
				t.Errorf("env %v, want %v", env, want)
			}
		}
		if kind == "ConfigMap" && dir == "kubernetes-postgres" {
			path := writeConfig(t, dig(t, obj, "data", "gateway.yaml").(string))
			report, err := gatewaycmd.Check(path, func(k string) string {
				return map[string]string{"DATABASE_URL": "postgres://gateway:pw@postgres.toolgateway.svc:5432/gateway"}[k]
			})
			if err != nil || !strings.HasPrefix(report.Store, "postgres:") {
				t.Errorf("the PostgreSQL variant's config with DATABASE_URL: %v, store %v", err, report)
			}
		}
	}
	slices.Sort(kinds)
	if want := []string{"ConfigMap", "Deployment", "Namespace", "NetworkPolicy", "PodDisruptionBudget", "Service"}; !slices.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
}

// TestSystemdUnitOrdersAfterTheStores: the unit starts after a Redis or a
// PostgreSQL of the same host (Debian's unit names), so a boot does not
// start the gateway before its store.
func TestSystemdUnitOrdersAfterTheStores(t *testing.T) {
	unit, err := os.ReadFile("systemd/toolgateway.service")
	if err != nil {
		t.Fatal(err)
	}
	var after []string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "After="); ok {
			after = append(after, strings.Fields(v)...)
		}
	}
	for _, want := range []string{"network-online.target", "redis-server.service", "postgresql.service"} {
		if !slices.Contains(after, want) {
			t.Errorf("After= %v: want %s", after, want)
		}
	}
}
