// Differential test: thousands of generated JSON documents canonicalized by
// this SDK and by the Go implementation (internal/cmd/canonical, which
// prints keyderive.Canonicalize's output), compared byte for byte. The
// documents hold doubles drawn from random bits, numbers written in several
// spellings, strings over the whole of Unicode (astral characters, controls,
// U+2028) with random escaping, and member names whose UTF-16 order differs
// from their code-point order.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { test } from "node:test";

import { canonicalJSON } from "../src/canonical.js";
import { InvalidInputError } from "../src/errors.js";
import { buildGo } from "./helpers.js";

const documents = Number(process.env["DIFFERENTIAL_DOCS"] ?? 3000);
const seed = Number(process.env["DIFFERENTIAL_SEED"] ?? Date.now() % 2 ** 31);

/** xorshift32: a small seeded generator, so a failing run can be repeated with DIFFERENTIAL_SEED. */
function generator(initial: number) {
  let state = initial || 1;
  const next = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
  return {
    u32: next,
    below: (n: number) => next() % n,
    chance: (p: number) => next() / 2 ** 32 < p,
  };
}
type Random = ReturnType<typeof generator>;

// Member names whose order differs between UTF-16 code units (RFC 8785) and
// code points: an astral character (a surrogate pair, 0xD83D...) sorts
// before U+E000–U+FFFF in UTF-16 and after them by code point.
const trickyNames = ["\u{1F600}", "\uFB33", "\uFFFF", "\uE000", "\u{10FFFF}", "\u{10000}", "\u00f6", "\u20ac", "\r", "1", "", "a", "A", "aa", "\u0080", "\u2028"];

function randomDouble(r: Random): number {
  const view = new DataView(new ArrayBuffer(8));
  for (;;) {
    view.setUint32(0, r.u32());
    view.setUint32(4, r.u32());
    const x = view.getFloat64(0);
    if (Number.isFinite(x)) return x;
  }
}

const specialNumbers = [0, -0, 1, -1, 0.1, 0.5, 1e21, 1e-7, 1e-6, 1e20, 123e-20, 5e-324, -5e-324, 2 ** 53, 2 ** 53 - 1, -(2 ** 53), 1.7976931348623157e308, 2.2250738585072014e-308, 333333333.3333333, 4.5, 0.002, 1e30];

function randomNumber(r: Random): number {
  switch (r.below(5)) {
    case 0:
      return specialNumbers[r.below(specialNumbers.length)]!;
    case 1:
      return r.below(2_000_001) - 1_000_000;
    case 2:
      return (r.below(2_000_001) - 1_000_000) / 10 ** r.below(12);
    default:
      return randomDouble(r);
  }
}

/** A number's JSON text in one of several spellings of the same double. */
function spellNumber(r: Random, x: number): string {
  if (Object.is(x, -0)) return ["-0", "-0.0", "-0e5"][r.below(3)]!;
  switch (r.below(4)) {
    case 0:
      return x.toPrecision(17);
    case 1:
      return x.toExponential();
    case 2:
      return Number.isInteger(x) && Math.abs(x) < 1e21 ? `${BigInt(x)}.000` : JSON.stringify(x);
    default:
      return JSON.stringify(x);
  }
}

function randomCodePoint(r: Random): number {
  for (;;) {
    let cp: number;
    switch (r.below(7)) {
      case 0:
        cp = r.below(0x20); // controls
        break;
      case 1:
        cp = [0x22, 0x5c, 0x2f, 0x7f, 0x2028, 0x2029, 0xfeff][r.below(7)]!;
        break;
      case 2:
      case 3:
        cp = 0x20 + r.below(0x5f); // printable ASCII
        break;
      case 4:
        cp = 0x80 + r.below(0x800 - 0x80);
        break;
      case 5:
        cp = 0x800 + r.below(0x10000 - 0x800);
        break;
      default:
        cp = 0x10000 + r.below(0x110000 - 0x10000); // astral
    }
    if (cp < 0xd800 || cp > 0xdfff) return cp;
  }
}

function randomString(r: Random): string {
  let s = "";
  const length = r.below(12);
  for (let i = 0; i < length; i++) s += String.fromCodePoint(randomCodePoint(r));
  return s;
}

/** A string's JSON text, with some characters escaped as \uXXXX (pairs as two escapes) or "\/". */
function spellString(r: Random, s: string): string {
  let out = '"';
  for (const ch of s) {
    const standard = JSON.stringify(ch).slice(1, -1);
    if (ch === "/" && r.chance(0.5)) out += "\\/";
    else if (r.chance(0.2) || standard !== ch) {
      out += r.chance(0.5) && standard !== ch ? standard : [...ch].map(escapeUnits).join("");
    } else out += ch;
  }
  return out + '"';
}

function escapeUnits(ch: string): string {
  let out = "";
  for (let i = 0; i < ch.length; i++) {
    const hex = ch.charCodeAt(i).toString(16).padStart(4, "0");
    out += `\\u${i % 2 === 0 ? hex : hex.toUpperCase()}`;
  }
  return out;
}

function space(r: Random): string {
  return r.chance(0.15) ? [" ", "\t", "  "][r.below(3)]! : "";
}

/** A random JSON value, returned as its text (one line). */
function randomJSON(r: Random, depth: number): string {
  const kind = depth >= 4 ? r.below(4) : r.below(7);
  switch (kind) {
    case 0:
      return ["null", "true", "false"][r.below(3)]!;
    case 1:
    case 2:
      return spellNumber(r, randomNumber(r));
    case 3:
      return spellString(r, randomString(r));
    case 4: {
      const n = r.below(5);
      const items = Array.from({ length: n }, () => space(r) + randomJSON(r, depth + 1) + space(r));
      return `[${items.join(",")}]`;
    }
    default:
      return randomObject(r, depth);
  }
}

function randomObject(r: Random, depth: number): string {
  const names = new Set<string>();
  const n = r.below(7);
  while (names.size < n) names.add(r.chance(0.4) ? trickyNames[r.below(trickyNames.length)]! : randomString(r));
  const members = [...names].map(
    (name) => `${space(r)}${spellString(r, name)}${space(r)}:${space(r)}${randomJSON(r, depth + 1)}${space(r)}`,
  );
  return `{${members.join(",")}}`;
}

function holdsUnsafeInteger(value: unknown): boolean {
  if (typeof value === "number") return Number.isInteger(value) && !Number.isSafeInteger(value);
  if (value !== null && typeof value === "object") return Object.values(value).some(holdsUnsafeInteger);
  return false;
}

/** Runs the Go program on the lines and returns its answers, one per line. */
async function goCanonical(lines: string[]): Promise<Array<{ canonical?: string; error?: string }>> {
  const binary = await buildGo("./internal/cmd/canonical");
  const child = spawn(binary, [], { stdio: ["pipe", "pipe", "inherit"] });
  const answers: Array<{ canonical?: string; error?: string }> = [];
  const reader = createInterface({ input: child.stdout });
  reader.on("line", (line) => answers.push(JSON.parse(line) as { canonical?: string; error?: string }));
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  child.stdin.end(lines.join("\n") + "\n");
  assert.equal(await exited, 0, "the Go program failed");
  return answers;
}

test(`RFC 8785: ${documents} generated documents canonicalize as in Go (seed ${seed})`, async (t) => {
  const r = generator(seed);
  const lines: string[] = [];
  for (let i = 0; i < documents; i++) lines.push(r.chance(0.85) ? randomObject(r, 0) : randomJSON(r, 0));
  // Texts whose numbers JSON.parse and Go read at the edges of the double
  // range: an overflow is refused by both, an underflow is 0 for both, an
  // integer beyond 2^53 rounds to the same double in both.
  lines.push('{"n":1e400}', '{"n":-1e400}', '{"n":1e-400}', '{"n":12345678901234567890123}', '{"n":-0.0}', "[9007199254740993]");
  // Nesting at the limit both accept (128 levels) and one level beyond it.
  lines.push("[".repeat(128) + "]".repeat(128), "[".repeat(129) + "]".repeat(129));
  const answers = await goCanonical(lines);
  assert.equal(answers.length, lines.length);

  let compared = 0;
  let bothRefused = 0;
  let unsafeRefused = 0;
  for (const [i, line] of lines.entries()) {
    const go = answers[i]!;
    const value: unknown = JSON.parse(line);
    let ours: string | undefined;
    let ourError: unknown;
    try {
      ours = canonicalJSON(value, { allowUnsafeIntegers: true });
    } catch (err) {
      ourError = err;
    }
    if (go.error !== undefined) {
      // Go refuses only numbers outside the double range here (JSON.parse
      // turns them into ±Infinity, which the SDK refuses) and nesting
      // beyond 128 levels.
      assert.ok(ourError instanceof InvalidInputError, `line ${i}: Go refused (${go.error}), the SDK gave ${ours}\n${line}`);
      bothRefused++;
      continue;
    }
    assert.equal(ourError, undefined, `line ${i}: the SDK refused (${String(ourError)}), Go gave ${go.canonical}\n${line}`);
    assert.equal(ours, go.canonical, `line ${i} differs\n${line}`);
    compared++;
    // What Session.call and mcpMeta send: the same text, unless the
    // document holds an integral number beyond 2^53−1, which they refuse.
    if (holdsUnsafeInteger(value)) {
      assert.throws(() => canonicalJSON(value, {}), InvalidInputError, `line ${i}`);
      unsafeRefused++;
    } else {
      assert.equal(canonicalJSON(value, {}), ours);
    }
  }
  t.diagnostic(`${compared} documents equal to Go's canonical form, ${bothRefused} refused by both, ${unsafeRefused} with integers beyond 2^53−1 refused for sending`);
  assert.ok(compared >= documents * 0.9, `only ${compared} documents compared`);
  assert.equal(bothRefused, 3);
  assert.ok(unsafeRefused > 0);
});
