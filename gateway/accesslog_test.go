package gateway_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/tools"
)

// TestOneLogLinePerMCPRequest: a POST /mcp writes its one access-log line
// and nothing else at info level (the go-sdk server's per-session lines
// are not passed on), as docs/operations.md promises.
func TestOneLogLinePerMCPRequest(t *testing.T) {
	logs := &testutil.LockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")}, withLogger(logger))
	cs := h.mcpSession(mcpClientOptions{})
	for step := range 3 {
		if res, err := mcpCall(t, cs, "provision", `{}`, identityMeta("onelog", uint64(step))); err != nil || res.IsError {
			t.Fatalf("call: %v", err)
		}
	}
	var requests int
	lines := bufio.NewScanner(strings.NewReader(logs.String()))
	for lines.Scan() {
		var l map[string]any
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatalf("log line is not JSON: %s", lines.Text())
		}
		if l["msg"] != "request" {
			t.Errorf("a line besides the access log: %s", lines.Text())
			continue
		}
		requests++
	}
	if requests < 4 { // initialize, initialized, three calls at least
		t.Fatalf("%d access-log lines for at least 5 POSTs", requests)
	}
}
