// approver: caller with the official MCP TypeScript client
// (@modelcontextprotocol/sdk 1.32.2), against the real gateway binary. That
// client speaks protocol 2025-11-25 at most: it can answer a server's
// elicitation/create request, but not the 2026-07-28 input requests, and
// the gateway's stateless endpoint cannot send it a request in the middle
// of a call. So even with elicitation declared it is not asked: the call
// waits as for an operator (a pending tool result, nothing run, the
// client's elicitation handler never called), and the tenant decides it
// with its own token (POST /api/tools/v1/approvals/{id}/approve or /deny):
// approved, the same call runs once; denied, approval_denied.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

import { mcpMeta, wire } from "../src/index.js";
import { localServer, startGateway, tempDir, type Gateway } from "./helpers.js";
import { personToken, startProvider, withProvider } from "./approval-stack.js";
import { provisionConfig, token } from "./stack.js";

let gateway: Gateway;
let upstream: Awaited<ReturnType<typeof localServer>>;
let runs = 0;
let asked = 0;
let provider: { issuer: string; kill(): void };

before(async () => {
  provider = await startProvider();
  const dir = tempDir("tsgw-elicit-");
  upstream = await localServer(async (_req, _body, res) => {
    runs++;
    res.writeHead(201, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ resource: `r-${runs}` }));
  });
  const config =
    withProvider(provisionConfig(dir, upstream.url, token), provider.issuer) +
    `    decide:
      - decision: approve
        approver: caller
        reason: "the user says yes"
`;
  gateway = await startGateway(dir, config);
});
after(async () => {
  await gateway?.kill();
  await upstream?.close();
  provider?.kill();
});

/** The official client, declaring elicitation and counting the questions it gets. */
async function connect(): Promise<McpClient> {
  const client = new McpClient({ name: "toolgateway-ts-elicitation", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async () => {
    asked++;
    return { action: "accept", content: { approve: true } };
  });
  const transport = new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
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

async function call(client: McpClient, session: string, args: Record<string, unknown>): Promise<ToolResult> {
  return (await client.callTool({ name: "provision", arguments: args, _meta: mcpMeta(session, 0, "provision", args) })) as ToolResult;
}

function errorCode(result: ToolResult): string | undefined {
  return (result._meta?.[wire.MetaError] as { code?: string } | undefined)?.code;
}

/** A person of the tenant decides through the caller endpoint with their own access token (a real OpenID provider's): approver: caller means a person. */
async function decide(id: string, decision: "approve" | "deny"): Promise<void> {
  const res = await fetch(`${gateway.url}/api/tools/v1/approvals/${id}/${decision}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${await personToken(provider.issuer)}`, "Content-Type": "application/json" },
    body: JSON.stringify({ note: "checked by a person" }),
  });
  assert.equal(res.status, 200, await res.text());
}

for (const decision of ["approve", "deny"] as const) {
  test(`official client with elicitation: pending as for an operator, then a person's ${decision}`, async () => {
    const client = await connect();
    try {
      const args = { name: `elicit-${decision}` };
      const before = runs;
      const pending = await call(client, `ts-elicit-${decision}`, args);
      assert.equal(pending.isError, true, JSON.stringify(pending));
      assert.equal(errorCode(pending), "approval_pending");
      const id = String(pending.structuredContent?.["approval_id"]);
      assert.match(id, /^[0-9A-HJKMNP-TV-Z]{26}$/);
      assert.equal(asked, 0, "a 2025-11-25 client is never asked over the stateless endpoint");
      assert.equal(runs, before);

      await decide(id, decision);
      const after = await call(client, `ts-elicit-${decision}`, args);
      if (decision === "approve") {
        assert.ok(!after.isError, JSON.stringify(after));
        assert.equal(runs, before + 1);
        const again = await call(client, `ts-elicit-${decision}`, args);
        assert.equal(again._meta?.[wire.MetaReplayed], true);
        assert.equal(runs, before + 1);
      } else {
        assert.equal(after.isError, true);
        assert.equal(errorCode(after), "approval_denied");
        assert.equal(runs, before);
      }
      assert.equal(asked, 0);
    } finally {
      await client.close();
    }
  });
}
