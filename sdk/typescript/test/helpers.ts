// Helpers shared by the tests: the repository root, Go programs built once
// per test process, the real gateway binary started on a free port, and a
// local HTTP server.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The repository root: the nearest directory above this file with a go.mod. */
export const repoRoot = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "go.mod"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("go.mod not found above the test files");
    dir = parent;
  }
  return dir;
})();

/** A temporary directory removed when the process exits. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const goEnv = { ...process.env, PATH: `${process.env["PATH"] ?? ""}:/usr/local/go/bin` };
const built = new Map<string, Promise<string>>();

/** Builds the Go package (such as ./cmd/gateway) once per process and returns the binary's path. */
export function buildGo(pkg: string): Promise<string> {
  let binary = built.get(pkg);
  if (!binary) {
    const out = join(tempDir("tsgo-"), pkg.split("/").pop()!);
    binary = run("go", ["build", "-o", out, pkg], { cwd: repoRoot, env: goEnv }).then(() => out);
    built.set(pkg, binary);
  }
  return binary;
}

/** A gateway process started from the real binary. */
export interface Gateway {
  url: string;
  process: ChildProcess;
  /** kill -9, and wait until the process is gone. */
  kill(): Promise<void>;
}

/**
 * Starts the real gateway binary (built from this repository, or the one
 * TOOLGATEWAY_GATEWAY_BIN names) with the YAML configuration text and the
 * listen address (a free port by default) and resolves once it logs the
 * address it listens on.
 */
export async function startGateway(dir: string, config: string, listen = "127.0.0.1:0"): Promise<Gateway> {
  // TOOLGATEWAY_GATEWAY_BIN runs the tests against a gateway built elsewhere.
  const binary = process.env["TOOLGATEWAY_GATEWAY_BIN"] || (await buildGo("./cmd/gateway"));
  const configPath = join(dir, `gateway-${Date.now()}-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(configPath, `listen: ${listen}\n${config}`);
  const child = spawn(binary, ["-config", configPath], { stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<void>((resolveExit) => child.once("exit", () => resolveExit()));
  process.on("exit", () => child.kill("SIGKILL"));
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const url = await new Promise<string>((resolveURL, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error(`gateway did not start in 20s: ${stderr}`)), 20_000);
    lines.on("line", (line) => {
      try {
        const entry = JSON.parse(line) as { msg?: string; addr?: string };
        if (entry.msg === "gateway listening" && entry.addr) {
          clearTimeout(timer);
          resolveURL(`http://${entry.addr}`);
        }
      } catch {
        // not a log line of interest
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}: ${stderr}`));
    });
  });
  return {
    url,
    process: child,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

/** A local HTTP server whose handler the test supplies. */
export async function localServer(
  handler: (req: IncomingMessage, body: string, res: ServerResponse) => void | Promise<void>,
): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (body += chunk));
    req.on("end", () => void handler(req, body, res));
  });
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** A TCP port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

export { resolve };
