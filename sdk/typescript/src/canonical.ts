import serialize from "canonicalize";

import { InvalidInputError } from "./errors.js";

/** Options of {@link canonicalJSON} (internal). */
export interface CanonicalOptions {
  /**
   * Accept integral numbers beyond ±(2^53−1) and write them as RFC 8785
   * does (as doubles). canonicalize and deriveKey do, to reproduce the Go
   * implementation on every double; Session.call and mcpMeta, which prepare
   * a request, do not.
   */
  allowUnsafeIntegers?: boolean;
}

/**
 * Returns the RFC 8785 (JSON Canonicalization Scheme) text of a JSON value:
 * object members sorted by their UTF-16 code units, no whitespace, numbers
 * in ECMAScript's shortest round-trip form, minimal string escaping. The
 * SHA-256 of `session:step:tool:` followed by this text is a call's
 * idempotency key.
 *
 * Every finite number is written as RFC 8785 writes doubles, as the
 * gateway's Go implementation does, including integral values beyond
 * ±(2^53−1) such as `1e30` (Session.call and mcpMeta refuse those before
 * sending: see there).
 *
 * Refused with an {@link InvalidInputError}: NaN and ±Infinity; BigInt
 * (send big ids as strings); functions and
 * symbols; `undefined` except as an object member, where it is omitted as
 * `JSON.stringify` omits it; strings or member names with a lone surrogate;
 * cycles; objects other than plain objects and arrays (a `Map` or a class
 * instance) unless they have a `toJSON` method, which is used as
 * `JSON.stringify` uses it (a `Date` becomes its ISO string); arrays and
 * objects nested more than 128 levels ({@link MaxDepth}), which the gateway
 * refuses.
 */
export function canonicalize(value: unknown): string {
  return canonicalJSON(value, { allowUnsafeIntegers: true });
}

/** {@link canonicalize} with options; not part of the package's exports. */
export function canonicalJSON(value: unknown, options: CanonicalOptions): string {
  const plain = toPlainJSON(value, "", 0, new Set(), options.allowUnsafeIntegers === true);
  if (plain === undefined) {
    throw new InvalidInputError("args", "undefined is not a JSON value", "");
  }
  const text = serialize(plain);
  if (text === undefined) {
    // toPlainJSON returns only JSON values, for which serialize never fails.
    throw new InvalidInputError("args", "value has no JSON form", "");
  }
  return text;
}

/**
 * The deepest nesting of arrays and objects accepted, as the gateway's
 * keyderive.MaxDepth: deeper arguments are refused before they are sent.
 */
export const MaxDepth = 128;

type PlainJSON = null | boolean | number | string | PlainJSON[] | { [name: string]: PlainJSON };

// A lone surrogate: with the u flag, a well-formed pair is one code point and
// does not match \p{Cs}.
const loneSurrogate = /\p{Cs}/u;

/**
 * Checks value recursively and returns a tree of plain JSON values (toJSON
 * applied, undefined members dropped), or undefined for an undefined value.
 * Every refusal names the JSON Pointer of the offending value.
 */
function toPlainJSON(
  value: unknown,
  path: string,
  depth: number,
  seen: Set<object>,
  allowUnsafeIntegers: boolean,
): PlainJSON | undefined {
  switch (typeof value) {
    case "undefined":
      return undefined;
    case "boolean":
      return value;
    case "string":
      if (loneSurrogate.test(value)) {
        throw new InvalidInputError("args", "string contains a lone surrogate, which is not valid Unicode", path);
      }
      return value;
    case "number":
      if (Number.isNaN(value)) {
        throw new InvalidInputError("args", "NaN is not a JSON number", path);
      }
      if (!Number.isFinite(value)) {
        throw new InvalidInputError("args", `${value} is not a JSON number`, path);
      }
      if (!allowUnsafeIntegers && Number.isInteger(value) && !Number.isSafeInteger(value)) {
        throw new InvalidInputError(
          "args",
          `integer ${value} is beyond ±(2^53−1), where numbers lose digits; send it as a string`,
          path,
        );
      }
      return value;
    case "bigint":
      throw new InvalidInputError(
        "args",
        "a BigInt has no JSON form; send it as a string (or as a number if it is within ±(2^53−1))",
        path,
      );
    case "function":
    case "symbol":
      throw new InvalidInputError("args", `a ${typeof value} has no JSON form`, path);
  }
  if (value === null) return null;
  const object = value as object;
  if (seen.has(object)) {
    throw new InvalidInputError("args", "cyclic structure", path);
  }
  seen.add(object);
  try {
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") {
      return toPlainJSON(toJSON.call(object, lastSegment(path)), path, depth, seen, allowUnsafeIntegers);
    }
    if (depth + 1 > MaxDepth) {
      throw new InvalidInputError("args", `arrays and objects nested more than ${MaxDepth} levels`, path);
    }
    if (Array.isArray(object)) {
      return object.map((element: unknown, index) => {
        const elementPath = `${path}/${index}`;
        const plain = toPlainJSON(element, elementPath, depth + 1, seen, allowUnsafeIntegers);
        if (plain === undefined) {
          throw new InvalidInputError("args", "undefined in an array has no JSON form (JSON.stringify would write null)", elementPath);
        }
        return plain;
      });
    }
    const proto: unknown = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) {
      const name = (object as { constructor?: { name?: unknown } }).constructor?.name;
      throw new InvalidInputError(
        "args",
        `a ${typeof name === "string" && name ? name : "non-plain object"} is not a plain object; convert it (or give it a toJSON method)`,
        path,
      );
    }
    const result: { [name: string]: PlainJSON } = {};
    for (const [name, member] of Object.entries(object)) {
      const memberPath = `${path}/${name.replaceAll("~", "~0").replaceAll("/", "~1")}`;
      if (loneSurrogate.test(name)) {
        throw new InvalidInputError("args", "member name contains a lone surrogate, which is not valid Unicode", memberPath);
      }
      const plain = toPlainJSON(member, memberPath, depth + 1, seen, allowUnsafeIntegers);
      if (plain !== undefined) {
        // defineProperty, not assignment: a member named "__proto__" stays a member.
        Object.defineProperty(result, name, { value: plain, enumerable: true, writable: true, configurable: true });
      }
    }
    return result;
  } finally {
    seen.delete(object);
  }
}

/** The key JSON.stringify passes to toJSON: the member name or index, "" at the root. */
function lastSegment(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : path.slice(slash + 1).replaceAll("~1", "/").replaceAll("~0", "~");
}
