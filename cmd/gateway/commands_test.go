package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/keyderive"
)

// runProgram runs the program's run function like the shell would run the
// binary, and returns its stdout and error.
func runProgram(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"gateway"}, args...), func(string) string { return "" }, strings.NewReader(stdin), &out)
	return out.String(), err
}

func TestKeyPrintsTheDerivedKey(t *testing.T) {
	want, canonical, err := keyderive.Derive("sess-1", 7, "provision-infra", []byte(`{"region":"eu-west-1", "name":"db","cpus":2.0}`))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"key", "-session", "sess-1", "-step", "7", "-tool", "provision-infra"}
	// Not canonical on purpose: member order, spaces and 2.0 all change
	// under RFC 8785, which a plain sha256sum of the text would miss.
	const nonCanonical = `{"region":"eu-west-1", "name":"db","cpus":2.0}`

	t.Run("argument", func(t *testing.T) {
		out, err := runProgram(t, "", append(args, nonCanonical)...)
		if err != nil || out != want+"\n" {
			t.Fatalf("got %q, %v; want %q", out, err, want)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		out, err := runProgram(t, nonCanonical+"\n", args...)
		if err != nil || out != want+"\n" {
			t.Fatalf("got %q, %v; want %q", out, err, want)
		}
	})
	t.Run("stdin dash", func(t *testing.T) {
		out, err := runProgram(t, nonCanonical, append(args, "-")...)
		if err != nil || out != want+"\n" {
			t.Fatalf("got %q, %v; want %q", out, err, want)
		}
	})
	t.Run("verbose", func(t *testing.T) {
		out, err := runProgram(t, "", append([]string{"key", "-v", "-session", "sess-1", "-step", "7", "-tool", "provision-infra"}, nonCanonical)...)
		if err != nil {
			t.Fatal(err)
		}
		if out != want+"\n"+string(canonical)+"\n" {
			t.Fatalf("got %q, want key then %s", out, canonical)
		}
		if string(canonical) != `{"cpus":2,"name":"db","region":"eu-west-1"}` {
			t.Fatalf("canonical %s", canonical)
		}
	})
}

func TestKeyRefusesBadInput(t *testing.T) {
	base := []string{"key", "-session", "s1", "-step", "0", "-tool", "echo"}
	cases := []struct {
		name    string
		stdin   string
		args    []string
		message string
	}{
		{"invalid JSON", "", append(base, `{"text":`), "arguments: keyderive: JSON syntax error"},
		{"invalid JSON on stdin", `{"a":1,"a":2}`, base, "duplicate member name"},
		{"not an object", "", append(base, `[1,2]`), "not a JSON object"},
		{"empty stdin", "", base, "no arguments"},
		{"two arguments", "", append(base, `{}`, `{}`), "want one JSON argument, got 2"},
		{"missing flags", "", []string{"key", "-tool", "echo", `{}`}, "-session, -step required"},
		{"bad step", "", []string{"key", "-session", "s", "-step", "-1", "-tool", "echo", `{}`}, "-step: keyderive: invalid step index"},
		{"step above 2^53-1", "", []string{"key", "-session", "s", "-step", "9007199254740992", "-tool", "echo", `{}`}, "-step"},
		{"bad session", "", []string{"key", "-session", "a:b", "-step", "1", "-tool", "echo", `{}`}, "-session: keyderive: invalid session id"},
		{"bad tool", "", []string{"key", "-session", "s", "-step", "1", "-tool", "Echo", `{}`}, "-tool: keyderive: invalid tool name"},
		{"unknown flag", "", []string{"key", "-sesion", "s", `{}`}, "flag provided but not defined: -sesion"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := runProgram(t, c.stdin, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.message) {
				t.Fatalf("error %v, want one containing %q", err, c.message)
			}
			if out != "" {
				t.Fatalf("stdout %q on error; want nothing", out)
			}
		})
	}
}

// TestSubcommandExitStatus runs the real binary (the test binary in child
// mode) to check what a shell sees: exit status 1, the reason on stderr,
// nothing on stdout; and 0 with the key on stdout when all is well.
func TestSubcommandExitStatus(t *testing.T) {
	child := func(stdin string, args ...string) (stdout, stderr string, code int) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "GATEWAY_TEST_CHILD=1")
		cmd.Stdin = strings.NewReader(stdin)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}
	out, errOut, code := child(`{"text":"hello"}`, "key", "-session", "sess-1", "-step", "0", "-tool", "echo")
	want, _ := keyderive.Key("sess-1", 0, "echo", []byte(`{"text":"hello"}`))
	if code != 0 || out != want+"\n" || errOut != "" {
		t.Fatalf("key from stdin: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = child("", "key", "-session", "sess-1", "-step", "0", "-tool", "echo", `{"text":hello}`)
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "gateway: key: arguments: keyderive: JSON syntax error") {
		t.Fatalf("invalid JSON: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("stroe:\n  path: x.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = child("", "check", "-config", bad)
	if code != 1 || out != "" || !strings.Contains(errOut, "unknown field stroe") {
		t.Fatalf("check of a bad config: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = child("", "health", "-url", "http://"+closedAddr(t)+"/healthz", "-timeout", "2s")
	if code != 1 || out != "" || !strings.Contains(errOut, "gateway: health:") {
		t.Fatalf("health of nothing: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestCheckListsTheTools(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "schemas", "charge.json")
	if err := os.MkdirAll(filepath.Dir(schema), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(schema, []byte(`{"type":"object","required":["amount"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// redis_url points at a port nobody listens on: check must not connect.
	config := filepath.Join(dir, "gateway.yaml")
	text := `listen: 0.0.0.0:9999
store:
  redis_url: redis://:s3cret@` + closedAddr(t) + `/0
idempotency:
  replay_ttl: 48h
tools:
  - name: charge-card
    schema: schemas/charge.json
    timeout: 20s
    lease_expiry: unknown
    http:
      url: http://user:pw@127.0.0.1:9000/charge?api_key=abc
  - name: provision-infra
    timeout: 2m
`
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runProgram(t, "", "check", "-config", config)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"gateway.yaml: OK",
		"listen    0.0.0.0:9999 (http)",
		"store     redis:127.0.0.1:",
		"NAME ",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("check output lacks %q:\n%s", want, out)
		}
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 7 {
			rows[f[0]] = f[1:]
		}
	}
	wantRows := map[string]string{
		"charge-card":     "http false 20s 48h unknown http://127.0.0.1:9000/charge?...",
		"provision-infra": "plugin false 2m 48h rerun -",
		"echo":            "plugin false 30s 48h rerun -",
		"lookup-resource": "plugin true 30s - - -",
	}
	for name, want := range wantRows {
		if got := strings.Join(rows[name], " "); got != want {
			t.Fatalf("row %s: %q, want %q\n%s", name, got, want, out)
		}
	}
	for _, secret := range []string{"s3cret", "pw@", "abc"} {
		if strings.Contains(out, secret) {
			t.Fatalf("check prints a credential (%s):\n%s", secret, out)
		}
	}

	// A relative -config from another directory: the schema is found next
	// to the file and the report names the file's absolute path.
	t.Chdir(filepath.Dir(dir))
	relOut, err := runProgram(t, "", "check", "-config", filepath.Join(filepath.Base(dir), "gateway.yaml"))
	if err != nil || !strings.HasPrefix(relOut, "config    "+config+": OK\n") {
		t.Fatalf("relative -config: %v\n%s", err, relOut)
	}

	jsonOut, err := runProgram(t, "", "check", "-json", "-config", config)
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Tools []struct {
			Name, Kind, Timeout string
			ReadOnly            bool `json:"read_only"`
		}
	}
	if err := json.Unmarshal([]byte(jsonOut), &report); err != nil {
		t.Fatalf("check -json: %v\n%s", err, jsonOut)
	}
	if len(report.Tools) != 4 || report.Tools[0].Name != "charge-card" || report.Tools[0].Kind != "http" {
		t.Fatalf("check -json tools: %+v", report.Tools)
	}
}

func TestCheckRefusesBadConfigs(t *testing.T) {
	cases := map[string]struct{ config, message string }{
		"unknown field":   {"stroe: {}\n", "unknown field stroe"},
		"unknown plugin":  {"tools:\n  - name: ghost\n", "tools[0] (ghost): no plugin of that name"},
		"bad schema":      {"tools:\n  - name: echo\n    input_schema: {type: 3}\n", "invalid input schema"},
		"bad redis url":   {"store:\n  redis_url: http://x\n", "store.redis_url"},
		"bad log level":   {"log_level: loud\n", "log_level"},
		"half tls":        {"tls:\n  cert_file: cert.pem\n", "tls.key_file: required"},
		"missing tls":     {"tls:\n  cert_file: cert.pem\n  key_file: key.pem\n", "tls: cert_file"},
		"bad admin token": {"admin:\n  token_sha256: abc\n", "admin.token_sha256"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			config := filepath.Join(dir, "gateway.yaml")
			if err := os.WriteFile(config, []byte(c.config), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runProgram(t, "", "check", "-config", config)
			if err == nil || !strings.Contains(err.Error(), c.message) || !strings.HasPrefix(err.Error(), "check: ") {
				t.Fatalf("error %v, want one containing %q", err, c.message)
			}
			if out != "" {
				t.Fatalf("stdout %q on error", out)
			}
		})
	}
	if _, err := runProgram(t, "", "check"); err == nil || !strings.Contains(err.Error(), "-config FILE") {
		t.Fatalf("check without -config: %v", err)
	}
}

// TestCheckOpensNoStore checks that check leaves the embedded store's file
// alone (it would create it) and binds no port.
func TestCheckOpensNoStore(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// listen names a port that is taken: serving would fail, checking does not.
	text := "listen: " + ln.Addr().String() + "\nstore:\n  path: data/gw.db\n"
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runProgram(t, "", "check", "-config", config); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("check created the store's directory: %v", err)
	}
}

func TestHealthProbesARunningGateway(t *testing.T) {
	addr := startInProcess(t, "store:\n  path: gw.db\n")
	out, err := runProgram(t, "", "health", "-url", "http://"+addr+"/healthz")
	if err != nil || !strings.Contains(out, `200 {"status":"ok"}`) {
		t.Fatalf("healthz: %q, %v", out, err)
	}
	if _, err := runProgram(t, "", "health", "-url", "http://"+addr+"/readyz"); err != nil {
		t.Fatalf("readyz: %v", err)
	}
	out, err = runProgram(t, "", "health", "-url", "http://"+addr+"/nothing-here")
	if err == nil || !strings.Contains(err.Error(), "answered 404") || out != "" {
		t.Fatalf("a 404 must fail the probe: %q, %v", out, err)
	}
	if _, err := runProgram(t, "", "health", "-url", "http://"+closedAddr(t)+"/healthz"); err == nil {
		t.Fatal("a closed port must fail the probe")
	}
	if _, err := runProgram(t, "", "health", "-timeout", "0s"); err == nil {
		t.Fatal("-timeout 0s accepted")
	}
}

// TestServeRefusesStrayArguments: `gateway chek` must not start a gateway.
func TestServeRefusesStrayArguments(t *testing.T) {
	if _, err := runProgram(t, "", "chek", "-config", "x.yaml"); err == nil || !strings.Contains(err.Error(), `unknown command "chek"`) {
		t.Fatalf("got %v", err)
	}
	out, err := runProgram(t, "", "help")
	if err != nil || !strings.Contains(out, "key -session S -step N -tool T") {
		t.Fatalf("help: %q, %v", out, err)
	}
}

// startInProcess runs the program's run function as a server until the
// test ends and returns its address.
func startInProcess(t *testing.T, configText string) string {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(config, []byte(configText), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testutil.LockedBuffer{}
	done := make(chan error, 1)
	env := map[string]string{"GATEWAY_ADDR": "127.0.0.1:0"}
	go func() {
		done <- run(ctx, []string{"gateway", "-config", config}, func(k string) string { return env[k] }, strings.NewReader(""), logs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if addr, _ := logs.Find("gateway listening")["addr"].(string); addr != "" {
			return addr
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("gateway did not start: %s", logs.String())
	return ""
}

// closedAddr is a loopback address nothing listens on.
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
