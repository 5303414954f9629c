package eino

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolgateway/toolgateway/agentclient"
)

// Gateway makes Eino tools that call one gateway. It is safe for concurrent
// use, and one Gateway serves every run: the run is told by the context
// (WithSession).
type Gateway struct {
	client  *agentclient.Client
	history HistoryFunc
}

// New returns a Gateway calling the tools through client, with step indices
// counted in the history that history returns (StateHistory for a graph
// whose state holds the messages).
func New(client *agentclient.Client, history HistoryFunc) *Gateway {
	return &Gateway{client: client, history: history}
}

// Tools returns one Eino tool per definition, for compose.ToolsNodeConfig's
// Tools (and the model's WithTools). Each definition's Name is the gateway's
// tool name.
func (g *Gateway) Tools(infos ...*schema.ToolInfo) []tool.BaseTool {
	out := make([]tool.BaseTool, 0, len(infos))
	for _, info := range infos {
		out = append(out, g.Tool(info))
	}
	return out
}

// Tool returns the Eino tool that calls the gateway's tool info.Name.
func (g *Gateway) Tool(info *schema.ToolInfo) tool.InvokableTool {
	return &gatewayTool{gateway: g, info: info}
}

// gatewayTool is one gateway tool as an Eino tool.
type gatewayTool struct {
	gateway *Gateway
	info    *schema.ToolInfo
}

// Info implements tool.BaseTool.
func (t *gatewayTool) Info(context.Context) (*schema.ToolInfo, error) {
	return t.info, nil
}

// InvokableRun implements tool.InvokableTool: it calls the gateway with the
// run's session and the call's step, and returns the tool's response body.
// A refusal the model can act on (RefusalText) is returned as the result,
// for the model to read; a call held for a human's approval is an Eino
// interrupt ([ApprovalInterrupt]); any other failure is the tool's error.
func (t *gatewayTool) InvokableRun(ctx context.Context, argumentsInJSON string, _ ...tool.Option) (string, error) {
	session, ok := SessionFrom(ctx)
	if !ok {
		return "", fmt.Errorf("toolgateway eino: %s: no session id in the context (run the graph with eino.WithSession)", t.info.Name)
	}
	history, err := t.gateway.history(ctx)
	if err != nil {
		return "", fmt.Errorf("toolgateway eino: %s: %w", t.info.Name, err)
	}
	step, err := StepOf(history, compose.GetToolCallID(ctx))
	if err != nil {
		return "", fmt.Errorf("toolgateway eino: %s: %w", t.info.Name, err)
	}
	result, err := t.gateway.client.Session(session).Call(ctx, step, t.info.Name, []byte(argumentsInJSON))
	if text, ok := RefusalText(t.info.Name, step, err); ok {
		return text, nil
	}
	if pending := (*agentclient.ApprovalPendingError)(nil); errors.As(err, &pending) {
		return "", approvalInterrupt(ctx, pending, t.info.Name, argumentsInJSON, step)
	}
	if err != nil {
		return "", fmt.Errorf("toolgateway eino: %s step %d: %w", t.info.Name, step, err)
	}
	return string(result.Body), nil
}
