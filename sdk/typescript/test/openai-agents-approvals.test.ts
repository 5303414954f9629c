// @toolgateway/client/openai-agents and approvals: a call the gateway's
// decide rules hold for a human (409 approval_pending) becomes the OpenAI
// Agents SDK's tool-approval interruption (the adapter's needsApproval).
// The app (openai-agents-agent.ts, mode "gateway", a child process)
// persists the RunState and is killed with SIGKILL while paused; the human
// answers (an operator through the admin API; the caller through
// state.approve(), which the adapter sends to the gateway); a new process
// resumes the stored RunState. The upstream, served here, counts the
// executions: one per approved call.
import assert from "node:assert/strict";
import { test } from "node:test";

import { approvalStack } from "./approval-stack.js";

const { executions, app, pendingApprovalOf, operatorDecides, personApproves } = approvalStack("openai-agents-approvals", "openai-agents-agent.js", "gateway");

test("operator approval: interruption, kill -9 while paused, the operator approves, the stored RunState resumes in a new process: one execution", async () => {
  const first = app("oa-op", "big-1", 32);
  await first.interrupted;
  await first.kill();
  assert.equal(executions.get("big-1"), undefined);

  // Approved in the runtime before the operator decided: the run stops, nothing runs.
  const early = await app("oa-op", "big-1", 32, "approve").exited;
  assert.equal(early.code, 3, JSON.stringify(early.last));
  assert.equal(executions.get("big-1"), undefined);

  await operatorDecides(await pendingApprovalOf("big-1"), "approve");
  const resumed = await app("oa-op", "big-1", 32, "approve").exited;
  assert.equal(resumed.code, 0, JSON.stringify(resumed.last));
  assert.deepEqual((resumed.last as { seen: unknown[] }).seen.length, 1);
  assert.equal(executions.get("big-1"), 1);
});

// approver: caller means a person: an app that approves every interruption
// itself (the SDK's durable pattern, state.approve() for each) runs nothing;
// a person's decision (their own access token from a real OpenID
// provider, sent with Client.approve's token option) runs the
// call once.
test("caller approval: an app that approves every interruption itself runs nothing (0 executions); a person's approval runs it once", async () => {
  const first = app("oa-caller", "mid-1", 4);
  await first.interrupted;
  await first.kill();
  assert.equal(executions.get("mid-1"), undefined);
  for (let i = 0; i < 2; i++) {
    const selfApproved = await app("oa-caller", "mid-1", 4, "approve").exited;
    assert.equal(selfApproved.code, 3, JSON.stringify(selfApproved.last));
    assert.equal(executions.get("mid-1"), undefined);
  }

  await personApproves(await pendingApprovalOf("mid-1"));
  const resumed = await app("oa-caller", "mid-1", 4, "approve").exited;
  assert.equal(resumed.code, 0, JSON.stringify(resumed.last));
  assert.equal(executions.get("mid-1"), 1);
});

test("rejected in the runtime: the model reads the SDK's rejection, nothing runs", async () => {
  const first = app("oa-reject", "mid-2", 4);
  await first.interrupted;
  await first.kill();
  const resumed = await app("oa-reject", "mid-2", 4, "reject").exited;
  assert.equal(resumed.code, 0, JSON.stringify(resumed.last));
  assert.equal(executions.get("mid-2"), undefined);
});
