// The crash tests' stack, shared by the AI SDK and OpenAI Agents adapter
// tests: the real gateway binary in front of an HTTP tool "provision" that
// counts its executions per name and can hold a request until the test
// released it (so a test kills the agent while the gateway has the call in
// flight), and agent programs run as child processes the test can kill -9.
import { spawn, type ChildProcess } from "node:child_process";

import { localServer, startGateway, tempDir, type Gateway } from "./helpers.js";
import { provisionConfig } from "./stack.js";

/** The bearer token of the stack's one tenant. */
export const token = "crash-token-of-tenant-acme";

/** An agent child process. */
export interface Agent {
  child: ChildProcess;
  /** Resolves when the process exited (by itself or killed), with what it printed. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
  /** kill -9, and wait until the process is gone. */
  kill(): Promise<void>;
}

export interface CrashStack {
  gateway: Gateway;
  /** A directory for the agents' persisted state. */
  dir: string;
  /** Executions of "provision" per name argument. */
  executions: Map<string, number>;
  /** Resolves once the upstream received a request for this name (at once if it already did). */
  started(name: string): Promise<void>;
  /** Makes the upstream hold every request until {@link release}. */
  hold(): void;
  /** Lets held requests (and later ones) through. */
  release(): void;
  /** Starts the compiled agent program (dist/test/<script>.js) with its configuration. */
  agent(script: string, config: Record<string, unknown>): Agent;
  close(): Promise<void>;
}

export async function startCrashStack({ effectKey }: { effectKey?: string } = {}): Promise<CrashStack> {
  const dir = tempDir("tsgw-crash-");
  const executions = new Map<string, number>();
  const waiters = new Map<string, (() => void)[]>();
  let total = 0;
  let gate: Promise<void> | undefined;
  let open: () => void = () => {};
  const upstream = await localServer(async (_req, body, res) => {
    const args = JSON.parse(body) as { name: string };
    total++;
    executions.set(args.name, (executions.get(args.name) ?? 0) + 1);
    for (const wake of waiters.get(args.name) ?? []) wake();
    waiters.delete(args.name);
    if (gate) await gate;
    res.writeHead(201, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ resource: `${args.name}-${total}`, execution: total }));
  });
  const config = provisionConfig(dir, upstream.url, token, { effectKey });
  const gateway = await startGateway(dir, config);
  const agents = new Set<ChildProcess>();
  const release = () => {
    gate = undefined;
    open();
  };
  return {
    gateway,
    dir,
    executions,
    started(name) {
      if (executions.has(name)) return Promise.resolve();
      return new Promise((resolve) => waiters.set(name, [...(waiters.get(name) ?? []), resolve]));
    },
    hold() {
      gate = new Promise((resolve) => (open = resolve));
    },
    release,
    agent(script, agentConfig) {
      const path = new URL(`./${script}.js`, import.meta.url).pathname;
      const child = spawn(process.execPath, [path, JSON.stringify({ gateway: gateway.url, token, ...agentConfig })], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      agents.add(child);
      let stdout = "";
      let stderr = "";
      child.stdout!.on("data", (chunk) => (stdout += chunk));
      child.stderr!.on("data", (chunk) => (stderr += chunk));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
        child.once("exit", (code, signal) => {
          agents.delete(child);
          resolve({ code, signal, stdout, stderr });
        }),
      );
      return {
        child,
        exited,
        async kill() {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
          await exited;
        },
      };
    },
    async close() {
      for (const child of agents) child.kill("SIGKILL");
      release();
      await gateway.kill();
      await upstream.close();
    },
  };
}

/** Runs the agent to its end and returns its last stdout line parsed as JSON; fails on a non-zero exit. */
export async function finish<T>(agent: Agent): Promise<T> {
  const { code, signal, stdout, stderr } = await agent.exited;
  if (code !== 0) throw new Error(`agent exited with ${code ?? signal}: ${stderr}`);
  const lines = stdout.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]!) as T;
}
