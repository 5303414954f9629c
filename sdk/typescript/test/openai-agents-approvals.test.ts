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
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { localServer, startGateway, tempDir, type Gateway } from "./helpers.js";
import { provisionConfig } from "./stack.js";

const token = "openai-agents-approvals-token";
const adminToken = "openai-agents-approvals-admin";
const dir = tempDir("tsoaa-");
const appProgram = join(fileURLToPath(new URL(".", import.meta.url)), "openai-agents-agent.js");
const executions = new Map<string, number>();
let gateway: Gateway;
let closeUpstream: () => Promise<void>;

before(async () => {
  const upstream = await localServer(async (_req, body, res) => {
    const args = JSON.parse(body) as { name: string };
    executions.set(args.name, (executions.get(args.name) ?? 0) + 1);
    res.writeHead(201, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ provisioned: args.name }));
  });
  closeUpstream = upstream.close;
  gateway = await startGateway(
    dir,
    provisionConfig(dir, upstream.url, token, { extra: { cpus: "{type: integer}" } }) +
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
});

interface App {
  /** Resolves when the app paused at an interruption. */
  interrupted: Promise<void>;
  /** Resolves with the app's last line (parsed) and exit code once it exits. */
  exited: Promise<{ code: number | null; last: unknown }>;
  kill(): Promise<void>;
}

function app(conversation: string, name: string, cpus: number, answer?: "approve" | "reject"): App {
  const config = {
    gateway: gateway.url,
    token,
    state: join(dir, `${conversation}.state`),
    conversation,
    mode: "gateway",
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

async function operatorApproves(id: string): Promise<void> {
  const response = await fetch(`${gateway.url}/admin/v1/approvals/${id}/approve`, {
    method: "POST",
    headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ by: "ops@example" }),
  });
  assert.equal(response.status, 200, await response.text());
}

test("operator approval: interruption, kill -9 while paused, the operator approves, the stored RunState resumes in a new process: one execution", async () => {
  const first = app("oa-op", "big-1", 32);
  await first.interrupted;
  await first.kill();
  assert.equal(executions.get("big-1"), undefined);

  // Approved in the runtime before the operator decided: the run stops, nothing runs.
  const early = await app("oa-op", "big-1", 32, "approve").exited;
  assert.equal(early.code, 3, JSON.stringify(early.last));
  assert.equal(executions.get("big-1"), undefined);

  await operatorApproves(await pendingApprovalOf("big-1"));
  const resumed = await app("oa-op", "big-1", 32, "approve").exited;
  assert.equal(resumed.code, 0, JSON.stringify(resumed.last));
  assert.deepEqual((resumed.last as { seen: unknown[] }).seen.length, 1);
  assert.equal(executions.get("big-1"), 1);
});

test("caller approval: state.approve() in a new process reaches the gateway through the caller endpoint: one execution", async () => {
  const first = app("oa-caller", "mid-1", 4);
  await first.interrupted;
  await first.kill();
  assert.equal(executions.get("mid-1"), undefined);
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
