// Package eino runs the gateway's tools as tools of a CloudWeGo Eino graph
// (github.com/cloudwego/eino), with each call's identity taken from the
// graph's own checkpointed state, so a run resumed from a checkpoint, a
// regenerated model turn and a fork replay the calls that already ran
// instead of running them again.
//
// The three lines (docs/runtimes-go.md):
//
//	gw := eino.New(agentclient.New(gatewayURL), eino.StateHistory(func(s *State) []*schema.Message { return s.Messages }))
//	infos, err := eino.Discover(ctx, nil, gatewayURL, "") // or your own []*schema.ToolInfo
//	ctx = eino.WithSession(ctx, threadID) // the run's id, kept by resumes and forks
//
// with gw.Tools(infos...) as the tools of the graph's compose.ToolsNode and
// ctx passed to the graph's Invoke or Stream. docs/runtimes-go.md shows a
// whole agent (the model → tools loop as a compose graph), the one the
// package's crash test runs.
//
// Identity:
//
//   - The session id is the id of the run the application passes with
//     WithSession: its thread id, the one it resumes with
//     compose.WithCheckPointID. It stays the same across resumes,
//     regenerations and forks (a fork that writes to another checkpoint id
//     with compose.WithWriteToCheckPointID keeps the thread's session). It is
//     never a tool call id: models mint those fresh for every turn.
//   - The step index of a tool call is its ordinal among the tool calls of
//     the run's message history (the graph state's messages, which Eino
//     checkpoints): the tool calls of earlier assistant messages plus its
//     position in its own message. Parallel calls of one turn get distinct
//     steps; a regenerated turn gets the same ones.
//
// The graph must append the assistant message to its state before the tools
// node runs (a state pre-handler of the tools node, as Eino's ReAct agent
// does), and should be compiled with compose.WithCheckPointStore (a store
// that outlives the process, such as [FileCheckPointStore]) and
// compose.WithInterruptBeforeNodes naming the tools node, so that the
// model's turn is checkpointed before any tool runs.
//
// A refusal the model can act on reaches it as the tool's result, in the
// words the TypeScript adapters use (RefusalText), and the run goes on:
// step_conflict (a regenerated turn that asks other arguments at a step
// that already ran), invalid_arguments (with the violations),
// idempotency_key_reused, outcome_unknown, payload_too_large,
// upstream_response_too_large, and the denials (call_denied,
// approval_denied, approval_expired). A call the gateway holds for a
// human's approval is an Eino interrupt whose Info is an
// [ApprovalInterrupt] ([PendingApprovals] lists them from Invoke's error);
// Invoke again once the human answered. Other failures are errors of the
// tool, which end the graph run.
package eino
