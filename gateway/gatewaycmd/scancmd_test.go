package gatewaycmd

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
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

// TestScanSuggestionsAreValidConfig: every YAML `gateway scan` proposes —
// for HTTP tools and plugins (tools[]) and for MCP tools (the server
// entry's tool_settings) — merged into the scanned config, loads with the
// config loader (unknown fields refused, rules compiled at start), and
// the tool it was for is then protected by what it added.
func TestScanSuggestionsAreValidConfig(t *testing.T) {
	up := newMCPUpstream(t)
	raw, err := os.ReadFile(exampleConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	base := string(raw) + `
mcp_servers:
  - name: tickets
    url: ` + up.http.URL + `
    prefix: t_
    tools: [create_ticket, get_ticket, fail_tool]
`
	path := filepath.Join(t.TempDir(), "gateway.yaml") // the example's schemas are inline
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(base)
	before, err := scan(context.Background(), path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	suggested := map[string]string{}
	for _, st := range before.Tools {
		if st.Add != "" {
			suggested[st.Name] = st.Add
		}
	}
	if suggested["t_create_ticket"] == "" || !strings.Contains(suggested["t_create_ticket"], "tool_settings:") {
		t.Fatalf("no tool_settings suggestion for the MCP tool t_create_ticket: %q", suggested["t_create_ticket"])
	}
	merged := base
	for name, add := range suggested {
		if _, err := ParseConfig([]byte(add)); err != nil {
			t.Fatalf("%s: the suggestion alone does not parse: %v\n%s", name, err, add)
		}
		merged = mergeYAML(t, merged, add)
	}
	write(merged)
	if _, err := LoadConfig(path); err != nil {
		t.Fatalf("the config with every suggestion: %v\n%s", err, merged)
	}
	after, err := scan(context.Background(), path, func(string) string { return "" })
	if err != nil {
		t.Fatalf("the config with every suggestion does not start: %v\n%s", err, merged)
	}
	for _, st := range after.Tools {
		if suggested[st.Name] == "" {
			continue
		}
		if st.Protected == nil || !*st.Protected || !contains(st.Protections, "decide rules (enforced)") || !contains(st.Protections, "lease_expiry: unknown") {
			t.Errorf("%s after its suggestion: protected %v by %v, want decide rules and lease_expiry: unknown\n%s", st.Name, st.Protected, st.Protections, suggested[st.Name])
		}
	}
}

// mergeYAML merges the YAML add into base: mappings member by member,
// and a list item with a name into the base's item of that name (appended
// when there is none); it answers the merged text.
func mergeYAML(t *testing.T, base, add string) string {
	t.Helper()
	var b, a yaml.Node
	if err := yaml.Unmarshal([]byte(base), &b); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(add), &a); err != nil {
		t.Fatal(err)
	}
	mergeNode(b.Content[0], a.Content[0])
	out, err := yaml.Marshal(&b)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func mergeNode(into, from *yaml.Node) {
	switch {
	case into.Kind == yaml.MappingNode && from.Kind == yaml.MappingNode:
		for i := 0; i < len(from.Content); i += 2 {
			key, value := from.Content[i], from.Content[i+1]
			if existing := mappingValue(into, key.Value); existing != nil {
				mergeNode(existing, value)
			} else {
				into.Content = append(into.Content, key, value)
			}
		}
	case into.Kind == yaml.SequenceNode && from.Kind == yaml.SequenceNode:
		for _, item := range from.Content {
			var same *yaml.Node
			if name := mappingValue(item, "name"); name != nil {
				for _, existing := range into.Content {
					if n := mappingValue(existing, "name"); n != nil && n.Value == name.Value {
						same = existing
					}
				}
			}
			if same != nil {
				mergeNode(same, item)
			} else {
				into.Content = append(into.Content, item)
			}
		}
	default:
		*into = *from
	}
}

// mappingValue is the value of key in the mapping m, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
