package gatewaycmd

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// updateGolden rewrites the golden files of the scan tests:
// go test ./gateway/gatewaycmd/ -run Scan -update
var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (run with -update after checking the change):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// runScanCmd runs `gateway scan` with args and returns its output and error.
func runScanCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Run(context.Background(), append([]string{"gateway", "scan"}, args...), func(string) string { return "" }, &out)
	return out.String(), err
}

// The golden files hold the plugins this test binary compiles in
// (cmdtest-slow, reloadtest) beside the config's tools.

// TestScanExampleConfig: the scan of docs/gateway.example.yaml (text and
// JSON) is checked in; the example's provision tools are consequential
// and unprotected, so -fail-on unprotected exits 1 naming the count.
func TestScanExampleConfig(t *testing.T) {
	text, err := runScanCmd(t, "-config", exampleConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "scan_example.txt", []byte(text))
	js, err := runScanCmd(t, "-config", exampleConfigPath, "-json")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "scan_example.json", []byte(js))
	if _, err := runScanCmd(t, "-config", exampleConfigPath, "-fail-on", "unprotected"); err == nil || !strings.Contains(err.Error(), "consequential tools unprotected") {
		t.Fatalf("-fail-on unprotected on the example: %v, want an error (exit 1)", err)
	}
}

// TestScanMCPServer: the scan lists a real MCP server's tools (tools/list
// only: the server counts no tools/call), classifies them from their
// names, schemas and annotations, and -fail-on unprotected passes once
// the server's tools are lease_expiry: unknown.
func TestScanMCPServer(t *testing.T) {
	up := newMCPUpstream(t)
	config := func(extra string) string {
		return writeConfig(t, "store:\n  path: "+filepath.Join(t.TempDir(), "gw.db")+`
mcp_servers:
  - name: tickets
    url: `+up.http.URL+`
    prefix: t_
    tools: [create_ticket, get_ticket, fail_tool]
`+extra)
	}
	text, err := runScanCmd(t, "-config", config(""))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "scan_mcp.txt", []byte(text))
	if _, err := runScanCmd(t, "-config", config(""), "-fail-on", "unprotected"); err == nil {
		t.Fatal("-fail-on unprotected passed with an unprotected create_ticket")
	}
	if out, err := runScanCmd(t, "-config", config("    lease_expiry: unknown\n"), "-fail-on", "unprotected"); err != nil {
		t.Fatalf("-fail-on unprotected with lease_expiry: unknown: %v\n%s", err, out)
	}
	if n := len(up.srv.All()); n != 0 {
		t.Fatalf("the scan made the server run %d tool calls, want none (tools/list only)", n)
	}
}
