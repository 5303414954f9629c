// Every vector of keyderive/testdata/vectors.json, byte for byte: the
// canonical text and the key.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { canonicalize, deriveKey, InvalidInputError, mcpMeta, wire } from "../src/index.js";
import { repoRoot } from "./helpers.js";

interface Vector {
  name: string;
  session_id: string;
  step_index: number;
  tool: string;
  args: string;
  canonical: string;
  key: string;
}

const vectors = JSON.parse(readFileSync(join(repoRoot, "keyderive/testdata/vectors.json"), "utf8")) as Vector[];

test("the vectors file is not empty", () => {
  assert.ok(vectors.length >= 10, `only ${vectors.length} vectors`);
});

for (const v of vectors) {
  test(`vector ${v.name}`, () => {
    const args: unknown = JSON.parse(v.args);
    assert.equal(canonicalize(args), v.canonical);
    assert.equal(deriveKey(v.session_id, v.step_index, v.tool, args), v.key);
    assert.equal(deriveKey(v.session_id, BigInt(v.step_index), v.tool, args), v.key);
    // mcpMeta prepares a request, so like Session.call it refuses integral
    // numbers beyond 2^53−1 (some vectors hold 1e30 or 2^53); the rest
    // carry the vector's key.
    if (holdsUnsafeInteger(args)) {
      assert.throws(() => mcpMeta(v.session_id, v.step_index, v.tool, args), InvalidInputError);
    } else {
      assert.equal(mcpMeta(v.session_id, v.step_index, v.tool, args)[wire.MetaIdempotencyKey], v.key);
    }
  });
}

function holdsUnsafeInteger(value: unknown): boolean {
  if (typeof value === "number") return Number.isInteger(value) && !Number.isSafeInteger(value);
  if (value !== null && typeof value === "object") return Object.values(value).some(holdsUnsafeInteger);
  return false;
}
