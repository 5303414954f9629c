// End to end against the real gateway binary, built by the test: the story
// the SDK exists for (crash and replay: same execution id, the tool ran
// once), a duplicate in flight, the gateway's errors, and keys the gateway
// recomputes to the same value for awkward arguments.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, GatewayError, deriveKey } from "../src/index.js";
import { startStack, token, type Stack } from "./stack.js";

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack?.close();
});

test("crash and replay: a new process replays step 4 with the same execution id; the tool ran once", async () => {
  const first = await new Client(stack.gateway.url, { token }).session("run-42").call(4, "provision", { name: "db", size: 3 });
  assert.equal(first.status, 201);
  assert.equal(first.replayed, false);
  assert.match(first.executionId, /^[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.equal(first.key, deriveKey("run-42", 4, "provision", { name: "db", size: 3 }));

  // The agent crashed, and the gateway with it (kill -9): both start again.
  await stack.restartGateway();
  const again = await new Client(stack.gateway.url, { token }).session("run-42").call(4, "provision", { size: 3, name: "db" });
  assert.equal(again.replayed, true);
  assert.equal(again.executionId, first.executionId);
  assert.equal(again.status, 201);
  assert.equal(again.body, first.body);
  assert.equal(again.key, first.key);
  assert.equal(stack.executions.get("db"), 1);

  // Another call in the same step is refused, naming the first.
  await assert.rejects(new Client(stack.gateway.url, { token }).session("run-42").call(4, "provision", { name: "cache" }), (err: unknown) => {
    assert.ok(err instanceof GatewayError);
    assert.equal(err.status, 422);
    assert.equal(err.code, "step_conflict");
    assert.equal(err.executionId, first.executionId);
    assert.equal(err.tool, "provision");
    assert.equal(err.retryable, false);
    return true;
  });
  assert.equal(stack.executions.get("cache"), undefined);
});

test("the gateway is killed mid-call: the call retries through the restart and the lease takeover, and ends with a result", async () => {
  const client = new Client(stack.gateway.url, { token, preferWait: 1, initialBackoff: 50, maxBackoff: 500 });
  const call = client.session("run-crash").call(0, "provision", { name: "mid-call", delay_ms: 1000 });
  // kill -9 while the upstream runs; the same port answers again later.
  await new Promise((resolve) => setTimeout(resolve, 300));
  await stack.restartGateway();
  const result = await call;
  assert.equal(result.status, 201);
  assert.equal(result.replayed, false);
  assert.ok(result.attempts >= 2, `${result.attempts} attempts`);
  // lease_expiry: rerun (the default): the record of the dead gateway is
  // taken over once its lease (lock_ttl 2s) passed, and the tool runs again.
  assert.equal(stack.executions.get("mid-call"), 2);
  const again = await new Client(stack.gateway.url, { token }).session("run-crash").call(0, "provision", { name: "mid-call", delay_ms: 1000 });
  assert.equal(again.replayed, true);
  assert.equal(again.executionId, result.executionId);
  assert.equal(stack.executions.get("mid-call"), 2);
});

test("a duplicate of a call in flight gets its outcome (Prefer: wait), and the tool runs once", async () => {
  const client = new Client(stack.gateway.url, { token });
  const original = client.session("run-slow").call(0, "provision", { name: "vm", delay_ms: 1500 });
  await new Promise((resolve) => setTimeout(resolve, 300));
  const duplicate = await new Client(stack.gateway.url, { token }).session("run-slow").call(0, "provision", { delay_ms: 1500, name: "vm" });
  const first = await original;
  assert.equal(first.replayed, false);
  assert.equal(duplicate.replayed, true);
  assert.equal(duplicate.executionId, first.executionId);
  assert.equal(duplicate.body, first.body);
  assert.equal(stack.executions.get("vm"), 1);
});

test("twenty concurrent identical calls: one execution, one execution id", async () => {
  const results = await Promise.all(
    Array.from({ length: 20 }, () => new Client(stack.gateway.url, { token }).session("run-burst").call(7, "provision", { name: "burst", delay_ms: 200 })),
  );
  assert.equal(new Set(results.map((r) => r.executionId)).size, 1);
  assert.equal(results.filter((r) => !r.replayed).length, 1);
  assert.equal(new Set(results.map((r) => r.body)).size, 1);
  assert.equal(stack.executions.get("burst"), 1);
});

test("the gateway derives the same key for awkward arguments (no 422 mismatch)", async () => {
  const args = {
    name: "unicode-\u{1F600}-é-\u2028-\u0000",
    "\uFB33": 1,
    "\u{1F600}": 2,
    numbers: [0.1, 1e-7, 1e15, 2.5e-300, 123456.789e3, 333333333.3333333, -0, 5e-324, 2 ** 53 - 1, -(2 ** 53 - 1)],
    nested: { z: [true, false, null], a: { "": "" } },
    when: new Date(0),
  };
  const result = await new Client(stack.gateway.url, { token }).session("run-unicode").call(1, "provision", args);
  assert.equal(result.status, 201);
  assert.equal(result.key, deriveKey("run-unicode", 1, "provision", args));
});

test("the gateway's errors come back as GatewayError, without retries", async () => {
  const session = new Client(stack.gateway.url, { token }).session("run-errors");
  await assert.rejects(session.call(0, "provision", { name: 7 }), (err: unknown) => {
    assert.ok(err instanceof GatewayError);
    assert.equal(err.status, 400);
    assert.equal(err.code, "invalid_arguments");
    assert.ok(err.errors?.some((v) => v.location === "/name"), JSON.stringify(err.errors));
    assert.ok(err.requestId);
    return true;
  });
  await assert.rejects(session.call(0, "no-such-tool", {}), { name: "GatewayError", status: 404, code: "tool_not_found" });
  await assert.rejects(new Client(stack.gateway.url, { token: "wrong" }).session("s").call(0, "provision", { name: "x" }), {
    name: "GatewayError",
    status: 401,
    code: "unauthorized",
  });
  assert.equal(stack.executions.get("x"), undefined);
  // The schema violation stored nothing: the step is free for a valid call.
  const ok = await session.call(0, "provision", { name: "fixed" });
  assert.equal(ok.replayed, false);
});
