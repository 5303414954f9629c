package gateway_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/gateway/gatewaytest"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/tools"
)

// toolCard is the Tools page's card of tool, tags stripped, spaces folded.
func toolCard(t *testing.T, page, tool string) string {
	t.Helper()
	start := strings.Index(page, `<h2 id="tool-`+tool+`">`)
	if start < 0 {
		t.Fatalf("no card for %s:\n%s", tool, page)
	}
	card := page[start:]
	card = card[:strings.Index(card, "</section>")]
	text := regexp.MustCompile(`<[^>]+>`).ReplaceAllString(card, " ")
	return strings.Join(strings.Fields(text), " ")
}

// TestConsoleToolsCountExecutionsOncePerCall: the Tools page counts the
// tool's runs as the tool counts them — a retry that replays, finds the
// record UNKNOWN or its approval pending, or is denied again adds none;
// a run whose outcome was left UNKNOWN is one — and the decisions once
// per call, enforced and observed apart.
func TestConsoleToolsCountExecutionsOncePerCall(t *testing.T) {
	t.Run("enforced", func(t *testing.T) {
		refundTool := newTestTool("refund")
		refundTool.behave = func(_ context.Context, req *tools.Request) (*tools.Response, error) {
			if strings.Contains(string(req.Arguments), `"fail"`) {
				// An upstream's 5xx: it may have acted (an UNKNOWN record).
				return &tools.Response{Status: 503, ContentType: "application/json", Body: []byte(`{"error":"busy"}`), Relayed: true}, nil
			}
			return tools.JSON(200, map[string]any{"ok": true})
		}
		h := newHarness(t, storeEmbedded, []tools.Tool{refundTool}, withAdmin("adm"),
			withDecisions(compileRules(t, "refund", refundRules), decide.ModeEnforce, callpath.ApprovalSettings{}),
			withPolicy("refund", tools.Policy{ReplayTTL: time.Hour, LeaseExpiry: idempotency.LeaseExpiryUnknown}))
		calls := []struct {
			call   gatewaytest.Call
			status int
		}{
			{refund("e", 1, "50"), 200},
			{refund("e", 1, "50"), 200}, // replayed
			{gatewaytest.Call{Tool: "refund", Session: "e", Step: 2, Args: `{"amount":60,"fail":true}`}, 500},
			{gatewaytest.Call{Tool: "refund", Session: "e", Step: 2, Args: `{"amount":60,"fail":true}`}, 409}, // outcome_unknown
			{refund("e", 3, "500"), 409},   // approval_pending
			{refund("e", 3, "500"), 409},   // still pending
			{refund("e", 4, "50000"), 403}, // denied
		}
		for i, c := range calls {
			if r := h.Do(c.call); r.Status != c.status {
				t.Fatalf("call %d: %d %s, want %d", i, r.Status, r.Body, c.status)
			}
		}
		if n := refundTool.total.Load(); n != 2 {
			t.Fatalf("the tool ran %d times, want 2", n)
		}
		c, _ := consoleBrowser(t, h, "adm")
		card := toolCard(t, consoleGet(t, c, h.Srv.URL+"/console/tools"), "refund")
		for _, want := range []string{"Executions 2 (1 left UNKNOWN)", "Replays 1", "Decisions allow: 2 approve: 1 deny: 1"} {
			if !strings.Contains(card, want) {
				t.Errorf("tools page: want %q in %q", want, card)
			}
		}
		if strings.Contains(card, "Observed") {
			t.Errorf("enforced decisions shown as observed: %q", card)
		}
	})
	t.Run("observed", func(t *testing.T) {
		refundTool := newTestTool("refund")
		h := newHarness(t, storeEmbedded, []tools.Tool{refundTool}, withAdmin("adm"),
			withDecisions(compileRules(t, "refund", refundRules), decide.ModeObserve, callpath.ApprovalSettings{}))
		for i, amount := range []string{"50", "500", "50000"} {
			for range 2 { // each call and its retry, which replays
				if r := h.Do(refund("o", uint64(i+1), amount)); r.Status != http.StatusOK {
					t.Fatalf("observe mode, amount %s: %d %s", amount, r.Status, r.Body)
				}
			}
		}
		if n := refundTool.total.Load(); n != 3 {
			t.Fatalf("the tool ran %d times, want 3", n)
		}
		c, _ := consoleBrowser(t, h, "adm")
		card := toolCard(t, consoleGet(t, c, h.Srv.URL+"/console/tools"), "refund")
		for _, want := range []string{"Executions 3 Replays 3", "Decisions none counted", "Observed allow: 1 approve: 1 deny: 1"} {
			if !strings.Contains(card, want) {
				t.Errorf("tools page: want %q in %q", want, card)
			}
		}
	})
}
