// The adapters' shared core against a local HTTP server standing in for the
// gateway: which identity a call goes out with (read-only tools: the fixed
// one; others: the conversation's session and the step), the one
// step_conflict text every adapter hands the model, and what is thrown
// instead of being handed to the model.
import assert from "node:assert/strict";
import type { ServerResponse } from "node:http";
import { test } from "node:test";

import { callGateway, ConversationTools, readOnlyIdentity } from "../src/adapter-core.js";
import { Client, GatewayError, deriveKey, sessionIdFromParts, type ToolDefinition } from "../src/index.js";
import { localServer } from "./helpers.js";

/** A server that answers every request with answer, and records the keys it was sent. */
async function gateway(answer: (res: ServerResponse) => void) {
  const keys: string[] = [];
  const server = await localServer((req, _body, res) => {
    keys.push(String(req.headers["idempotency-key"]));
    answer(res);
  });
  return { ...server, keys };
}

const created = (res: ServerResponse) => {
  res.writeHead(201, { "Content-Type": "application/json", "Tool-Execution-Id": "01JEXEC" });
  res.end('{"id":7}');
};

function problem(status: number, code: string, extra: Record<string, unknown> = {}) {
  return (res: ServerResponse) => {
    res.writeHead(status, { "Content-Type": "application/problem+json" });
    res.end(JSON.stringify({ type: `urn:toolgateway:problem:${code}`, title: "t", status, detail: `detail of ${code}`, code, retryable: false, ...extra }));
  };
}

const discovered: ToolDefinition[] = [
  { name: "lookup", description: "reads", input_schema: { type: "object" }, read_only: true },
  { name: "provision", description: "allocates", input_schema: { type: "object" } },
];

test("ConversationTools: a discovery list's read_only tool goes out with the read-only identity, others with the session and step", async () => {
  const server = await gateway(created);
  try {
    const core = new ConversationTools(new Client(server.url), "chat:1", discovered, (tool) => ({ description: tool.description }));
    assert.deepEqual(core.definitions, { lookup: { description: "reads" }, provision: { description: "allocates" } });
    assert.equal(core.isReadOnly("lookup"), true);
    assert.equal(core.isReadOnly("provision"), false);
    assert.deepEqual(await core.outcome("lookup", 5, { id: "r" }), { ok: true, json: true, value: { id: 7 } });
    await core.outcome("provision", 5, { name: "db" });
    assert.deepEqual(server.keys, [
      deriveKey(readOnlyIdentity.sessionId, readOnlyIdentity.stepIndex, "lookup", { id: "r" }),
      deriveKey(sessionIdFromParts("chat:1"), 5, "provision", { name: "db" }),
    ]);
    // Definitions given as a record have no read-only tools.
    const fromRecord = new ConversationTools(new Client(server.url), "chat:1", { lookup: { description: "mine" } }, () => ({ description: "" }));
    assert.equal(fromRecord.isReadOnly("lookup"), false);
  } finally {
    await server.close();
  }
});

test("callGateway: step_conflict becomes the one model-facing text", async () => {
  const server = await gateway(problem(422, "step_conflict", { tool: "provision", execution_id: "01JEARLIER" }));
  try {
    const answer = await callGateway(new Client(server.url), { sessionId: "s", stepIndex: 3 }, "provision", { name: "other" });
    assert.deepEqual(answer, {
      refused: true,
      text:
        "step_conflict: this call of provision was NOT run. Step 3 of this conversation already ran a call of provision " +
        "(execution 01JEARLIER) with other arguments: an earlier attempt at this turn (before a restart, or in another " +
        "branch of this conversation). Its effect has happened; its result is not available here. If this call is " +
        "still needed, make it again: it will run as a new call.",
    });
  } finally {
    await server.close();
  }
});

test("callGateway: a step_conflict without the earlier call's tool and execution says \"another call\"", async () => {
  const server = await gateway(problem(422, "step_conflict"));
  try {
    const answer = await callGateway(new Client(server.url), { sessionId: "s", stepIndex: 0 }, "provision", {});
    assert.equal(answer.refused, true);
    assert.match(answer.refused ? answer.text : "", /^step_conflict: this call of provision was NOT run\. Step 0 of this conversation already ran another call with other arguments: an earlier attempt/);
  } finally {
    await server.close();
  }
});

test("callGateway: what the app must fix is thrown, not handed to the model", async () => {
  const server = await gateway(problem(401, "unauthorized"));
  try {
    await assert.rejects(callGateway(new Client(server.url), { sessionId: "s", stepIndex: 0 }, "provision", {}), (err) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.status, 401);
      return true;
    });
  } finally {
    await server.close();
  }
});
