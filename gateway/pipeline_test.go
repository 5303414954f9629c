package gateway_test

import (
	"context"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// The call path serves a second door without HTTP: a Call with the
// identity a transport found (no key: derived mode derives it) runs the
// tool once, and the same call over REST replays that execution, one
// record for both doors.
func TestCallPathServesAnotherDoor(t *testing.T) {
	tool := newTestTool("provision")
	h := newHarness(t, storeEmbedded, []tools.Tool{tool})
	entry, _ := h.tools.Lookup("provision")
	args := `{"size":1}`
	res := h.gw.Call(context.Background(), &callpath.Call{
		API: callpath.APIMCP, Tenant: callpath.AnonymousTenant, Entry: entry, Arguments: []byte(args),
		Identity: callpath.Identity{SessionID: "door", StepIndex: 3, HasStep: true},
	})
	if res.Kind != callpath.ResultExecuted || res.Status != 200 || res.ExecutionID == "" || res.Replayed {
		t.Fatalf("first call: %+v", res)
	}
	rest := h.do(callSpec{tool: "provision", session: "door", step: 3, args: args})
	if rest.status != 200 || rest.header.Get(wire.HeaderReplayed) != "true" || rest.header.Get(wire.HeaderExecutionID) != res.ExecutionID {
		t.Fatalf("REST retry: %d %v", rest.status, rest.header)
	}
	again := h.gw.Call(context.Background(), &callpath.Call{
		API: callpath.APIMCP, Tenant: callpath.AnonymousTenant, Entry: entry, Arguments: []byte(args),
		Identity: callpath.Identity{SessionID: "door", StepIndex: 3, HasStep: true},
	})
	if again.Kind != callpath.ResultReplayed || !again.Replayed || string(again.Body) != string(res.Body) {
		t.Fatalf("second call: %+v", again)
	}
	if n := tool.runs(derivedKey(t, "door", 3, "provision", args)); n != 1 {
		t.Fatalf("tool ran %d times", n)
	}
	if got := h.counterAPI("mcp", "provision", "executed"); got != 1 {
		t.Fatalf("gateway_requests_total{api=mcp,outcome=executed} = %v", got)
	}
}
