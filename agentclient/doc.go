// Package agentclient is the Go SDK for agent runtimes that call tools
// through the gateway (the API docs/api.md describes). Every call carries an
// idempotency key derived with package keyderive from the session id, the
// step index, the tool name and the canonical arguments, so a call that is
// sent again (by a retry, or by a runtime that crashed and resumed) is
// recognised by the gateway and answered from its record instead of running
// the tool twice.
//
// # Session ids and step indices
//
// The key is only as stable as its inputs, so the agent runtime must assign
// them deterministically and persist them:
//
//   - Session id: minted once when an agent run (conversation, job) starts,
//     for example a ULID or UUID, and stored in the runtime's checkpoint. A
//     resumed run uses the stored id; a new run gets a new id. 1–256 visible
//     ASCII characters, no ':'.
//   - Step index: a counter per session, one index per tool call (not per
//     model turn), starting at 0. When the model emits a turn with several
//     tool calls that run in parallel, each call takes its own index in the
//     order the model emitted them (a turn with three calls after step 6 uses
//     7, 8 and 9).
//   - Persist the index with the call: the runtime writes (index, tool,
//     arguments) into its checkpoint before sending, and the result after.
//     On resume, every call that has an index but no result is sent again
//     with the same index and arguments: the gateway replays the outcome
//     (Result.Replayed is true, Result.ExecutionID is the original
//     execution's) or runs the tool if it never ran.
//   - Never reuse an index for a different call. If the model regenerates a
//     call with other arguments after a crash, the gateway answers 422
//     step_conflict naming the earlier execution; the runtime decides whether
//     to use that result or issue the new call under a fresh index.
//
// # Retries
//
// Call retries with the same key on network errors, 409 request_in_progress
// (waiting the Retry-After the gateway sends), 502, 503 and 504, with capped
// exponential backoff and jitter. Every other status is returned at once; in
// particular 409 outcome_unknown is never retried, since it means the tool
// may have acted and a human has to check. So is a mistake no retry can fix:
// a base URL without http:// or https:// (ErrInvalidBaseURL), a token a
// header cannot carry (ErrInvalidToken), invalid session ids, step indices,
// tool names or arguments (keyderive's errors); nothing is sent for them.
//
// Retries end when the first of these is reached:
//
//   - the context ends (its deadline, if it has one, is the time bound you
//     chose);
//   - a context without deadline: DefaultRetryBudget (20 s) after the call
//     started, no attempt or wait starts that would end later, so a call to
//     a gateway that is down ends within about 20 s plus one connection
//     attempt (DefaultDialTimeout, 10 s, with the default HTTP client);
//     WithRetryBudget sets another budget, which then applies with or
//     without a deadline (d ≤ 0: no budget);
//   - WithMaxAttempts attempts were made (no bound by default).
//
// # Waiting for a call in flight
//
// Every attempt sends "Prefer: wait=N" (N = 10 s by default, never past the
// context's deadline or the retry budget; WithPreferWait changes or disables
// it). A duplicate of a call that is still running elsewhere, such as the
// retry of a runtime that lost its connection, is then held by the gateway
// and answered with the outcome as soon as it exists, instead of being told
// 409 "come back after Retry-After". The gateway waits at most 60 s.
//
// # Approvals
//
// A tool whose decide rules ask for a human's approval answers 409
// approval_pending: Call returns an *ApprovalPendingError (approval id and
// expiry) at once, never retrying it, since the answer takes a human. The
// runtime pauses and later makes the same call (same session, step, tool and
// arguments): it runs once when approved, and fails with approval_denied or
// approval_expired otherwise. Client.Approve and Client.Deny answer an
// approval of a rule with approver: caller for the caller's own human.
//
// # MCP
//
// A runtime that reaches the gateway's POST /mcp endpoint with an MCP client
// puts the call's identity into the tools/call _meta: MCPMeta(sessionID,
// step), or MCPMetaWithKey to add the derived key. The key is the one Call
// would send, so a call made over REST and over MCP is one call.
//
// # Results and errors
//
// A response with a status of 2xx–4xx that is not application/problem+json
// is the tool's own recorded outcome and comes back as a *Result. A problem
// response (the gateway's errors) and any 5xx come back as an *Error, whose
// Code is one of the wire.Code* constants and which carries the problem's
// extra members: the earlier call of a step_conflict, the violations of
// invalid_arguments, the gateway's expected key and canonical arguments of
// an idempotency_key_mismatch.
package agentclient
