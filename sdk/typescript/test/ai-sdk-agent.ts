// An AI SDK app, run as a child process by ai-sdk.test.ts so the test can
// kill -9 it: a conversation persisted to a JSON file, a scripted model
// (the `ai` package's MockLanguageModelV3) and the gateway tool "provision"
// through @toolgateway/client/ai-sdk. It prints its outcome as one JSON line.
//
// Configuration (argv[2], JSON):
//   gateway, token   the gateway
//   state            the file the conversation is persisted to
//   conversation     the conversation id
//   mode             "tools": generateText runs the gateway tools itself and
//                    the app persists the messages when it returns;
//                    "durable": the model's turn is persisted before its
//                    calls run, through runPendingToolCalls
//   turns            the model's script: turn k (k = tool turns already in
//                    the prompt) calls these tools, in this order; after
//                    the last, the model answers with the tool results it saw
//   stream           use streamText instead of generateText ("tools" mode)
//   crash            "after-tools": kill -9 itself once the tools ran and
//                    before the messages are persisted
//   unwrapped        give generateText/streamText the model itself, not
//                    gw.model(model) (the mistake the adapter must report)
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";

import { generateText, jsonSchema, stepCountIs, streamText, type ModelMessage } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { aiSdkGateway } from "../src/ai-sdk.js";
import { Client } from "../src/index.js";

interface Config {
  gateway: string;
  token: string;
  state: string;
  conversation: string;
  /** "approval": generateText with the gateway tools; a call the gateway holds stops the run at the SDK's tool-approval request (messages persisted, "INTERRUPTED" printed, then the app waits to be killed); `answer` approves or denies it in the stored messages and resumes. */
  mode: "tools" | "durable" | "approval";
  answer?: "approve" | "deny";
  turns: { tool: string; args: Record<string, unknown> }[][];
  stream?: boolean;
  crash?: "after-tools";
  /** Take the tool definitions from the gateway's discovery list instead. */
  discover?: boolean;
  unwrapped?: boolean;
}

const config = JSON.parse(process.argv[2]!) as Config;

function load(): ModelMessage[] {
  if (!existsSync(config.state)) return [{ role: "user", content: "provision what the plan says" }];
  return JSON.parse(readFileSync(config.state, "utf8")) as ModelMessage[];
}

function persist(messages: ModelMessage[]): void {
  writeFileSync(config.state + ".tmp", JSON.stringify(messages));
  renameSync(config.state + ".tmp", config.state);
}

function crashPoint(): void {
  if (config.crash === "after-tools") process.kill(process.pid, "SIGKILL");
}

/** What the scripted model saw of the tool results: their outputs, in order. */
const seen: unknown[] = [];
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** The script's answer to a prompt: the next planned turn's calls (with fresh ids, as a real model mints them), or the end. */
function respond(prompt: { role: string; content: unknown }[]) {
  const turn = prompt.filter((message) => message.role === "tool").length;
  const planned = config.turns[turn];
  if (planned) {
    const content = planned.map((call) => ({
      type: "tool-call" as const,
      toolCallId: `call-${Math.random().toString(36).slice(2)}`,
      toolName: call.tool,
      input: JSON.stringify(call.args),
    }));
    return { content, finishReason: { unified: "tool-calls" as const, raw: undefined } };
  }
  seen.length = 0;
  for (const message of prompt) {
    if (message.role !== "tool") continue;
    for (const part of message.content as { output: { value: unknown } }[]) seen.push(part.output.value);
  }
  return { content: [{ type: "text" as const, text: "done" }], finishReason: { unified: "stop" as const, raw: undefined } };
}

const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => ({ ...respond(prompt), usage, warnings: [] }),
  doStream: async ({ prompt }) => {
    const { content, finishReason } = respond(prompt);
    const parts = [
      ...content.map((part) =>
        part.type === "text"
          ? [
              { type: "text-start" as const, id: "t" },
              { type: "text-delta" as const, id: "t", delta: part.text },
              { type: "text-end" as const, id: "t" },
            ]
          : [part],
      ),
    ].flat();
    return {
      stream: new ReadableStream({
        start(controller) {
          for (const part of [...parts, { type: "finish" as const, finishReason, usage }]) controller.enqueue(part);
          controller.close();
        },
      }),
    };
  },
});

const client = new Client(config.gateway, { token: config.token, initialBackoff: 20 });
const gw = aiSdkGateway(
  client,
  config.conversation,
  config.discover
    ? await client.tools() // the gateway's discovery list (GET /api/tools/v1)
    : {
        provision: {
          description: "allocates a resource",
          inputSchema: jsonSchema<{ name: string }>({ type: "object", required: ["name"], properties: { name: { type: "string" } } }),
        },
      },
);

const messages = load();
if (config.mode === "approval") {
  const last = messages[messages.length - 1]!;
  if (config.answer && last.role === "assistant" && typeof last.content !== "string") {
    const content = last.content.flatMap((part) =>
      part.type === "tool-approval-request"
        ? [{ type: "tool-approval-response" as const, approvalId: part.approvalId, approved: config.answer === "approve" }]
        : [],
    );
    messages.push({ role: "tool", content });
  }
  const result = await generateText({ model: gw.model(model), tools: gw.tools, messages, stopWhen: stepCountIs(10) });
  const held = result.content.filter((part) => part.type === "tool-approval-request");
  const toolCallIds = messages.flatMap((message) =>
    message.role === "assistant" && typeof message.content !== "string"
      ? message.content.flatMap((part) => (part.type === "tool-call" ? [part.toolCallId] : []))
      : [],
  );
  if (toolCallIds.some((id) => gw.heldApproval(id))) {
    // Approved here, but the gateway's operator has not decided: keep the stored turn.
    process.stdout.write(JSON.stringify({ pending: true }) + "\n");
    process.exit(3);
  }
  messages.push(...result.responseMessages);
  persist(messages);
  if (held.length > 0) {
    process.stdout.write(`INTERRUPTED ${held.map((part) => gw.heldApproval(part.toolCall.toolCallId)?.approvalId).join(" ")}\n`);
    await new Promise(() => setInterval(() => {}, 1000)); // paused: the human answers elsewhere
  }
} else if (config.mode === "tools") {
  const options = { model: config.unwrapped ? model : gw.model(model), tools: gw.tools, messages, stopWhen: stepCountIs(10) };
  let responseMessages: ModelMessage[];
  if (config.stream) {
    const result = streamText(options);
    responseMessages = await result.responseMessages;
  } else {
    responseMessages = (await generateText(options)).responseMessages;
  }
  crashPoint();
  messages.push(...responseMessages);
  persist(messages);
} else {
  for (;;) {
    const results = await gw.runPendingToolCalls(messages);
    if (results.length > 0) {
      crashPoint();
      messages.push(...results);
      persist(messages);
      continue;
    }
    const last = messages[messages.length - 1]!;
    if (last.role === "assistant") break;
    const result = await generateText({ model, tools: gw.declarations, messages });
    messages.push(...result.responseMessages);
    persist(messages);
    if (result.toolCalls.length === 0) break;
  }
}
process.stdout.write(JSON.stringify({ seen, messages }) + "\n");
