// The real gateway binary in front of an HTTP upstream tool served by the
// test, which counts its executions: what the end-to-end and MCP tests run
// against.
import { createHash } from "node:crypto";
import { join } from "node:path";

import { localServer, startGateway, tempDir, type Gateway } from "./helpers.js";

/** The bearer token of the stack's one tenant. */
export const token = "e2e-token-of-tenant-acme";

export interface Stack {
  gateway: Gateway;
  /** Executions of the upstream tool "provision", per name argument. */
  executions: Map<string, number>;
  /** Total executions of "provision". */
  total(): number;
  /** kill -9 the gateway and start it again on the same store file (and the same port). */
  restartGateway(): Promise<Gateway>;
  close(): Promise<void>;
}

/**
 * Starts the upstream and the gateway: the embedded store in a temp dir,
 * one tenant, and the HTTP tool "provision" ({name: string}, other members
 * allowed; a member delay_ms makes the upstream slow).
 */
export async function startStack(): Promise<Stack> {
  const dir = tempDir("tsgw-e2e-");
  const executions = new Map<string, number>();
  let total = 0;
  const upstream = await localServer(async (_req, body, res) => {
    const args = JSON.parse(body) as { name: string; delay_ms?: number };
    total++;
    const n = (executions.get(args.name) ?? 0) + 1;
    executions.set(args.name, n);
    if (args.delay_ms) await new Promise((resolve) => setTimeout(resolve, args.delay_ms));
    res.writeHead(201, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ resource: `${args.name}-${total}`, execution: total }));
  });
  const config = provisionConfig(dir, upstream.url, token);
  const stack: Stack = {
    gateway: await startGateway(dir, config),
    executions,
    total: () => total,
    async restartGateway() {
      await stack.gateway.kill();
      stack.gateway = await startGateway(dir, config, new URL(stack.gateway.url).host);
      return stack.gateway;
    },
    async close() {
      await stack.gateway.kill();
      await upstream.close();
    },
  };
  return stack;
}

/**
 * The gateway config of the test stacks: the embedded store in dir, one
 * tenant "acme" whose bearer token is tenantToken, and the HTTP tool
 * "provision" on upstreamUrl, whose schema requires name (a string); extra
 * adds properties, each a YAML flow mapping (e.g. {cpus: "{type: integer}"}).
 */
export function provisionConfig(
  dir: string,
  upstreamUrl: string,
  tenantToken: string,
  {
    description = "allocates a resource",
    extra = {},
    effectKey,
  }: { description?: string; extra?: Record<string, string>; effectKey?: string } = {},
): string {
  const properties = Object.entries({ name: "{type: string}", ...extra })
    .map(([name, schema]) => `        ${name}: ${schema}\n`)
    .join("");
  return `log_level: info
store:
  path: ${JSON.stringify(join(dir, "gateway.db"))}
idempotency:
  lock_ttl: 2s
auth:
  tenants:
    - name: acme
      token_sha256: ${createHash("sha256").update(tenantToken).digest("hex")}
tools:
  - name: provision
    description: ${description}
    input_schema:
      type: object
      required: [name]
      properties:
${properties}    http:
      url: ${upstreamUrl}/provision
${effectKey ? `    effect_key: ${JSON.stringify(effectKey)}\n` : ""}`;
}
