"""Exceptions of the SDK.

Two families, so callers can tell "fix the call" from "the gateway answered":

* :class:`InvalidInputError` (a ``ValueError``) and its subclass
  :class:`CanonicalizationError`: the inputs of a call are unusable (not JSON,
  NaN, an integer beyond 2^53-1, a bad session id, step or tool name, a bad
  base URL). Raised before any request is sent.
* :class:`GatewayError`: the gateway (or a proxy in front of it) answered with
  a problem document or a 5xx. :class:`GatewayConnectionError`: no answer at
  all, after the retries.
"""

import datetime
from typing import Any, Dict, Optional


class InvalidInputError(ValueError):
    """The inputs of a call are invalid; nothing was sent."""


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
        status: the HTTP status.
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
        text = f"toolgateway: {self.status}"
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
