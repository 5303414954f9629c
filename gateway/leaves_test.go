package gateway_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/deptest"
)

// TestLeavesImportNoGateway pins the capabilities as leaves: each imports
// only what its allow-list names of this module, never the gateway root
// or its call path, so any of them can be used, tested and replaced on
// its own (docs/architecture.md).
func TestLeavesImportNoGateway(t *testing.T) {
	const m = deptest.Module
	// tools brings keyderive and wire (the wire vocabulary, which imports
	// nothing): what a tool and its record are made of.
	tool := []string{m + "/tools", m + "/keyderive", m + "/wire"}
	// A store keeps the MCP tools' pins too (gateway/pins, itself a leaf).
	store := slices.Concat([]string{m + "/gateway/idempotency", m + "/gateway/pins"}, tool)
	leaves := map[string][]string{
		"gateway/decide":    {m + "/gateway/principal"},
		"gateway/principal": nil,
		// Budgets compile their costs as decide does and speak the
		// store's charges.
		"gateway/budgets":                slices.Concat([]string{m + "/gateway/decide", m + "/gateway/principal"}, store),
		"gateway/notify":                 nil,
		"gateway/pins":                   nil,
		"gateway/oidcauth":               nil,
		"gateway/redisscript":            nil,
		"gateway/ratelimit":              {m + "/gateway/redisscript"},
		"gateway/receipts":               nil,
		"gateway/receipts/boltreceipts":  {m + "/gateway/receipts"},
		"gateway/receipts/redisreceipts": {m + "/gateway/receipts", m + "/gateway/redisscript"},
		"gateway/receipts/pgreceipts":    {m + "/gateway/receipts"},
		"gateway/reconcile":              store,
		"gateway/idempotency":            tool,
		"gateway/idempotency/boltstore":  store,
		"gateway/idempotency/redisstore": slices.Concat(store, []string{m + "/gateway/redisscript"}),
		"gateway/idempotency/pgstore":    slices.Concat(store, []string{m + "/gateway/redisscript", m + "/gateway/ratelimit", m + "/tools/pgxtx"}),
	}
	for leaf, allow := range leaves {
		t.Run(leaf, func(t *testing.T) {
			t.Parallel()
			deptest.Check(t, m+"/"+leaf, allow)
		})
	}
}

// TestEngineImportsNoSurface pins the engine below its surfaces: the call
// path imports neither the gateway root nor a door nor the console, whose
// settings are the console's own (docs/architecture.md).
func TestEngineImportsNoSurface(t *testing.T) {
	const m = deptest.Module
	deps, err := deptest.Deps(t.Context(), m+"/gateway/callpath")
	if err != nil {
		t.Fatal(err)
	}
	for _, surface := range []string{m + "/gateway", m + "/gateway/console", m + "/gateway/mcpserver", m + "/gateway/gatewaycmd"} {
		if slices.Contains(deps, surface) {
			t.Errorf("gateway/callpath depends on %s", surface)
		}
	}
}

// TestRootStaysTheHouse pins the gateway root's size as issue 41 set it:
// the root is the HTTP house around the engine, at most 20 non-test files
// of at most 400 lines each; what grows past that is a package of its own
// (docs/architecture.md, "Measuring the shape").
func TestRootStaysTheHouse(t *testing.T) {
	const maxFiles, maxLines = 20, 400
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		sources = append(sources, name)
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if lines := bytes.Count(b, []byte("\n")); lines > maxLines {
			t.Errorf("%s has %d lines, more than %d: move a concern into a file or package of its own", name, lines, maxLines)
		}
	}
	if len(sources) > maxFiles {
		t.Errorf("the gateway root has %d non-test files, more than %d: %v", len(sources), maxFiles, sources)
	}
}
