// Package mcptest is a real MCP server, written with the MCP Go SDK, for
// the tests of the gateway's MCP upstream tools. It counts executions,
// records the _meta each call carries, and can be slow, fail (JSON-RPC
// error), answer isError, die (the stdio program), and change its tool list
// while it serves. Serve it over Streamable HTTP in-process
// (mcp.NewStreamableHTTPHandler around Server.MCP) or over stdio with the
// program in mcptestserver.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/wire"
)

// Execution is one tools/call the server received.
type Execution struct {
	// Event is "start" when the handler began and "done" when it answered.
	Event     string          `json:"event"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      map[string]any  `json:"meta"`
	PID       int             `json:"pid"`
}

// Server is the test MCP server.
type Server struct {
	srv *mcp.Server

	mu    sync.Mutex
	execs []Execution
	log   *os.File // also append every Execution here (the stdio program)
	// gate, when non-nil, holds create_ticket calls until it is closed.
	gate chan struct{}
	// initialized counts the client sessions that completed the MCP
	// handshake (notifications/initialized), so a test can tell a pool of
	// sessions from a session per call.
	initialized int
}

// Options configure a Server.
type Options struct {
	// LogPath, when set, receives every Execution as one JSON line (so a
	// test can read what a stdio server process saw, across restarts).
	LogPath string
	// PageSize is the tools/list page size (small values test paging).
	PageSize int
	// ExtraTools are echo tools added at start (e.g. a name that breaks the
	// gateway's tool-name rule).
	ExtraTools []string
}

// Tool names the server offers.
const (
	ToolCreate  = "create_ticket"  // mutating: counts, answers {"id", "title"}; "delay_ms" makes it slow
	ToolGet     = "get_ticket"     // readOnlyHint
	ToolFailRPC = "fail_rpc"       // a JSON-RPC error
	ToolIsError = "fail_tool"      // a result with isError: true
	ToolDie     = "die"            // the process exits mid-call (stdio program only)
	ToolAddTool = "add_tool"       // adds the tool {"name"}: the server announces list_changed
	ToolBig     = "big_result"     // mutating: counts, answers a text of {"bytes"} bytes; "delay_ms" makes it slow
	ToolConfirm = "confirm_ticket" // mutating, multi round-trip: asks the client to confirm (input_required, event "asked") before it counts
)

// New builds a Server.
func New(opts Options) (*Server, error) {
	s := &Server{}
	if opts.LogPath != "" {
		f, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		s.log = f
	}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, &mcp.ServerOptions{
		PageSize: opts.PageSize,
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) {
			s.mu.Lock()
			s.initialized++
			s.mu.Unlock()
		},
	})
	s.SetCreateDescription(CreateDescription)
	s.srv.AddTool(&mcp.Tool{
		Name:        ToolGet,
		Description: "Read a ticket",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.record(func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(fmt.Sprintf("ticket %s", req.Params.Arguments)), nil
	}))
	s.srv.AddTool(&mcp.Tool{Name: ToolFailRPC, Description: "Fails with a JSON-RPC error", InputSchema: json.RawMessage(`{"type":"object"}`)},
		s.record(s.failRPC))
	s.srv.AddTool(&mcp.Tool{Name: ToolIsError, Description: "Answers isError", InputSchema: json.RawMessage(`{"type":"object"}`)},
		s.record(s.failTool))
	s.srv.AddTool(&mcp.Tool{Name: ToolDie, Description: "Exits the process mid-call", InputSchema: json.RawMessage(`{"type":"object"}`)},
		s.record(func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if s.log == nil {
				return nil, errors.New("die is only served by the stdio program")
			}
			os.Exit(3)
			return nil, nil
		}))
	s.srv.AddTool(&mcp.Tool{Name: ToolAddTool, Description: "Adds a tool", InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
		s.record(func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Name string }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			s.AddTool(args.Name)
			return text("added " + args.Name), nil
		}))
	s.srv.AddTool(&mcp.Tool{
		Name:        ToolBig,
		Description: "Answers a result of the given size",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"bytes":{"type":"integer","minimum":0},"delay_ms":{"type":"integer","minimum":0}},"required":["bytes"]}`),
	}, s.big)
	s.srv.AddTool(&mcp.Tool{
		Name:        ToolConfirm,
		Description: "Creates a ticket after the user confirms it",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`),
	}, s.confirm)
	for _, name := range opts.ExtraTools {
		s.AddTool(name)
	}
	return s, nil
}

// MCP is the SDK server, to serve over any transport.
func (s *Server) MCP() *mcp.Server { return s.srv }

// AddTool adds an echo tool called name; the SDK announces
// notifications/tools/list_changed to the connected clients.
func (s *Server) AddTool(name string) {
	s.srv.AddTool(&mcp.Tool{Name: name, Description: "Added at run time", InputSchema: json.RawMessage(`{"type":"object"}`)},
		s.record(func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(string(req.Params.Arguments)), nil
		}))
}

// AddReadOnlyTool adds an echo tool called name annotated readOnlyHint
// (a tool the server re-lists as read-only); list_changed again.
func (s *Server) AddReadOnlyTool(name string) {
	s.srv.AddTool(&mcp.Tool{Name: name, Description: "Read-only now", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		s.record(func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("read-only " + string(req.Params.Arguments)), nil
		}))
}

// CreateDescription is create_ticket's description at start.
const CreateDescription = "Create a ticket"

// SetCreateDescription serves create_ticket with description (the same
// schema and handler): a server that changes a tool after it was reviewed
// (a "rug pull"). The SDK announces list_changed.
func (s *Server) SetCreateDescription(description string) {
	s.srv.AddTool(&mcp.Tool{
		Name:        ToolCreate,
		Description: description,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string","minLength":1},"delay_ms":{"type":"integer","minimum":0}},"required":["title"],"additionalProperties":false}`),
	}, s.create)
}

// RemoveTool removes a tool (list_changed again).
func (s *Server) RemoveTool(name string) { s.srv.RemoveTools(name) }

// Hold makes create_ticket calls wait until the returned func is called.
func (s *Server) Hold() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(gate)
		})
	}
}

// Executions returns the recorded executions of tool ("" for all) whose
// event is "done" ("start" with started).
func (s *Server) Executions(tool string) []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Filter(s.execs, tool, "done")
}

// Initialized returns how many client sessions completed the MCP handshake
// with this server so far.
func (s *Server) Initialized() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized
}

// All returns every recorded event, in order.
func (s *Server) All() []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Execution(nil), s.execs...)
}

// Filter keeps the executions of tool ("" for all) with the given event.
func Filter(execs []Execution, tool, event string) []Execution {
	var out []Execution
	for _, e := range execs {
		if (tool == "" || e.Tool == tool) && e.Event == event {
			out = append(out, e)
		}
	}
	return out
}

// ReadLog reads the executions a server wrote to its LogPath.
func ReadLog(path string) ([]Execution, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Execution
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var e Execution
		if err := dec.Decode(&e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// create is create_ticket: slow with delay_ms, held by Hold.
func (s *Server) create(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s.note("start", req)
	var args struct {
		Title   string `json:"title"`
		DelayMS int    `json:"delay_ms"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, err
	}
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if args.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(args.DelayMS) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := s.note("done", req)
	res := text(fmt.Sprintf("created ticket %d: %s", n, args.Title))
	res.StructuredContent = map[string]any{"id": n, "title": args.Title}
	return res, nil
}

// big is big_result: a text content block of the asked size.
func (s *Server) big(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s.note("start", req)
	var args struct {
		Bytes   int `json:"bytes"`
		DelayMS int `json:"delay_ms"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, err
	}
	if args.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(args.DelayMS) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := s.note("done", req)
	return text(fmt.Sprintf("%d:", n) + string(bytes.Repeat([]byte("x"), args.Bytes))), nil
}

// ConfirmState is the requestState confirm_ticket asks the client to echo.
const ConfirmState = "confirm-state-1"

// confirm is confirm_ticket, a multi round-trip tool (SEP-2322): a call
// without the user's answer gets an input_required result asking for it
// (recorded as event "asked", nothing done); the continuation carrying an
// accepting answer and the state creates the ticket (counted as "done").
func (s *Server) confirm(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	answer, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
	if !ok || req.Params.RequestState != ConfirmState {
		s.note("asked", req)
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message:         "Create this ticket?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
			}},
			RequestState: ConfirmState,
		}, nil
	}
	s.note("start", req)
	var args struct {
		Title string `json:"title"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, err
	}
	if answer.Action != "accept" {
		s.note("declined", req)
		return text("not created: " + answer.Action), nil
	}
	n := s.note("done", req)
	return text(fmt.Sprintf("created ticket %d: %s", n, args.Title)), nil
}

// failTool answers a result with isError, its _meta marked
// {wire.MetaOutcome: wire.OutcomeNotExecuted} when the arguments say
// "not_executed"; with "succeed_after" N a plain result once N earlier
// calls carried the same _meta idempotency key.
func (s *Server) failTool(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		NotExecuted  bool `json:"not_executed"`
		SucceedAfter int  `json:"succeed_after"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, err
	}
	if args.SucceedAfter > 0 && s.earlierCalls(req) > args.SucceedAfter {
		return text("succeeded"), nil
	}
	res := text("the ticket system refused: title too long")
	res.IsError = true
	if args.NotExecuted {
		res.Meta = mcp.Meta{wire.MetaOutcome: wire.OutcomeNotExecuted}
	}
	return res, nil
}

// failRPC answers a JSON-RPC error: a plain one ("backend exploded"), or
// with the arguments' "code" and, when "not_executed", data carrying _meta
// {wire.MetaOutcome: wire.OutcomeNotExecuted}. With "succeed_after" N it
// answers a result instead once N earlier calls carried the same _meta
// idempotency key (the retry of a released call succeeds).
func (s *Server) failRPC(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Code         int64 `json:"code"`
		NotExecuted  bool  `json:"not_executed"`
		SucceedAfter int   `json:"succeed_after"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, err
	}
	if args.SucceedAfter > 0 && s.earlierCalls(req) > args.SucceedAfter {
		return text("succeeded"), nil
	}
	if args.Code == 0 && !args.NotExecuted {
		return nil, errors.New("backend exploded")
	}
	e := &jsonrpc.Error{Code: args.Code, Message: "backend refused"}
	if args.NotExecuted {
		e.Data, _ = json.Marshal(map[string]any{"_meta": map[string]any{wire.MetaOutcome: wire.OutcomeNotExecuted}})
	}
	return nil, e
}

// earlierCalls counts the "start" events of req's tool with req's _meta
// idempotency key (req's own included).
func (s *Server) earlierCalls(req *mcp.CallToolRequest) int {
	key := req.Params.Meta[wire.MetaIdempotencyKey]
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range Filter(s.execs, req.Params.Name, "start") {
		if e.Meta[wire.MetaIdempotencyKey] == key {
			n++
		}
	}
	return n
}

// record wraps a handler so its call is recorded as start and done.
func (s *Server) record(h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.note("start", req)
		res, err := h(ctx, req)
		s.note("done", req)
		return res, err
	}
}

// note records an event and returns how many "done" events of the tool
// there are (the ticket number for create_ticket).
func (s *Server) note(event string, req *mcp.CallToolRequest) int {
	e := Execution{Event: event, Tool: req.Params.Name, Arguments: req.Params.Arguments, Meta: req.Params.Meta, PID: os.Getpid()}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.execs = append(s.execs, e)
	if s.log != nil {
		line, _ := json.Marshal(e)
		_, _ = s.log.Write(append(line, '\n'))
	}
	return len(Filter(s.execs, e.Tool, "done"))
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
