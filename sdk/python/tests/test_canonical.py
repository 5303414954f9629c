"""RFC 8785 details and refusals of toolgateway.canonicalize and derive_key."""

import collections
import decimal
import math
import unittest

import _support  # noqa: F401  (puts the SDK on sys.path)

from toolgateway import (CanonicalizationError, InvalidInputError, canonicalize, derive_key,
                         format_number, mcp_meta)


def c(value) -> str:
    return canonicalize(value).decode("utf-8")


class NumbersTest(unittest.TestCase):
    def test_ecmascript_number_to_string(self):
        cases = {
            0.0: "0", -0.0: "0", 1.0: "1", -1.0: "-1", 1.5: "1.5", 0.1 + 0.2: "0.30000000000000004",
            1e21: "1e+21", 1e20: "100000000000000000000", 123e18: "123000000000000000000",
            1e-6: "0.000001", 1e-7: "1e-7", 1.5e-7: "1.5e-7", 0.000123: "0.000123",
            1e300: "1e+300", -1.7976931348623157e308: "-1.7976931348623157e+308",
            5e-324: "5e-324", 2.2250738585072014e-308: "2.2250738585072014e-308",
            333333333.33333329: "333333333.3333333", 4.5: "4.5", 2e-3: "0.002", 1e-27: "1e-27",
            9007199254740992.0: "9007199254740992", 2.0**70: "1.1805916207174113e+21",
            123456.789e3: "123456789", 1.2345e-5: "0.000012345",
        }
        for number, want in cases.items():
            with self.subTest(number=repr(number)):
                self.assertEqual(format_number(number), want)

    def test_ints_and_bools(self):
        self.assertEqual(c([True, False, None, 1, -1, 0, 2**53 - 1, -(2**53 - 1)]),
                         "[true,false,null,1,-1,0,9007199254740991,-9007199254740991]")
        self.assertEqual(c({"a": True}), '{"a":true}')  # not 1: True is an int in Python
        self.assertEqual(c([1, 1.0, True]), "[1,1,true]")

    def test_refused_numbers(self):
        for bad in (math.nan, math.inf, -math.inf, 2**53, -(2**53), 10**30):
            with self.subTest(bad=bad):
                with self.assertRaises(CanonicalizationError) as caught:
                    canonicalize({"x": [bad]})
                self.assertIn("/x/0", str(caught.exception))
        with self.assertRaisesRegex(CanonicalizationError, "send such ids as strings"):
            canonicalize({"id": 12345678901234567890})
        with self.assertRaisesRegex(CanonicalizationError, "send such ids as strings"):
            canonicalize(b'{"id": 12345678901234567890}')


class StringsAndObjectsTest(unittest.TestCase):
    def test_escapes(self):
        self.assertEqual(c("\"\\/\b\f\n\r\t\x00\x1f\x7f<>&\u2028\u20ac\U0001F600"),
                         '"\\"\\\\/\\b\\f\\n\\r\\t\\u0000\\u001f\x7f<>&\u2028\u20ac\U0001F600"')

    def test_utf16_member_order(self):
        # U+1F600 is D83D DE00 in UTF-16, which sorts before U+E000 (code
        # point order would put it after).
        self.assertEqual(c({"\ue000": 1, "\U0001F600": 2, "a": 3, "": 4, "aa": 5, "B": 6}),
                         '{"":4,"B":6,"a":3,"aa":5,"\U0001F600":2,"\ue000":1}')

    def test_rfc8785_sorting_example(self):
        value = {"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
                 "1": "One", "\U0001F600": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}
        keys = [k for k in __import__("json").loads(c(value))]
        self.assertEqual(keys, ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001F600", "\ufb33"])

    def test_containers(self):
        self.assertEqual(c({}), "{}")
        self.assertEqual(c([]), "[]")
        self.assertEqual(c(("a", ["b"])), '["a",["b"]]')
        self.assertEqual(c(collections.OrderedDict([("b", 1), ("a", 2)])), '{"a":2,"b":1}')

    def test_refused_values(self):
        cases = {
            "lone surrogate": {"a": "x\ud800"},
            "lone surrogate key": {"\udc00": 1},
            "surrogate pair as two code points": {"a": "\ud83d\ude00"},
            "int key": {1: "a"},
            "set": {"a": {1, 2}},
            "bytes inside": {"a": b"x"},
            "decimal": {"amount": decimal.Decimal("1.10")},
            "object": {"a": object()},
        }
        for name, value in cases.items():
            with self.subTest(name):
                self.assertRaises(CanonicalizationError, canonicalize, value)

    def test_depth(self):
        deep = []
        for _ in range(127):
            deep = [deep]
        self.assertEqual(c(deep), "[" * 128 + "]" * 128)
        with self.assertRaisesRegex(CanonicalizationError, "deeper than 128"):
            canonicalize([deep])
        self.assertEqual(canonicalize(b"[" * 128 + b"]" * 128), b"[" * 128 + b"]" * 128)
        self.assertRaises(CanonicalizationError, canonicalize, b"[" * 129 + b"]" * 129)
        self.assertRaises(CanonicalizationError, canonicalize, b"[" * 100000 + b"]" * 100000)


class JSONTextTest(unittest.TestCase):
    def test_text_is_parsed_then_canonicalized(self):
        self.assertEqual(canonicalize(b' { "b" : [1.0E2, -0, 1e-400], "a":"\\u0041\\ud83d\\ude00" } '),
                         '{"a":"A\U0001F600","b":[100,0,0]}'.encode())
        self.assertEqual(canonicalize(bytearray(b'"x"')), b'"x"')

    def test_refused_text(self):
        cases = {
            "duplicate names": b'{"a":1,"\\u0061":2}',
            "lone surrogate escape": b'{"a":"\\ud800"}',
            "invalid utf-8": b'{"a":"\xff"}',
            "encoded surrogate": b'{"a":"\xed\xa0\x80"}',
            "byte order mark": b'\xef\xbb\xbf{}',
            "NaN literal": b'{"a":NaN}',
            "Infinity literal": b'{"a":-Infinity}',
            "out of double range": b'{"a":1e400}',
            "trailing comma": b'{"a":1,}',
            "two values": b'{} {}',
            "empty": b'',
            "raw control in string": b'{"a":"\x01"}',
        }
        for name, text in cases.items():
            with self.subTest(name):
                self.assertRaises(CanonicalizationError, canonicalize, text)


class DeriveKeyTest(unittest.TestCase):
    def test_hand_checked_key(self):
        # printf '%s' 'sess-01J8ZK4Q7XKZ3V9W6T2R5M0ABC:0:provision-infra:{}' | sha256sum
        self.assertEqual(derive_key("sess-01J8ZK4Q7XKZ3V9W6T2R5M0ABC", 0, "provision-infra", {}),
                         "6bb51eb681a9297eb10b33022b18e8165e8c18ebae68dd035b360cda305f1482")

    def test_spellings_of_one_call_have_one_key(self):
        a = derive_key("s", 3, "t", {"n": 1, "m": [1.0, "x"]})
        self.assertEqual(a, derive_key("s", 3, "t", b'{ "m": [1e0, "\\u0078"], "n": 1.00 }'))
        self.assertNotEqual(a, derive_key("s", 4, "t", {"n": 1, "m": [1.0, "x"]}))

    def test_invalid_inputs(self):
        good = ("s", 0, "echo", {})
        cases = {
            "session with colon": ("a:b", 0, "echo", {}),
            "empty session": ("", 0, "echo", {}),
            "session with space": ("a b", 0, "echo", {}),
            "session non-ascii": ("caf\u00e9", 0, "echo", {}),
            "session too long": ("s" * 257, 0, "echo", {}),
            "session not str": (b"s", 0, "echo", {}),
            "negative step": ("s", -1, "echo", {}),
            "fractional step": ("s", 1.5, "echo", {}),
            "float step": ("s", 1.0, "echo", {}),
            "bool step": ("s", True, "echo", {}),
            "string step": ("s", "1", "echo", {}),
            "step beyond 2^53-1": ("s", 2**53, "echo", {}),
            "tool upper case": ("s", 0, "Echo", {}),
            "tool too long": ("s", 0, "e" * 65, {}),
            "args a list": ("s", 0, "echo", [1]),
            "args text not an object": ("s", 0, "echo", b"[1]"),
            "args None": ("s", 0, "echo", None),
        }
        self.assertEqual(len(derive_key(*good)), 64)
        self.assertEqual(len(derive_key("s" * 256, 2**53 - 1, "e" * 64, {})), 64)
        for name, inputs in cases.items():
            with self.subTest(name):
                self.assertRaises(InvalidInputError, derive_key, *inputs)


class MCPMetaTest(unittest.TestCase):
    def test_members(self):
        self.assertEqual(mcp_meta("run-1", 7), {"io.github.toolgateway/sessionId": "run-1",
                                                "io.github.toolgateway/stepIndex": 7})
        meta = mcp_meta("run-1", 7, "echo", {"a": 1})
        self.assertEqual(meta["io.github.toolgateway/idempotencyKey"], derive_key("run-1", 7, "echo", {"a": 1}))
        self.assertIsInstance(meta["io.github.toolgateway/stepIndex"], int)

    def test_refusals(self):
        self.assertRaises(InvalidInputError, mcp_meta, "a:b", 0)
        self.assertRaises(InvalidInputError, mcp_meta, "a", -1)
        self.assertRaises(InvalidInputError, mcp_meta, "a", 0, "echo")  # args missing
        self.assertRaises(InvalidInputError, mcp_meta, "a", 0, "echo", {"x": math.nan})


def load_tests(loader, tests, pattern):
    """Also run the examples in the docstrings."""
    import doctest
    import toolgateway.canonical
    tests.addTests(doctest.DocTestSuite(toolgateway.canonical))
    return tests


if __name__ == "__main__":
    unittest.main()
