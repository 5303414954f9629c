// @toolgateway/client/langgraph under crashes: a real LangGraph.js
// createReactAgent with the real SQLite checkpointer, in a child process
// (langgraph-agent.ts) that the test kills with SIGKILL, calling the real
// gateway binary, whose HTTP upstream tool — served here — counts what it
// receives. Every case counts executions at that upstream: exactly one per
// logical call.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

import { Client, deriveKey, GatewayError, InvalidInputError } from "../src/index.js";
import { gatewayIdentity, gatewayTool, gatewayTools, withGatewayIdentity } from "../src/langgraph.js";
import { localServer, startGateway, tempDir, type Gateway } from "./helpers.js";
import { provisionConfig } from "./stack.js";
import type { AgentInput, AgentMessage, ScriptedCall } from "./langgraph-agent.js";

const token = "langgraph-token-of-tenant-acme";
const dir = tempDir("tslg-");
const agentProgram = join(fileURLToPath(new URL(".", import.meta.url)), "langgraph-agent.js");

/** Executions of the upstream tool, per name argument. */
const executions = new Map<string, number>();
/** Idempotency keys the upstream received (the gateway's scoped keys: one per record). */
const upstreamKeys = new Set<string>();
/** Calls held by the upstream (args.hold) until the test releases them, by name. */
const held = new Map<string, () => void>();
const receivedWaiters = new Map<string, () => void>();

let gateway: Gateway;
let closeUpstream: () => Promise<void>;

before(async () => {
  const upstream = await localServer(async (req, body, res) => {
    const args = JSON.parse(body) as { name: string; hold?: boolean };
    executions.set(args.name, (executions.get(args.name) ?? 0) + 1);
    upstreamKeys.add(String(req.headers["idempotency-key"]));
    receivedWaiters.get(args.name)?.();
    if (args.hold) await new Promise<void>((release) => held.set(args.name, release));
    res.writeHead(201, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ provisioned: args.name, execution: executions.get(args.name) }));
  });
  closeUpstream = upstream.close;
  gateway = await startGateway(
    dir,
    provisionConfig(dir, upstream.url, token, {
      description: "Provision a machine; name is the machine's name.",
      extra: { cpus: "{type: integer}", hold: "{type: boolean}" },
    }),
  );
});

after(async () => {
  for (const release of held.values()) release();
  await gateway.kill();
  await closeUpstream();
});

/** Resolves when the upstream has received a call of that name (the gateway started it). */
function received(name: string): Promise<void> {
  return new Promise((resolve) => receivedWaiters.set(name, resolve));
}

interface AgentRun {
  /** Resolves with the run's messages, or rejects if the process ends without DONE. */
  done: Promise<AgentMessage[]>;
  /** Resolves when the process writes this line. */
  line(text: string): Promise<void>;
  /** kill -9, and wait until the process is gone. */
  kill(): Promise<void>;
}

let processes = 0;

/** Starts the agent process. */
function agent(input: Omit<AgentInput, "gateway" | "token" | "db" | "idPrefix">): AgentRun {
  const full: AgentInput = { gateway: gateway.url, token, db: join(dir, `${input.thread}.sqlite`), idPrefix: `p${++processes}_`, ...input };
  const child = spawn(process.execPath, [agentProgram, JSON.stringify(full)], { stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const waiters = new Map<string, () => void>();
  let doneLine: ((messages: AgentMessage[]) => void) | undefined;
  const done = new Promise<AgentMessage[]>((resolve, reject) => {
    doneLine = resolve;
    child.once("exit", (code, signal) => setImmediate(() => reject(new Error(`agent exited (${code ?? signal}) without finishing: ${stderr}`))));
  });
  done.catch(() => {}); // a killed run's promise is not awaited
  createInterface({ input: child.stdout! }).on("line", (line) => {
    if (line.startsWith("DONE ")) doneLine?.(JSON.parse(line.slice(5)) as AgentMessage[]);
    waiters.get(line)?.();
  });
  return {
    done,
    line: (text) => new Promise((resolve) => waiters.set(text, resolve)),
    async kill() {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

const toolMessages = (messages: AgentMessage[]) => messages.filter((m) => m.type === "tool");
const provision = (name: string, extra: Record<string, unknown> = {}): ScriptedCall => ({ name: "provision", args: { name, ...extra } });

test("kill -9 while the gateway runs the call; the resumed thread replays it: one execution", async () => {
  const turns = [[provision("a-db", { hold: true })]];
  const started = received("a-db");
  const first = agent({ thread: "a", turns, mode: "start" });
  await started; // the upstream has the request: the gateway started the tool
  await first.kill();
  held.get("a-db")!(); // the tool finishes with nobody waiting for it

  const messages = await agent({ thread: "a", turns, mode: "resume" }).done;
  const [result] = toolMessages(messages);
  assert.equal(result?.status, "success", JSON.stringify(messages));
  assert.equal(result?.artifact?.replayed, true);
  assert.match(result!.content, /"provisioned":"a-db"/);
  assert.equal(messages.at(-1)?.content, "done");
  assert.equal(executions.get("a-db"), 1);
});

test("durability exit: kill -9 mid-call loses the model's turn; the run starts again, regenerates the call and replays it", async () => {
  const turns = [[provision("a2-db", { hold: true })]];
  const started = received("a2-db");
  const first = agent({ thread: "a2", turns, mode: "start", durability: "exit" });
  await started;
  await first.kill();
  held.get("a2-db")!();
  // Nothing was checkpointed: the thread starts over, and the model's turn
  // is generated again, with new tool-call ids.
  const messages = await agent({ thread: "a2", turns, mode: "start", durability: "exit" }).done;
  const [result] = toolMessages(messages);
  assert.equal(result?.artifact?.replayed, true, JSON.stringify(messages));
  assert.equal(executions.get("a2-db"), 1);
});

test("kill -9 after the tool answered, before the runtime checkpointed it: the resume replays it, once", async () => {
  const turns = [[provision("b-db")]];
  const first = agent({ thread: "b", turns, mode: "start", holdAfterResponse: true });
  await first.line("RESPONSE provision");
  await first.kill();
  assert.equal(executions.get("b-db"), 1);

  const messages = await agent({ thread: "b", turns, mode: "resume" }).done;
  const [result] = toolMessages(messages);
  assert.equal(result?.artifact?.replayed, true, JSON.stringify(messages));
  assert.equal(messages.at(-1)?.content, "done");
  assert.equal(executions.get("b-db"), 1);
});

test("a regenerated turn (fork before the model node): the same calls replay; a call with other arguments gets step_conflict as a tool message, and the run goes on", async () => {
  const turns = [[provision("c-lookup")], [provision("c-db", { cpus: 2 }), provision("c-cache", { cpus: 1 })]];
  const original = await agent({ thread: "c", turns, mode: "start" }).done;
  const originalResults = toolMessages(original);
  assert.deepEqual(originalResults.map((m) => m.artifact?.replayed), [false, false, false]);

  // Time travel to the checkpoint before the model's second turn: the model
  // runs again and makes the same calls under new ids.
  const same = await agent({ thread: "c", turns, mode: "fork", forkBeforeTurn: 1 }).done;
  const sameResults = toolMessages(same);
  assert.equal(sameResults.length, 3, JSON.stringify(same));
  assert.notEqual(sameResults[1]!.toolCallId, originalResults[1]!.toolCallId, "the regenerated calls have new ids");
  assert.deepEqual(sameResults.slice(1).map((m) => m.artifact?.replayed), [true, true]);
  assert.deepEqual(
    sameResults.slice(1).map((m) => m.artifact?.executionId),
    originalResults.slice(1).map((m) => m.artifact?.executionId),
  );

  // Regenerated with other arguments for the first call of the turn.
  const other = [turns[0]!, [provision("c-db-bigger", { cpus: 8 }), provision("c-cache", { cpus: 1 })]];
  const conflicted = await agent({ thread: "c", turns: other, mode: "fork", forkBeforeTurn: 1 }).done;
  const [, conflict, cache] = toolMessages(conflicted);
  assert.equal(conflict?.status, "error", JSON.stringify(conflicted));
  assert.match(conflict!.content, /^step_conflict: .*a call of provision \(execution [0-9A-Z]{26}\)/);
  assert.equal(cache?.artifact?.replayed, true);
  assert.equal(conflicted.at(-1)?.content, "done", "the run went on to the model's next turn");

  assert.deepEqual(
    ["c-lookup", "c-db", "c-cache", "c-db-bigger"].map((name) => executions.get(name) ?? 0),
    [1, 1, 1, 0],
  );
});

test("parallel tool calls of one turn take distinct steps: each runs once, and a regenerated turn replays each", async () => {
  const names = ["d-1", "d-2", "d-3", "d-4"];
  const turns = [names.map((name) => provision(name))];
  const keysBefore = upstreamKeys.size;
  const first = toolMessages(await agent({ thread: "d", turns, mode: "start" }).done);
  assert.deepEqual(first.map((m) => [m.status, m.artifact?.replayed]), names.map(() => ["success", false]));
  assert.equal(new Set(first.map((m) => m.artifact?.executionId)).size, names.length);
  assert.equal(upstreamKeys.size - keysBefore, names.length, "one idempotency record per call");

  const again = toolMessages(await agent({ thread: "d", turns, mode: "fork", forkBeforeTurn: 0 }).done);
  assert.deepEqual(again.map((m) => m.artifact?.replayed), names.map(() => true));
  assert.deepEqual(again.map((m) => m.artifact?.executionId), first.map((m) => m.artifact?.executionId));
  assert.deepEqual(names.map((name) => executions.get(name)), names.map(() => 1));
});

// --- The adapter's other entry points, in-process --------------------------------

test("gatewayTools: discovery gives the published tools; an unknown name is refused", async () => {
  const client = new Client(gateway.url, { token });
  const all = await gatewayTools(client);
  // The configured tool and the gateway's bundled ones, in name order, as discovery lists them.
  const names = all.map((t) => t.name);
  assert.ok(names.includes("provision"), names.join(", "));
  assert.deepEqual(names, [...names].sort());
  const tools = await gatewayTools(client, { names: ["provision"] });
  assert.deepEqual(tools.map((t) => t.name), ["provision"]);
  assert.equal(tools[0]!.description, "Provision a machine; name is the machine's name.");
  await assert.rejects(gatewayTools(client, { names: ["provision", "nope"] }), /no tool "nope"/);
  await assert.rejects(new Client(gateway.url, { token: "wrong-token" }).tools(), (err: unknown) => err instanceof GatewayError && err.status === 401);
});

test("a gateway tool invoked outside a ToolNode (no tool call, no thread) refuses to run", async () => {
  const [tool] = await gatewayTools(new Client(gateway.url, { token }));
  const before = executions.get("outside") ?? 0;
  await assert.rejects(tool!.invoke({ name: "outside" }), InvalidInputError);
  assert.equal(executions.get("outside") ?? 0, before);
});

test("withGatewayIdentity: an in-process tool gets the call's session, step and key in its config", async () => {
  const seen: Array<ReturnType<typeof gatewayIdentity>> = [];
  const local = tool(async (_args: { to: string }, config) => (seen.push(gatewayIdentity(config)), "sent"), {
    name: "send-mail",
    description: "Send a mail.",
    schema: z.object({ to: z.string() }),
  });
  const script = [
    new AIMessage({ content: "", tool_calls: [{ id: "m1", name: "send-mail", args: { to: "a@example.com" }, type: "tool_call" }] }),
    new AIMessage({
      content: "",
      tool_calls: [
        { id: "m2", name: "send-mail", args: { to: "b@example.com" }, type: "tool_call" },
        { id: "m3", name: "send-mail", args: { to: "c@example.com" }, type: "tool_call" },
      ],
    }),
  ];
  const graph = new StateGraph(MessagesAnnotation)
    .addNode("agent", async () => ({ messages: [script.shift() ?? new AIMessage("done")] }))
    .addNode("tools", new ToolNode([withGatewayIdentity(local)]))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", toolsCondition, ["tools", END])
    .addEdge("tools", "agent")
    .compile({ checkpointer: new MemorySaver() });
  const result = await graph.invoke({ messages: [new HumanMessage("mail them")] }, { configurable: { thread_id: "mail:1" } });
  assert.equal(result.messages.filter((m) => m.getType() === "tool").length, 3);
  const byStep = seen.sort((a, b) => a!.stepIndex - b!.stepIndex);
  assert.deepEqual(
    byStep,
    ["a", "b", "c"].map((who, step) => ({
      sessionId: "mail%3A1",
      stepIndex: step,
      idempotencyKey: deriveKey("mail%3A1", step, "send-mail", { to: `${who}@example.com` }),
    })),
  );
});

test("gatewayTool(client, existingTool): the model keeps the local tool's definition, the gateway runs the call, the local function does not", async () => {
  let localRuns = 0;
  const local = tool(async () => (localRuns++, "local"), {
    name: "provision",
    description: "Provision a machine (the local definition).",
    schema: z.object({ name: z.string() }),
  });
  const script = [new AIMessage({ content: "", tool_calls: [{ id: "e1", name: "provision", args: { name: "e-db" }, type: "tool_call" }] })];
  const graph = new StateGraph(MessagesAnnotation)
    .addNode("agent", async () => ({ messages: [script.shift() ?? new AIMessage("done")] }))
    .addNode("tools", new ToolNode([gatewayTool(new Client(gateway.url, { token }), local)]))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", toolsCondition, ["tools", END])
    .addEdge("tools", "agent")
    .compile({ checkpointer: new MemorySaver() });
  const result = await graph.invoke({ messages: [new HumanMessage("provision e-db")] }, { configurable: { thread_id: "e" } });
  const [message] = result.messages.filter((m) => m.getType() === "tool");
  assert.match(String(message?.content), /"provisioned":"e-db"/);
  assert.equal(localRuns, 0);
  assert.equal(executions.get("e-db"), 1);
});
