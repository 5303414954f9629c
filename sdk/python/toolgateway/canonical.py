"""RFC 8785 (JSON Canonicalization Scheme) for Python values.

The canonical bytes are what the gateway derives the idempotency key from, so
they must match the Go implementation (package ``keyderive``) byte for byte:

* numbers are IEEE-754 doubles written as ECMAScript's ``Number.prototype.
  toString`` writes them (shortest round-trip digits; exponent form below 1e-6
  and from 1e21 on: ``1e+21``, ``1.5e-7``; ``-0`` is ``0``; ``1.0`` is ``1``);
* object members are sorted by their names as arrays of UTF-16 code units;
* strings escape only ``"``, ``\\``, ``\\b \\t \\n \\f \\r`` and the other
  control characters (as ``\\u00xx``); everything else is written as UTF-8.

Refused, with a :class:`~toolgateway.errors.CanonicalizationError` naming the
place: NaN and infinities, Python ``int`` values beyond +/-(2^53-1) (a JavaScript
runtime could not even hold them; send such ids as strings), strings with lone
surrogates, non-string member names, nesting deeper than 128 levels, and any
value that is not JSON (sets, bytes inside a value, ``Decimal``, objects).
"""

import json
import math
import re
from collections.abc import Mapping
from typing import Any, List, Union

from .errors import CanonicalizationError

#: Largest magnitude of an integer every JSON implementation holds exactly.
MAX_SAFE_INTEGER = 2**53 - 1

#: Deepest nesting of arrays and objects accepted (the gateway's limit).
MAX_DEPTH = 128

#: JSON text: ``bytes``-like arguments are parsed as a JSON document.
JSONText = Union[bytes, bytearray, memoryview]

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
for _code in range(0x20):
    _ESCAPES.setdefault(chr(_code), "\\u%04x" % _code)
_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f]')
_SURROGATE = re.compile("[\ud800-\udfff]")


def canonicalize(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of ``value``.

    ``value`` is a JSON value as Python holds it: ``dict`` (or any mapping
    with ``str`` keys), ``list``/``tuple``, ``str``, ``int``, ``float``,
    ``bool``, ``None``. ``bytes``, ``bytearray`` and ``memoryview`` are taken
    as JSON *text* and parsed first (strictly: UTF-8, no duplicate member
    names, no NaN literals), like ``json.RawMessage`` in the Go SDK.

    >>> canonicalize({"b": [1.0, 1e21, -0.0], "a": "\\u20ac"})
    b'{"a":"\\xe2\\x82\\xac","b":[1,1e+21,0]}'

    Raises:
        CanonicalizationError: the value is not I-JSON (see the module docs).
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = parse_json_text(value)
    out: List[str] = []
    _write(value, out, "", 0)
    return "".join(out).encode("utf-8")


def parse_json_text(text: JSONText) -> Any:
    """Parse JSON text the way the SDK canonicalizes it.

    Strict where Python's ``json`` is lenient: the bytes must be UTF-8 (no
    byte-order mark), member names unique, and ``NaN``/``Infinity`` are not
    JSON. Integers are kept as ``int`` (so one beyond 2^53-1 is refused when
    canonicalized), other numbers become ``float``.

    Raises:
        CanonicalizationError: the text is not such JSON.
    """
    try:
        decoded = bytes(text).decode("utf-8")
    except UnicodeDecodeError as err:
        raise CanonicalizationError(f"JSON text is not valid UTF-8 ({err.reason} at byte {err.start})") from None
    try:
        return json.loads(decoded, object_pairs_hook=_unique_members, parse_constant=_refuse_constant)
    except RecursionError:
        raise CanonicalizationError(f"JSON text nests more than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as err:
        raise CanonicalizationError(f"invalid JSON text: {err}") from None


def format_number(number: Union[int, float]) -> str:
    """Write a number as RFC 8785 (ECMAScript ``Number::toString``) does.

    Raises:
        CanonicalizationError: NaN, an infinity, or an ``int`` beyond 2^53-1.
    """
    return _number(number, "")


def _unique_members(pairs: List[Any]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for name, _ in pairs:
            if name in seen:
                raise CanonicalizationError(f"duplicate member name {json.dumps(name)} in JSON text")
            seen.add(name)
    return obj


def _refuse_constant(name: str) -> Any:
    raise CanonicalizationError(f"{name} is not a JSON number")


def _write(value: Any, out: List[str], path: str, depth: int) -> None:
    # bool before int: True is an int in Python, but JSON's true.
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value, path))
    elif isinstance(value, (int, float)):
        out.append(_number(value, path))
    elif isinstance(value, Mapping):
        if depth >= MAX_DEPTH:
            raise CanonicalizationError(f"nesting deeper than {MAX_DEPTH} levels", path)
        members = []
        for name, member in value.items():
            if not isinstance(name, str):
                raise CanonicalizationError(
                    f"member name {name!r} is a {type(name).__name__}, not a str", path)
            members.append((name.encode("utf-16-be", "surrogatepass"), name, member))
        members.sort(key=lambda entry: entry[0])
        out.append("{")
        for i, (_, name, member) in enumerate(members):
            if i:
                out.append(",")
            member_path = path + "/" + name.replace("~", "~0").replace("/", "~1")
            out.append(_string(name, member_path))
            out.append(":")
            _write(member, out, member_path, depth + 1)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        if depth >= MAX_DEPTH:
            raise CanonicalizationError(f"nesting deeper than {MAX_DEPTH} levels", path)
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out, f"{path}/{i}", depth + 1)
        out.append("]")
    else:
        raise CanonicalizationError(
            f"a {type(value).__name__} is not JSON-serialisable "
            "(use dict, list, str, int, float, bool or None)", path)


def _string(text: str, path: str) -> str:
    if _SURROGATE.search(text):
        raise CanonicalizationError("string contains a lone UTF-16 surrogate (not valid Unicode text)", path)
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _ESCAPES[m.group()], text) + '"'


def _number(number: Union[int, float], path: str) -> str:
    if isinstance(number, bool):  # only when called directly through format_number
        raise CanonicalizationError("a bool is not a number", path)
    if isinstance(number, int):
        if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
            return str(int(number))
        raise CanonicalizationError(
            f"integer {number} is beyond +/-(2^53-1) and would lose precision as a JSON number; "
            "send such ids as strings", path)
    if math.isnan(number) or math.isinf(number):
        raise CanonicalizationError(f"{number!r} is not a JSON number", path)
    return _es_number_to_string(float(number))


def _es_number_to_string(x: float) -> str:
    """ECMAScript Number::toString(x) for a finite double (ES2023 7.1.12.1)."""
    if x == 0:
        return "0"  # also -0
    # repr gives the shortest digits that round-trip, choosing the closest
    # such string, which is the (s, k, n) the ECMAScript algorithm asks for.
    text = repr(x)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    stripped = digits.lstrip("0")
    # value = 0.<digits without leading zeros> * 10**n
    n = len(whole) - (len(digits) - len(stripped)) + (int(exponent) if exponent else 0)
    s = stripped.rstrip("0")
    k = len(s)
    if k <= n <= 21:
        return sign + s + "0" * (n - k)
    if 0 < n <= 21:
        return sign + s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + s
    e = n - 1
    exp = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return sign + s + "e" + exp
    return sign + s[0] + "." + s[1:] + "e" + exp
