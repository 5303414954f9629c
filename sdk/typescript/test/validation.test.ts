// Bad input gets a clear error before any request is sent.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, InvalidInputError, canonicalize, deriveKey, mcpMeta, wire } from "../src/index.js";
import { localServer } from "./helpers.js";

test("bad arguments, session ids, steps and tool names are refused and nothing is sent", async () => {
  let requests = 0;
  const server = await localServer((_req, _body, res) => {
    requests++;
    res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
  });
  try {
    const client = new Client(server.url);
    const session = client.session("run-1");
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    class Point {
      constructor(readonly x: number) {}
    }
    const badArgs: Array<[string, unknown, string]> = [
      ["NaN", { n: NaN }, "/n"],
      ["Infinity", { n: [1, Infinity] }, "/n/1"],
      ["-Infinity", { n: -Infinity }, "/n"],
      ["2^53", { id: 2 ** 53 }, "/id"],
      ["-(2^53)", { id: -(2 ** 53) }, "/id"],
      ["1e21", { id: 1e21 }, "/id"],
      ["BigInt", { id: 12345678901234567890n }, "/id"],
      ["function", { f: () => 1 }, "/f"],
      ["symbol", { s: Symbol("x") }, "/s"],
      ["Map", { m: new Map([["a", 1]]) }, "/m"],
      ["class instance", { p: new Point(1) }, "/p"],
      ["lone surrogate", { s: "a\ud800b" }, "/s"],
      ["lone surrogate in a name", { "\udc00": 1 }, "/\udc00"],
      ["cycle", cyclic, "/self"],
      ["undefined in an array", { a: [1, undefined] }, "/a/1"],
      ["escaped pointer", { "a/b~c": NaN }, "/a~1b~0c"],
      ["an array", [1, 2], ""],
      ["null", null, ""],
      ["a string", '{"a":1}', ""],
      ["undefined", undefined, ""],
    ];
    for (const [name, args, path] of badArgs) {
      await assert.rejects(session.call(1, "provision", args), (err: unknown) => {
        assert.ok(err instanceof InvalidInputError, `${name}: ${String(err)}`);
        assert.equal(err.field, "args", name);
        assert.equal(err.path, path, name);
        return true;
      });
      assert.throws(() => mcpMeta("run-1", 1, "provision", args), InvalidInputError, name);
    }

    const badSessions: unknown[] = ["", "a:b", "has space", "tab\t", "caf\u00e9", "\u{1F600}", "x".repeat(257), 42, null];
    for (const id of badSessions) {
      assert.throws(() => client.session(id as string), (err: unknown) => err instanceof InvalidInputError && err.field === "sessionId", String(id));
      assert.throws(() => deriveKey(id as string, 0, "provision", {}), InvalidInputError);
      assert.throws(() => mcpMeta(id as string, 0), InvalidInputError);
    }
    assert.equal(client.session("x".repeat(256)).id.length, 256);
    assert.equal(client.session("!~").id, "!~");

    const badSteps: unknown[] = [-1, 1.5, 2 ** 53, Number.MAX_VALUE, NaN, Infinity, "3", -1n, 2n ** 53n, null];
    for (const step of badSteps) {
      await assert.rejects(session.call(step as number, "provision", {}), (err: unknown) => err instanceof InvalidInputError && err.field === "stepIndex", String(step));
      assert.throws(() => mcpMeta("run-1", step as number), InvalidInputError);
    }

    const badTools: unknown[] = ["", "Provision", "-x", "a b", "a/b", "x".repeat(65), "é", 7];
    for (const tool of badTools) {
      await assert.rejects(session.call(0, tool as string, {}), (err: unknown) => err instanceof InvalidInputError && err.field === "tool", String(tool));
    }

    // A token that cannot be a header value is refused at once, and the
    // error does not show it.
    for (const token of ["secret\nInjected: 1", "sec ret", "s\u00e9cret"]) {
      assert.throws(() => new Client(server.url, { token }), (err: unknown) => err instanceof TypeError && !err.message.includes("ecret"));
    }
    assert.equal(requests, 0, "a request was sent");

    // The largest valid step and a BigInt step are sent.
    await session.call(2 ** 53 - 1, "provision", { n: 2 ** 53 - 1 });
    await session.call(5n, "provision", {});
    assert.equal(requests, 2);
  } finally {
    await server.close();
  }
});

test("bad base URLs are refused at once", () => {
  for (const url of ["", "not a url", "ftp://host", "http://host/?q=1", "http://host/#f", "http://user:pw@host"]) {
    assert.throws(() => new Client(url), TypeError, url);
  }
  assert.equal(new Client("http://gw.internal:8080/base//").baseUrl, "http://gw.internal:8080/base");
  assert.throws(() => new Client("http://h", { maxAttempts: -1 }), TypeError);
});

test("canonicalize follows JSON.stringify for toJSON and undefined members, and keeps every double", () => {
  assert.equal(canonicalize({ b: undefined, a: new Date(0) }), '{"a":"1970-01-01T00:00:00.000Z"}');
  assert.equal(canonicalize({ n: 1e30, m: 2 ** 53, z: -0 }), '{"m":9007199254740992,"n":1e+30,"z":0}');
  assert.equal(canonicalize(JSON.parse('{"__proto__":1}')), '{"__proto__":1}');
  assert.equal(canonicalize("\u2028"), '"\u2028"');
  assert.throws(() => canonicalize(undefined), InvalidInputError);
  // 128 levels are accepted, as by the gateway; 129 are not.
  const nest = (levels: number): unknown => (levels === 1 ? {} : { a: nest(levels - 1) });
  assert.equal(canonicalize(nest(128)).length, "{\"a\":".length * 127 + 2 + 127);
  assert.throws(() => canonicalize(nest(129)), /nested more than 128 levels/);
  assert.throws(() => canonicalize({ n: NaN }), InvalidInputError);
});

test("mcpMeta: session, integer step, and the key when tool and args are given", () => {
  assert.deepEqual(mcpMeta("run-1", 7), { [wire.MetaSessionID]: "run-1", [wire.MetaStepIndex]: 7 });
  const meta = mcpMeta("run-1", 7n, "provision", { name: "db" });
  assert.equal(meta[wire.MetaStepIndex], 7);
  assert.equal(meta[wire.MetaIdempotencyKey], deriveKey("run-1", 7, "provision", { name: "db" }));
  assert.equal(Object.keys(meta).length, 3);
  assert.throws(() => mcpMeta("run-1", 7, "provision"), InvalidInputError);
  assert.throws(() => mcpMeta("run-1", 7, undefined, {}), InvalidInputError);
  assert.throws(() => mcpMeta("run-1", 7, "Bad Tool", {}), InvalidInputError);
});
