// @toolgateway/client/langgraph and approvals: a tool call that waits for a
// human's approval (409 approval_pending) pauses the real createReactAgent
// at an interrupt() (SQLite checkpointer, child process langgraph-agent.ts);
// the test kills the paused process with SIGKILL, the human answers (the
// operator through the admin API, or the caller through Command({resume})),
// and a new process resumes the thread from its checkpoint. The upstream,
// served here, counts the executions: one per approved call, none for a
// denied one.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { ApprovalPendingError, Client } from "../src/index.js";
import { localServer, startGateway, tempDir, type Gateway } from "./helpers.js";
import { personToken, startProvider, withProvider } from "./approval-stack.js";
import { provisionConfig } from "./stack.js";
import type { AgentInput, AgentMessage } from "./langgraph-agent.js";
import type { ApprovalInterrupt } from "../src/langgraph.js";

const token = "langgraph-approvals-token";
const adminToken = "langgraph-approvals-admin";
const dir = tempDir("tslga-");
const agentProgram = join(fileURLToPath(new URL(".", import.meta.url)), "langgraph-agent.js");

/** Executions of the upstream tool, per name argument. */
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
    res.end(JSON.stringify({ provisioned: args.name, execution: executions.get(args.name) }));
  });
  closeUpstream = upstream.close;
  // provisionConfig's last lines are the tool's http section: the decide
  // rules join the same tool, the admin section follows at the top level.
  const config =
    withProvider(provisionConfig(dir, upstream.url, token, { extra: { cpus: "{type: integer}" } }), provider.issuer) +
    `    lease_expiry: unknown
    decide:
      - when: "!has(args.cpus) || args.cpus <= 2"
        decision: allow
      - when: "args.cpus <= 8"
        decision: approve
        approver: caller
        reason: "the user confirms mid-size machines"
      - decision: approve
        reason: "ops approves big machines"
admin:
  token_sha256: ${createHash("sha256").update(adminToken).digest("hex")}
`;
  gateway = await startGateway(dir, config);
});

after(async () => {
  await gateway.kill();
  await closeUpstream();
  provider.kill();
});

interface AgentRun {
  /** Resolves with the run's messages when it finishes. */
  done: Promise<AgentMessage[]>;
  /** Resolves with the interrupts' values when the run pauses. */
  interrupted: Promise<ApprovalInterrupt[]>;
  kill(): Promise<void>;
}

let processes = 0;

function agent(input: Pick<AgentInput, "thread" | "mode" | "turns" | "answer">): AgentRun {
  const full: AgentInput = { gateway: gateway.url, token, db: join(dir, `${input.thread}.sqlite`), idPrefix: `p${++processes}_`, preferWait: 0, ...input };
  const child = spawn(process.execPath, [agentProgram, JSON.stringify(full)], { stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  let finish: (messages: AgentMessage[]) => void = () => {};
  let pause: (values: ApprovalInterrupt[]) => void = () => {};
  const ended = (what: string) => new Error(`agent exited without ${what}: ${stderr}`);
  const done = new Promise<AgentMessage[]>((resolve, reject) => {
    finish = resolve;
    child.once("exit", () => setImmediate(() => reject(ended("finishing"))));
  });
  const interrupted = new Promise<ApprovalInterrupt[]>((resolve, reject) => {
    pause = resolve;
    child.once("exit", () => setImmediate(() => reject(ended("pausing"))));
  });
  done.catch(() => {});
  interrupted.catch(() => {});
  createInterface({ input: child.stdout! }).on("line", (line) => {
    if (line.startsWith("DONE ")) finish(JSON.parse(line.slice(5)) as AgentMessage[]);
    if (line.startsWith("INTERRUPTED ")) pause(JSON.parse(line.slice(12)) as ApprovalInterrupt[]);
  });
  return {
    done,
    interrupted,
    async kill() {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

async function operatorDecides(id: string, decision: "approve" | "deny"): Promise<void> {
  const response = await fetch(`${gateway.url}/admin/v1/approvals/${id}/${decision}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ by: "ops@example", note: "checked" }),
  });
  assert.equal(response.status, 200, await response.text());
}

const provision = (name: string, cpus: number) => [[{ name: "provision", args: { name, cpus } }]];
const toolMessages = (messages: AgentMessage[]) => messages.filter((m) => m.type === "tool");

test("operator approval: the agent pauses at interrupt(), is killed, the operator approves, a new process resumes: one execution", async () => {
  const turns = provision("big-1", 32);
  const first = agent({ thread: "op", mode: "start", turns });
  const [request, ...more] = await first.interrupted;
  await first.kill();
  assert.equal(more.length, 0);
  assert.equal(request!.type, "toolgateway.approval");
  assert.equal(request!.tool, "provision");
  assert.deepEqual(request!.args, { name: "big-1", cpus: 32 });
  assert.ok(request!.approval_id && Date.parse(request!.expires_at!) > Date.now());
  assert.equal(executions.get("big-1"), undefined);

  // Resumed before anyone decided: it pauses again, nothing runs.
  const early = agent({ thread: "op", mode: "answer", turns, answer: "checking" });
  const [again] = await early.interrupted;
  await early.kill();
  assert.equal(again!.approval_id, request!.approval_id);
  assert.equal(executions.get("big-1"), undefined);

  await operatorDecides(request!.approval_id, "approve");
  const resumed = agent({ thread: "op", mode: "answer", turns, answer: true });
  const messages = await resumed.done;
  const [result] = toolMessages(messages);
  assert.equal(result!.status, "success");
  assert.equal(result!.artifact!.replayed, false);
  assert.equal(executions.get("big-1"), 1);

  // The same call again (a retry of the thread's step) replays.
  const replay = await new Client(gateway.url, { token, preferWait: 0 }).session("op").call(0, "provision", { name: "big-1", cpus: 32 });
  assert.equal(replay.replayed, true);
  assert.equal(executions.get("big-1"), 1);
  // Other arguments are another call: pending, with an approval of its own.
  await assert.rejects(
    new Client(gateway.url, { token, preferWait: 0 }).session("op2").call(0, "provision", { name: "big-2", cpus: 32 }),
    (err: unknown) => err instanceof ApprovalPendingError && err.approvalId !== request!.approval_id && err.status === 409,
  );
});

// approver: caller means a person: an app that resumes the interrupt with
// an approval of its own (no person's token) decides nothing and runs
// nothing: the tool throws the ApprovalPendingError (no new interrupt, so
// no loop; with the default ToolNode the model reads it as a tool error);
// a person's answer with their own token runs the call once.
test("caller approval: an app that approves everything itself runs nothing (0 executions); a person's answer with their token runs the call once", async () => {
  const turns = provision("mid-1", 4);
  const first = agent({ thread: "caller", mode: "start", turns });
  const [request] = await first.interrupted;
  await first.kill();
  assert.equal(executions.get("mid-1"), undefined);

  const selfApproved = agent({ thread: "caller", mode: "answer", turns, answer: { approved: true, note: "yes, that one" } });
  const [result] = toolMessages(await selfApproved.done);
  assert.equal(result!.status, "error");
  assert.match(result!.content, /approval_pending/);
  assert.equal(executions.get("mid-1"), undefined);
  const record = await fetch(`${gateway.url}/admin/v1/approvals/${request!.approval_id}`, { headers: { Authorization: `Bearer ${adminToken}` } });
  assert.equal(((await record.json()) as { state: string }).state, "PENDING");

  // A person answers through the interrupt with their own access token (a
  // real OpenID provider's): the adapter decides with it, the call runs once.
  const personTurns = provision("mid-4", 4);
  const asked = agent({ thread: "person", mode: "start", turns: personTurns });
  await asked.interrupted;
  await asked.kill();
  const answered = agent({ thread: "person", mode: "answer", turns: personTurns, answer: { approved: true, note: "checked", token: await personToken(provider.issuer) } });
  const [ran] = toolMessages(await answered.done);
  assert.equal(ran!.status, "success");
  assert.equal(executions.get("mid-4"), 1);
  assert.equal(executions.get("mid-1"), undefined);
});

test("the app's own denial: the model reads that the user declined; nothing runs", async () => {
  const turns = provision("mid-2", 6);
  const first = agent({ thread: "deny", mode: "start", turns });
  await first.interrupted;
  await first.kill();
  const resumed = agent({ thread: "deny", mode: "answer", turns, answer: { approved: false, note: "not today" } });
  const [result] = toolMessages(await resumed.done);
  assert.equal(result!.status, "error");
  assert.match(result!.content, /NOT run.*declined/);
  assert.equal(executions.get("mid-2"), undefined);
});
