package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolgateway/toolgateway/tools"
)

// ToolAsker asks by calling a tool with the question as its arguments:
// reconcile.tool of an MCP upstream tool (a tool of the same MCP server).
type ToolAsker struct {
	// Lookup returns the tool by its gateway name (the registry's Get);
	// looked up at each question, as an MCP server's tools come and go.
	Lookup func(name string) (tools.Tool, bool)
	// Name is the asking tool's gateway name.
	Name string
}

// Ask calls the tool once. Its answer is the JSON of a CallToolResult
// (structuredContent, else the first text block) for an MCP tool, or its
// body as it is for another tool.
func (a ToolAsker) Ask(ctx context.Context, q Question, maxBodyBytes int64) (Answer, error) {
	tool, ok := a.Lookup(a.Name)
	if !ok {
		return Answer{}, fmt.Errorf("reconcile tool %q is not available", a.Name)
	}
	args, err := json.Marshal(q)
	if err != nil {
		return Answer{}, fmt.Errorf("encode question: %w", err)
	}
	resp, err := tool.Call(ctx, &tools.Request{Arguments: args})
	if err != nil {
		return Answer{}, fmt.Errorf("reconcile tool %q: %w", a.Name, err)
	}
	if resp.Status < 200 || resp.Status > 299 {
		return Answer{}, fmt.Errorf("reconcile tool %q answered status %d", a.Name, resp.Status)
	}
	if int64(len(resp.Body)) > maxBodyBytes+envelopeBytes {
		return Answer{}, fmt.Errorf("%w: answer exceeds %d bytes", errInvalidAnswer, maxBodyBytes+envelopeBytes)
	}
	raw := resp.Body
	if tool.Spec().ResultIsCallToolResult {
		if raw, err = callToolAnswer(resp.Body); err != nil {
			return Answer{}, err
		}
	}
	return parseAnswer(raw, maxBodyBytes)
}

// callToolAnswer takes the answer out of a CallToolResult.
func callToolAnswer(body []byte) ([]byte, error) {
	var result struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Content           []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(body, &result); err != nil {
		return nil, fmt.Errorf("%w: not a CallToolResult", errInvalidAnswer)
	}
	if result.IsError {
		return nil, fmt.Errorf("reconcile tool answered isError")
	}
	if len(result.StructuredContent) > 0 && string(result.StructuredContent) != "null" {
		return result.StructuredContent, nil
	}
	for _, c := range result.Content {
		if c.Type == "text" {
			return []byte(c.Text), nil
		}
	}
	return nil, fmt.Errorf("%w: CallToolResult without structuredContent or text", errInvalidAnswer)
}
