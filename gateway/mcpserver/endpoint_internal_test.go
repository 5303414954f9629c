package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

func TestMCPInputSchema(t *testing.T) {
	for raw, want := range map[string]string{
		`{"type":"object","properties":{}}`: `{"type":"object","properties":{}}`,
		`{"properties":{"a":{}}}`:           `{"type":"object","allOf":[{"properties":{"a":{}}}]}`,
		`{"type":["object","null"]}`:        `{"type":"object","allOf":[{"type":["object","null"]}]}`,
		`true`:                              `{"type":"object"}`,
		``:                                  `{"type":"object"}`,
	} {
		if got := string(mcpInputSchema([]byte(raw))); got != want {
			t.Errorf("mcpInputSchema(%s) = %s, want %s", raw, got, want)
		}
	}
}

func TestMCPInProgressWait(t *testing.T) {
	for in, want := range map[int64]int64{0: int64(DefaultInProgressWait), -1: 0, 5e9: 5e9, 120e9: int64(MaxInProgressWait)} {
		if got := (Options{InProgressWait: time.Duration(in)}).inProgressWait(); int64(got) != want {
			t.Errorf("InProgressWait %d: effective %v, want %d", in, got, want)
		}
	}
}

// TestMCPRenderFollowsTheCodeTable pins how a tools/call failure renders:
// upstream_response_too_large is a tool result with isError and
// retryable false (the contract's tool-failure row; the same call would
// fail again); a retryable code answered not retryable for this call
// (WithRetryable) carries false both in _meta and in a JSON-RPC error's
// data; upstream_unavailable is the retryable -32053.
func TestMCPRenderFollowsTheCodeTable(t *testing.T) {
	c := &callpath.Call{Entry: &tools.Entry{Spec: tools.Spec{Name: "ship"}}, Arguments: []byte(`{}`)}
	render := func(p *callpath.Problem) (*mcp.CallToolResult, error) {
		return mcpRender(c, callpath.Result{Kind: callpath.ResultProblem, Problem: p, ExecutionID: "01JD8ZK3V6Q3H1T9W3C0X5N7RM"})
	}
	for _, tc := range []struct {
		p         *callpath.Problem
		retryable bool
	}{
		{callpath.NewProblem(wire.CodeUpstreamResponseTooLarge, "too large"), false},
		{callpath.NewProblem(wire.CodeToolTimeout, "timed out"), true},
		{callpath.NewProblem(wire.CodeToolTimeout, "timed out; the outcome is unknown").WithRetryable(false), false},
		{callpath.NewProblem(wire.CodeUpstreamUnreachable, "lost").WithRetryable(false), false},
	} {
		res, err := render(tc.p)
		if err != nil || !res.IsError {
			t.Fatalf("%s: %v %+v, want a tool result with isError", tc.p.Code, err, res)
		}
		meta, ok := res.Meta[wire.MetaError].(mcpErrorMeta)
		if !ok || meta.Code != tc.p.Code || meta.Retryable != tc.retryable {
			t.Fatalf("%s: _meta error %+v, want retryable %v", tc.p.Code, res.Meta[wire.MetaError], tc.retryable)
		}
		if res.Meta[wire.MetaIdentity] != wire.MetaIdentityGateway || res.Meta[wire.MetaExecutionID] == nil {
			t.Fatalf("%s: _meta %v lacks the execution and identity", tc.p.Code, res.Meta)
		}
	}
	_, err := render(callpath.NewProblem(wire.CodeRequestInProgress, "running").WithRetryable(false))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != wire.RPCRequestInProgress || !strings.Contains(string(rpcErr.Data), `"retryable":false`) {
		t.Fatalf("an overridden retryable in a JSON-RPC error: %v", err)
	}
	_, err = render(callpath.NewProblem(wire.CodeUpstreamUnavailable, "not listed").WithRetryAfter(1))
	if !errors.As(err, &rpcErr) || rpcErr.Code != wire.RPCUpstreamUnavailable || !strings.Contains(string(rpcErr.Data), `"retryable":true`) {
		t.Fatalf("upstream_unavailable: %v", err)
	}
}

// TestEachMember: the envelope scan finds exactly the members
// encoding/json finds, values byte for byte, on objects with strings that
// hold brackets, quotes and escapes, nested values and odd white space;
// and it refuses a name given twice, escaped or not.
func TestEachMember(t *testing.T) {
	for _, text := range []string{
		`{}`,
		` { "a" : 1 , "b":"x\"}]" ,"c":[1,{"d":"]}"}, "e\\"], "f": {"g": [[], {}]} ,"h":null,"i":true,"j":-1.5e3 } `,
		`{"arguments":{"s":"\\\"{"},"name":"provision","_meta":{"k":"v"}}`,
		"{\n\t\"x\"\r\n:\n[ ]\n}",
	} {
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(text), &want); err != nil {
			t.Fatal(err)
		}
		got := map[string]json.RawMessage{}
		if err := eachMember([]byte(text), func(name string, value json.RawMessage) error {
			got[name] = value
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: members %v, want %v", text, got, want)
		}
		for name, v := range want {
			if string(bytes.TrimSpace(got[name])) != string(bytes.TrimSpace(v)) {
				t.Fatalf("%s: member %s = %s, want %s", text, name, got[name], v)
			}
		}
	}
	for _, text := range []string{`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"x":{"a":1},"b":[],"x":0}`} {
		if err := eachMember([]byte(text), func(string, json.RawMessage) error { return nil }); err == nil {
			t.Errorf("%s: a duplicate name accepted", text)
		}
	}
}
