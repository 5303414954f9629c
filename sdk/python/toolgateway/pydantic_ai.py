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
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from pydantic_core import SchemaValidator, core_schema

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from . import _adapter, wire
from .aio import AsyncClient
from .client import Client
from .errors import ApprovalPendingError, DeniedError, GatewayError, InvalidInputError
from .runtimes import session_id_from_parts

try:  # PydanticAI >= 2.20: a failed tool result that does not ask the model to retry.
    from pydantic_ai.exceptions import ToolFailed as _ToolFailed
except ImportError:  # the refusal becomes the tool's (text) result
    _ToolFailed = None  # type: ignore[assignment,misc]

__all__ = ["GatewayToolset", "APPROVAL_METADATA", "pydantic_ai_step"]

#: The member of a deferred call's metadata (``DeferredToolRequests.metadata[tool_call_id]``)
#: under which the adapter puts the gateway's approval: ``{"type":
#: "toolgateway.approval", "approval_id", "expires_at", "tool", "args"}``.
APPROVAL_METADATA = "toolgateway"

# Validation is the gateway's: it checks the arguments against the tool's
# schema and answers invalid_arguments with every violation.
_ANY_ARGS = SchemaValidator(schema=core_schema.any_schema())

# Final refusals the model can act on (change its arguments, make the call as
# a new one, tell the user); every other error leaves the run.
_MODEL_VISIBLE = frozenset({
    wire.CODE_STEP_CONFLICT, wire.CODE_EFFECT_CONFLICT, wire.CODE_IDEMPOTENCY_KEY_REUSED,
    wire.CODE_INVALID_ARGUMENTS, wire.CODE_PAYLOAD_TOO_LARGE, wire.CODE_UPSTREAM_RESPONSE_TOO_LARGE,
})


def pydantic_ai_step(messages: Sequence[Any], tool_call_id: str) -> int:
    """The step index of a tool call: the 0-based ordinal of the call among
    the ``ToolCallPart``\\ s of ``messages`` (a run's message history,
    oldest first), in the order the model emitted them.

    Raises:
        IdentityError: no tool call id.
        InvalidInputError: the call is not in ``messages``.
    """
    _adapter.require_identity(tool_call_id, "the tool call's tool_call_id", "PydanticAI sets it on every call")
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
            :class:`toolgateway.Client`, for which one with the same
            settings is made).
        tools: the gateway tools to offer the model: ``None`` for every tool
            the gateway lists to this client's tenant (``GET
            /api/tools/v1``, fetched once, at the first run), a sequence of
            names (a subset of that list), or a sequence of definitions
            ``{"name", "description", "input_schema", "read_only"}``
            (nothing fetched).
        id: the toolset's id (unique among an agent's toolsets; durable
            engines name their steps with it).

    Raises:
        InvalidInputError: ``client`` is not a toolgateway client, or a
            definition has no name.
    """

    def __init__(self, client: Union[AsyncClient, Client], tools: Optional[Sequence[Any]] = None, *,
                 id: str = "toolgateway") -> None:
        self._client = _adapter.async_client(client)
        self._id = id
        self._names: Optional[List[str]] = None
        self._definitions: Optional[Dict[str, Mapping[str, Any]]] = None
        if tools is not None:
            if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
                raise InvalidInputError("toolgateway: tools must be a sequence of names or of definitions")
            if all(isinstance(t, str) for t in tools):
                self._names = list(tools)
            else:
                self._definitions = {}
                for definition in tools:
                    if not isinstance(definition, Mapping) or not isinstance(definition.get("name"), str):
                        raise InvalidInputError(f"toolgateway: a tool definition needs a name: {definition!r}")
                    self._definitions[definition["name"]] = definition

    @property
    def id(self) -> Optional[str]:
        return self._id

    @property
    def label(self) -> str:
        return f"toolgateway at {self._client.base_url}"

    async def _load(self) -> Dict[str, Mapping[str, Any]]:
        if self._definitions is not None:
            return self._definitions
        listed = await asyncio.to_thread(_adapter.list_tools, self._client)
        if self._names is not None:
            missing = [name for name in self._names if name not in listed]
            if missing:
                raise InvalidInputError(
                    f"toolgateway: the gateway lists no tool named {', '.join(missing)} for this client")
            listed = {name: listed[name] for name in self._names}
        self._definitions = listed
        return listed

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

    def identity(self, ctx: RunContext[Any]) -> Tuple[str, int]:
        """``(session_id, step_index)`` of the tool call ``ctx`` is for: the
        run's conversation id and the call's ordinal in the message history.

        Raises:
            IdentityError: the run has no conversation id.
            InvalidInputError: the call is not in the run's message history.
        """
        conversation = _adapter.require_identity(
            getattr(ctx, "conversation_id", None), "the run's conversation_id",
            "run the agent with conversation_id=<your conversation's id>, or continue a stored message history")
        return session_id_from_parts(conversation), pydantic_ai_step(ctx.messages, ctx.tool_call_id or "")

    async def call_tool(self, name: str, tool_args: Dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        definitions = await self._load()
        if _adapter.is_read_only(definitions.get(name)):
            session_id, step = _adapter.READ_ONLY_IDENTITY
        else:
            session_id, step = self.identity(ctx)
        try:
            try:
                result = await _adapter.acall(self._client, session_id, step, name, tool_args)
            except ApprovalPendingError as pending:
                if not getattr(ctx, "tool_call_approved", False):
                    raise _pause(name, tool_args, pending) from None
                # The app approved the deferred call: send that as the caller's
                # answer (a rule with approver: caller), then make the same
                # call again. An operator's approval is not the app's to give
                # (approval_not_yours): the call then runs if an operator
                # approved it, and pauses again while it is still pending.
                await _adapter.adecide(self._client.session(session_id), pending.approval_id,
                                       {"approved": True, "note": None})
                result = await _adapter.acall(self._client, session_id, step, name, tool_args)
        except ApprovalPendingError as still:
            raise _pause(name, tool_args, still) from None
        except DeniedError as denied:
            return _failed(_adapter.denial_text(name, denied))
        except GatewayError as err:
            if err.retryable or err.code not in _MODEL_VISIBLE:
                raise  # the run stops; resumed later, the same call goes out with the same key
            if err.code in (wire.CODE_STEP_CONFLICT, wire.CODE_EFFECT_CONFLICT):
                return _failed(_adapter.conflict_text(name, step, err))
            violations = err.problem.get("errors")
            return _failed(f"The gateway refused this call of {name} ({err.status} {err.code}): "
                           f"{err.detail or err.title}{' ' + repr(violations) if violations else ''}")
        value = _adapter.result_value(result)
        return _failed(value) if result.status >= 400 else value


def _pause(tool: str, args: Dict[str, Any], pending: ApprovalPendingError) -> ApprovalRequired:
    """PydanticAI's approval pause for a call the gateway holds for a human."""
    return ApprovalRequired(metadata={APPROVAL_METADATA: _adapter.approval_request(tool, args, pending)})


def _failed(text: str) -> Any:
    """A failed tool result the model reads (PydanticAI's ToolFailed where
    it exists: the model is not told to retry), else the text as the result."""
    if _ToolFailed is not None:
        raise _ToolFailed(text)
    return text
