// Generates vectors.json with an implementation independent of the Go code:
// ECMAScript's own JSON.parse / JSON.stringify (which RFC 8785 is defined
// against), members sorted with the default sort (UTF-16 code units) and
// Node's SHA-256. Where RFC 8785 prints an expected result (section 3.2.2,
// 3.2.3 and the Appendix B number table) the script asserts it, so the file
// is checked against the RFC text, not just against this script.
//
//   node keyderive/testdata/gen_vectors.js > keyderive/testdata/vectors.json
'use strict';
const crypto = require('crypto');
const assert = require('assert');

function jcs(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']';
  return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + jcs(v[k])).join(',') + '}';
}

function doubleBits(x) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  return view.getBigUint64(0).toString(16).padStart(16, '0');
}

const S = 'sess-01J8ZK4Q7XKZ3V9W6T2R5M0ABC';
const vectors = [];
// add(name, args, {session, step, tool, canonical (expected, from the RFC or by hand)})
function add(name, args, o = {}) {
  const canonical = jcs(JSON.parse(args));
  if (o.canonical !== undefined) assert.strictEqual(canonical, o.canonical, name);
  const session = o.session ?? S, step = o.step ?? 4, tool = o.tool ?? 'provision-infra';
  const key = crypto.createHash('sha256').update(`${session}:${step}:${tool}:${canonical}`, 'utf8').digest('hex');
  vectors.push({ name, session_id: session, step_index: step, tool, args, canonical, key });
}

// RFC 8785 section 3.2.2 (the input is wrapped in no extra object).
add('rfc8785-3.2.2-sample', String.raw`{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, { canonical: String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"` + '\u20ac' + String.raw`$\u000f\nA'B\"\\\\\"/"}` });

// RFC 8785 section 3.2.3: sorting by UTF-16 code units.
add('rfc8785-3.2.3-sorting', String.raw`{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`, { canonical: '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}' });

// RFC 8785 Appendix B: IEEE-754 bit pattern -> expected text. The input text
// is a decimal that parses to exactly that pattern (asserted).
const appendixB = [
  ['0000000000000000', '0', '0'],
  ['8000000000000000', '-0', '0'],
  ['0000000000000001', '5e-324', '5e-324'],
  ['8000000000000001', '-5e-324', '-5e-324'],
  ['7fefffffffffffff', '1.7976931348623157e308', '1.7976931348623157e+308'],
  ['ffefffffffffffff', '-1.7976931348623157e308', '-1.7976931348623157e+308'],
  ['4340000000000000', '9007199254740992', '9007199254740992'],
  ['c340000000000000', '-9007199254740992', '-9007199254740992'],
  ['4430000000000000', '295147905179352825856', '295147905179352830000'],
  ['44b52d02c7e14af5', '9.999999999999997e22', '9.999999999999997e+22'],
  ['44b52d02c7e14af6', '1e23', '1e+23'],
  ['44b52d02c7e14af7', '1.0000000000000001e23', '1.0000000000000001e+23'],
  ['444b1ae4d6e2ef4e', '999999999999999700000', '999999999999999700000'],
  ['444b1ae4d6e2ef4f', '999999999999999900000', '999999999999999900000'],
  ['444b1ae4d6e2ef50', '1e21', '1e+21'],
  ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7', '9.999999999999997e-7'],
  ['3eb0c6f7a0b5ed8d', '0.000001', '0.000001'],
  ['41b3de4355555553', '333333333.3333332', '333333333.3333332'],
  ['41b3de4355555554', '333333333.33333325', '333333333.33333325'],
  ['41b3de4355555555', '333333333.3333333', '333333333.3333333'],
  ['41b3de4355555556', '333333333.3333334', '333333333.3333334'],
  ['41b3de4355555557', '333333333.33333343', '333333333.33333343'],
  ['becbf647612f3696', '-0.0000033333333333333333', '-0.0000033333333333333333'],
  ['43143ff3c1cb0959', '1424953923781206.25', '1424953923781206.2'],
];
for (const [bits, input, expected] of appendixB) {
  assert.strictEqual(doubleBits(JSON.parse(input)), bits, `bits of ${input}`);
  add(`rfc8785-appendix-b-${bits}`, `{"n":${input}}`, { canonical: `{"n":${expected}}`, step: 10 });
}

// Further number formatting (expected values written by hand from the
// ECMAScript Number::toString rules that RFC 8785 section 3.2.2.3 cites).
const numbers = [
  ['one-e21-uppercase-plus', '1E+21', '1e+21'],
  ['one-e20-plain', '1e20', '100000000000000000000'],
  ['one-e-7', '1e-7', '1e-7'],
  ['one-e-6-boundary', '0.0000010', '0.000001'],
  ['point-one-plus-point-two', '0.30000000000000004', '0.30000000000000004'],
  ['point-three', '0.3', '0.3'],
  ['two-pow-53-plus-one-rounds', '9007199254740993', '9007199254740992'],
  ['large-integer-beyond-2-53', '12345678901234567890', '12345678901234567000'],
  ['exponent-308', '1e308', '1e+308'],
  ['subnormal', '2.5e-320', '2.5e-320'],
  ['underflow-to-zero', '1e-400', '0'],
  ['negative-zero-fraction', '-0.0e5', '0'],
  ['trailing-zeros-and-exponent', '4.50E+2', '450'],
  ['fraction-exponent', '123e-2', '1.23'],
  ['negative-small', '-1.5e-9', '-1.5e-9'],
  ['integer-with-fraction-zero', '7.000', '7'],
];
for (const [name, input, expected] of numbers) {
  add(`number-${name}`, `{"n":${input}}`, { canonical: `{"n":${expected}}`, session: 'agent-7', step: 0, tool: 'math' });
}

// Strings and escapes.
add('escapes-short-forms', String.raw`{"s":"\"\\\/\b\f\n\r\t"}`, { canonical: String.raw`{"s":"\"\\/\b\f\n\r\t"}` });
add('escapes-control-characters', String.raw`{"s":"\u0000\u0001\u001F\u007f"}`, { canonical: '{"s":"\\u0000\\u0001\\u001f\u007f"}' });
add('escapes-html-and-separators-stay-literal', String.raw`{"s":"\u003c\u003e\u0026 \u2028\u2029"}`, { canonical: '{"s":"<>& \u2028\u2029"}' });
add('escapes-latin-unescaped', String.raw`{"s":"caf\u00e9 na\u00efve"}`, { canonical: '{"s":"caf\u00e9 na\u00efve"}' });
add('non-bmp-escaped-pair', String.raw`{"s":"\uD83D\uDE00 \ud834\udd1e"}`, { canonical: '{"s":"\u{1F600} \u{1D11E}"}' });
add('non-bmp-raw-utf8', '{"s":"\u{1F600}\u{10FFFF}"}', { canonical: '{"s":"\u{1F600}\u{10FFFF}"}' });
add('sort-utf16-not-codepoint', String.raw`{"\ue000":1,"\ud83d\ude00":2,"z":3}`, { canonical: '{"z":3,"\u{1F600}":2,"\ue000":1}' });
add('sort-numeric-looking-names', '{"10":"a","9":"b","1":"c","":"empty","A":"d","a":"e","_":"f"}', { canonical: '{"":"empty","1":"c","10":"a","9":"b","A":"d","_":"f","a":"e"}' });
add('sort-prefix-shorter-first', '{"abc":1,"ab":2,"a":3,"b":0}', { canonical: '{"a":3,"ab":2,"abc":1,"b":0}' });

// Structure.
add('empty-object', '{}', { canonical: '{}', step: 0 });
add('empty-object-whitespace', ' \t\r\n{ \n }\n', { canonical: '{}', step: 0 });
add('empty-containers-inside', '{"a":[],"o":{},"s":""}', { canonical: '{"a":[],"o":{},"s":""}' });
add('nested-objects-sorted-at-every-level', '{"z":{"y":{"x":1,"w":2},"b":[{"d":1,"c":2}]},"a":null}',
  { canonical: '{"a":null,"z":{"b":[{"c":2,"d":1}],"y":{"w":2,"x":1}}}' });
add('nested-arrays', '{"m":[[1,[2,[3,[]]]],[[],{}],[true,false,null]]}', { canonical: '{"m":[[1,[2,[3,[]]]],[[],{}],[true,false,null]]}' });
add('array-order-kept', '{"list":[3,1,2,"b","a"]}', { canonical: '{"list":[3,1,2,"b","a"]}' });
add('pretty-printed-realistic', `{
    "region": "eu-west-1",
    "size": "m5.large",
    "count": 3,
    "tags": {"team": "agents", "env": "prod"},
    "dry_run": false
}`, { canonical: '{"count":3,"dry_run":false,"region":"eu-west-1","size":"m5.large","tags":{"env":"prod","team":"agents"}}' });
add('same-args-reordered-same-key', '{"dry_run":false,"tags":{"env":"prod","team":"agents"},"count":3.0,"size":"m5.large","region":"eu-west-1"}',
  { canonical: '{"count":3,"dry_run":false,"region":"eu-west-1","size":"m5.large","tags":{"env":"prod","team":"agents"}}' });

// The other key inputs.
add('max-step-index', '{"a":1}', { step: 9007199254740991, canonical: '{"a":1}' });
add('session-all-visible-punctuation', '{"a":1}', { session: '!"#$%&\'()*+,-./;<=>?@[\\]^_`{|}~', canonical: '{"a":1}' });
add('session-256-chars', '{"a":1}', { session: 'x'.repeat(256), step: 1, canonical: '{"a":1}' });
add('tool-name-64-chars', '{"a":1}', { tool: 'a'.repeat(32) + '_-0123456789' + 'z'.repeat(20), step: 2, canonical: '{"a":1}' });
add('tool-name-one-digit', '{"a":1}', { tool: '7', step: 3, canonical: '{"a":1}' });

// The reordered vector must give the same key as the pretty-printed one.
const byName = Object.fromEntries(vectors.map(v => [v.name, v]));
assert.strictEqual(byName['same-args-reordered-same-key'].key, byName['pretty-printed-realistic'].key);

process.stdout.write(JSON.stringify(vectors, null, 2) + '\n');
