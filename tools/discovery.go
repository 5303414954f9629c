package tools

import "encoding/json"

// The discovery documents. Each is a pure function of the entries, in the
// order given (Registry.Entries is sorted by name), so that two gateways with
// the same config publish byte-identical documents.

// NativeCatalog is the body of GET /api/tools/v1.
type NativeCatalog struct {
	Tools []NativeTool `json:"tools"`
}

// NativeTool describes one tool in the gateway's own format; it is also the
// body of GET /api/tools/v1/{tool}. read_only appears only when true, so the
// common case stays in the contract's three-member shape.
type NativeTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	ReadOnly    bool            `json:"read_only,omitempty"`
}

// OpenAITool is one element of the ?format=openai list (the Chat
// Completions "tools" parameter).
type OpenAITool struct {
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function member of an OpenAITool.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// AnthropicTool is one element of the ?format=anthropic list (the Messages
// API "tools" parameter).
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// NativeList builds {"tools": [...]}; an empty list is [] rather than null.
func NativeList(entries []*Entry) NativeCatalog {
	out := NativeCatalog{Tools: make([]NativeTool, 0, len(entries))}
	for _, e := range entries {
		out.Tools = append(out.Tools, NativeOne(e))
	}
	return out
}

// NativeOne builds the bare object describing one tool.
func NativeOne(e *Entry) NativeTool {
	return NativeTool{
		Name:        e.Spec.Name,
		Description: e.Spec.Description,
		InputSchema: inputSchema(e),
		ReadOnly:    e.Spec.ReadOnly,
	}
}

// OpenAIList builds [{"type": "function", "function": {...}}, ...].
func OpenAIList(entries []*Entry) []OpenAITool {
	out := make([]OpenAITool, 0, len(entries))
	for _, e := range entries {
		out = append(out, OpenAITool{
			Type: "function",
			Function: OpenAIFunction{
				Name:        e.Spec.Name,
				Description: e.Spec.Description,
				Parameters:  inputSchema(e),
			},
		})
	}
	return out
}

// AnthropicList builds [{"name", "description", "input_schema"}, ...].
func AnthropicList(entries []*Entry) []AnthropicTool {
	out := make([]AnthropicTool, 0, len(entries))
	for _, e := range entries {
		out = append(out, AnthropicTool{
			Name:        e.Spec.Name,
			Description: e.Spec.Description,
			InputSchema: inputSchema(e),
		})
	}
	return out
}

// inputSchema is the schema to publish: an Entry built by hand may have none.
func inputSchema(e *Entry) json.RawMessage {
	if len(e.Spec.InputSchema) == 0 {
		return json.RawMessage(DefaultInputSchema)
	}
	return e.Spec.InputSchema
}
