package agentclient

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

func TestMCPMeta(t *testing.T) {
	meta := MCPMeta("run-42", 9007199254740991)
	text, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	// The step index is a JSON integer, exact up to 2^53-1.
	want := `{"io.github.toolgateway/sessionId":"run-42","io.github.toolgateway/stepIndex":9007199254740991}`
	if string(text) != want {
		t.Errorf("MCPMeta = %s\nwant %s", text, want)
	}
	if meta[wire.MetaSessionID] != "run-42" || meta[wire.MetaStepIndex] != uint64(9007199254740991) {
		t.Errorf("MCPMeta = %#v", meta)
	}
}

func TestMCPMetaWithKey(t *testing.T) {
	args := map[string]any{"name": "db", "region": "eu-west-1", "cpus": 2}
	meta, err := MCPMetaWithKey("run-42", 4, "provision-infra", args)
	if err != nil {
		t.Fatal(err)
	}
	// The key is the one Call sends for the same call, whatever the
	// spelling of the arguments.
	want, err := keyderive.Key("run-42", 4, "provision-infra", []byte(`{"region":"eu-west-1","cpus":2.0,"name":"db"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(meta) != 3 || meta[wire.MetaIdempotencyKey] != want || meta[wire.MetaSessionID] != "run-42" || meta[wire.MetaStepIndex] != uint64(4) {
		t.Errorf("MCPMetaWithKey = %#v, want key %s", meta, want)
	}
	for _, form := range []any{json.RawMessage(`{"cpus":2,"name":"db","region":"eu-west-1"}`), []byte(`{ "name":"db","cpus":2e0,"region":"eu-west-1"}`)} {
		other, err := MCPMetaWithKey("run-42", 4, "provision-infra", form)
		if err != nil || other[wire.MetaIdempotencyKey] != want {
			t.Errorf("MCPMetaWithKey(%s) = %v, %v; want key %s", form, other, err, want)
		}
	}

	for _, bad := range []struct {
		session string
		tool    string
		args    any
		want    error
	}{
		{"a:b", "t", map[string]int{}, keyderive.ErrInvalidSession},
		{"s", "Bad Tool", map[string]int{}, keyderive.ErrInvalidTool},
		{"s", "t", []int{1}, keyderive.ErrNotObject},
		{"s", "t", nil, keyderive.ErrNotObject},
	} {
		if meta, err := MCPMetaWithKey(bad.session, 0, bad.tool, bad.args); !errors.Is(err, bad.want) || meta != nil {
			t.Errorf("MCPMetaWithKey(%q, %q, %v) = %v, %v; want %v", bad.session, bad.tool, bad.args, meta, err, bad.want)
		}
	}
}
