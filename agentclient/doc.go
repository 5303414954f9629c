// Package agentclient is the Go SDK for agent runtimes that call tools
// through the gateway (contract section 7). Every call carries an idempotency
// key derived with package keyderive from the session id, the step index, the
// tool name and the canonical arguments, so a call that is sent again (by a
// retry, or by a runtime that crashed and resumed) is recognised by the
// gateway and answered from its record instead of running the tool twice.
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
// exponential backoff and jitter, until ctx ends or WithMaxAttempts is
// reached. Every other status is returned at once; in particular 409
// outcome_unknown is never retried, since it means the tool may have acted
// and a human has to check.
//
// # Results and errors
//
// A response with a status of 2xx–4xx that is not application/problem+json
// is the tool's own recorded outcome and comes back as a *Result. A problem
// response (the gateway's errors) and any 5xx come back as an *Error.
package agentclient
