package benchtool

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// PlainMCPName names the plain go-sdk MCP server target.
const PlainMCPName = "plain-mcp"

// PlainMCPHandler serves tool over MCP with go-sdk v1.8.0 alone, as the
// official SDK's own server would, with no idempotency layer: stateless
// Streamable HTTP with JSON answers (the gateway's settings), one
// tools/call runs the tool once (the key the client sent in _meta names
// its counter, as the baseline's header does) and answers its body as text
// and structuredContent. It is what the gateway's MCP cost is measured
// against.
func PlainMCPHandler(tool tools.Tool) http.Handler {
	spec := tool.Spec()
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain-go-sdk", Version: "1"}, &mcp.ServerOptions{
		Logger:       slog.New(slog.DiscardHandler),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	srv.AddTool(&mcp.Tool{Name: spec.Name, Description: spec.Description, InputSchema: json.RawMessage(spec.InputSchema)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key, _ := req.Params.Meta[wire.MetaIdempotencyKey].(string)
			resp, err := tool.Call(ctx, &tools.Request{
				Arguments:      req.Params.Arguments,
				Tenant:         "anonymous",
				IdempotencyKey: key,
			})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: string(resp.Body)}},
				StructuredContent: json.RawMessage(resp.Body),
			}, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       slog.New(slog.DiscardHandler),
	})
}
