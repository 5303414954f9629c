package agentclient

import (
	"fmt"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// MCPMeta returns the _meta members that give an MCP tools/call the
// identity of step step of session sessionID, for a runtime that reaches
// the gateway's POST /mcp endpoint with an MCP client instead of Call:
//
//	{"io.github.toolgateway/sessionId": sessionID, "io.github.toolgateway/stepIndex": step}
//
// The step index is a JSON integer. The gateway derives the key from these,
// the tool name and the arguments exactly as for REST, so the same call made
// over REST and over MCP is one call. Put the map in the request's _meta
// (with the go-sdk client: mcp.CallToolParams{Meta: agentclient.MCPMeta(id, step), ...}).
// The values are checked by the gateway; use MCPMetaWithKey to check them
// before sending.
func MCPMeta(sessionID string, step uint64) map[string]any {
	return map[string]any{
		wire.MetaSessionID: sessionID,
		wire.MetaStepIndex: step,
	}
}

// MCPMetaWithKey returns MCPMeta(sessionID, step) plus
// "io.github.toolgateway/idempotencyKey", the key derived from the session,
// the step, tool and args (args as for Session.Call). The gateway checks a
// key it is given against the one it derives, so sending it guards against
// arguments that change on the way (an MCP client that re-encodes numbers);
// an opaque-mode gateway requires it. It fails, like Call, on inputs that
// cannot make a key (keyderive's errors).
func MCPMetaWithKey(sessionID string, step uint64, tool string, args any) (map[string]any, error) {
	text, err := argumentsJSON(args)
	if err != nil {
		return nil, err
	}
	key, err := keyderive.Key(sessionID, step, tool, text)
	if err != nil {
		return nil, fmt.Errorf("agentclient: %s step %d: %w", tool, step, err)
	}
	meta := MCPMeta(sessionID, step)
	meta[wire.MetaIdempotencyKey] = key
	return meta, nil
}
