"""Exceptions of the SDK.

Two families, so callers can tell "fix the call" from "the gateway answered":

* :class:`InvalidInputError` (a ``ValueError``) and its subclass
  :class:`CanonicalizationError`: the inputs of a call are unusable (not JSON,
  NaN, an integer beyond 2^53-1, a bad session id, step or tool name, a bad
  base URL). Raised before any request is sent.
* :class:`GatewayError`: the gateway (or a proxy in front of it) answered with
  a problem document or a 5xx. :class:`GatewayConnectionError`: no answer at
  all, after the retries.

The answers an agent (or a runtime adapter) must tell apart have a subclass
of :class:`GatewayError` each, chosen by :func:`error_class` from the code:
:class:`ApprovalPendingError`; :class:`DeniedError` (:class:`CallDeniedError`,
:class:`ApprovalDeniedError`, :class:`ApprovalExpiredError`: it never ran);
:class:`StepConflictError`; :class:`EffectConflictError`;
:class:`OutcomeUnknownError` (it may have run: an operator resolves it);
:class:`ToolFailedError`; :class:`GatewayUnavailableError` (an outage of the
store, the upstream or the gateway: nothing recorded, the same call may be
made again later). :class:`InvalidInputError` subclass
:class:`IdentityError`: an adapter cannot read a stable session or step.
"""

import datetime
from typing import Any, Dict, Optional, Type

from . import wire


class InvalidInputError(ValueError):
    """The inputs of a call are invalid; nothing was sent."""


class IdentityError(InvalidInputError):
    """A runtime adapter cannot read a stable identity (a session id, a
    step) from the runtime's object; the message names what is missing.
    Raised when the tools are wrapped, or at the call when only the call
    lacks it; never replaced by a random or per-turn id."""


class CanonicalizationError(InvalidInputError):
    """A value cannot be written as RFC 8785 canonical JSON (I-JSON).

    ``path`` is a JSON Pointer to the offending value ("" for the root).
    """

    def __init__(self, message: str, path: str = "") -> None:
        where = f" at {path}" if path else ""
        super().__init__(f"toolgateway: {message}{where}")
        self.path = path


class GatewayError(Exception):
    """A problem response (RFC 9457 ``application/problem+json``) or a 5xx.

    Attributes:
        status: the HTTP status (0 for an answer over MCP: :mod:`toolgateway.mcp`).
        code: the contract's machine-readable code, such as ``"step_conflict"``
            (``""`` when the body was not a problem document, e.g. a proxy's 502).
        title, detail: the problem's human-readable members.
        retryable: whether the same request, unchanged, may succeed later.
        problem: the whole problem document as a dict (``{}`` if none), with
            every extra member, e.g. ``errors`` of ``invalid_arguments`` or
            ``tool`` and ``execution_id`` of ``step_conflict``.
        expected_key, canonical_arguments: for ``idempotency_key_mismatch``,
            the key the gateway derived and the canonical text it derived it
            from (``None`` otherwise).
        approval_id: the call's approval (``approval_pending``,
            ``approval_denied``, ``approval_expired``; ``""`` otherwise).
        reason, by: why the call was refused and who decided
            (``call_denied``, ``approval_denied``, ``approval_expired``).
        retry_after: the response's ``Retry-After`` in seconds (``None`` if absent).
        request_id: the gateway's ``X-Request-Id``.
        body: the response body exactly as received.
        attempts: how many HTTP requests the call made before this answer.
    """

    def __init__(
        self,
        status: int,
        problem: Optional[Dict[str, Any]] = None,
        *,
        body: bytes = b"",
        retry_after: Optional[float] = None,
        request_id: str = "",
        retryable: Optional[bool] = None,
        attempts: int = 1,
    ) -> None:
        self.status = status
        self.problem: Dict[str, Any] = problem or {}
        self.code: str = _str(self.problem.get("code"))
        self.title: str = _str(self.problem.get("title"))
        self.detail: str = _str(self.problem.get("detail"))
        if retryable is None:
            retryable = self.problem.get("retryable") is True
        self.retryable = retryable
        self.expected_key: Optional[str] = self.problem.get("expected_key")
        self.canonical_arguments: Optional[str] = self.problem.get("canonical_arguments")
        self.approval_id: str = _str(self.problem.get("approval_id"))
        self.reason: str = _str(self.problem.get("reason"))
        self.by: str = _str(self.problem.get("by"))
        self.retry_after = retry_after
        self.request_id = request_id
        self.body = body
        self.attempts = attempts
        super().__init__(self._message())

    def _message(self) -> str:
        text = "toolgateway:"
        if self.status:  # 0: the answer came over MCP (toolgateway.mcp), not as an HTTP problem
            text += f" {self.status}"
        if self.code:
            text += " " + self.code
        if self.title:
            text += ": " + self.title
        if self.detail:
            text += ": " + self.detail
        return text


class ApprovalPendingError(GatewayError):
    """409 ``approval_pending``: the tool's rules hold the call for a human's
    approval; nothing ran.

    Raised at once, never retried, although the gateway marks it retryable: a
    human answers in minutes or hours, so the agent pauses (checkpoints) and
    makes the same call again (same session, step, tool and arguments) once
    the approval is decided; it then runs once, or raises ``approval_denied``
    / ``approval_expired``. For a rule with ``approver: caller``, answer with
    :meth:`toolgateway.Client.approve` / :meth:`~toolgateway.Client.deny`.

    Attributes (beside :class:`GatewayError`'s):
        approval_id: the approval's id (a ULID).
        expires_at: when it expires undecided (an aware ``datetime``, or
            ``None`` if the gateway did not say).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.expires_at: Optional[datetime.datetime] = _parse_time(self.problem.get("approval_expires_at"))


class DeniedError(GatewayError):
    """403 ``call_denied``, ``approval_denied`` or ``approval_expired``: the
    tool's rules or a human said no (``reason``, ``by``); the call never ran
    and will not run under this step."""


class CallDeniedError(DeniedError):
    """403 ``call_denied``: a ``decide`` rule denies the call."""


class ApprovalDeniedError(DeniedError):
    """403 ``approval_denied``: the approver denied the call."""


class ApprovalExpiredError(DeniedError):
    """403 ``approval_expired``: nobody decided in time, or the approved call
    came back too late."""


class StepConflictError(GatewayError):
    """422 ``step_conflict``: this step of the session already ran another call
    (``problem["tool"]``, ``problem["execution_id"]``); this one did not run."""


class EffectConflictError(GatewayError):
    """409 ``effect_conflict``: the tool's effect key is held by another call
    with other arguments (``problem["execution_id"]``); this one did not run."""


class OutcomeUnknownError(GatewayError):
    """409 ``outcome_unknown``: an earlier attempt may have acted and its
    outcome is not known; an operator resolves it. Never retried."""


class ToolFailedError(GatewayError):
    """500 ``tool_failed``: the tool failed; nothing is recorded, the same call
    runs the tool again."""


class GatewayUnavailableError(GatewayError):
    """An outage answered with a status: 503 ``store_unavailable`` (the tool
    did not run), ``upstream_unavailable``, 502 ``upstream_unreachable``, 504
    ``tool_timeout``, 429 ``rate_limited`` or a proxy's 5xx, still so when the
    client's retries ran out. Nothing is recorded as done: make the same
    call again later."""


_BY_CODE: Dict[str, Type[GatewayError]] = {
    wire.CODE_APPROVAL_PENDING: ApprovalPendingError,
    wire.CODE_CALL_DENIED: CallDeniedError,
    wire.CODE_APPROVAL_DENIED: ApprovalDeniedError,
    wire.CODE_APPROVAL_EXPIRED: ApprovalExpiredError,
    wire.CODE_STEP_CONFLICT: StepConflictError,
    wire.CODE_EFFECT_CONFLICT: EffectConflictError,
    wire.CODE_OUTCOME_UNKNOWN: OutcomeUnknownError,
    wire.CODE_TOOL_FAILED: ToolFailedError,
    wire.CODE_STORE_UNAVAILABLE: GatewayUnavailableError,
    wire.CODE_UPSTREAM_UNAVAILABLE: GatewayUnavailableError,
    wire.CODE_UPSTREAM_UNREACHABLE: GatewayUnavailableError,
    wire.CODE_TOOL_TIMEOUT: GatewayUnavailableError,
    wire.CODE_RATE_LIMITED: GatewayUnavailableError,
}


def error_class(status: int, code: str) -> Type[GatewayError]:
    """The :class:`GatewayError` subclass for an answer's status and problem
    code (a 5xx without a known code is :class:`GatewayUnavailableError`)."""
    found = _BY_CODE.get(code)
    if found is not None:
        return found
    if status >= 500:
        return GatewayUnavailableError
    return GatewayError


class GatewayConnectionError(ConnectionError):
    """The gateway could not be reached (or the answer was cut off), and the
    retries allowed by the client's bound are used up. ``__cause__`` is the
    last attempt's error; ``attempts`` counts the requests made."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _parse_time(value: Any) -> Optional[datetime.datetime]:
    """An RFC 3339 time (``Z`` or an offset), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
