package mcptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/internal/mcptest"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/mcptool"
	"github.com/toolgateway/toolgateway/wire"
)

// TestJSONRPCErrorIsNotExecutedOnlyWithEvidence: every JSON-RPC error the
// server answers is ErrUpstreamRejected; only a protocol refusal or an
// error whose data._meta marks it not executed also wraps ErrNotExecuted.
func TestJSONRPCErrorIsNotExecutedOnlyWithEvidence(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "remote", URL: up.http.URL, Sessions: 1, RecordIsError: true}, mcptool.Options{})
	for _, tc := range []struct {
		args        string
		notExecuted bool
	}{
		{`{}`, false},
		{`{"code":-32603}`, false},
		{`{"code":-32000}`, false},
		{`{"code":-32000,"not_executed":true}`, true},
		{`{"code":-32700}`, true},
		{`{"code":-32600}`, true},
		{`{"code":-32601}`, true},
		{`{"code":-32602}`, true},
	} {
		_, err := lookup(t, reg, mcptest.ToolFailRPC).Tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(tc.args)})
		if !errors.Is(err, tools.ErrUpstreamRejected) || errors.Is(err, tools.ErrNotExecuted) != tc.notExecuted {
			t.Errorf("%s: %v; want ErrUpstreamRejected, ErrNotExecuted %v", tc.args, err, tc.notExecuted)
		}
	}
}

// TestStreamableHTTP5xxIsUncertain: a url server (or a proxy in front of
// it) answers a call's request with 502 or 429 after the server acted: the
// call may have run, ErrOutcomeUncertain; so too with two contradictory
// Toolgateway-Outcome headers (issue 40). Marked Toolgateway-Outcome:
// not-executed (once), or a 4xx other than 408/425/429, it is a refusal:
// ErrUpstreamUnreachable.
func TestStreamableHTTP5xxIsUncertain(t *testing.T) {
	s, err := mcptest.New(mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP() }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case bytes.Contains(body, []byte("proxy 502")), bytes.Contains(body, []byte("proxy 429")):
			handler.ServeHTTP(httptest.NewRecorder(), r) // the server acts; the proxy fails
			switch {
			case bytes.Contains(body, []byte("contradictory")):
				w.Header().Add(wire.HeaderOutcome, wire.OutcomeNotExecuted)
				w.Header().Add(wire.HeaderOutcome, "executed")
			case bytes.Contains(body, []byte("marked")):
				w.Header().Set(wire.HeaderOutcome, wire.OutcomeNotExecuted)
			}
			status := http.StatusBadGateway
			if bytes.Contains(body, []byte("proxy 429")) {
				status = http.StatusTooManyRequests
			}
			http.Error(w, "proxy failed", status)
		case bytes.Contains(body, []byte("proxy 403")):
			http.Error(w, "forbidden", http.StatusForbidden)
		default:
			handler.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "remote", URL: srv.URL, Sessions: 1, RecordIsError: true}, mcptool.Options{})
	for _, tc := range []struct {
		title     string
		uncertain bool
	}{
		{"proxy 502", true},
		{"proxy 502 marked", false},
		{"proxy 502 contradictory", true},
		{"proxy 429", true},
		{"proxy 429 marked", false},
		{"proxy 403", false},
	} {
		waitFor(t, "a session", func() bool {
			_, err := lookup(t, reg, mcptest.ToolCreate).Tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(`{"title":"ping"}`)})
			return err == nil
		})
		_, err := lookup(t, reg, mcptest.ToolCreate).Tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(`{"title":"` + tc.title + `"}`)})
		if errors.Is(err, tools.ErrOutcomeUncertain) != tc.uncertain || errors.Is(err, tools.ErrUpstreamUnreachable) == tc.uncertain {
			t.Errorf("%s: %v; want uncertain %v", tc.title, err, tc.uncertain)
		}
	}
	acted := 0
	for _, e := range mcptest.Filter(s.All(), mcptest.ToolCreate, "done") {
		if bytes.Contains(e.Arguments, []byte("proxy 502")) || bytes.Contains(e.Arguments, []byte("proxy 429")) {
			acted++
		}
	}
	if acted != 5 {
		t.Errorf("the server acted %d times behind the three 502s and two 429s, want 5", acted)
	}
}
