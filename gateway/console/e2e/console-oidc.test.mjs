// The console's sign-in through the identity provider in a real Chromium:
// the real gateway binary with console.oidc on a real OpenID provider
// (internal/cmd/testop: zitadel/oidc's example OP). The browser follows
// "Sign in with your identity provider", fills in the provider's login
// page, and lands signed in on the page it asked for, under the person's
// name and subject — which also proves the browser sends the SameSite=Lax
// attempt cookie on the provider's redirect back and the Strict session
// cookie after the callback's page moves on.
//
//   cd gateway/console/e2e && npm ci && npm test
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
let tmp, procs = [], browser, base, provider;

function freePort() {
  return new Promise((ok) => {
    const srv = createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

function firstLine(proc, what) {
  return new Promise((ok, fail) => {
    let logs = "";
    const timer = setTimeout(() => fail(new Error(`${what} did not start:\n${logs}`)), 20000);
    proc.stderr.on("data", (c) => (logs += c));
    createInterface({ input: proc.stdout }).on("line", (line) => {
      logs += line + "\n";
      if (what === "testop" || line.includes('"gateway listening"')) {
        clearTimeout(timer);
        ok(JSON.parse(line));
      }
    });
    proc.on("exit", (code) => fail(new Error(`${what} exited ${code}:\n${logs}`)));
  });
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), "console-oidc-e2e-"));
  for (const [out, pkg] of [["gateway", "./cmd/gateway"], ["testop", "./internal/cmd/testop"]]) {
    execFileSync("go", ["build", "-o", join(tmp, out), pkg], { cwd: repo, stdio: "inherit" });
  }
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const callback = `${base}/console/oidc/callback`;
  const op = spawn(join(tmp, "testop"), ["-audience", `${base}/mcp`, "-client-id", "console", "-client-secret", "console-secret", "-redirect-url", callback], { stdio: ["ignore", "pipe", "pipe"] });
  procs.push(op);
  provider = await firstLine(op, "testop");
  const config = join(tmp, "gateway.yaml");
  writeFileSync(config, `
listen: 127.0.0.1:${port}
store:
  path: ${join(tmp, "gateway.db")}
admin:
  token_sha256: ${createHash("sha256").update("e2e-admin-token").digest("hex")}
auth:
  oidc:
    issuer: ${provider.issuer}
    audience: ${base}/mcp
    tenant_claim: org_id
console:
  oidc:
    client_id: console
    client_secret_env: CONSOLE_SECRET
    redirect_url: ${callback}
`);
  const gw = spawn(join(tmp, "gateway"), ["-config", config], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, CONSOLE_SECRET: "console-secret" } });
  procs.push(gw);
  await firstLine(gw, "gateway");
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
});

after(async () => {
  await browser?.close();
  for (const p of procs) p.kill("SIGTERM");
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test("sign in through the identity provider's login page", async () => {
  const page = await browser.newPage();
  await page.goto(`${base}/console/tools`);
  assert.equal(new URL(page.url()).pathname, "/console/signin");
  // With console.oidc the admin-token form is off (console.token_sign_in).
  assert.equal(await page.getByLabel("Admin token").count(), 0, "the admin-token form is offered beside the provider");
  await page.getByRole("link", { name: "Sign in with your identity provider" }).click();
  assert.ok(page.url().startsWith(provider.issuer), `not at the provider: ${page.url()}`);
  await page.locator("#username").fill(provider.username);
  await page.locator("#password").fill(provider.password);
  await page.locator("button[type=submit]").click();
  await page.waitForURL(`${base}/console/tools`);
  assert.match(await page.locator("header").innerText(), /Signed in as Test User \(id1\)/);
  await page.close();
});
