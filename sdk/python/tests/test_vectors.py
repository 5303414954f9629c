"""Every vector of keyderive/testdata/vectors.json, byte for byte."""

import json
import os
import unittest

from _support import REPO_ROOT

import toolgateway
from toolgateway import CanonicalizationError

VECTORS = os.path.join(REPO_ROOT, "keyderive", "testdata", "vectors.json")


def _has_unsafe_integer_literal(text: str) -> bool:
    value = json.loads(text, parse_int=lambda s: ("BIG" if abs(int(s)) > 2**53 - 1 else int(s)))
    return "BIG" in json.dumps(value)


class VectorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(VECTORS, encoding="utf-8") as f:
            cls.vectors = json.load(f)

    def test_there_are_vectors(self):
        self.assertGreaterEqual(len(self.vectors), 60)

    def test_every_vector_from_the_value(self):
        # RFC 8785 reads every JSON number as an IEEE-754 double; parse_int=float
        # does that for the integer literals, so big literals round as in JCS.
        for v in self.vectors:
            with self.subTest(v["name"]):
                value = json.loads(v["args"], parse_int=float)
                self.assertEqual(toolgateway.canonicalize(value), v["canonical"].encode("utf-8"))
                self.assertEqual(toolgateway.derive_key(v["session_id"], v["step_index"], v["tool"], value), v["key"])

    def test_every_vector_from_the_json_text(self):
        # The SDK's own JSON-text path (bytes arguments). It refuses integer
        # literals beyond 2^53-1 rather than rounding them: those vectors must
        # fail with the "send such ids as strings" error, every other one must
        # match byte for byte.
        refused = 0
        for v in self.vectors:
            with self.subTest(v["name"]):
                text = v["args"].encode("utf-8")
                if _has_unsafe_integer_literal(v["args"]):
                    refused += 1
                    with self.assertRaisesRegex(CanonicalizationError, "send such ids as strings"):
                        toolgateway.canonicalize(text)
                    continue
                self.assertEqual(toolgateway.canonicalize(text), v["canonical"].encode("utf-8"))
                self.assertEqual(toolgateway.derive_key(v["session_id"], v["step_index"], v["tool"], text), v["key"])
        # The RFC 8785 Appendix B integers 2^53, -2^53, 2^68, 999999999999999700000,
        # 999999999999999900000, and 2^53+1, 12345678901234567890.
        self.assertEqual(refused, 7)


if __name__ == "__main__":
    unittest.main()
