package mcpserver

import "github.com/toolgateway/toolgateway/wire"

// rpcCodes is how POST /mcp answers each problem code of the contract
// (the engine's one code table, callpath.Codes, has the rest of each
// code's row): a JSON-RPC error code, or rpcToolResult for a tool result
// with isError (a failure of the tool's run, which the model sees and may
// act on). invalid_arguments is a tool result when the arguments are an
// object that breaks the schema, so the model can correct them; arguments
// that are not an object at all are -32602 (mcpRender).
var rpcCodes = map[string]int64{
	wire.CodeInvalidJSON:                 wire.RPCInvalidParams,
	wire.CodeInvalidArguments:            rpcToolResult,
	wire.CodeIdempotencyKeyMissing:       wire.RPCInvalidParams,
	wire.CodeIdempotencyKeyMalformed:     wire.RPCInvalidParams,
	wire.CodeAgentSessionMissing:         wire.RPCInvalidParams,
	wire.CodeAgentSessionMalformed:       wire.RPCInvalidParams,
	wire.CodeAgentStepMissing:            wire.RPCInvalidParams,
	wire.CodeAgentStepMalformed:          wire.RPCInvalidParams,
	wire.CodeIdempotencyMetadataConflict: wire.RPCInvalidParams,
	wire.CodeUnauthorized:                wire.RPCInvalidParams,
	wire.CodeToolNotFound:                wire.RPCInvalidParams,
	wire.CodeRecordNotFound:              wire.RPCInvalidParams,
	wire.CodeNotFound:                    wire.RPCInvalidParams,
	wire.CodeMethodNotAllowed:            wire.RPCInvalidParams,
	wire.CodeRequestInProgress:           wire.RPCRequestInProgress,
	wire.CodeOutcomeUnknown:              wire.RPCOutcomeUnknown,
	wire.CodeRecordNotResolvable:         wire.RPCInvalidParams,
	wire.CodeInvalidAdminRequest:         wire.RPCInvalidParams,
	wire.CodeAdminUnsupported:            wire.RPCInvalidParams,
	wire.CodeChainDiverged:               wire.RPCInvalidParams,
	wire.CodePayloadTooLarge:             wire.RPCInvalidParams,
	wire.CodeUnsupportedMediaType:        wire.RPCInvalidParams,
	wire.CodeIdempotencyKeyMismatch:      wire.RPCInvalidParams,
	wire.CodeIdempotencyKeyReused:        wire.RPCInvalidParams,
	wire.CodeStepConflict:                wire.RPCInvalidParams,
	wire.CodeEffectConflict:              rpcToolResult,
	wire.CodeBudgetExceeded:              rpcToolResult,
	wire.CodeRateLimited:                 wire.RPCRateLimited,
	wire.CodeToolFailed:                  rpcToolResult,
	wire.CodeUpstreamUnreachable:         rpcToolResult,
	wire.CodeUpstreamResponseTooLarge:    rpcToolResult,
	wire.CodeStoreUnavailable:            wire.RPCStoreUnavailable,
	wire.CodeUpstreamUnavailable:         wire.RPCUpstreamUnavailable,
	wire.CodeToolTimeout:                 rpcToolResult,
	wire.CodeApprovalNotPending:          wire.RPCInvalidParams,
	wire.CodeApprovalNotYours:            wire.RPCInvalidParams,
	wire.CodeCallDenied:                  rpcToolResult,
	wire.CodeApprovalPending:             rpcToolResult,
	wire.CodeApprovalDenied:              rpcToolResult,
	wire.CodeApprovalExpired:             rpcToolResult,
	wire.CodeNotAnApprover:               wire.RPCInvalidParams,
	wire.CodeSelfApproval:                wire.RPCInvalidParams,
	wire.CodeApprovalStale:               rpcToolResult,
	wire.CodeToolChanged:                 rpcToolResult,
}

// rpcToolResult in rpcCodes renders the code as a tool result with isError
// and _meta "io.github.toolgateway/error" (never a JSON-RPC code: those
// are negative).
const rpcToolResult int64 = 1

// rpcCode returns how POST /mcp answers a problem code: the JSON-RPC error
// code, or a tool result for a failure of the tool's run, rendered as a tool
// result with isError. A code the table lacks (a programming error) is
// -32602, as the engine makes it a retryable 500 over REST.
func rpcCode(code string) (rpc int64, isToolResult bool) {
	rpc, ok := rpcCodes[code]
	if !ok {
		rpc = wire.RPCInvalidParams
	}
	return rpc, rpc == rpcToolResult
}
