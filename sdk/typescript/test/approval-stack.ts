// The stack of the adapters' approval crash tests: a counting upstream, the
// real gateway with decide rules (caller approval up to 8 cpus, operator
// approval above) and an admin token, an agent program run as a child
// process (killed with SIGKILL while paused), and the operator's side of
// the admin API. Each test file calls approvalStack once at its top level.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";

import { buildGo, localServer, startGateway, tempDir, type Gateway } from "./helpers.js";
import { Client } from "../src/index.js";
import { provisionConfig } from "./stack.js";

/** An agent process of an approval test. */
export interface App {
  /** Resolves when the app paused at an interruption. */
  interrupted: Promise<void>;
  /** Resolves with the app's last line (parsed) and exit code once it exits. */
  exited: Promise<{ code: number | null; last: unknown }>;
  kill(): Promise<void>;
}

/** What an approval test drives. */
export interface ApprovalStack {
  /** Executions at the upstream, by the provisioned name. */
  executions: Map<string, number>;
  /** Starts the agent program on one turn calling provision(name, cpus). */
  app(conversation: string, name: string, cpus: number, answer?: string): App;
  /** The id of the pending approval of provision(name). */
  pendingApprovalOf(name: string): Promise<string>;
  /** The operator approves or denies through the admin API. */
  operatorDecides(id: string, decision: "approve" | "deny"): Promise<void>;
  /**
   * A person approves through the caller endpoint with their own access
   * token from a real OpenID provider (internal/cmd/testop): what a
   * `caller` rule needs, since the agent's token cannot approve.
   */
  personApproves(id: string): Promise<void>;
}

/** The audience of the provider's access tokens, as the gateway's auth.oidc expects it. */
const audience = "http://toolgateway.test/approvals";

/** config (provisionConfig's) with auth.oidc on the provider at issuer, tenant from the token's org_id. */
export function withProvider(config: string, issuer: string): string {
  return config.replace("auth:\n", `auth:\n  oidc:\n    issuer: ${issuer}\n    audience: ${audience}\n    tenant_claim: org_id\n`);
}

/** A person's access token from the provider at issuer: its service user, tenant acme (org_id from the org: scope). */
export async function personToken(issuer: string): Promise<string> {
  const response = await fetch(new URL("oauth/token", issuer.endsWith("/") ? issuer : `${issuer}/`), {
    method: "POST",
    headers: { Authorization: `Basic ${Buffer.from("sid1:verysecret").toString("base64")}`, "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", scope: "org:acme" }),
  });
  assert.equal(response.status, 200, await response.clone().text());
  return ((await response.json()) as { access_token: string }).access_token;
}

/** Starts internal/cmd/testop and reads the issuer it prints; the process is killed on exit. */
export async function startProvider(): Promise<{ issuer: string; kill(): void }> {
  const binary = await buildGo("./internal/cmd/testop");
  const child = spawn(binary, ["-audience", audience, "-client-id", "unused", "-client-secret", "unused", "-redirect-url", "http://127.0.0.1:1/cb"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  process.on("exit", () => child.kill("SIGKILL"));
  const line = await new Promise<string>((resolveLine, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolveLine);
    child.once("exit", (code) => reject(new Error(`testop exited with ${code}`)));
  });
  return { issuer: (JSON.parse(line) as { issuer: string }).issuer, kill: () => child.kill("SIGKILL") };
}

/**
 * Registers the stack's before/after hooks; prefix names its tokens and
 * temporary folder, agent is the compiled agent program (in this folder)
 * and mode the agent's mode for approvals.
 */
export function approvalStack(prefix: string, agent: string, mode: string): ApprovalStack {
  const token = `${prefix}-token`;
  const adminToken = `${prefix}-admin`;
  const dir = tempDir(`${prefix}-`);
  const appProgram = join(fileURLToPath(new URL(".", import.meta.url)), agent);
  const executions = new Map<string, number>();
  let gateway: Gateway;
  let closeUpstream: () => Promise<void>;
  let provider: { issuer: string; kill(): void };
  before(async () => {
    provider = await startProvider();
    const upstream = await localServer(async (_req, body, res) => {
      const args = JSON.parse(body) as { name: string };
      executions.set(args.name, (executions.get(args.name) ?? 0) + 1);
      res.writeHead(201, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ provisioned: args.name }));
    });
    closeUpstream = upstream.close;
    gateway = await startGateway(
      dir,
      withProvider(provisionConfig(dir, upstream.url, token, { extra: { cpus: "{type: integer}" } }), provider.issuer) +
        `    lease_expiry: unknown
    decide:
      - when: "args.cpus <= 8"
        decision: approve
        approver: caller
      - decision: approve
        reason: "ops approves big machines"
admin:
  token_sha256: ${createHash("sha256").update(adminToken).digest("hex")}
`,
    );
  });

  after(async () => {
    await gateway.kill();
    await closeUpstream();
    provider.kill();
  });


  function app(conversation: string, name: string, cpus: number, answer?: string): App {
    const config = {
      gateway: gateway.url,
      token,
      state: join(dir, `${conversation}.state`),
      conversation,
      mode,
      discover: true,
      turns: [[{ tool: "provision", args: { name, cpus } }]],
      ...(answer ? { answer } : {}),
    };
    const child = spawn(process.execPath, [appProgram, JSON.stringify(config)], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    let last = "";
    let pause: () => void = () => {};
    const interrupted = new Promise<void>((resolve, reject) => {
      pause = resolve;
      child.once("exit", () => setImmediate(() => reject(new Error(`app exited without pausing: ${last} ${stderr}`))));
    });
    interrupted.catch(() => {});
    createInterface({ input: child.stdout! }).on("line", (line) => {
      last = line;
      if (line.startsWith("INTERRUPTED ")) pause();
    });
    const exited = new Promise<{ code: number | null; last: unknown }>((resolve) =>
      child.once("exit", (code) => setImmediate(() => resolve({ code, last: last.startsWith("{") ? JSON.parse(last) : last }))),
    );
    return {
      interrupted,
      exited,
      async kill() {
        child.kill("SIGKILL");
        await exited;
      },
    };
  }

  async function pendingApprovalOf(name: string): Promise<string> {
    const response = await fetch(`${gateway.url}/admin/v1/approvals?state=PENDING&tool=provision`, { headers: { Authorization: `Bearer ${adminToken}` } });
    const { approvals } = (await response.json()) as { approvals: { id: string }[] };
    for (const { id } of approvals) {
      // The list leaves the arguments out; the approval itself shows them.
      const detail = await fetch(`${gateway.url}/admin/v1/approvals/${id}`, { headers: { Authorization: `Bearer ${adminToken}` } });
      const { canonical_arguments } = (await detail.json()) as { canonical_arguments?: string };
      if (canonical_arguments?.includes(`"${name}"`)) return id;
    }
    assert.fail(`no pending approval for ${name}`);
  }

  async function operatorDecides(id: string, decision: "approve" | "deny"): Promise<void> {
    const response = await fetch(`${gateway.url}/admin/v1/approvals/${id}/${decision}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
      body: JSON.stringify({ by: "ops@example", note: "checked" }),
    });
    assert.equal(response.status, 200, await response.text());
  }

  async function personApproves(id: string): Promise<void> {
    await new Client(gateway.url, { token }).approve(id, { token: await personToken(provider.issuer), note: "a person checked it" });
  }

  return { executions, app, pendingApprovalOf, operatorDecides, personApproves };
}
