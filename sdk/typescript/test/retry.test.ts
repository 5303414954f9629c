// Retries against a local HTTP server: what is retried (network errors,
// 409 request_in_progress after Retry-After, 502, 503, 504) and with which
// request, what is not (every other status), the default bound against a
// port nobody listens on, and AbortSignal.
import assert from "node:assert/strict";
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { test } from "node:test";

import { Client, Defaults, GatewayError, NetworkError, deriveKey } from "../src/index.js";
import { parseRetryAfter } from "../src/client.js";
import { closedPort, localServer } from "./helpers.js";

interface Seen {
  at: number;
  headers: IncomingHttpHeaders;
  body: string;
  url: string;
}

/** A server that answers attempt n with answers[n] (the last one repeats) and records every request. */
async function scripted(answers: Array<(res: ServerResponse) => void>) {
  const seen: Seen[] = [];
  const server = await localServer((req, body, res) => {
    seen.push({ at: Date.now(), headers: req.headers, body, url: req.url ?? "" });
    answers[Math.min(seen.length - 1, answers.length - 1)]!(res);
  });
  return { ...server, seen };
}

function problem(status: number, code: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  return (res: ServerResponse) => {
    res.writeHead(status, { "Content-Type": "application/problem+json", "X-Request-Id": "req-1", ...headers });
    res.end(JSON.stringify({ type: `urn:toolgateway:problem:${code}`, title: "t", status, detail: `detail of ${code}`, code, retryable: status >= 500 || code === "request_in_progress", ...extra }));
  };
}

function ok(body: string, status = 201, replayed = false) {
  return (res: ServerResponse) => {
    res.writeHead(status, { "Content-Type": "application/json", "Idempotent-Replayed": String(replayed), "Tool-Execution-Id": "01JEXEC", "X-Request-Id": "req-2" });
    res.end(body);
  };
}

const fast = { initialBackoff: 1, maxBackoff: 5 };

test("503 then 502 then 504 then success: four attempts with the same key, headers and body", async () => {
  const server = await scripted([problem(503, "store_unavailable"), (res) => res.writeHead(502, { "Content-Type": "text/html" }).end("<h1>bad gateway</h1>"), problem(504, "tool_timeout"), ok('{"id":7}')]);
  try {
    const client = new Client(server.url + "/", { token: "secret-token", ...fast });
    const result = await client.session("run-1").call(3, "provision", { name: "db", size: 2 });
    assert.equal(result.status, 201);
    assert.deepEqual(result.json(), { id: 7 });
    assert.equal(result.body, '{"id":7}');
    assert.equal(result.attempts, 4);
    assert.equal(result.executionId, "01JEXEC");
    assert.equal(result.replayed, false);
    const key = deriveKey("run-1", 3, "provision", { size: 2, name: "db" });
    assert.equal(result.key, key);
    assert.equal(server.seen.length, 4);
    for (const request of server.seen) {
      assert.equal(request.url, "/api/tools/v1/provision");
      assert.equal(request.body, '{"name":"db","size":2}');
      assert.equal(request.headers["idempotency-key"], key);
      assert.equal(request.headers["agent-session-id"], "run-1");
      assert.equal(request.headers["agent-step-index"], "3");
      assert.equal(request.headers["authorization"], "Bearer secret-token");
      assert.equal(request.headers["prefer"], `wait=${Defaults.preferWait}`);
      assert.equal(request.headers["content-type"], "application/json");
    }
  } finally {
    await server.close();
  }
});

test("409 request_in_progress: Retry-After is honoured, then the replay is returned", async () => {
  const server = await scripted([problem(409, "request_in_progress", {}, { "Retry-After": "1" }), ok('{"id":1}', 201, true)]);
  try {
    const result = await new Client(server.url, fast).session("run-2").call(0, "provision", {});
    assert.equal(result.attempts, 2);
    assert.equal(result.replayed, true);
    const gap = server.seen[1]!.at - server.seen[0]!.at;
    // The backoff alone would be ≤ 5 ms: a gap of ~1 s is the Retry-After.
    assert.ok(gap >= 950, `second attempt ${gap} ms after the first`);
    assert.equal(server.seen[0]!.headers["idempotency-key"], server.seen[1]!.headers["idempotency-key"]);
  } finally {
    await server.close();
  }
});

test("4xx problems, 500 and outcome_unknown are returned at once, without retry", async () => {
  const cases: Array<[number, string, Record<string, unknown>]> = [
    [422, "step_conflict", { tool: "provision", execution_id: "01JEARLIER" }],
    [422, "idempotency_key_mismatch", { expected_key: "ab".repeat(32), canonical_arguments: '{"a":1}' }],
    [422, "idempotency_key_reused", {}],
    [409, "outcome_unknown", {}],
    [400, "invalid_arguments", { errors: [{ location: "/size", message: "must be ≥ 1" }] }],
    [401, "unauthorized", {}],
    [404, "tool_not_found", {}],
    [429, "rate_limited", {}],
    [500, "tool_failed", {}],
  ];
  for (const [status, code, extra] of cases) {
    const server = await scripted([problem(status, code, extra, status === 429 ? { "Retry-After": "2" } : {})]);
    try {
      const call = new Client(server.url, fast).session("run-3").call(1, "provision", { a: 1 });
      const err = await call.then(
        () => assert.fail(`${code}: resolved`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof GatewayError, `${code}: ${String(err)}`);
      assert.equal(err.status, status);
      assert.equal(err.code, code);
      assert.equal(err.detail, `detail of ${code}`);
      assert.equal(err.requestId, "req-1");
      assert.equal(err.problem?.["code"], code);
      assert.equal(server.seen.length, 1, `${code} was retried`);
      if (code === "step_conflict") {
        assert.equal(err.tool, "provision");
        assert.equal(err.executionId, "01JEARLIER");
      }
      if (code === "idempotency_key_mismatch") {
        assert.equal(err.expectedKey, "ab".repeat(32));
        assert.equal(err.canonicalArguments, '{"a":1}');
      }
      if (code === "invalid_arguments") assert.deepEqual(err.errors, [{ location: "/size", message: "must be ≥ 1" }]);
      if (code === "rate_limited") assert.equal(err.retryAfter, 2);
      assert.equal(err.retryable, status >= 500);
    } finally {
      await server.close();
    }
  }
});

test("a tool's own 4xx (not a problem document) is a Result", async () => {
  const server = await scripted([ok('{"error":"no such customer"}', 404)]);
  try {
    const result = await new Client(server.url, fast).session("run-4").call(2, "lookup-thing", { id: "c1" });
    assert.equal(result.status, 404);
    assert.deepEqual(result.json(), { error: "no such customer" });
    assert.equal(server.seen.length, 1);
  } finally {
    await server.close();
  }
});

test("the last retryable answer is thrown when maxAttempts is reached", async () => {
  const server = await scripted([problem(503, "store_unavailable", {}, { "Retry-After": "1" })]);
  try {
    const client = new Client(server.url, { ...fast, maxAttempts: 3, maxRetryTime: 60_000 });
    await assert.rejects(client.session("run-5").call(0, "provision", {}), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.status, 503);
      assert.equal(err.code, "store_unavailable");
      assert.equal(err.retryable, true);
      return true;
    });
    assert.equal(server.seen.length, 3);
  } finally {
    await server.close();
  }
});

test("a Retry-After that outlasts maxRetryTime ends the call with the 409", async () => {
  const server = await scripted([problem(409, "request_in_progress", {}, { "Retry-After": "30" })]);
  try {
    const client = new Client(server.url, { ...fast, maxRetryTime: 2_000 });
    await assert.rejects(client.session("run-6").call(0, "provision", {}), (err: unknown) => err instanceof GatewayError && err.code === "request_in_progress" && err.retryAfter === 30);
    assert.equal(server.seen.length, 1);
  } finally {
    await server.close();
  }
});

test("a connection cut in the middle of the answer is retried", async () => {
  const server = await scripted([
    (res) => {
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": "100" });
      res.write('{"partial":');
      setTimeout(() => res.socket?.destroy(), 20);
    },
    ok('{"whole":true}', 200, true),
  ]);
  try {
    const result = await new Client(server.url, fast).session("run-7").call(9, "provision", { x: "y" });
    assert.equal(result.attempts, 2);
    assert.deepEqual(result.json(), { whole: true });
  } finally {
    await server.close();
  }
});

test("attemptTimeout aborts a hung attempt and retries it", async () => {
  const server = await scripted([() => undefined /* never answers */, ok('{"late":false}')]);
  try {
    const result = await new Client(server.url, { ...fast, attemptTimeout: 300 }).session("run-8").call(1, "provision", {});
    assert.equal(result.attempts, 2);
    assert.equal(server.seen.length, 2);
  } finally {
    await server.close();
  }
});

test("a gateway that is down: the default bound ends the call with a NetworkError", async () => {
  const port = await closedPort();
  let attempts = 0;
  const counting: typeof fetch = (input, init) => {
    attempts++;
    return fetch(input, init);
  };
  // The defaults: no option but the counting fetch.
  const call = new Client(`http://127.0.0.1:${port}`, { fetch: counting }).session("run-9").call(0, "provision", {});
  await assert.rejects(call, (err: unknown) => {
    assert.ok(err instanceof NetworkError, String(err));
    assert.match(err.message, /ECONNREFUSED/);
    assert.equal(err.attempts, attempts);
    return true;
  });
  assert.ok(attempts >= 2 && attempts <= Defaults.maxAttempts, `${attempts} attempts`);
});

test("maxAttempts against a closed port: exactly that many attempts", async () => {
  const port = await closedPort();
  let attempts = 0;
  const counting: typeof fetch = (input, init) => {
    attempts++;
    return fetch(input, init);
  };
  await assert.rejects(new Client(`http://127.0.0.1:${port}`, { ...fast, maxAttempts: 4, fetch: counting }).session("s").call(0, "provision", {}), NetworkError);
  assert.equal(attempts, 4);
});

test("AbortSignal: aborting during a Retry-After wait ends the call with the signal's reason", async () => {
  const server = await scripted([problem(409, "request_in_progress", {}, { "Retry-After": "20" })]);
  try {
    const controller = new AbortController();
    const reason = new Error("agent shutting down");
    setTimeout(() => controller.abort(reason), 200);
    await assert.rejects(
      new Client(server.url, fast).session("run-10").call(0, "provision", {}, { signal: controller.signal }),
      (err: unknown) => err === reason,
    );
    assert.equal(server.seen.length, 1);
    // An already aborted signal sends nothing.
    await assert.rejects(new Client(server.url).session("run-10").call(0, "provision", {}, { signal: AbortSignal.abort() }), { name: "AbortError" });
    assert.equal(server.seen.length, 1);
  } finally {
    await server.close();
  }
});

test("AbortSignal: aborting an attempt in flight is not retried", async () => {
  const server = await scripted([() => undefined /* never answers */]);
  try {
    await assert.rejects(
      new Client(server.url, fast).session("run-11").call(0, "provision", {}, { signal: AbortSignal.timeout(300) }),
      { name: "TimeoutError" },
    );
    assert.equal(server.seen.length, 1);
  } finally {
    await server.close();
  }
});

test("Retry-After: delay-seconds and HTTP dates", () => {
  assert.equal(parseRetryAfter("3"), 3);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter("soon"), undefined);
  const inFive = new Date(Date.now() + 5_000).toUTCString();
  const seconds = parseRetryAfter(inFive)!;
  assert.ok(seconds >= 4 && seconds <= 5, String(seconds));
});
