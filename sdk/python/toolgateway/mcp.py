"""Calling the gateway's ``/mcp`` endpoint from Python MCP clients.

``pip install 'toolgateway[mcp]'``. Works with the official ``mcp`` SDK (2.x:
``mcp.ClientSession`` and ``mcp.Client``) and with FastMCP's ``Client``
(4.x): one call sends the agent's identity in the request's ``_meta`` and
turns the gateway's refusals into typed errors::

    from toolgateway.mcp import call_tool

    result = await call_tool(session, "refund", {"order": "A-1"},
                             session_id=run.id, step_index=run.step_of(call))

The gateway derives the call's key from the session, the step, the tool and
the arguments (docs/keys.md), so the same call sent again — by a retry, or by
a new process resuming the run — replays the first outcome instead of
running the tool again. The step must come from the run's checkpointed state
(never a JSON-RPC id, a counter bumped per attempt or a clock).

Errors. A JSON-RPC error from the gateway (``error.data.code``: a
``step_conflict``, a malformed identity, ``request_in_progress``, …) and a
tool result the gateway marked with ``_meta["io.github.toolgateway/error"]``
(``approval_pending``, ``approval_denied``, ``call_denied``, ``tool_failed``,
…) are raised as the REST client's typed errors, chosen by the code:
:class:`toolgateway.ApprovalPendingError` (``approval_id``, ``expires_at``),
:class:`~toolgateway.errors.StepConflictError`,
:class:`~toolgateway.errors.DeniedError` and its subclasses,
:class:`~toolgateway.errors.ToolFailedError`,
:class:`~toolgateway.errors.GatewayUnavailableError`, … — every one a
:class:`toolgateway.GatewayError` with the code in ``code``, the answer's
``retryable``, ``retry_after`` (from ``data.retry_after_ms``) and ``detail``
(the JSON-RPC message, or the result's text, which the model can be shown).
Over MCP ``status`` is 0, and two attributes say what came:
``jsonrpc_code`` (the JSON-RPC error code; ``None`` for a tool result) and
``result`` (the gateway's ``CallToolResult``; ``None`` for a JSON-RPC
error). A result the tool itself answered with ``isError`` (a recorded 4xx:
the tool refused) is returned, not raised: it is the call's outcome, and it
replays like any other.

Approvals. A call held for an operator raises ``ApprovalPendingError`` at
once; the app keeps its state and makes the same call again once it is
decided. A call whose approval is the caller's (``approver: caller``) is
asked of the user through the client's own elicitation handler when it has
one (``mcp.Client(..., elicitation_callback=...)``,
``fastmcp.Client(..., elicitation_handler=...)``: protocol 2026-07-28); the
client sends the continuation itself, and ``call_tool`` returns the outcome.

This module imports nothing from ``mcp`` or ``fastmcp``; it reads the
clients' objects duck-typed.
"""

from typing import Any, Dict, Mapping, Optional

from . import wire
from .errors import GatewayError, InvalidInputError, error_class
from .keys import mcp_meta

__all__ = ["call_tool", "gateway_error", "replayed", "execution_id"]


async def call_tool(client: Any, tool: str, arguments: Optional[Mapping[str, Any]] = None, *,
                    session_id: str, step_index: int, meta: Optional[Mapping[str, Any]] = None,
                    timeout: Optional[float] = None) -> Any:
    """Call ``tool`` through the gateway's ``/mcp`` with the call's identity.

    Args:
        client: a connected ``mcp.ClientSession``, ``mcp.Client`` or
            ``fastmcp.Client`` whose transport points at the gateway's ``/mcp``.
        tool: the gateway's tool name.
        arguments: the tool's arguments (``None`` means ``{}``).
        session_id: the run's id, stable across resumes (``Agent-Session-Id``).
        step_index: the call's ordinal in the run's checkpointed history.
        meta: other ``_meta`` members to send beside the identity (a member
            of the gateway's own ``io.github.toolgateway/`` names is refused).
        timeout: seconds to wait for the answer (the client's default if ``None``).

    Returns:
        The client's ``CallToolResult`` (``mcp.types.CallToolResult``; FastMCP's
        raw MCP result, not its parsed one), with ``_meta`` naming the
        execution (:func:`execution_id`) and whether it was a replay
        (:func:`replayed`).

    Raises:
        InvalidInputError: a bad session id, step or ``meta``; nothing was sent.
        ApprovalPendingError: the call waits for a human's approval; nothing
            ran. Pause, and make the same call again once it is decided.
        GatewayError: the gateway refused the call or the tool failed, as
            its typed subclass (see the module's docstring); ``retryable``
            says whether the same call may be sent again.
    """
    request_meta: Dict[str, Any] = {}
    for name, value in (meta or {}).items():
        if name.startswith(wire.META_PREFIX):
            raise InvalidInputError(f"toolgateway: meta member {name!r} is the gateway's own; "
                                    "pass session_id and step_index instead")
        request_meta[name] = value
    request_meta.update(mcp_meta(session_id, step_index))
    args = dict(arguments or {})
    try:
        if hasattr(client, "call_tool_mcp"):
            # FastMCP: call_tool would raise its own ToolError for every
            # isError result and hide the gateway's _meta; the raw call keeps it.
            result = await client.call_tool_mcp(tool, args, timeout=timeout, meta=request_meta)
        else:
            result = await client.call_tool(tool, args, read_timeout_seconds=timeout, meta=request_meta)
    except Exception as exc:  # the clients raise mcp.MCPError; anything else is not ours
        error = gateway_error(exc)
        if error is None:
            raise
        raise error from exc
    error = gateway_error(result)
    if error is not None:
        raise error
    return result


def gateway_error(answer: Any) -> Optional[GatewayError]:
    """The typed error of a gateway answer, or ``None`` if it is not one.

    ``answer`` is an ``mcp.MCPError`` (a JSON-RPC error, read from
    ``error.data``) or a ``CallToolResult`` (an ``isError`` result, read from
    ``_meta["io.github.toolgateway/error"]``). For clients called without
    :func:`call_tool`.
    """
    error_data = getattr(getattr(answer, "error", None), "data", None)
    if isinstance(answer, Exception) and isinstance(error_data, Mapping):
        if not isinstance(error_data.get("code"), str):
            return None
        problem = dict(error_data)
        problem.setdefault("detail", getattr(answer.error, "message", ""))
        return _typed(problem, jsonrpc_code=getattr(answer.error, "code", None), result=None)
    if not getattr(answer, "is_error", False):
        return None
    marked = (getattr(answer, "meta", None) or {}).get(wire.META_ERROR)
    if not isinstance(marked, Mapping) or not isinstance(marked.get("code"), str):
        return None  # the tool's own refusal: an outcome, not an error
    problem = dict(marked)
    structured = getattr(answer, "structured_content", None)
    if isinstance(structured, Mapping):
        for name in ("approval_id", "approval_expires_at"):
            if name in structured:
                problem[name] = structured[name]
    problem.setdefault("detail", _text(answer))
    return _typed(problem, jsonrpc_code=None, result=answer)


def replayed(result: Any) -> bool:
    """Whether the gateway answered ``result`` from its record (a replay)."""
    return (getattr(result, "meta", None) or {}).get(wire.META_REPLAYED) is True


def execution_id(result: Any) -> str:
    """The execution's id (``Tool-Execution-Id`` over REST), ``""`` if none
    (a read-only tool's result has none)."""
    value = (getattr(result, "meta", None) or {}).get(wire.META_EXECUTION_ID)
    return value if isinstance(value, str) else ""


def _typed(problem: Dict[str, Any], *, jsonrpc_code: Optional[int], result: Any) -> GatewayError:
    retry_after_ms = problem.get("retry_after_ms")
    retry_after = retry_after_ms / 1000 if isinstance(retry_after_ms, (int, float)) else None
    # The REST client's classes, chosen by code alone: an MCP answer has no HTTP status (0).
    error = error_class(0, problem["code"])(0, problem, retry_after=retry_after)
    error.jsonrpc_code = jsonrpc_code  # type: ignore[attr-defined]
    error.result = result  # type: ignore[attr-defined]
    return error


def _text(result: Any) -> str:
    parts = [getattr(block, "text", None) for block in getattr(result, "content", None) or []]
    return "\n".join(part for part in parts if isinstance(part, str))
