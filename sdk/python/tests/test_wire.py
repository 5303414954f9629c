"""toolgateway.wire mirrors the Go package wire: same names, same values."""

import os
import re
import unittest

from _support import REPO_ROOT

from toolgateway import wire

WIRE_GO = os.path.join(REPO_ROOT, "wire", "wire.go")
# A constant inside a const block or alone:  Name = "text" | Name = -32602 | Name = MetaPrefix + "x"
_CONST = re.compile(r'^\s*(?:const\s+)?([A-Z][A-Za-z0-9]*)\s*=\s*(.+?)\s*(?://.*)?$', re.M)
# One operand: a string literal without escapes, an integer, or an earlier constant.
_TERM = re.compile(r'"[^"\\]*"|-?\d+|[A-Za-z]\w*')


def python_name(go_name: str) -> str:
    """HeaderIdempotencyKey -> HEADER_IDEMPOTENCY_KEY, RPCInvalidParams -> RPC_INVALID_PARAMS."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", go_name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).upper()


def go_constants() -> dict:
    with open(WIRE_GO, encoding="utf-8") as f:
        source = f.read()
    values: dict = {}
    for name, expression in _CONST.findall(source):
        total = None
        terms = _TERM.findall(expression)
        if "+".join(terms).replace(" ", "") != expression.replace(" ", ""):
            raise AssertionError(f"wire.go: cannot read {name} = {expression}")
        for term in terms:
            if term.startswith('"') and term.endswith('"'):
                part = term[1:-1]
            elif re.fullmatch(r"-?\d+", term):
                part = int(term)
            elif term in values:
                part = values[term]
            else:
                raise AssertionError(f"wire.go: cannot evaluate {name} = {expression}")
            total = part if total is None else total + part
        values[name] = total
    return values


class WireTest(unittest.TestCase):
    def test_names(self):
        self.assertEqual(python_name("HeaderIdempotencyKey"), "HEADER_IDEMPOTENCY_KEY")
        self.assertEqual(python_name("HeaderSessionID"), "HEADER_SESSION_ID")
        self.assertEqual(python_name("RPCInvalidParams"), "RPC_INVALID_PARAMS")
        self.assertEqual(python_name("MediaTypeJSON"), "MEDIA_TYPE_JSON")

    def test_every_go_constant_is_mirrored_with_its_value(self):
        constants = go_constants()
        self.assertGreater(len(constants), 50, "wire.go parsed to too few constants")
        for go_name, value in constants.items():
            with self.subTest(go_name):
                name = python_name(go_name)
                self.assertTrue(hasattr(wire, name), f"toolgateway.wire lacks {name} (Go {go_name} = {value!r})")
                self.assertEqual(getattr(wire, name), value)

    def test_nothing_extra_in_python(self):
        mirrored = {python_name(n) for n in go_constants()}
        extra = {n for n in vars(wire) if n.isupper() and n not in mirrored}
        self.assertEqual(extra, set(), "constants in toolgateway.wire that wire.go does not define")


if __name__ == "__main__":
    unittest.main()
