"""HTTP client for the gateway: derived keys, safe retries, typed results."""

import email.utils
import http.client
import json
import math
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Optional, Union

from . import wire
from .errors import GatewayConnectionError, GatewayError, InvalidInputError, error_class
from .keys import derive, validate_session_id

__all__ = ["Client", "Session", "Result"]

#: Default retry policy (documented in docs/sdk-python.md).
DEFAULT_MAX_ATTEMPTS = 8
DEFAULT_MAX_ELAPSED = 30.0
DEFAULT_INITIAL_BACKOFF = 0.1
DEFAULT_MAX_BACKOFF = 5.0
DEFAULT_PREFER_WAIT = 10
#: The longest Prefer: wait the gateway honours.
MAX_PREFER_WAIT = 60

_USER_AGENT = "toolgateway-python"
_RETRYABLE_STATUSES = frozenset({502, 503, 504})


class Result:
    """The tool's outcome, from its execution or from a replay.

    Attributes:
        status: the HTTP status the tool answered (2xx-4xx).
        body: the tool's response body, byte for byte.
        replayed: True when the gateway answered from its record of an earlier
            execution (``Idempotent-Replayed: true``): the tool did not run.
        execution_id: the execution's id (``Tool-Execution-Id``); a replay
            carries the id of the execution it replays.
        key: the ``Idempotency-Key`` that was sent.
        content_type: the response's ``Content-Type``.
        request_id: the gateway's ``X-Request-Id`` of the last attempt.
        attempts: how many HTTP requests the call took (1 without retries).
    """

    __slots__ = ("status", "body", "replayed", "execution_id", "key", "content_type", "request_id", "attempts")

    def __init__(self, status: int, body: bytes, replayed: bool, execution_id: str, key: str,
                 content_type: str = "", request_id: str = "", attempts: int = 1) -> None:
        self.status = status
        self.body = body
        self.replayed = replayed
        self.execution_id = execution_id
        self.key = key
        self.content_type = content_type
        self.request_id = request_id
        self.attempts = attempts

    def json(self) -> Any:
        """Decode the body as JSON.

        Raises:
            ValueError: the body is not JSON.
        """
        return json.loads(self.body)

    def __repr__(self) -> str:
        return (f"Result(status={self.status}, replayed={self.replayed}, "
                f"execution_id={self.execution_id!r}, key={self.key[:12]!r}..., body={self.body[:80]!r})")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would turn the POST into a GET or resend it elsewhere: the
    # 3xx is returned as the answer instead.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


class Client:
    """Calls tools on one gateway. Safe for concurrent use from threads.

    Args:
        base_url: the gateway's root URL, e.g. ``"https://gateway.internal"``;
            calls go to ``<base_url>/api/tools/v1/<tool>``.
        token: sent as ``Authorization: Bearer <token>`` when set.
        timeout: seconds one HTTP attempt may take (connect and answer).
        max_attempts: HTTP requests per call at most, the first included.
        max_elapsed: seconds after which no further attempt is started.
        initial_backoff, max_backoff: the first retry waits about
            ``initial_backoff``; each further one doubles it up to
            ``max_backoff``; every delay is drawn from the upper half of its
            ceiling ("equal jitter"). A ``Retry-After`` replaces the delay.
        prefer_wait: whole seconds sent as ``Prefer: wait=N`` (0 disables it):
            a duplicate of a call in flight gets its outcome as soon as it
            exists instead of a 409. Capped at 60 and kept below ``timeout``.

    Raises:
        InvalidInputError: a malformed base URL or token, or bad numbers.
    """

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 30.0, *,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, max_elapsed: float = DEFAULT_MAX_ELAPSED,
                 initial_backoff: float = DEFAULT_INITIAL_BACKOFF, max_backoff: float = DEFAULT_MAX_BACKOFF,
                 prefer_wait: int = DEFAULT_PREFER_WAIT) -> None:
        self.base_url = _check_base_url(base_url)
        _check_token(token)
        for name, number in (("timeout", timeout), ("max_elapsed", max_elapsed),
                             ("initial_backoff", initial_backoff), ("max_backoff", max_backoff)):
            if not isinstance(number, (int, float)) or isinstance(number, bool) or not number > 0:
                raise InvalidInputError(f"toolgateway: {name} must be a positive number, not {number!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise InvalidInputError(f"toolgateway: max_attempts must be an int >= 1, not {max_attempts!r}")
        if isinstance(prefer_wait, bool) or not isinstance(prefer_wait, int) or prefer_wait < 0:
            raise InvalidInputError(f"toolgateway: prefer_wait must be an int >= 0, not {prefer_wait!r}")
        self.token = token
        self.timeout = float(timeout)
        self.max_attempts = max_attempts
        self.max_elapsed = float(max_elapsed)
        self.initial_backoff = float(initial_backoff)
        self.max_backoff = max(float(max_backoff), self.initial_backoff)
        # The gateway holds the request up to N seconds: leave the attempt's
        # timeout room to receive the answer after that.
        self.prefer_wait = min(prefer_wait, MAX_PREFER_WAIT, max(0, math.ceil(self.timeout) - 5))
        self._opener = urllib.request.build_opener(_NoRedirect)
        # Replaced in tests to record the delays without waiting them.
        self._sleep: Callable[[float], None] = time.sleep
        self._clock: Callable[[], float] = time.monotonic
        self._random: Callable[[float, float], float] = random.uniform

    def session(self, session_id: str) -> "Session":
        """A handle for the agent run ``session_id`` (checked now: 1-256
        visible ASCII characters, no ``:``).

        Raises:
            InvalidInputError: the id breaks the rules.
        """
        return Session(self, validate_session_id(session_id))

    def approve(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """Approve ``approval_id`` for the caller's own human: the answer to an
        approval of a rule with ``approver: caller``, sent once with
        ``token``, the deciding person's own bearer token (their OIDC access
        token; this client's token without it, which the gateway refuses:
        ``approver: caller`` means a person, 403 ``not_an_approver``).
        Nothing runs now: the agent's next call of the same step runs the
        call, once.

        Raises:
            GatewayError: ``not_an_approver`` (no person's token, or not one
                of the rule's approvers), ``approval_not_yours`` (an operator
                decides it, or another tenant's), ``approval_not_pending``
                (decided already), ``not_found``.
            GatewayConnectionError: no answer.
        """
        self._decide(approval_id, "approve", note, token)

    def deny(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """Deny ``approval_id`` as :meth:`approve` approves it (a deny needs
        a ``note``); the call then raises ``approval_denied`` with ``note``
        as its ``reason``."""
        self._decide(approval_id, "deny", note, token)

    def _decide(self, approval_id: str, decision: str, note: Optional[str], token: Optional[str]) -> None:
        # Sent once: a second decision answers approval_not_pending, so a
        # lost answer is the caller's to check, not this method's to retry.
        call = self._decision_call(approval_id, decision, note, token)
        self._decision_outcome(call, self._attempt(call, 1))

    def _decision_call(self, approval_id: str, decision: str, note: Optional[str],
                       token: Optional[str] = None) -> "_Call":
        if not isinstance(approval_id, str) or not approval_id:
            raise InvalidInputError("toolgateway: approval_id must be a non-empty str")
        body = json.dumps({"note": note} if note else {}).encode()
        headers = {"Content-Type": wire.MEDIA_TYPE_JSON, "User-Agent": _USER_AGENT,
                   "Accept": wire.MEDIA_TYPE_JSON + ", " + wire.MEDIA_TYPE_PROBLEM}
        _check_token(token)
        token = token or self.token
        if token:
            headers[wire.HEADER_AUTHORIZATION] = "Bearer " + token
        url = self.base_url + "/api/tools/v1/approvals/" + urllib.parse.quote(approval_id, safe="") + "/" + decision
        return _Call(url, body, headers, "", f"{decision} approval {approval_id}")

    def _decision_outcome(self, call: "_Call", outcome: Union[Result, GatewayError, Exception]) -> None:
        if isinstance(outcome, GatewayError):
            raise outcome
        if isinstance(outcome, Exception):
            raise GatewayConnectionError(
                f"toolgateway: {call.what}: no answer from {self.base_url}: {outcome}", 1) from outcome

    def _backoff(self, retry: int) -> float:
        ceiling = min(self.initial_backoff * (2 ** min(retry, 62)), self.max_backoff)
        return self._random(ceiling / 2, ceiling)

    def _prepare(self, session_id: str, step: int, tool: str, args: Any) -> "_Call":
        """Validate, canonicalize and derive: everything before the first
        request, so bad input raises before anything is sent."""
        key, canonical = derive(session_id, step, tool, args)
        headers = {
            "Content-Type": wire.MEDIA_TYPE_JSON,
            "Accept": wire.MEDIA_TYPE_JSON + ", " + wire.MEDIA_TYPE_PROBLEM,
            "User-Agent": _USER_AGENT,
            wire.HEADER_IDEMPOTENCY_KEY: key,
            wire.HEADER_SESSION_ID: session_id,
            wire.HEADER_STEP_INDEX: str(step),
        }
        if self.token:
            headers[wire.HEADER_AUTHORIZATION] = "Bearer " + self.token
        if self.prefer_wait:
            headers[wire.HEADER_PREFER] = f"wait={self.prefer_wait}"
        return _Call(self.base_url + "/api/tools/v1/" + tool, canonical, headers, key, f"{tool} step {step}")

    def _next_wait(self, call: "_Call", outcome: Union[GatewayError, Exception], attempt: int,
                   started: float) -> float:
        """The delay before the next attempt, or raise when the outcome is
        final or the bound is reached."""
        if isinstance(outcome, GatewayError):
            if not _should_retry(outcome):
                raise outcome
            wait = outcome.retry_after if outcome.retry_after else self._backoff(attempt - 1)
        else:
            wait = self._backoff(attempt - 1)
        if attempt >= self.max_attempts or self._clock() - started + wait > self.max_elapsed:
            if isinstance(outcome, GatewayError):
                raise outcome
            raise GatewayConnectionError(
                f"toolgateway: {call.what}: no answer from {self.base_url} after "
                f"{attempt} attempt(s): {outcome}", attempt) from outcome
        return wait

    def _call(self, session_id: str, step: int, tool: str, args: Any) -> Result:
        call = self._prepare(session_id, step, tool, args)
        started = self._clock()
        attempt = 0
        while True:
            attempt += 1
            outcome = self._attempt(call, attempt)
            if isinstance(outcome, Result):
                return outcome
            self._sleep(self._next_wait(call, outcome, attempt, started))

    def _attempt(self, call: "_Call", attempt: int) -> Union[Result, GatewayError, Exception]:
        """Send one request: a Result, a GatewayError, or the transport error."""
        request = urllib.request.Request(call.url, data=call.body, headers=call.headers, method="POST")
        try:
            try:
                response = self._opener.open(request, timeout=self.timeout)
            except urllib.error.HTTPError as answer:  # a non-2xx status is still an answer
                response = answer
            with response:
                status = response.status if response.status is not None else response.getcode()
                response_headers = response.headers
                payload = response.read()
        except (urllib.error.URLError, http.client.HTTPException, OSError, socket.timeout) as err:
            return err
        return self._answer(call, attempt, status, response_headers, payload)

    def _answer(self, call: "_Call", attempt: int, status: int, response_headers: Any,
                payload: bytes) -> Union[Result, GatewayError]:
        """Turn one HTTP answer into a Result or a GatewayError; shared with
        the async client, so both read answers by the same rules.
        ``response_headers`` has a case-insensitive ``get``."""
        content_type = response_headers.get("Content-Type", "")
        request_id = response_headers.get(wire.HEADER_REQUEST_ID, "")
        is_problem = content_type.split(";")[0].strip().lower() == wire.MEDIA_TYPE_PROBLEM
        if status >= 500 or (status >= 400 and is_problem):
            problem: Dict[str, Any] = {}
            if is_problem:
                try:
                    decoded = json.loads(payload)
                    if isinstance(decoded, dict):
                        problem = decoded
                except ValueError:
                    pass  # a malformed problem keeps its bytes in .body
            code = problem.get("code")
            return error_class(status, code if isinstance(code, str) else "")(
                status, problem, body=payload, request_id=request_id, attempts=attempt,
                retry_after=_parse_retry_after(response_headers.get(wire.HEADER_RETRY_AFTER)),
                retryable=None if is_problem else status in _RETRYABLE_STATUSES,
            )
        return Result(
            status=status, body=payload,
            replayed=response_headers.get(wire.HEADER_REPLAYED, "") == "true",
            execution_id=response_headers.get(wire.HEADER_EXECUTION_ID, ""),
            key=call.key, content_type=content_type, request_id=request_id, attempts=attempt,
        )


class _Call:
    """What is identical in every attempt of one call."""

    __slots__ = ("url", "body", "headers", "key", "what")

    def __init__(self, url: str, body: bytes, headers: Dict[str, str], key: str, what: str) -> None:
        self.url = url
        self.body = body
        self.headers = headers
        self.key = key
        self.what = what


class Session:
    """One agent run: the scope of its step indices. Get it from
    :meth:`Client.session`."""

    __slots__ = ("client", "id")

    def __init__(self, client: Client, session_id: str) -> None:
        self.client = client
        self.id = session_id

    def call(self, step: int, tool: str, args: Any) -> Result:
        """Run ``tool`` with ``args`` as step ``step`` of this session.

        ``args`` is a ``dict`` (or JSON object text as ``bytes``). Its RFC 8785
        canonical bytes are sent with the key derived from them. The call is
        retried with the same key on network errors, 409
        ``request_in_progress`` (after its ``Retry-After``), 502, 503 and 504,
        until the client's ``max_attempts`` or ``max_elapsed`` is reached.

        Returns:
            the tool's outcome (a 2xx-4xx answer that is not a problem).

        Raises:
            InvalidInputError: bad step, tool name or arguments; nothing was sent.
            ApprovalPendingError: the call waits for a human's approval (at
                once, never retried); make the same call again once decided.
            GatewayError: a problem answer, or the last retryable answer when
                the bound was reached.
            GatewayConnectionError: no answer, after the retries.
        """
        return self.client._call(self.id, step, tool, args)

    def approve(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """:meth:`Client.approve` through this session's client."""
        self.client.approve(approval_id, note, token=token)

    def deny(self, approval_id: str, note: Optional[str] = None, *, token: Optional[str] = None) -> None:
        """:meth:`Client.deny` through this session's client."""
        self.client.deny(approval_id, note, token=token)


def _check_token(token: Any) -> None:
    """Raise unless token is None or a bearer token; the token stays out of
    the message (errors get logged)."""
    if token is not None and (not isinstance(token, str) or not token
                              or any(c < "\x20" or c == "\x7f" for c in token)):
        raise InvalidInputError("toolgateway: token must be a non-empty str without control characters")


def _should_retry(error: GatewayError) -> bool:
    # 409 outcome_unknown is final: the tool may have acted.
    if error.status == 409:
        return error.code == wire.CODE_REQUEST_IN_PROGRESS
    return error.status in _RETRYABLE_STATUSES


def _parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After as delta-seconds or an HTTP date, in seconds (None if absent)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time()) or None


def _check_base_url(base_url: Any) -> str:
    if not isinstance(base_url, str):
        raise InvalidInputError(f"toolgateway: base URL must be a str, not {type(base_url).__name__}")
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query or parsed.fragment:
        raise InvalidInputError(
            f"toolgateway: invalid base URL {base_url!r}: want http(s)://host[:port][/path]")
    try:
        parsed.port  # raises ValueError on a malformed port
    except ValueError as err:
        raise InvalidInputError(f"toolgateway: invalid base URL {base_url!r}: {err}") from None
    if any(c <= " " or c == "\x7f" for c in base_url):
        raise InvalidInputError(f"toolgateway: invalid base URL {base_url!r}: contains spaces or controls")
    return base_url.rstrip("/")


