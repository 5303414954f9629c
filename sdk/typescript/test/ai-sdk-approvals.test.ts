// @toolgateway/client/ai-sdk and approvals: a call the gateway's decide
// rules hold for a human (409 approval_pending) becomes the AI SDK's tool
// approval (the adapter's needsApproval: a tool-approval-request part).
// The app (ai-sdk-agent.ts, mode "approval", a child process) persists the
// messages and is killed with SIGKILL while paused; the human answers (an
// operator through the admin API; the caller through a
// tool-approval-response part, which the adapter sends to the gateway); a
// new process resumes from the stored messages. The upstream, served here,
// counts the executions: one per approved call, none for a denied one.
import assert from "node:assert/strict";
import { test } from "node:test";

import { approvalStack } from "./approval-stack.js";

const { executions, app, pendingApprovalOf, operatorDecides, personApproves } = approvalStack("ai-sdk-approvals", "ai-sdk-agent.js", "approval");

test("operator approval: tool-approval-request, kill -9 while paused, the operator approves, the stored messages resume in a new process: one execution", async () => {
  const first = app("ai-op", "big-1", 32);
  await first.interrupted;
  await first.kill();
  assert.equal(executions.get("big-1"), undefined);

  // Approved in the runtime before the operator decided: the app keeps its stored turn, nothing runs.
  const early = await app("ai-op", "big-1", 32, "approve").exited;
  assert.equal(early.code, 3, JSON.stringify(early.last));
  assert.equal(executions.get("big-1"), undefined);

  await operatorDecides(await pendingApprovalOf("big-1"), "approve");
  const resumed = await app("ai-op", "big-1", 32, "approve").exited;
  assert.equal(resumed.code, 0, JSON.stringify(resumed.last));
  assert.deepEqual((resumed.last as { seen: unknown[] }).seen, [{ provisioned: "big-1" }]);
  assert.equal(executions.get("big-1"), 1);
});

test("operator denial: the resumed call reads the denial, nothing runs", async () => {
  const first = app("ai-op-deny", "big-2", 64);
  await first.interrupted;
  await first.kill();
  await operatorDecides(await pendingApprovalOf("big-2"), "deny");
  const resumed = await app("ai-op-deny", "big-2", 64, "approve").exited;
  assert.equal(resumed.code, 0, JSON.stringify(resumed.last));
  assert.equal(executions.get("big-2"), undefined);
});

// approver: caller means a person: an app that approves every
// tool-approval-request itself runs nothing; a person's decision (here an
// operator through the admin API) runs the call once.
test("caller approval: an app that approves everything itself runs nothing (0 executions); a person's approval runs it once", async () => {
  const first = app("ai-caller", "mid-1", 4);
  await first.interrupted;
  await first.kill();
  assert.equal(executions.get("mid-1"), undefined);
  for (let i = 0; i < 2; i++) {
    const selfApproved = await app("ai-caller", "mid-1", 4, "approve").exited;
    assert.equal(selfApproved.code, 3, JSON.stringify(selfApproved.last));
    assert.equal(executions.get("mid-1"), undefined);
  }

  await personApproves(await pendingApprovalOf("mid-1"));
  const resumed = await app("ai-caller", "mid-1", 4, "approve").exited;
  assert.equal(resumed.code, 0, JSON.stringify(resumed.last));
  assert.deepEqual((resumed.last as { seen: unknown[] }).seen, [{ provisioned: "mid-1" }]);
  assert.equal(executions.get("mid-1"), 1);
});

test("denied in the runtime: the model reads the SDK's execution-denied result, nothing runs", async () => {
  const first = app("ai-deny", "mid-2", 4);
  await first.interrupted;
  await first.kill();
  const resumed = await app("ai-deny", "mid-2", 4, "deny").exited;
  assert.equal(resumed.code, 0, JSON.stringify(resumed.last));
  assert.equal(executions.get("mid-2"), undefined);
});
