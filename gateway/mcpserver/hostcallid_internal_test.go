package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/wire"
)

// TestHostCallIDMembers: the first configured host member a call's _meta
// carries is its host call id; a host member that is not a string is
// refused; members that name a conversation, a turn or an attempt key
// nothing and cannot be configured.
func TestHostCallIDMembers(t *testing.T) {
	hosts := DefaultHostCallIDs()
	read := func(meta map[string]any) callpath.HostCall {
		raw := map[string]json.RawMessage{}
		for name, v := range meta {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			raw[name] = b
		}
		return hostCallID(raw, hosts)
	}
	got := read(map[string]any{"claudecode/toolUseId": "toolu_01", "agent-tool-call-request-id": "g-1"})
	if got.Problem != nil || got.Meta != "claudecode/toolUseId" || got.ID != "toolu_01" {
		t.Fatalf("claude code id: %+v", got)
	}
	if got := read(map[string]any{"agent-tool-call-request-id": "g-1"}); got.Meta != "agent-tool-call-request-id" {
		t.Fatalf("goose id: %+v", got)
	}
	if got := read(map[string]any{"claudecode/toolUseId": 7.0}); got.Problem == nil || got.Problem.Code != wire.CodeIdempotencyKeyMalformed {
		t.Fatalf("a number as host id: %+v", got)
	}
	if got := read(map[string]any{"openai/session": "conv", "vscode.requestId": "turn", "progressToken": "p"}); got != (callpath.HostCall{}) {
		t.Fatalf("turn-level ids keyed a call: %+v", got)
	}
	for _, bad := range [][]string{{"openai/session"}, {"vscode.requestId"}, {"progressToken"}, {""}, {"a:b"}, {"x", "x"}, {wire.MetaSessionID}} {
		if err := ValidateHostCallIDs(bad); err == nil {
			t.Errorf("host_call_ids %q accepted", bad)
		}
	}
	if err := ValidateHostCallIDs([]string{"claudecode/toolUseId", "myhost/callId"}); err != nil {
		t.Errorf("a good list refused: %v", err)
	}
}
