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
)

// TestURLAnswerLostAfterTheServerActedIsUncertain: the server receives the
// call and carries it out, then the connection drops before the answer
// leaves (the answer goes nowhere, the socket is aborted). The call fails
// with ErrOutcomeUncertain, not ErrUpstreamUnreachable (a retry could repeat
// the side effect, which the server's counter shows happened once); a call
// to a server that is not there at all stays ErrUpstreamUnreachable.
func TestURLAnswerLostAfterTheServerActedIsUncertain(t *testing.T) {
	s, err := mcptest.New(mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP() }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte("lose the answer")) {
			handler.ServeHTTP(w, r)
			return
		}
		handler.ServeHTTP(httptest.NewRecorder(), r) // acts; the answer is lost
		panic(http.ErrAbortHandler)                  // and the connection drops
	}))
	t.Cleanup(srv.Close)
	reg := tools.NewRegistry()
	// No keep-alive: every request dials, so a server that is gone refuses
	// the connection before anything is written.
	noReuse := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	startManager(t, reg, mcptool.ServerConfig{Name: "remote", URL: srv.URL, Sessions: 1, RecordIsError: true}, mcptool.Options{HTTPClient: noReuse})
	call := func(args string) error {
		_, err := lookup(t, reg, "create_ticket").Tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(args), Tenant: "acme"})
		return err
	}
	err = call(`{"title":"lose the answer"}`)
	if !errors.Is(err, tools.ErrOutcomeUncertain) || errors.Is(err, tools.ErrUpstreamUnreachable) {
		t.Fatalf("answer lost after the request was sent: %v, want ErrOutcomeUncertain", err)
	}
	if n := len(s.Executions(mcptest.ToolCreate)); n != 1 {
		t.Fatalf("the server carried the call out %d times, want 1", n)
	}
	// The session survives a failure of one call's request.
	if err := call(`{"title":"next"}`); err != nil {
		t.Fatalf("next call on the session: %v", err)
	}

	srv.CloseClientConnections()
	srv.Close()
	if err := call(`{"title":"nobody there"}`); !errors.Is(err, tools.ErrUpstreamUnreachable) || errors.Is(err, tools.ErrOutcomeUncertain) {
		t.Fatalf("server gone before the request: %v, want ErrUpstreamUnreachable", err)
	}
}

// TestURLStreamDroppedMidCallIsUncertain: over an SSE answer stream, the
// connection drops while the server runs the call: ErrOutcomeUncertain
// (the server's log shows the call started).
func TestURLStreamDroppedMidCallIsUncertain(t *testing.T) {
	up := newHTTPUpstream(t, mcptest.Options{})
	reg := tools.NewRegistry()
	startManager(t, reg, mcptool.ServerConfig{Name: "remote", URL: up.http.URL, Sessions: 1, RecordIsError: true}, mcptool.Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := lookup(t, reg, "create_ticket").Tool.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(`{"title":"dropped","delay_ms":3000}`)})
		errc <- err
	}()
	waitFor(t, "the call to start", func() bool { return len(mcptest.Filter(up.srv.All(), mcptest.ToolCreate, "start")) == 1 })
	up.http.CloseClientConnections()
	if err := <-errc; !errors.Is(err, tools.ErrOutcomeUncertain) {
		t.Fatalf("stream dropped mid-call: %v, want ErrOutcomeUncertain", err)
	}
}
