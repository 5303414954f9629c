"""Idempotency-key derivation, identical to the Go package ``keyderive``::

    key = lowercase_hex(SHA-256(session_id ":" step_index ":" tool ":" JCS(args)))
"""

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Dict, Optional, Tuple

from . import wire
from .canonical import JSONText, MAX_SAFE_INTEGER, canonicalize, parse_json_text
from .errors import CanonicalizationError, InvalidInputError

#: Largest step index (2^53-1).
MAX_STEP_INDEX = MAX_SAFE_INTEGER
#: Longest session id.
MAX_SESSION_ID_LENGTH = 256

_SESSION_ID = re.compile(r"[\x21-\x39\x3b-\x7e]{1,256}")  # visible ASCII without ':'
_TOOL_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def validate_session_id(session_id: Any) -> str:
    """Check the ``Agent-Session-Id`` rules: a ``str`` of 1-256 visible ASCII
    characters (0x21-0x7E) without ``:``. Returns it.

    Raises:
        InvalidInputError: it breaks a rule.
    """
    if not isinstance(session_id, str):
        raise InvalidInputError(f"toolgateway: session id must be a str, not {type(session_id).__name__}")
    if not _SESSION_ID.fullmatch(session_id):
        if not 1 <= len(session_id) <= MAX_SESSION_ID_LENGTH:
            reason = f"its length is {len(session_id)}, want 1-{MAX_SESSION_ID_LENGTH}"
        else:
            bad = next(c for c in session_id if not ("\x21" <= c <= "\x7e") or c == ":")
            reason = f"it contains {bad!r}; allowed: visible ASCII 0x21-0x7E except ':'"
        raise InvalidInputError(f"toolgateway: invalid session id: {reason}")
    return session_id


def validate_step_index(step_index: Any) -> int:
    """Check that the step index is an ``int`` (not a bool or float) in
    0 ... 2^53-1. Returns it.

    Raises:
        InvalidInputError: it is not.
    """
    if isinstance(step_index, bool) or not isinstance(step_index, int):
        raise InvalidInputError(
            f"toolgateway: step index must be an int, not {type(step_index).__name__} ({step_index!r})")
    if not 0 <= step_index <= MAX_STEP_INDEX:
        raise InvalidInputError(f"toolgateway: step index {step_index} is outside 0 ... 2^53-1")
    return int(step_index)


def validate_tool_name(tool: Any) -> str:
    """Check the tool name against ``^[a-z0-9][a-z0-9_-]{0,63}$``. Returns it.

    Raises:
        InvalidInputError: it does not match.
    """
    if not isinstance(tool, str) or not _TOOL_NAME.fullmatch(tool):
        raise InvalidInputError(f"toolgateway: invalid tool name {tool!r}: want ^[a-z0-9][a-z0-9_-]{{0,63}}$")
    return tool


def derive(session_id: str, step_index: int, tool: str, args: Any) -> Tuple[str, bytes]:
    """Return ``(key, canonical_arguments)`` for a call; see :func:`derive_key`."""
    validate_session_id(session_id)
    validate_step_index(step_index)
    validate_tool_name(tool)
    if isinstance(args, (bytes, bytearray, memoryview)):
        args = parse_json_text(args)
    if not isinstance(args, Mapping):
        raise CanonicalizationError(f"arguments must be a JSON object (a dict), not {type(args).__name__}")
    canonical = canonicalize(args)
    digest = hashlib.sha256()
    digest.update(f"{session_id}:{step_index}:{tool}:".encode("ascii"))
    digest.update(canonical)
    return digest.hexdigest(), canonical


def derive_key(session_id: str, step_index: int, tool: str, args: Any) -> str:
    """Derive the ``Idempotency-Key`` of a tool call.

    Args:
        session_id: the agent run, 1-256 visible ASCII characters without ``:``.
        step_index: the call's step in the session, an ``int`` 0 ... 2^53-1.
        tool: the tool name, ``^[a-z0-9][a-z0-9_-]{0,63}$``.
        args: the arguments, a ``dict`` (or JSON object text as ``bytes``).

    Returns:
        64 lowercase hex characters.

    Raises:
        InvalidInputError: an input breaks its rule (CanonicalizationError for
            arguments that are not I-JSON).
    """
    return derive(session_id, step_index, tool, args)[0]


def mcp_meta(session_id: str, step_index: int, tool: Optional[str] = None,
             args: Any = None) -> Dict[str, Any]:
    """The ``_meta`` of an MCP ``tools/call`` request for this call.

    Returns ``{"io.github.toolgateway/sessionId": ..., ".../stepIndex": <int>}``
    and, when ``tool`` and ``args`` are both given, ``".../idempotencyKey"``
    with the derived key (the gateway checks it against its own derivation).

    Raises:
        InvalidInputError: an input breaks its rule.
    """
    meta: Dict[str, Any] = {
        wire.META_SESSION_ID: validate_session_id(session_id),
        wire.META_STEP_INDEX: validate_step_index(step_index),
    }
    if (tool is None) != (args is None):
        raise InvalidInputError("toolgateway: mcp_meta needs both tool and args for the key, or neither")
    if tool is not None:
        meta[wire.META_IDEMPOTENCY_KEY] = derive_key(session_id, step_index, tool, args)
    return meta
