// End-to-end tests of the operator console: the real gateway binary
// (go build ./cmd/gateway), a counting HTTP upstream, and Debian's chromium
// driven by playwright-core. They sign in; see an agent's call that needs
// approval appear without a reload, approve it (a second tab is told who
// approved first) and see the call run once at the upstream, deny another
// that never runs; make a call go UNKNOWN, resolve it and see the agent's
// retry replay it; check the XSS and CSRF cases; and take the screenshots
// docs/console.md shows.
//
//   cd gateway/console/e2e && npm ci && npm test
//
// CHROMIUM overrides the browser (default /usr/bin/chromium).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const shots = join(repo, "docs/console");
const adminToken = "e2e-admin-token-0123456789";
const xss = `<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">`;

let tmp, gateway, gatewayLogs = "", base, upstream, browser;
const upstreamRuns = new Map(); // Idempotency-Key → executions

function startUpstream() {
  return new Promise((ok) => {
    const srv = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        // Counted by the call's own ref: the upstream sees a key derived
        // from the agent's, not the agent's key itself.
        const args = JSON.parse(body);
        const key = args.ref;
        upstreamRuns.set(key, (upstreamRuns.get(key) ?? 0) + 1);
        // A slow call outlives the tool's timeout: the gateway cannot know
        // whether it acted, and a lease_expiry: unknown tool goes UNKNOWN.
        // Only its first execution is slow, so a call the console removed
        // as not executed runs normally the next time.
        const delay = args.slow && upstreamRuns.get(key) === 1 ? 3000 : 0;
        setTimeout(() => {
          res.writeHead(201, { "Content-Type": "application/json" });
          res.end(JSON.stringify({ paid: args.amount }));
        }, delay);
      });
    });
    srv.listen(0, "127.0.0.1", () => ok(srv));
  });
}

function startGateway(bin, config) {
  return new Promise((ok, fail) => {
    const p = spawn(bin, ["-config", config], { stdio: ["ignore", "pipe", "pipe"] });
    const timer = setTimeout(() => fail(new Error("gateway did not start:\n" + gatewayLogs)), 20000);
    const onData = (chunk) => {
      gatewayLogs += chunk;
      for (const line of String(chunk).split("\n")) {
        if (!line.includes('"gateway listening"')) continue;
        clearTimeout(timer);
        ok({ proc: p, addr: JSON.parse(line).addr });
      }
    };
    p.stdout.on("data", onData);
    p.stderr.on("data", onData);
    p.on("exit", (code) => fail(new Error(`gateway exited ${code}:\n${gatewayLogs}`)));
  });
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), "console-e2e-"));
  mkdirSync(shots, { recursive: true });
  const bin = join(tmp, "gateway");
  execFileSync("go", ["build", "-o", bin, "./cmd/gateway"], { cwd: repo, stdio: "inherit" });
  upstream = await startUpstream();
  const config = join(tmp, "gateway.yaml");
  writeFileSync(config, `
listen: 127.0.0.1:0
log_level: info
store:
  path: ${join(tmp, "gateway.db")}
idempotency:
  key_mode: opaque
admin:
  token_sha256: ${createHash("sha256").update(adminToken).digest("hex")}
tools:
  - name: pay
    lease_expiry: unknown
    timeout: 500ms
    http:
      url: http://127.0.0.1:${upstream.address().port}/pay
  - name: refund
    http:
      url: http://127.0.0.1:${upstream.address().port}/refund
    decide:
      - when: "args.amount <= 1000"
        decision: allow
      - when: "args.amount <= 10000"
        decision: approve
        reason: "refunds above 1 000 need finance <b>now</b>"
      - decision: deny
        reason: "refunds above 10 000 are not an agent's call"
`);
  gateway = await startGateway(bin, config);
  base = `http://${gateway.addr}`;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
});

after(async () => {
  if (process.env.E2E_GATEWAY_LOG) writeFileSync(process.env.E2E_GATEWAY_LOG, gatewayLogs);
  await browser?.close();
  gateway?.proc.kill("SIGTERM");
  upstream?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// callTool is the agent: one REST call with an opaque key.
let nextStep = 0;
const steps = new Map(); // key → its step: each call its own agent step
async function callTool(key, args, tool = "pay") {
  if (!steps.has(key)) steps.set(key, String(nextStep++));
  const res = await fetch(`${base}/api/tools/v1/${tool}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Idempotency-Key": key, "Agent-Session-Id": "run-7", "Agent-Step-Index": steps.get(key) },
    body: JSON.stringify(args),
  });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

async function newPage(viewport = { width: 1280, height: 800 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.on("dialog", () => assert.fail("a dialog opened: script from data ran"));
  return page;
}

// signIn uses the keyboard only: the form must be reachable without a mouse.
async function signIn(page, token = adminToken, name = "olga") {
  await page.goto(`${base}/console/`);
  await page.getByLabel("Your name").focus();
  await page.keyboard.type(name);
  await page.keyboard.press("Tab");
  await page.keyboard.type(token);
  await page.keyboard.press("Enter");
  if (token === adminToken) await page.waitForURL((u) => !u.pathname.endsWith("/signin"));
  else await page.getByRole("alert").waitFor();
}

test("a wrong token stays on sign-in with a message", async () => {
  const page = await newPage();
  await signIn(page, "not-the-token");
  assert.match(new URL(page.url()).pathname, /\/console\/signin$/);
  assert.match(await page.getByRole("alert").innerText(), /not the admin token/);
  assert.equal(await page.getByLabel("Admin token").inputValue(), "", "the token is not echoed back");
  await page.screenshot({ path: join(shots, "signin.png") });
  await page.context().close();
});

test("an UNKNOWN call is resolved in the console and the agent's retry replays it", async () => {
  const key = "e2e-unknown-1";
  const args = { ref: key, amount: 1200, memo: xss, slow: true };
  const first = await callTool(key, args);
  assert.equal(first.status, 504, first.body);
  assert.match((await callTool(key, args)).body, /outcome_unknown/);

  const page = await newPage();
  await signIn(page);
  assert.match(await page.locator("header").innerText(), /Signed in as olga/);
  await page.getByRole("link", { name: "Uncertain calls" }).click();
  const row = page.locator("tr", { hasText: `run-7 / ${steps.get(key)}` });
  await row.first().waitFor();
  await page.screenshot({ path: join(shots, "uncertain.png"), fullPage: true });
  await row.first().getByRole("link").click();

  // The arguments are text: the script is shown, not run.
  const shown = await page.locator("pre.args").innerText();
  assert.ok(shown.includes("<script>window.__xss = 1</script><img src=x onerror="), shown);
  assert.equal(await page.evaluate(() => window.__xss), undefined);

  // A body that is not JSON for application/json is shown inline; nothing changes.
  await page.getByLabel("Status").fill("201");
  await page.getByLabel("Content type", { exact: true }).fill("application/json");
  await page.getByLabel(/^Body/).fill('{"paid": 12');
  await page.getByRole("button", { name: "Resolve" }).click();
  assert.match(await page.getByRole("alert").innerText(), /not valid JSON.*nothing changed/);
  assert.equal(await page.getByLabel(/^Body/).inputValue(), '{"paid": 12', "the form keeps what was typed");
  await page.screenshot({ path: join(shots, "resolve-error.png"), fullPage: true });
  assert.match((await callTool(key, args)).body, /outcome_unknown/, "still UNKNOWN after a bad resolution");

  await page.getByLabel(/^Body/).fill('{"paid": 1200}');
  await page.getByRole("button", { name: "Resolve" }).click();
  // The record's page shows the outcome: no error, no resolve form again.
  await page.waitForURL(/\/console\/records\/pay\/[0-9a-f]{64}\?done=committed$/);
  assert.match(await page.locator("#resolved").innerText(), /Resolved as committed/);
  assert.equal(await page.locator("#record-state").innerText(), "COMPLETED");
  assert.match(await page.locator("main").innerText(), /"paid": 1200/);
  assert.equal(await page.getByRole("button", { name: "Resolve" }).count(), 0, "the resolve form is gone");
  assert.equal(await page.locator(".error").count(), 0, "no error on a resolved record");
  const retry = await callTool(key, args);
  assert.equal(retry.status, 201);
  assert.equal(retry.body, '{"paid": 1200}');
  assert.equal(retry.headers.get("idempotent-replayed"), "true");
  assert.equal(upstreamRuns.get(key), 1, "the upstream ran the call once");
  await page.context().close();
});

test("a POST without the CSRF token is refused and changes nothing", async () => {
  const key = "e2e-unknown-csrf";
  assert.equal((await callTool(key, { ref: key, amount: 5, slow: true })).status, 504);
  const page = await newPage();
  await signIn(page);
  await page.goto(`${base}/console/uncertain`);
  const link = page.locator("tr", { hasText: `run-7 / ${steps.get(key)}` }).getByRole("link");
  const execID = await link.innerText();
  const status = await page.evaluate(async (path) => {
    const res = await fetch(path + "/resolve", { method: "POST", body: new URLSearchParams({ outcome: "not_executed" }) });
    return res.status;
  }, `/console/uncertain/${execID}`);
  assert.equal(status, 403);
  assert.match((await callTool(key, { ref: key, amount: 5, slow: true })).body, /outcome_unknown/, "the record is unchanged");
  // Resolve it as not executed through the form: the retry runs the tool.
  await link.click();
  await page.getByLabel(/It did not run/).check();
  await page.getByRole("button", { name: "Resolve" }).click();
  await page.waitForURL(/\/console\/uncertain\?done=not_executed$/);
  assert.equal((await callTool(key, { ref: key, amount: 5, slow: true })).status, 201);
  assert.equal(upstreamRuns.get(key), 2, "removed as not executed, the retry ran the tool");
  await page.context().close();
});

test("tools, receipts and the phone layout", async () => {
  const page = await newPage();
  await signIn(page);
  await page.getByRole("link", { name: "Tools" }).click();
  const card = page.locator('section[aria-labelledby="tool-pay"]');
  assert.match(await card.innerText(), /lease_expiry: unknown/);
  assert.match(await card.innerText(), /Replays\s+1/);
  await page.getByRole("link", { name: "Receipts" }).click();
  // The receipts of the calls above: the chain verifies, and the UNKNOWN
  // call's receipts are in the timeline.
  const receipts = await page.locator("main").innerText();
  assert.match(receipts, /anonymous\s+\d+\s+intact/);
  assert.match(receipts, /made_unknown\s+pay/);
  assert.match(receipts, /executed\s+pay/);
  // The operator's own actions in the console: resolved and (not executed) deleted, by the signed-in name.
  assert.match(receipts, /resolved\s+pay/);
  assert.match(receipts, /deleted\s+pay/);
  await page.screenshot({ path: join(shots, "receipts.png"), fullPage: true });
  await page.context().close();

  const phone = await newPage({ width: 390, height: 844 });
  await signIn(phone);
  const width = await phone.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `the page is ${width}px wide at phone width`);
  await phone.screenshot({ path: join(shots, "approvals-phone.png"), fullPage: true });
  await phone.context().close();
});

test("a pending approval appears without a reload, is approved once, and the call runs once", async () => {
  const call = (key, args) => callTool(key, args, "refund");
  const signInAs = async (name) => {
    const page = await newPage();
    await page.goto(`${base}/console/`);
    await page.getByLabel("Your name").fill(name);
    await page.getByLabel("Admin token").fill(adminToken);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(/\/console\/approvals$/);
    return page;
  };
  const tabA = await signInAs("olga");
  const tabB = await signInAs("bob");
  await tabA.evaluate(() => { window.__sameDocument = true; });

  // 1. The agent's call asks for approval; the open page shows it within
  //    2 s, without a reload.
  const key = "e2e-approve-1";
  const args = { ref: key, amount: 2500, memo: xss };
  const asked = await call(key, args);
  assert.equal(asked.status, 409, asked.body);
  const id = JSON.parse(asked.body).approval_id;
  assert.ok(id, asked.body);
  assert.equal(upstreamRuns.get(key), undefined, "nothing ran while pending");
  const card = tabA.locator(`#approval-${id}`);
  await card.waitFor({ timeout: 2000 });
  assert.equal(await tabA.evaluate(() => window.__sameDocument), true, "the page was not reloaded");
  const text = await card.innerText();
  for (const want of ["refund", "anonymous", "run-7", "decide[1]", "refunds above 1 000 need finance <b>", '"amount": 2500', '"memo": "<script>window.__xss = 1</script>']) {
    assert.ok(text.includes(want), `the approval card lacks ${want}:\n${text}`);
  }
  await tabA.screenshot({ path: join(shots, "approvals.png"), fullPage: true });
  await tabB.locator(`#approval-${id}`).waitFor({ timeout: 2000 });

  // 2. Approve in tab A with a note; tab B's later deny changes nothing.
  await card.getByLabel("Note").fill(`ok by finance ${xss}`);
  await card.getByRole("button", { name: "Approve" }).click();
  // The decision lands on the approval's own page with a confirmation.
  await tabA.waitForURL(new RegExp(`/console/approvals/${id}\\?done=approve$`));
  assert.match(await tabA.locator("#decided").innerText(), /You approved this call\./);
  assert.equal(await tabA.locator("#approval-state").innerText(), "APPROVED");
  // Signed in with the admin token, the decider is token:admin; the typed
  // name is kept beside it as claimed_by (contract section 19).
  assert.equal(await tabA.locator("#decided-by").innerText(), "olga (token:admin)");
  assert.ok((await tabA.locator("main").innerText()).includes("ok by finance <script>"));
  await tabA.goto(`${base}/console/approvals`);
  await tabA.getByText("No pending approvals").waitFor();
  const decided = await tabA.locator("#history").innerText();
  assert.match(decided, new RegExp(`${id}\\s+APPROVED`));
  await tabB.locator(`#approval-${id}`).getByLabel("Note").fill("too much");
  await tabB.locator(`#approval-${id}`).getByRole("button", { name: "Deny" }).click();
  await tabB.getByRole("alert").waitFor();
  assert.match(await tabB.getByRole("alert").innerText(), /^Already approved by olga \(token:admin\) at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ; nothing changed\.$/);
  await tabB.screenshot({ path: join(shots, "already-approved.png") });
  assert.equal(await tabA.evaluate(() => window.__xss), undefined, "no script from data ran");

  // 3. The agent's next call runs once; its retry replays.
  const ran = await call(key, args);
  assert.equal(ran.status, 201, ran.body);
  assert.equal((await call(key, args)).headers.get("idempotent-replayed"), "true");
  assert.equal(upstreamRuns.get(key), 1, "the approved call ran once at the upstream");

  // 4. A denied one never runs.
  const denyKey = "e2e-deny-1";
  const denyArgs = { ref: denyKey, amount: 9000 };
  const denyID = JSON.parse((await call(denyKey, denyArgs)).body).approval_id;
  const denyCard = tabA.locator(`#approval-${denyID}`);
  await denyCard.waitFor({ timeout: 2000 });
  // A deny needs a note: the browser holds the form until one is typed.
  await denyCard.getByRole("button", { name: "Deny" }).click();
  assert.equal(await denyCard.getByLabel("Note").evaluate((t) => t.validity.valueMissing), true, "deny without a note was not held");
  assert.match(tabA.url(), /\/console\/approvals$/);
  await denyCard.getByLabel("Note").fill("not an agent's call");
  await denyCard.getByRole("button", { name: "Deny" }).click();
  await tabA.waitForURL(new RegExp(`/console/approvals/${denyID}\\?done=deny$`));
  assert.match(await tabA.locator("#decided").innerText(), /You denied this call\./);
  assert.equal(await tabA.locator("#decided-by").innerText(), "olga (token:admin)");
  const denied = await call(denyKey, denyArgs);
  assert.equal(denied.status, 403, denied.body);
  assert.match(denied.body, /approval_denied/);
  assert.equal(upstreamRuns.get(denyKey), undefined, "the denied call never reached the upstream");

  // 5. The Tools page counts the decisions and names the rules.
  await tabA.getByRole("link", { name: "Tools" }).click();
  const refund = await tabA.locator('section[aria-labelledby="tool-refund"]').innerText();
  assert.match(refund, /decide: 3 rules, policy [0-9a-f]{12}… \(mode enforce\)/);
  // Once per call: two calls asked for an approval; the use of the
  // approved one, its replay and the denied one's retry are not decided anew.
  assert.match(refund, /approve: 2/);
  assert.match(refund, /Executions\s+1/);
  await tabA.screenshot({ path: join(shots, "tools.png"), fullPage: true });
  await tabA.context().close();
  await tabB.context().close();
});

// A long unbroken name, like a provider's subject in a principal id: the
// layout must wrap or cut it, never widen the page past the phone.
const longName = "oidc:login.microsoftonline.example.com:" + "AAAAAAAAAAAAAAAAAAAAAKx9Zq7yq3pQ".repeat(4);

// assertFits checks the page is no wider than the viewport and Sign out is
// on screen.
async function assertFits(page, what) {
  const { width } = page.viewportSize();
  const scroll = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(scroll <= width, `${what}: the page is ${scroll}px wide at ${width}px`);
  const signOut = page.getByRole("button", { name: "Sign out" });
  assert.ok(await signOut.isVisible(), `${what}: Sign out is not visible`);
  const box = await signOut.boundingBox();
  assert.ok(box && box.x >= 0 && box.x + box.width <= width, `${what}: Sign out is off screen (${JSON.stringify(box)})`);
}

test("deep links open, the history filters, and every page fits 390 and 1280 px with a long name", async () => {
  const call = (key, args) => callTool(key, args, "refund");
  // One pending, one approved and run, one denied.
  const pendingID = JSON.parse((await call("e2e-deep-pending", { ref: "e2e-deep-pending", amount: 3000 })).body).approval_id;
  const approvedKey = "e2e-deep-approved";
  const approvedID = JSON.parse((await call(approvedKey, { ref: approvedKey, amount: 4000 })).body).approval_id;
  const deniedID = JSON.parse((await call("e2e-deep-denied", { ref: "e2e-deep-denied", amount: 5000 })).body).approval_id;

  const page = await newPage();
  await signIn(page, adminToken, longName);

  // The notification's console_url opens the approval's page.
  await page.goto(`${base}/console/approvals/${approvedID}`);
  assert.equal(await page.locator("#approval-id").innerText(), approvedID);
  assert.equal(await page.locator("#approval-state").innerText(), "PENDING");
  await page.getByRole("button", { name: "Approve" }).click();
  await page.waitForURL(/\?done=approve$/);
  assert.match(await page.locator("#decided").innerText(), /You approved this call\. It runs at the agent's next call/);
  assert.equal((await call(approvedKey, { ref: approvedKey, amount: 4000 })).status, 201);
  assert.equal(upstreamRuns.get(approvedKey), 1);
  // Its record's deep link shows the outcome.
  await page.locator("#call-record").click();
  await page.waitForURL(/\/console\/records\/refund\/[0-9a-f]{64}$/);
  assert.equal(await page.locator("#record-state").innerText(), "COMPLETED");
  assert.match(await page.locator("#outcome").innerText(), /201/);
  const recordURL = page.url();

  // Deny without a note: the server refuses it too (a request the browser's
  // check cannot stop), with its message on the page.
  await page.goto(`${base}/console/approvals/${deniedID}`);
  const status = await page.evaluate(async ({ id, csrf }) => {
    const res = await fetch(`/console/approvals/${id}/decide`, { method: "POST", body: new URLSearchParams({ csrf, action: "deny", note: "" }) });
    return [res.status, await res.text()];
  }, { id: deniedID, csrf: await page.locator('#decide input[name="csrf"]').inputValue() });
  assert.equal(status[0], 400);
  assert.match(status[1], /A deny needs a note/);
  await page.getByLabel(/^Note/).fill("no");
  await page.getByRole("button", { name: "Deny" }).click();
  await page.waitForURL(/\?done=deny$/);

  // History: newest first, filtered by state, tool, tenant and session.
  await page.goto(`${base}/console/approvals?state=DENIED`);
  let history = await page.locator("#history").innerText();
  assert.ok(history.includes(deniedID) && !history.includes(approvedID), history);
  await page.goto(`${base}/console/approvals?tool=refund&tenant=anonymous&session=run-7`);
  history = await page.locator("#history").innerText();
  assert.ok(history.includes(deniedID) && history.includes(pendingID), history);
  const rows = await page.locator("#history tbody tr td:first-child").allInnerTexts();
  assert.ok(rows.indexOf(deniedID) >= 0 && rows.indexOf(deniedID) < rows.indexOf(pendingID), `newest first: ${rows}`);
  await page.goto(`${base}/console/approvals?tool=pay`);
  assert.match(await page.locator("main").innerText(), /No approvals match/);
  // Every history row links to its approval's page.
  await page.goto(`${base}/console/approvals`);
  await page.locator("#history").getByRole("link", { name: deniedID }).click();
  assert.equal(await page.locator("#approval-state").innerText(), "DENIED");

  // Receipts: newest first, each linking to its own page.
  await page.goto(`${base}/console/receipts?tenant=anonymous`);
  const seqs = (await page.locator("#receipts tbody tr td:first-child").allInnerTexts()).map(Number);
  assert.ok(seqs.length > 2 && seqs.every((s, i) => i === 0 || s < seqs[i - 1]), `receipts newest first: ${seqs}`);
  await page.locator("#receipts").getByRole("link", { name: String(seqs[0]), exact: true }).click();
  await page.waitForURL(new RegExp(`/console/receipts/anonymous/${seqs[0]}$`));
  assert.match(await page.locator("#receipt").innerText(), new RegExp(`Seq\\s+${seqs[0]}`));
  const receiptURL = page.url();
  await page.context().close();

  // Every page, at phone and desktop width, with the long name.
  const pages = {
    approvals: "/console/approvals",
    approval: `/console/approvals/${pendingID}`,
    "approval-decided": `/console/approvals/${deniedID}`,
    record: new URL(recordURL).pathname,
    uncertain: "/console/uncertain",
    receipts: "/console/receipts?tenant=anonymous",
    receipt: new URL(receiptURL).pathname,
    tools: "/console/tools",
  };
  for (const width of [390, 1280]) {
    const p = await newPage({ width, height: width === 390 ? 844 : 800 });
    await signIn(p, adminToken, longName);
    for (const [name, path] of Object.entries(pages)) {
      await p.goto(base + path);
      await assertFits(p, `${name} at ${width}px`);
      await p.screenshot({ path: join(shots, `${name}-${width}.png`), fullPage: true });
    }
    await p.context().close();
  }
});
