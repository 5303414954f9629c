// The console with sign-in through the identity provider, in a real
// Chromium: the real gateway binary with console.oidc on a real OpenID
// provider (internal/cmd/testop: zitadel/oidc's example OP, whose people
// carry a `groups` claim), and a counting HTTP upstream.
//
// 1. The browser follows "Sign in with your identity provider", fills in
//    the provider's login page, and lands signed in on the page it asked
//    for, under the person's name and subject — which also proves the
//    browser sends the SameSite=Lax attempt cookie on the provider's
//    redirect back and the Strict session cookie after the callback's
//    page moves on. The admin-token form is absent, and a POST of it
//    signs nobody in.
// 2. Verified approvers: Carol (support) asks, through an agent holding
//    her access token, for a refund whose rule wants two of finance
//    (`"finance" in claims.groups`, quorum 2). Her own approve is refused
//    (self_approval), and hers of Ada's call too (not_an_approver); Ada's
//    approve alone runs nothing (1 of 2); Bob's makes it run, once at the
//    upstream; the receipts name oidc:<issuer host>:<sub>.
//
// Screenshots: docs/console/<page>-1280.png and -390.png.
//
//   cd gateway/console/e2e && npm ci && npm test
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { createServer as createHTTPServer } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const shots = join(repo, "docs/console");
let tmp, procs = [], browser, base, provider, upstream;
const upstreamRuns = new Map(); // the call's ref → executions at the upstream

function freePort() {
  return new Promise((ok) => {
    const srv = createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

// startUpstream is the refund tool: it counts what it receives, by the
// call's own ref.
function startUpstream() {
  return new Promise((ok) => {
    const srv = createHTTPServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const args = JSON.parse(body);
        upstreamRuns.set(args.ref, (upstreamRuns.get(args.ref) ?? 0) + 1);
        res.writeHead(201, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ refunded: args.amount }));
      });
    });
    srv.listen(0, "127.0.0.1", () => ok(srv));
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
  mkdirSync(shots, { recursive: true });
  for (const [out, pkg] of [["gateway", "./cmd/gateway"], ["testop", "./internal/cmd/testop"]]) {
    execFileSync("go", ["build", "-o", join(tmp, out), pkg], { cwd: repo, stdio: "inherit" });
  }
  upstream = await startUpstream();
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
idempotency:
  key_mode: opaque
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
tools:
  - name: refund
    http:
      url: http://127.0.0.1:${upstream.address().port}/refund
    decide:
      - when: "args.amount > 1000"
        decision: approve
        approvers: '"finance" in claims.groups'
        quorum: 2
        reason: "refunds above 1 000 need two people from finance"
      - decision: allow
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
  upstream?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// signInThroughProvider follows the sign-in page's provider link from a
// signed-out visit to next, fills in the provider's login page and waits
// to land on next.
async function signInThroughProvider(page, next, username, password) {
  await page.goto(base + next);
  assert.equal(new URL(page.url()).pathname, "/console/signin");
  await page.getByRole("link", { name: "Sign in with your identity provider" }).click();
  assert.ok(page.url().startsWith(provider.issuer), `not at the provider: ${page.url()}`);
  await page.locator("#username").fill(username);
  await page.locator("#password").fill(password);
  await page.locator("button[type=submit]").click();
  await page.waitForURL(base + next);
}

test("sign in through the identity provider's login page", async () => {
  const page = await browser.newPage();
  await page.goto(`${base}/console/tools`);
  assert.equal(new URL(page.url()).pathname, "/console/signin");
  // With console.oidc the admin-token form is off (console.token_sign_in).
  assert.equal(await page.getByLabel("Admin token").count(), 0, "the admin-token form is offered beside the provider");
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
    const scroll = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(scroll <= width, `sign-in at ${width}px is ${scroll}px wide`);
    await page.screenshot({ path: join(shots, `signin-oidc-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await signInThroughProvider(page, "/console/tools", provider.username, provider.password);
  assert.match(await page.locator("header").innerText(), /Signed in as Test User \(id1\)/);
  await page.close();
});

test("a POST of the admin-token form signs nobody in when provider sign-in is on", async () => {
  const res = await fetch(`${base}/console/signin`, { method: "POST", redirect: "manual", body: new URLSearchParams({ name: "mallory", token: "e2e-admin-token" }) });
  const text = await res.text();
  assert.equal(res.status, 403, text);
  // Refused for being the token form, before its CSRF check even looks.
  assert.match(text, /sign-in with the admin token is off/);
  assert.ok(!(res.headers.get("set-cookie") ?? "").includes("tg_console="), "a session cookie was set");
});

// personToken is the access token an agent holds for a person (what an
// MCP host gets when the person signs in there): from the provider's
// token endpoint, for the person's subject, in tenant acme.
async function personToken(person) {
  const res = await fetch(new URL("oauth/token", provider.issuer), {
    method: "POST",
    headers: { Authorization: "Basic " + Buffer.from(`${provider.token_client_id}:${provider.token_client_secret}`).toString("base64") },
    body: new URLSearchParams({ grant_type: "client_credentials", scope: `person:${person.subject} org:acme name:${person.username}` }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()).access_token;
}

// refund is the agent's call, with the person's token.
async function refund(token, ref, step, amount) {
  const res = await fetch(`${base}/api/tools/v1/refund`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", "Idempotency-Key": `e2e-${ref}`, "Agent-Session-Id": "run-q", "Agent-Step-Index": String(step) },
    body: JSON.stringify({ ref, amount }),
  });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

// shoot checks the page fits width (no wider than the window, Sign out on
// screen) and saves docs/console/<name>-<width>.png, at both widths.
async function shoot(page, name) {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
    const scroll = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(scroll <= width, `${name} at ${width}px is ${scroll}px wide`);
    const box = await page.getByRole("button", { name: "Sign out" }).boundingBox();
    assert.ok(box && box.x >= 0 && box.x + box.width <= width, `${name} at ${width}px: Sign out is off screen`);
    await page.screenshot({ path: join(shots, `${name}-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

test("verified approvers: four eyes, not an approver, quorum 2, receipts name the principals", async () => {
  const person = (sub) => provider.people.find((p) => p.subject === sub);
  const [ada, bob, carol] = ["ada", "bob", "carol"].map(person);
  assert.deepEqual([ada.groups, carol.groups], [["finance"], ["support"]], "the provider's people and their groups");
  const host = new URL(provider.issuer).host;
  const id = (p) => `oidc:${host}:${p.subject}`;

  // Carol asks, through her agent: the rule holds the call for two of finance.
  const carolToken = await personToken(carol);
  const asked = await refund(carolToken, "carol-1", 1, 2500);
  assert.equal(asked.status, 409, asked.body);
  const approvalID = JSON.parse(asked.body).approval_id;
  assert.ok(approvalID, asked.body);
  // Ada asks too (another call), for the non-approver's try below.
  const adaAsked = await refund(await personToken(ada), "ada-1", 2, 1500);
  assert.equal(adaAsked.status, 409, adaAsked.body);
  const adaApprovalID = JSON.parse(adaAsked.body).approval_id;

  // Each person in a browser of their own, signed in at the provider.
  const signedIn = async (p, next) => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await signInThroughProvider(page, next, p.username, p.password);
    assert.match(await page.locator("header").innerText(), new RegExp(`Signed in as ${p.name} \\(${p.subject}\\)`));
    return page;
  };
  const approval = `/console/approvals/${approvalID}`;

  // 1. Four eyes: Carol cannot approve her own call.
  const carolPage = await signedIn(carol, approval);
  assert.equal(await carolPage.locator("#requester").innerText(), `host-user:${host}:carol`);
  assert.equal(await carolPage.locator("#approval-id").innerText(), approvalID);
  assert.equal(await carolPage.locator(`#rule-when-${approvalID}`).innerText(), "when: args.amount > 1000");
  assert.equal(await carolPage.locator(`#rule-approvers-${approvalID}`).innerText(), 'approvers: "finance" in claims.groups');
  assert.match(await carolPage.locator("#quorum").innerText(), /^0 of 2 approvals$/);
  await carolPage.getByRole("button", { name: "Approve" }).click();
  await carolPage.locator("#decide-error").waitFor();
  assert.match(await carolPage.locator("#decide-error").innerText(), /^The requester of a call cannot decide its approval; another approver must\. Nothing changed\.$/);
  assert.equal(await carolPage.locator("#approval-state").innerText(), "PENDING");
  await shoot(carolPage, "self-approval");

  // 2. Not an approver: Carol (support) cannot approve Ada's call either.
  await carolPage.goto(`${base}/console/approvals/${adaApprovalID}`);
  await carolPage.getByRole("button", { name: "Approve" }).click();
  await carolPage.locator("#decide-error").waitFor();
  assert.match(await carolPage.locator("#decide-error").innerText(), /^You are not an approver of this call \(its rule's approvers decide it\)\. Nothing changed\.$/);
  assert.equal(await carolPage.locator("#approval-state").innerText(), "PENDING");
  await shoot(carolPage, "not-an-approver");
  assert.equal((await refund(await personToken(ada), "ada-1", 2, 1500)).status, 409, "Ada's call still waits");

  // 3. Quorum 2: Ada's approve alone runs nothing.
  const adaPage = await signedIn(ada, approval);
  await adaPage.getByLabel(/^Note/).fill("customer 4411, checked");
  await adaPage.getByRole("button", { name: "Approve" }).click();
  await adaPage.waitForURL(new RegExp(`${approval}\\?done=approve$`));
  assert.match(await adaPage.locator("#decided").innerText(), /You approved this call\./);
  assert.equal(await adaPage.locator("#approval-state").innerText(), "PENDING");
  assert.match(await adaPage.locator("#quorum").innerText(), /^1 of 2 approvals$/);
  assert.equal(await adaPage.locator("#approved-by").innerText(), id(ada));
  await shoot(adaPage, "quorum");
  const waiting = await refund(carolToken, "carol-1", 1, 2500);
  assert.equal(waiting.status, 409, waiting.body);
  assert.match(waiting.body, /approval_pending/);
  assert.equal(upstreamRuns.get("carol-1"), undefined, "one of two approvals ran the call");

  // 4. Bob's approve completes the quorum: the call runs once.
  const bobPage = await signedIn(bob, approval);
  await bobPage.getByRole("button", { name: "Approve" }).click();
  await bobPage.waitForURL(new RegExp(`${approval}\\?done=approve$`));
  assert.equal(await bobPage.locator("#approval-state").innerText(), "APPROVED");
  assert.equal(await bobPage.locator("#approved-by").innerText(), `${id(ada)}, ${id(bob)}`);
  assert.equal(await bobPage.locator("#decided-by").innerText(), id(bob));
  await shoot(bobPage, "approval-quorum-met");
  const ran = await refund(carolToken, "carol-1", 1, 2500);
  assert.equal(ran.status, 201, ran.body);
  const again = await refund(carolToken, "carol-1", 1, 2500);
  assert.equal(again.headers.get("idempotent-replayed"), "true");
  assert.equal(upstreamRuns.get("carol-1"), 1, "the approved call ran once at the upstream");
  assert.equal(upstreamRuns.get("ada-1"), undefined, "the call the non-approver tried to approve never ran");

  // 5. The receipts name the verified principals, never a typed name.
  await bobPage.goto(`${base}/console/receipts?tenant=acme&event=approval_granted`);
  const rows = await bobPage.locator("#receipts tbody tr").allInnerTexts();
  const granted = rows.filter((r) => r.includes("run-q / 1"));
  assert.ok(granted.length >= 1, `no approval_granted receipt of Carol's call:\n${rows.join("\n")}`);
  assert.ok(granted[0].includes(id(bob)), `the newest approval_granted receipt does not name Bob: ${granted[0]}`);
  await bobPage.locator("#receipts tbody tr", { hasText: "run-q / 1" }).first().getByRole("link").first().click();
  await bobPage.waitForURL(/\/console\/receipts\/acme\/\d+$/);
  assert.equal(await bobPage.locator("#receipt-by").innerText(), id(bob));
  assert.equal(await bobPage.locator("#receipt-requester").innerText(), `host-user:${host}:carol`);
  await shoot(bobPage, "receipt-oidc");
  for (const p of [carolPage, adaPage, bobPage]) await p.context().close();
});
