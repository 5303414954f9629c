package mcpserver

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/wire"
)

// Host call ids (contract section 9): a host that sends none of the
// gateway's identity may send its own id of the call in _meta, the same
// when the host or its transport replays the call. Which members count
// (mcp.host_call_ids) is MCP's business, read here; the engine derives
// the call's key from what this reads (callpath.HostCall).

// defaultHostCallIDs are the _meta members mcp.host_call_ids keys on by
// default: Claude Code's (and the Claude Agent SDK's) tool use id and
// Goose's tool call request id, both one id per call.
var defaultHostCallIDs = []string{"claudecode/toolUseId", "agent-tool-call-request-id"}

// DefaultHostCallIDs returns the _meta members mcp.host_call_ids keys
// on by default: "claudecode/toolUseId" (Claude Code, the Claude Agent
// SDK) and "agent-tool-call-request-id" (Goose).
func DefaultHostCallIDs() []string {
	return append([]string(nil), defaultHostCallIDs...)
}

// notPerCall are _meta members hosts send that name a conversation, a
// turn or an attempt rather than one call: keying on them would replay
// one call's answer to another call, or protect nothing.
var notPerCall = map[string]string{
	"openai/session":   "ChatGPT's conversation id: every call of a conversation carries the same one",
	"vscode.requestId": "VS Code's user-turn id: every call of one turn carries the same one",
	"progressToken":    "a progress token: new on every attempt, so a retry never matches",
}

// maxHostCallIDBytes bounds a host call id (Claude Code's are about 30
// bytes, Goose's UUID-like).
const maxHostCallIDBytes = 256

// ValidateHostCallIDs checks a list for mcp.host_call_ids: each name
// non-empty, without ':' (the key's separator) or control characters, not
// one of the gateway's own members, not listed twice, and not one of the
// members known to name more (or less) than one call.
func ValidateHostCallIDs(names []string) error {
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		switch {
		case name == "":
			return fmt.Errorf("mcp.host_call_ids: an empty name")
		case strings.ContainsAny(name, ": \t\r\n"):
			return fmt.Errorf("mcp.host_call_ids: %q: a name may not contain ':' or white space", name)
		case len(name) > 128:
			return fmt.Errorf("mcp.host_call_ids: %q: at most 128 bytes", name)
		case strings.HasPrefix(name, wire.MetaPrefix):
			return fmt.Errorf("mcp.host_call_ids: %q: the gateway's own members are its identity, not a host's", name)
		case notPerCall[name] != "":
			return fmt.Errorf("mcp.host_call_ids: %q is never a key: it is %s", name, notPerCall[name])
		case seen[name]:
			return fmt.Errorf("mcp.host_call_ids: %q listed twice", name)
		}
		for _, c := range []byte(name) {
			if c < 0x21 || c > 0x7e {
				return fmt.Errorf("mcp.host_call_ids: %q: visible ASCII only", name)
			}
		}
		seen[name] = true
	}
	return nil
}

// hostCallID returns the first of names (mcp.host_call_ids, in order of
// preference) that meta carries, with its id. A member that is there but
// is not a usable id (not a string, longer than 256 bytes) is refused
// rather than ignored: the host meant to identify the call.
func hostCallID(meta map[string]json.RawMessage, names []string) callpath.HostCall {
	for _, name := range names {
		raw, found := meta[name]
		if !found {
			continue
		}
		id, isString := callpath.MetaString(raw)
		if isString && id == "" {
			continue // empty counts as missing
		}
		if !isString || len(id) > maxHostCallIDBytes {
			return callpath.HostCall{Problem: callpath.NewProblem(wire.CodeIdempotencyKeyMalformed,
				"_meta \""+name+"\", the host's id of this call, must be a string of 1-"+strconv.Itoa(maxHostCallIDBytes)+" bytes")}
		}
		return callpath.HostCall{Meta: name, ID: id}
	}
	return callpath.HostCall{}
}
