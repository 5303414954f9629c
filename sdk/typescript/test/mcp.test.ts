// Interop with the official MCP TypeScript client (@modelcontextprotocol/sdk)
// against the real gateway binary's MCP endpoint (POST /mcp, Streamable
// HTTP, stateless): list, call with _meta from mcpMeta, replay, and the same
// record across REST and MCP. Never skipped: a gateway without its MCP
// endpoint fails these tests.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

import { Client, mcpMeta, wire } from "../src/index.js";
import { startStack, token, type Stack } from "./stack.js";

let stack: Stack;

before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack?.close();
});

/** A connected official MCP client, as an agent runtime would hold one. */
async function connect(): Promise<McpClient> {
  const client = new McpClient({ name: "toolgateway-ts-interop", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.gateway.url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

interface ToolResult {
  content: Array<{ type: string; text?: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
}

async function call(client: McpClient, session: string, step: number, name: string, args: Record<string, unknown>): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args, _meta: mcpMeta(session, step, name, args) })) as ToolResult;
}

test("tools/list over the official client: the registry, with schemas and readOnlyHint", async () => {
  const client = await connect();
  try {
    const { tools } = await client.listTools();
    const provision = tools.find((tool) => tool.name === "provision");
    assert.ok(provision, `provision not listed: ${tools.map((tool) => tool.name).join(", ")}`);
    assert.equal(provision.description, "allocates a resource");
    assert.equal(provision.inputSchema.type, "object");
    assert.deepEqual(provision.inputSchema.required, ["name"]);
    assert.ok(!provision.annotations?.readOnlyHint);
    const lookup = tools.find((tool) => tool.name === "lookup-resource");
    assert.equal(lookup?.annotations?.readOnlyHint, true);
  } finally {
    await client.close();
  }
});

test("tools/call with mcpMeta, then the same call again: one execution, replayed with the same execution id", async () => {
  const args = { name: "mcp-db", tier: "small" };
  const first = await connect();
  let original: ToolResult;
  try {
    original = await call(first, "mcp-run-1", 0, "provision", args);
  } finally {
    await first.close();
  }
  assert.ok(!original.isError, JSON.stringify(original));
  const text = original.content[0]?.text ?? "";
  assert.equal(original.content[0]?.type, "text");
  assert.deepEqual(original.structuredContent, JSON.parse(text));
  const executionId = original._meta?.[wire.MetaExecutionID];
  assert.match(String(executionId), /^[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.equal(original._meta?.[wire.MetaReplayed], false);

  // The agent restarted: a new client, the same call.
  const second = await connect();
  try {
    const replay = await call(second, "mcp-run-1", 0, "provision", { tier: "small", name: "mcp-db" });
    assert.equal(replay._meta?.[wire.MetaExecutionID], executionId);
    assert.equal(replay._meta?.[wire.MetaReplayed], true);
    assert.deepEqual(replay.content, original.content);
    assert.deepEqual(replay.structuredContent, original.structuredContent);
    // Identity without the key: the gateway derives it.
    const unkeyed = (await second.callTool({ name: "provision", arguments: args, _meta: mcpMeta("mcp-run-1", 0) })) as ToolResult;
    assert.equal(unkeyed._meta?.[wire.MetaExecutionID], executionId);
  } finally {
    await second.close();
  }
  assert.equal(stack.executions.get("mcp-db"), 1);
});

test("a call executed over REST replays over MCP, and the other way round", async () => {
  const rest = new Client(stack.gateway.url, { token }).session("mixed-run");
  const mcp = await connect();
  try {
    const overRest = await rest.call(1, "provision", { name: "rest-first" });
    const overMcp = await call(mcp, "mixed-run", 1, "provision", { name: "rest-first" });
    assert.equal(overMcp._meta?.[wire.MetaReplayed], true);
    assert.equal(overMcp._meta?.[wire.MetaExecutionID], overRest.executionId);
    assert.equal(overMcp.content[0]?.text, overRest.body);

    const mcpFirst = await call(mcp, "mixed-run", 2, "provision", { name: "mcp-first" });
    const restAfter = await rest.call(2, "provision", { name: "mcp-first" });
    assert.equal(restAfter.replayed, true);
    assert.equal(restAfter.executionId, mcpFirst._meta?.[wire.MetaExecutionID]);
    assert.equal(restAfter.body, mcpFirst.content[0]?.text);

    assert.equal(stack.executions.get("rest-first"), 1);
    assert.equal(stack.executions.get("mcp-first"), 1);

    // The step guard spans both: another call in step 1 is refused.
    await assert.rejects(call(mcp, "mixed-run", 1, "provision", { name: "other" }), (err: unknown) => {
      assert.ok(err instanceof McpError, String(err));
      assert.equal(err.code, wire.RPCInvalidParams);
      assert.equal((err.data as { code?: string }).code, wire.CodeStepConflict);
      return true;
    });
    assert.equal(stack.executions.get("other"), undefined);
  } finally {
    await mcp.close();
  }
});

test("host call ids: Claude Code's and Goose's own _meta id keys a call that carries none of ours", async () => {
  const client = await connect();
  try {
    for (const host of ["claudecode/toolUseId", "agent-tool-call-request-id"]) {
      const name = `host-${host}`;
      const id = `toolu_01ts${host.length}`;
      const hostCall = async (args: Record<string, unknown>, callId: string): Promise<ToolResult> =>
        (await client.callTool({ name: "provision", arguments: args, _meta: { [host]: callId } })) as ToolResult;

      const first = await hostCall({ name }, id);
      assert.ok(!first.isError, JSON.stringify(first));
      assert.equal(first._meta?.[wire.MetaReplayed], false);
      assert.equal(first._meta?.[wire.MetaIdentity], wire.MetaIdentityHostPrefix + host);

      // The host (or its transport) sends the same call again: a replay.
      const again = await hostCall({ name }, id);
      assert.equal(again._meta?.[wire.MetaReplayed], true);
      assert.equal(again._meta?.[wire.MetaExecutionID], first._meta?.[wire.MetaExecutionID]);
      assert.deepEqual(again.content, first.content);
      assert.deepEqual(again.structuredContent, first.structuredContent);

      // The same host id with other arguments: refused, nothing runs.
      await assert.rejects(hostCall({ name, tier: "large" }, id), (err: unknown) => {
        assert.ok(err instanceof McpError, String(err));
        assert.equal(err.code, wire.RPCInvalidParams);
        assert.equal((err.data as { code?: string }).code, wire.CodeIdempotencyKeyReused);
        return true;
      });

      // Another id: another execution.
      const other = await hostCall({ name }, `${id}-2`);
      assert.equal(other._meta?.[wire.MetaReplayed], false);
      assert.notEqual(other._meta?.[wire.MetaExecutionID], first._meta?.[wire.MetaExecutionID]);
      assert.equal(stack.executions.get(name), 2);

      // REST never reaches the host-keyed record by accident, not even
      // with the host member's name as its session.
      const overRest = await new Client(stack.gateway.url, { token }).session(host).call(0, "provision", { name });
      assert.equal(overRest.replayed, false);
      assert.equal(stack.executions.get(name), 3);
    }
  } finally {
    await client.close();
  }
});
