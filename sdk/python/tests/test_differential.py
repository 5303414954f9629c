"""Differential test: toolgateway.canonicalize against the Go implementation
(package keyderive, through internal/cmd/canonical) on thousands of generated
documents: random nested values, doubles from random bits and from random
decimal spellings with large and small exponents, Unicode with astral
characters, random escapes, whitespace and member order."""

import json
import math
import os
import random
import struct
import subprocess
import unittest

from _support import go_binary

from toolgateway import CanonicalizationError, canonicalize

DOCUMENTS = int(os.environ.get("TOOLGATEWAY_DIFF_DOCS", "5000"))
SEED = int(os.environ.get("TOOLGATEWAY_DIFF_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SPECIAL_CHARS = "\x00\x01\x1f\x7f\x80\u00e9\u2028\u2029\u20ac\ud7ff\ue000\ufb33\ufeff\uffff\"\\/<>&'"


class Generator:
    """Random JSON values, each with a randomly spelled JSON text."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def char(self) -> str:
        r = self.rng.random()
        if r < 0.55:
            return chr(self.rng.randrange(0x20, 0x7F))
        if r < 0.70:
            return self.rng.choice(_SPECIAL_CHARS)
        if r < 0.85:
            code = self.rng.randrange(0x80, 0x10000)
            return chr(code) if not 0xD800 <= code <= 0xDFFF else "\u00ff"
        return chr(self.rng.randrange(0x10000, 0x110000))

    def string(self) -> str:
        return "".join(self.char() for _ in range(self.rng.choice((0, 1, 1, 2, 3, 5, 8, 13))))

    def number(self):
        """(python value, JSON spelling)."""
        rng = self.rng
        kind = rng.randrange(7)
        if kind == 0:  # any finite double, from random bits
            while True:
                x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
                if math.isfinite(x):
                    spelling = rng.choice((repr(x), "%.17g" % x, "%.17E" % x))
                    # "%.17g" can write a big double as an integer literal,
                    # which the SDK refuses (tested on its own below).
                    return x, spelling if not spelling.lstrip("-").isdigit() else repr(x)
        if kind == 1:  # a decimal with a large or small exponent, parsed like JSON parsers do
            digits = str(rng.randrange(1, 10 ** rng.randrange(1, 25)))
            exp = rng.randrange(-345, 310)
            sign = "-" if exp < 0 else rng.choice(("", "+"))
            text = ("-" if rng.random() < 0.3 else "") + digits + rng.choice("eE") + sign + str(abs(exp))
            value = float(text)
            if math.isinf(value):
                return 0.0, "0"
            return value, text
        if kind == 2:  # safe integers, written as integers or as doubles
            i = rng.choice((0, 1, -1, 2**53 - 1, -(2**53 - 1), rng.randrange(-(2**53 - 1), 2**53)))
            if rng.random() < 0.5:
                return i, str(i)
            return float(i), rng.choice((str(i) + ".0", str(i) + "e0", str(i) + ".000E+0"))
        if kind == 3:  # boundaries of the exponent notation
            x = rng.choice((1e21, 1e20, 1e-6, 1e-7, 9.999999999999999e20, 1.0000000000000001e-6, 0.1 + 0.2,
                            5e-324, 1.7976931348623157e308, 2.2250738585072014e-308, -0.0, 1e-400 * 0))
            return x, repr(x)
        if kind == 4:  # integral doubles beyond 2^53
            x = float(rng.randrange(2**53, 2**80)) * rng.choice((1, -1))
            return x, repr(x)
        if kind == 5:  # short decimals
            x = round(rng.uniform(-1e6, 1e6), rng.randrange(0, 8))
            return x, repr(x)
        text = "%.15g" % (rng.uniform(-1, 1) * 10.0 ** rng.randrange(-30, 30))
        return float(text), text

    def spelled_string(self, s: str) -> str:
        out = ['"']
        for ch in s:
            if ch in _SHORT and self.rng.random() < 0.7:
                out.append(_SHORT[ch])
            elif ch in _SHORT or ord(ch) < 0x20 or self.rng.random() < 0.1:
                units = ch.encode("utf-16-be")
                for i in range(0, len(units), 2):
                    hexa = "%04x" % int.from_bytes(units[i:i + 2], "big")
                    out.append("\\u" + (hexa.upper() if self.rng.random() < 0.5 else hexa))
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)

    def ws(self) -> str:
        return self.rng.choice(("", "", "", " ", "\t", "  "))

    def value(self, depth: int = 0):
        """(python value, JSON text)."""
        rng = self.rng
        r = rng.random()
        if depth < 4 and r < 0.25:
            members = {}
            for _ in range(rng.randrange(0, 6)):
                members[self.string()] = self.value(depth + 1)
            names = list(members)
            rng.shuffle(names)
            text = "{" + ",".join(self.ws() + self.spelled_string(n) + self.ws() + ":" + self.ws() + members[n][1] + self.ws()
                                  for n in names) + "}"
            return {n: v for n, (v, _) in members.items()}, text
        if depth < 4 and r < 0.40:
            items = [self.value(depth + 1) for _ in range(rng.randrange(0, 6))]
            return [v for v, _ in items], "[" + ",".join(self.ws() + t + self.ws() for _, t in items) + "]"
        if r < 0.65:
            return self.number()
        if r < 0.90:
            s = self.string()
            return s, self.spelled_string(s)
        return rng.choice(((True, "true"), (False, "false"), (None, "null")))

    def document(self):
        value, text = self.value()
        return value, self.ws() + text + self.ws()


def run_go(texts):
    """Go's canonical form (or its refusal) of each JSON text."""
    program = go_binary("./internal/cmd/canonical")
    data = "".join(t + "\n" for t in texts).encode("utf-8")
    proc = subprocess.run([program], input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    # split on "\n" only: str.splitlines() also splits at U+0085, U+2028 and others
    answers = [json.loads(line) for line in proc.stdout.decode("utf-8").split("\n")[:-1]]
    if len(answers) != len(texts):
        raise AssertionError(f"Go answered {len(answers)} lines for {len(texts)} documents")
    return answers


class DifferentialTest(unittest.TestCase):
    def test_generated_documents_agree_with_go(self):
        gen = Generator(random.Random(SEED))
        documents = [gen.document() for _ in range(DOCUMENTS)]
        answers = run_go([text for _, text in documents])
        mismatches = []
        for (value, text), answer in zip(documents, answers):
            if "canonical" not in answer:
                mismatches.append(f"Go refused {text!r}: {answer.get('error')}")
                continue
            want = answer["canonical"].encode("utf-8")
            from_value = canonicalize(value)
            from_text = canonicalize(text.encode("utf-8"))
            if from_value != want or from_text != want:
                mismatches.append(f"text {text!r}\n  go    {want!r}\n  value {from_value!r}\n  text  {from_text!r}")
        self.maxDiff = None
        self.assertEqual(mismatches[:5], [], f"{len(mismatches)} of {len(documents)} documents differ (seed {SEED}, "
                                            "rerun with TOOLGATEWAY_DIFF_SEED)")
        print(f"\n  differential: {len(documents)} documents agree with Go (seed {SEED})", end=" ")

    def test_both_refuse_what_is_not_i_json(self):
        refused = ['{"a":1,"a":2}', '{"a":1,"\\u0061":2}', '{"a":"\\ud800"}', '["\\udc00\\ud800"]', '{"a":1e400}',
                   '[-1e309]', "[" * 129 + "]" * 129, '{"a":NaN}', '[Infinity]', '{"a":1,}', "{} {}", "", "[01]",
                   '{"a":"\\x"}', '"\t"', "\ufeff{}", "[1.]", "[.5]", "[+1]"]
        answers = run_go(refused)
        for text, answer in zip(refused, answers):
            with self.subTest(text=text[:40]):
                self.assertIn("error", answer, "Go accepted it")
                self.assertRaises(CanonicalizationError, canonicalize, text.encode("utf-8"))

    def test_big_integer_literals_are_refused_where_go_rounds(self):
        # The documented difference: the gateway accepts integer literals
        # beyond 2^53 and rounds them (RFC 8785); every SDK refuses them before
        # sending, asking for strings, because the rounding silently changes ids.
        texts = ['{"id":9007199254740993}', '[12345678901234567890]', '{"n":-9007199254740992}']
        answers = run_go(texts)
        for text, answer in zip(texts, answers):
            with self.subTest(text=text):
                self.assertIn("canonical", answer)
                with self.assertRaisesRegex(CanonicalizationError, "send such ids as strings"):
                    canonicalize(text.encode("utf-8"))
                # Read as doubles, as RFC 8785 does, the SDK writes what Go writes.
                self.assertEqual(canonicalize(json.loads(text, parse_int=float)), answer["canonical"].encode("utf-8"))


if __name__ == "__main__":
    unittest.main()
