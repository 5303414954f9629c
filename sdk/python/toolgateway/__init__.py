"""Python SDK of toolgateway: exactly-once tool calls for AI agents.

Every call carries an ``Idempotency-Key`` derived from the agent's session id,
the call's step index, the tool name and the RFC 8785 canonical JSON of the
arguments, so a call sent again (by a retry, or by a runtime that crashed and
resumed) is answered from the gateway's record instead of running twice::

    from toolgateway import Client

    client = Client("http://127.0.0.1:8080", token=token)
    session = client.session(checkpoint.session_id)
    result = session.call(checkpoint.step, "provision-infra", {"name": "db", "cpus": 2})
    print(result.status, result.replayed, result.execution_id, result.json())

Standard library only. See :mod:`toolgateway.runtimes` for choosing session
ids and step indices in LangGraph, the OpenAI Agents SDK and Temporal.
"""

from . import runtimes, wire
from .aio import AsyncClient, AsyncSession
from .canonical import MAX_DEPTH, MAX_SAFE_INTEGER, canonicalize, format_number, parse_json_text
from .client import Client, Result, Session
from .errors import (ApprovalDeniedError, ApprovalExpiredError, ApprovalPendingError, CallDeniedError,
                     CanonicalizationError, DeniedError, EffectConflictError, GatewayConnectionError, GatewayError,
                     GatewayUnavailableError, IdentityError, InvalidInputError, OutcomeUnknownError,
                     StepConflictError, ToolFailedError, error_class)
from .keys import (MAX_STEP_INDEX, derive_key, mcp_meta, validate_session_id,
                   validate_step_index, validate_tool_name)

__version__ = "0.1.0"

__all__ = [
    "ApprovalDeniedError",
    "ApprovalExpiredError",
    "ApprovalPendingError",
    "CallDeniedError",
    "DeniedError",
    "EffectConflictError",
    "GatewayUnavailableError",
    "IdentityError",
    "OutcomeUnknownError",
    "StepConflictError",
    "ToolFailedError",
    "error_class",
    "AsyncClient",
    "AsyncSession",
    "CanonicalizationError",
    "Client",
    "GatewayConnectionError",
    "GatewayError",
    "InvalidInputError",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "MAX_STEP_INDEX",
    "Result",
    "Session",
    "canonicalize",
    "derive_key",
    "format_number",
    "mcp_meta",
    "parse_json_text",
    "runtimes",
    "validate_session_id",
    "validate_step_index",
    "validate_tool_name",
    "wire",
]
