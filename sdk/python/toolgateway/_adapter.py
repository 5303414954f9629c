"""What every runtime adapter (toolgateway/<runtime>.py) shares; it imports
no runtime.

- :func:`require_identity`: read a stable identity (a thread id, a session)
  from a runtime's object or refuse with :class:`~toolgateway.IdentityError`
  naming what is missing; never a random or per-turn id in its place.
- :func:`call` / :func:`acall`: one call through the (async) client. Every
  problem answer arrives as its typed :class:`~toolgateway.GatewayError`
  subclass (approval pending, denied, expired, step or effect conflict,
  outcome unknown, outage) for the adapter to pause on or hand to the app;
  an adapter never turns them into "please try again" text.
- :func:`result_value`: the tool's answer as a runtime hands it to the model.
- :func:`denial_text`: the readable denial a model gets for a call a rule or
  a human refused (it never ran).
- :func:`approval_request`: what an adapter shows a human for a pending call.
- :func:`decide`: send a human's answer from the runtime's pause to the
  gateway (caller approvals), tolerating an answer already sent.
"""

import json
import weakref
from collections.abc import Mapping
from typing import Any, Dict, Optional, Union

from . import wire
from .aio import AsyncClient, AsyncSession
from .client import Client, Result, Session
from .errors import (ApprovalPendingError, DeniedError, GatewayError, IdentityError, InvalidInputError)

__all__ = ["require_identity", "call", "acall", "result_value", "denial_text", "approval_request",
           "decide", "adecide", "APPROVAL_TYPE", "sync_client", "async_client"]

#: The ``type`` of the value an adapter pauses with for an approval.
APPROVAL_TYPE = "toolgateway.approval"


def require_identity(value: Any, what: str, how: str) -> str:
    """``value`` as a non-empty str, or raise IdentityError saying that
    ``what`` is missing and ``how`` to provide it."""
    if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
        return str(value)
    raise IdentityError(f"toolgateway: no stable identity: {what} is missing ({how}); "
                        "a key from a random or per-turn id would not survive a resume")


def sync_client(client: Union[Client, AsyncClient]) -> Client:
    """The blocking client of ``client`` (an AsyncClient wraps one)."""
    if isinstance(client, AsyncClient):
        return client._client
    if isinstance(client, Client):
        return client
    raise InvalidInputError(f"toolgateway: want a toolgateway.Client or AsyncClient, not {type(client).__name__}")


_async_twins: "weakref.WeakKeyDictionary[Client, AsyncClient]" = weakref.WeakKeyDictionary()


def async_client(client: Union[Client, AsyncClient]) -> AsyncClient:
    """An AsyncClient for ``client``: itself, or for a Client one with the
    same settings (made once per Client, so its connections are reused)."""
    if isinstance(client, AsyncClient):
        return client
    if isinstance(client, Client):
        twin = _async_twins.get(client)
        if twin is None:
            twin = AsyncClient(client.base_url, client.token, client.timeout,
                               max_attempts=client.max_attempts, max_elapsed=client.max_elapsed,
                               initial_backoff=client.initial_backoff, max_backoff=client.max_backoff,
                               prefer_wait=client.prefer_wait)
            _async_twins[client] = twin
        return twin
    raise InvalidInputError(f"toolgateway: want a toolgateway.Client or AsyncClient, not {type(client).__name__}")


def call(client: Union[Client, AsyncClient], session_id: str, step: int, tool: str, args: Any) -> Result:
    """One blocking call (the client's retries included); raises the typed
    GatewayError of a problem answer."""
    return sync_client(client).session(session_id).call(step, tool, args)


async def acall(client: Union[Client, AsyncClient], session_id: str, step: int, tool: str, args: Any) -> Result:
    """:func:`call` on the event loop (httpx when installed)."""
    return await async_client(client).session(session_id).call(step, tool, args)


def result_value(result: Result) -> Any:
    """The tool's answer for the model: its JSON body decoded (text when it is
    not JSON). A 4xx answer of the tool itself (stored and replayed like a
    success) stays a value the model reads, with its status."""
    try:
        value: Any = json.loads(result.body)
    except ValueError:
        value = result.body.decode("utf-8", "replace")
    if result.status >= 400:
        text = value if isinstance(value, str) else json.dumps(value)
        return f"The tool answered {result.status}: {text}"
    return value


def denial_text(tool: str, err: DeniedError) -> str:
    """The readable denial for the model: the call never ran, who said no and
    why, and not to make it again."""
    why = f": {err.reason}" if err.reason else ""
    if err.code == wire.CODE_CALL_DENIED:
        what = "denied by the tool's rules"
    elif err.code == wire.CODE_APPROVAL_DENIED:
        what = "denied" + (f" by {err.by}" if err.by else "")
    else:
        what = "not approved in time"
    return f"This call of {tool} was NOT run: it was {what}{why} ({err.code}). Do not make it again; tell the user."


def approval_request(tool: str, args: Any, pending: ApprovalPendingError) -> Dict[str, Any]:
    """What an adapter pauses with (and shows a human) for a pending call:
    ``{"type": "toolgateway.approval", "approval_id", "expires_at", "tool",
    "args"}`` (JSON-able)."""
    return {"type": APPROVAL_TYPE, "approval_id": pending.approval_id,
            "expires_at": pending.expires_at.isoformat() if pending.expires_at else None,
            "tool": tool, "args": args}


def answer_of(resume: Any) -> Optional[Dict[str, Any]]:
    """A human's answer given to a runtime's resume: ``True``/``False`` or
    ``{"approved": bool, "note": str, "token": str}`` (``token``: the
    deciding person's own access token); anything else is no answer (None)."""
    if isinstance(resume, bool):
        return {"approved": resume, "note": None, "token": None}
    if isinstance(resume, Mapping) and isinstance(resume.get("approved"), bool):
        note, token = resume.get("note"), resume.get("token")
        return {"approved": resume["approved"], "note": note if isinstance(note, str) else None,
                "token": token if isinstance(token, str) else None}
    return None


def decide(session: Session, approval_id: str, answer: Dict[str, Any]) -> bool:
    """Send a person's answer (from :func:`answer_of`) as the caller's
    decision, with the person's own token. ``approver: caller`` means a
    person: an answer without ``token`` is the app's, not a person's, and
    is never sent with the agent's token (the gateway would refuse it, 403
    not_an_approver): it returns False, like an approval the caller may
    not decide (an operator's: ``approval_not_yours``), and the adapter
    only checks again. An approval decided already (a run that crashed
    after answering) counts as sent."""
    if not answer.get("token"):
        return False
    try:
        if answer["approved"]:
            session.approve(approval_id, answer.get("note"), token=answer["token"])
        else:
            session.deny(approval_id, answer.get("note"), token=answer["token"])
    except GatewayError as err:
        if err.code == wire.CODE_APPROVAL_NOT_PENDING:
            return True
        if err.code == wire.CODE_APPROVAL_NOT_YOURS:
            return False
        raise
    return True


async def adecide(session: AsyncSession, approval_id: str, answer: Dict[str, Any]) -> bool:
    """:func:`decide`, awaited."""
    if not answer.get("token"):
        return False
    try:
        if answer["approved"]:
            await session.approve(approval_id, answer.get("note"), token=answer["token"])
        else:
            await session.deny(approval_id, answer.get("note"), token=answer["token"])
    except GatewayError as err:
        if err.code == wire.CODE_APPROVAL_NOT_PENDING:
            return True
        if err.code == wire.CODE_APPROVAL_NOT_YOURS:
            return False
        raise
    return True


def declined_text(tool: str) -> str:
    """The model's text when the runtime's human declined an operator's
    approval from the pause (nothing ran; the approval stays pending until
    an operator decides or it expires)."""
    return f"This call of {tool} was NOT run: the user declined it. Do not make it again."


def list_tools(client: Union[Client, AsyncClient]) -> Dict[str, Dict[str, Any]]:
    """The tools the gateway lists to the client's tenant (``GET
    /api/tools/v1``), by name: ``{"name", "description", "input_schema",
    "read_only"?}``. Blocking: call it once, at wrap time or in a thread.

    Raises:
        GatewayError: the gateway answered with an error.
        GatewayConnectionError: no answer.
    """
    import urllib.error
    import urllib.request

    from .errors import GatewayConnectionError, error_class
    sync = sync_client(client)
    headers = {"Accept": wire.MEDIA_TYPE_JSON + ", " + wire.MEDIA_TYPE_PROBLEM}
    if sync.token:
        headers[wire.HEADER_AUTHORIZATION] = "Bearer " + sync.token
    request = urllib.request.Request(sync.base_url + "/api/tools/v1", headers=headers, method="GET")
    try:
        with sync._opener.open(request, timeout=sync.timeout) as response:
            listing = json.loads(response.read())
    except urllib.error.HTTPError as answer:
        payload = answer.read()
        try:
            problem = json.loads(payload)
        except ValueError:
            problem = {}
        problem = problem if isinstance(problem, dict) else {}
        raise error_class(answer.code, str(problem.get("code", "")))(answer.code, problem, body=payload) from None
    except (OSError, ValueError) as err:
        raise GatewayConnectionError(f"toolgateway: listing the tools of {sync.base_url}: {err}", 1) from err
    tools = listing.get("tools") if isinstance(listing, dict) else None
    return {tool["name"]: tool for tool in tools or () if isinstance(tool, dict) and isinstance(tool.get("name"), str)}


def is_read_only(definition: Optional[Mapping]) -> bool:
    """Whether a discovery entry marks the tool read-only: the gateway then
    runs it on every call and ignores the identity, so the adapter sends
    :data:`READ_ONLY_IDENTITY` and needs no history or step."""
    return bool(definition) and definition.get("read_only") is True


#: The identity of every call of a read-only tool (any valid one will do).
READ_ONLY_IDENTITY = ("read-only", 0)


def conflict_text(tool: str, step: int, err: GatewayError) -> str:
    """The model's text for a ``step_conflict`` / ``effect_conflict``: this call
    did NOT run because the step (or the effect) already belongs to an
    earlier call with other arguments, whose effect has happened."""
    holder = err.problem.get("tool")
    earlier = f"a call of {holder}" if holder else "another call"
    execution = err.problem.get("execution_id")
    execution = f" (execution {execution})" if execution else ""
    held = f"Step {step} of this conversation" if err.code == wire.CODE_STEP_CONFLICT else "Its effect key"
    return (f"{err.code}: this call of {tool} was NOT run. {held} already ran {earlier}{execution} with other "
            "arguments: an earlier attempt at this turn (before a restart, a retry, or in another branch of "
            "this conversation). Its effect has happened; its result is not available here. If this call is "
            "still needed, make it again: it will run as a new call.")
