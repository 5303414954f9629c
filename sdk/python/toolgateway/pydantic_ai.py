"""PydanticAI adapter: the gateway's tools as a PydanticAI toolset, each call
exactly once across crashes, retries and resumes.

    from toolgateway import AsyncClient
    from toolgateway.pydantic_ai import GatewayToolset

    agent = Agent(model, toolsets=[GatewayToolset(AsyncClient(url, token=token))],
                  output_type=[str, DeferredToolRequests])

Identity (docs/runtimes.md, "PydanticAI"): the session is the run's
``conversation_id`` (``RunContext.conversation_id``: the id the app passes to
``agent.run(conversation_id=...)``, else the one carried by the message
history it continues, else, under DBOS durable execution, the id PydanticAI
derives from the workflow id and the run's step in the workflow, so a
recovered workflow gets the same one); the step is the call's ordinal among
the tool calls of the run's message history, counted in the order the model
emitted them. The model's ``tool_call_id`` only locates the call: a
regenerated turn gets new ids, the same ordinals.

Approvals: a call the gateway's rules hold for a human (409
``approval_pending``) raises PydanticAI's ``ApprovalRequired``, so the run
ends with ``DeferredToolRequests`` (the call's metadata carries the
approval's id). The app stores ``result.all_messages()``; later, in any
process, it runs the agent with that history and
``DeferredToolResults(approvals={tool_call_id: True})``: the call is made
again with the same identity and runs once (after an operator's approval;
for a rule with ``approver: caller`` the adapter sends the approval first),
or the model reads that it was denied.

The model reads the gateway's refusals it can act on (``step_conflict``,
invalid arguments, a denial, ...) as a failed tool result; anything else
(the gateway unreachable after the client's retries, a 5xx, a refused
token) is raised out of the run, so nothing records the call as done and the
same call goes out again, with the same key, when the app resumes.
"""

import asyncio
import json
import urllib.request
from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from pydantic_core import SchemaValidator, core_schema

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from . import wire
from .aio import AsyncClient
from .client import Client, Result
from .errors import ApprovalPendingError, GatewayError, InvalidInputError
from .runtimes import session_id_from_parts

try:  # PydanticAI 2.7x: a failed tool result that does not ask the model to retry.
    from pydantic_ai.exceptions import ToolFailed as _ToolFailed
except ImportError:  # older 2.x: the refusal becomes the tool's (text) result
    _ToolFailed = None  # type: ignore[assignment,misc]

__all__ = ["GatewayToolset", "APPROVAL_METADATA", "pydantic_ai_step"]

#: The member of a deferred call's metadata (``DeferredToolRequests.metadata[tool_call_id]``)
#: under which the adapter puts the gateway's approval: ``approval_id``,
#: ``expires_at`` (RFC 3339 or None), ``tool``, ``session_id``, ``step``.
APPROVAL_METADATA = "toolgateway"

# Validation is the gateway's: it checks the arguments against the tool's
# schema and answers invalid_arguments with every violation.
_ANY_ARGS = SchemaValidator(schema=core_schema.any_schema())

_READ_ONLY_SESSION, _READ_ONLY_STEP = "read-only", 0


def pydantic_ai_step(messages: Sequence[Any], tool_call_id: str) -> int:
    """The step index of a tool call: the 0-based ordinal of the call among
    the ``ToolCallPart``\\ s of ``messages`` (a run's message history,
    oldest first), in the order the model emitted them.

    Raises:
        InvalidInputError: the call is not in ``messages``.
    """
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise InvalidInputError("toolgateway: the tool call has no tool_call_id to locate it in the history")
    step = 0
    for message in messages:
        if not isinstance(message, ModelResponse):
            continue
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                if part.tool_call_id == tool_call_id:
                    return step
                step += 1
    raise InvalidInputError(
        f"toolgateway: tool call {tool_call_id!r} is not in the run's message history; "
        "the step of a call is its ordinal there")


class GatewayToolset(AbstractToolset[Any]):
    """The gateway's tools as a PydanticAI toolset.

    Args:
        client: a :class:`toolgateway.AsyncClient` (or a
            :class:`toolgateway.Client`, whose calls then run in a worker
            thread each).
        tools: the gateway tools to offer the model: ``None`` for every tool
            the gateway lists to this client's tenant (``GET
            /api/tools/v1``, fetched once), a sequence of names (a subset of
            that list), or a sequence of definitions ``{"name",
            "description", "input_schema", "read_only"}`` (nothing fetched).
        id: the toolset's id (unique among an agent's toolsets; durable
            engines name their steps with it).

    Raises:
        InvalidInputError: ``client`` is not a toolgateway client, or a
            definition has no valid name.
    """

    def __init__(self, client: Union[AsyncClient, Client], tools: Optional[Sequence[Any]] = None, *,
                 id: str = "toolgateway") -> None:
        if isinstance(client, AsyncClient):
            self._sync = client._client
        elif isinstance(client, Client):
            self._sync = client
        else:
            raise InvalidInputError(
                f"toolgateway: GatewayToolset needs a toolgateway.AsyncClient or Client, not {type(client).__name__}")
        self._client = client
        self._id = id
        self._names: Optional[List[str]] = None
        self._definitions: Optional[Dict[str, Dict[str, Any]]] = None
        if tools is not None:
            if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
                raise InvalidInputError("toolgateway: tools must be a sequence of names or definitions")
            if all(isinstance(t, str) for t in tools):
                self._names = list(tools)
            else:
                self._definitions = {}
                for definition in tools:
                    if not isinstance(definition, Mapping) or not isinstance(definition.get("name"), str):
                        raise InvalidInputError(f"toolgateway: a tool definition needs a name: {definition!r}")
                    self._definitions[definition["name"]] = dict(definition)
        self._lock = asyncio.Lock()

    @property
    def id(self) -> Optional[str]:
        return self._id

    @property
    def label(self) -> str:
        return f"toolgateway at {self._sync.base_url}"

    async def _load(self) -> Dict[str, Dict[str, Any]]:
        async with self._lock:
            if self._definitions is None:
                listed = await asyncio.to_thread(_discover, self._sync)
                if self._names is not None:
                    missing = [name for name in self._names if name not in listed]
                    if missing:
                        raise InvalidInputError(
                            f"toolgateway: the gateway lists no tool named {', '.join(missing)} for this client")
                    listed = {name: listed[name] for name in self._names}
                self._definitions = listed
            return self._definitions

    async def get_tools(self, ctx: RunContext[Any]) -> Dict[str, ToolsetTool[Any]]:
        definitions = await self._load()
        return {
            name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=name,
                    description=definition.get("description") or "",
                    parameters_json_schema=definition.get("input_schema") or {"type": "object"},
                ),
                max_retries=0,
                args_validator=_ANY_ARGS,
            )
            for name, definition in definitions.items()
        }

    def identity(self, ctx: RunContext[Any]) -> "tuple[str, int]":
        """``(session_id, step_index)`` of the tool call ``ctx`` is for.

        Raises:
            InvalidInputError: the run has no conversation id, or the call is
                not in its message history.
        """
        conversation = getattr(ctx, "conversation_id", None)
        if not conversation:
            raise InvalidInputError(
                "toolgateway: the run has no conversation_id to make the gateway session from; "
                "run the agent with conversation_id=<your conversation's id>")
        return session_id_from_parts(conversation), pydantic_ai_step(ctx.messages, ctx.tool_call_id or "")

    async def call_tool(self, name: str, tool_args: Dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        definitions = await self._load()
        if definitions.get(name, {}).get("read_only") is True:
            # The gateway runs a read-only tool on every call and ignores the
            # identity: any valid one will do, and it needs no history.
            session_id, step = _READ_ONLY_SESSION, _READ_ONLY_STEP
        else:
            session_id, step = self.identity(ctx)
        try:
            try:
                result = await self._call(session_id, step, name, tool_args)
            except ApprovalPendingError as pending:
                if not getattr(ctx, "tool_call_approved", False):
                    raise ApprovalRequired(metadata={APPROVAL_METADATA: {
                        "approval_id": pending.approval_id,
                        "expires_at": pending.problem.get("approval_expires_at"),
                        "tool": name, "session_id": session_id, "step": step,
                    }}) from None
                # The app approved the deferred call: answer a caller
                # approval for its human, then make the same call again. An
                # operator's approval is not the app's to give (it answers
                # approval_not_yours): the call then runs if an operator
                # approved, or is still pending.
                await self._approve(pending.approval_id)
                result = await self._call(session_id, step, name, tool_args)
        except ApprovalPendingError as still:
            # Approved by the app but still waiting for an operator: pause
            # again; the app resumes once the operator decided.
            raise ApprovalRequired(metadata={APPROVAL_METADATA: {
                "approval_id": still.approval_id,
                "expires_at": still.problem.get("approval_expires_at"),
                "tool": name, "session_id": session_id, "step": step,
            }}) from None
        except GatewayError as err:
            text = refusal_text(name, step, err)
            if text is None:
                raise
            return _failed(text)
        return _outcome(name, result)

    async def _call(self, session_id: str, step: int, tool: str, args: Dict[str, Any]) -> Result:
        if isinstance(self._client, AsyncClient):
            return await self._client.session(session_id).call(step, tool, args)
        return await asyncio.to_thread(self._client.session(session_id).call, step, tool, args)

    async def _approve(self, approval_id: str) -> None:
        try:
            await asyncio.to_thread(self._sync.approve, approval_id)
        except GatewayError as err:
            if err.code not in (wire.CODE_APPROVAL_NOT_YOURS, wire.CODE_APPROVAL_NOT_PENDING):
                raise


def _failed(text: str) -> Any:
    if _ToolFailed is not None:
        raise _ToolFailed(text)
    return text


def _outcome(tool: str, result: Result) -> Any:
    """The tool's answer as the model reads it: the body's JSON (its text if
    it is not JSON); a 4xx answer of the tool is a failed result."""
    text = result.body.decode("utf-8", "replace")
    if result.status >= 400:
        return _failed(f"The tool {tool} answered {result.status}: {text}")
    try:
        return json.loads(text)
    except ValueError:
        return text


# Refusals the model can act on; anything else propagates (the same call may
# still succeed later, or the app must be fixed).
_MODEL_VISIBLE = frozenset({
    wire.CODE_STEP_CONFLICT, wire.CODE_EFFECT_CONFLICT, wire.CODE_IDEMPOTENCY_KEY_REUSED,
    wire.CODE_INVALID_ARGUMENTS, wire.CODE_OUTCOME_UNKNOWN, wire.CODE_PAYLOAD_TOO_LARGE,
    wire.CODE_UPSTREAM_RESPONSE_TOO_LARGE, wire.CODE_CALL_DENIED, wire.CODE_APPROVAL_DENIED,
    wire.CODE_APPROVAL_EXPIRED,
})


def refusal_text(tool: str, step: int, err: GatewayError) -> Optional[str]:
    """The text the model reads for a final refusal it can act on, or None."""
    if err.retryable or err.code not in _MODEL_VISIBLE:
        return None
    if err.code in (wire.CODE_STEP_CONFLICT, wire.CODE_EFFECT_CONFLICT):
        holder = err.problem.get("tool")
        earlier = f"a call of {holder}" if holder else "another call"
        execution = err.problem.get("execution_id")
        execution = f" (execution {execution})" if execution else ""
        return (f"{err.code}: this call of {tool} was NOT run. Step {step} of this conversation already ran "
                f"{earlier}{execution} with other arguments: an earlier attempt at this turn (before a restart, "
                "a retry, or in another branch of this conversation). Its effect has happened; its result is not "
                "available here. If this call is still needed, make it again: it will run as a new call.")
    if err.code in (wire.CODE_CALL_DENIED, wire.CODE_APPROVAL_DENIED, wire.CODE_APPROVAL_EXPIRED):
        who = f" by {err.by}" if err.by else ""
        why = f": {err.reason}" if err.reason else ""
        what = {wire.CODE_CALL_DENIED: "denied by the tool's rules",
                wire.CODE_APPROVAL_DENIED: f"denied{who}",
                wire.CODE_APPROVAL_EXPIRED: "not approved in time"}[err.code]
        return f"This call of {tool} was NOT run: it was {what}{why} ({err.code}). Do not make it again; tell the user."
    violations = ""
    if err.code == wire.CODE_INVALID_ARGUMENTS and err.problem.get("errors"):
        violations = " " + json.dumps(err.problem["errors"])
    return (f"The gateway refused this call of {tool} ({err.status} {err.code}): "
            f"{err.detail or err.title}{violations}")


def _discover(client: Client) -> Dict[str, Dict[str, Any]]:
    """The tools the gateway lists to the client's tenant, by name."""
    headers = {"Accept": wire.MEDIA_TYPE_JSON}
    if client.token:
        headers[wire.HEADER_AUTHORIZATION] = "Bearer " + client.token
    request = urllib.request.Request(client.base_url + "/api/tools/v1", headers=headers, method="GET")
    try:
        with client._opener.open(request, timeout=client.timeout) as response:
            listing = json.loads(response.read())
    except Exception as err:  # noqa: BLE001 (any failure: say where)
        raise GatewayError(0, {"title": f"listing the gateway's tools at {client.base_url} failed: {err}"}) from err
    return {tool["name"]: tool for tool in listing.get("tools", []) if isinstance(tool, dict) and "name" in tool}
