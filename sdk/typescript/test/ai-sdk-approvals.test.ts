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
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { localServer, startGateway, tempDir, type Gateway } from "./helpers.js";
import { provisionConfig } from "./stack.js";

const token = "ai-sdk-approvals-token";
const adminToken = "ai-sdk-approvals-admin";
const dir = tempDir("tsaia-");
const appProgram = join(fileURLToPath(new URL(".", import.meta.url)), "ai-sdk-agent.js");
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

function app(conversation: string, name: string, cpus: number, answer?: "approve" | "deny"): App {
  const config = {
    gateway: gateway.url,
    token,
    state: join(dir, `${conversation}.state`),
    conversation,
    mode: "approval",
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
    body: JSON.stringify({ by: "ops@example" }),
  });
  assert.equal(response.status, 200, await response.text());
}

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

test("caller approval: a tool-approval-response in a new process reaches the gateway through the caller endpoint: one execution", async () => {
  const first = app("ai-caller", "mid-1", 4);
  await first.interrupted;
  await first.kill();
  assert.equal(executions.get("mid-1"), undefined);
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
