package mcptool

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgateway/toolgateway/wire"
)

// TestAdversaryDuplicateOutcomeMemberIsNoEvidence: a JSON-RPC error whose
// data names the outcome twice (not-executed, then executed; or the
// reverse), or _meta twice, proves nothing — a decoder would keep one of
// them at its own choice; once and exactly not-executed, it is evidence.
func TestAdversaryDuplicateOutcomeMemberIsNoEvidence(t *testing.T) {
	k, _ := json.Marshal(wire.MetaOutcome)
	key := string(k)
	for _, tc := range []struct {
		data string
		want bool
	}{
		{`{"_meta":{` + key + `:"not-executed"}}`, true},
		{`{"_meta":{"other":1,` + key + `:"not-executed"},"x":[1,{"_meta":2}]}`, true},
		{`{"_meta":{` + key + `:"not-executed",` + key + `:"executed"}}`, false},
		{`{"_meta":{` + key + `:"executed",` + key + `:"not-executed"}}`, false},
		{`{"_meta":{` + key + `:"not-executed"},"_meta":{` + key + `:"executed"}}`, false},
		{`{"_meta":{` + key + `:"not-executed, executed"}}`, false},
		{`{"_meta":{` + key + `:["not-executed"]}}`, false},
		{`{"_meta":{` + key + `:"not-executed"}`, false}, // truncated
		{`[]`, false},
		{``, false},
	} {
		e := &jsonrpc.Error{Code: -32000, Message: "failed", Data: json.RawMessage(tc.data)}
		if got := rpcNotExecuted(e); got != tc.want {
			t.Errorf("data %s: not executed %v, want %v", tc.data, got, tc.want)
		}
	}
}
