"""Google ADK adapter: the gateway's tools as ADK tools, each call exactly
once across crashes, resumed invocations and tool confirmations.

    from toolgateway import AsyncClient
    from toolgateway.adk import gateway_tools

    agent = LlmAgent(name="ops", model=model, tools=gateway_tools(AsyncClient(url, token=token)))

Identity (docs/runtimes.md, "Google ADK"): the session is ADK's session
(app name, user id and session id: what a ``DatabaseSessionService``
persists); the step is the function call's ordinal among the function calls
of the session's events, in the order the model emitted them: the calls of
earlier events that got a response (a call lost with a killed process, to
which ADK may answer with a new model turn, takes no step), plus the call's
position in its own event (partial streaming events and ADK's own ``adk_*``
calls are not counted). The
``function_call_id`` only locates the call: a regenerated turn gets new ids
(and a streamed call can change its id between the partial and the final
event). A resumed invocation (``runner.run_async(invocation_id=...)`` of a
resumable App) runs the calls that have no response yet with the same
ordinals; the gateway answers them from the first execution.

Approvals: a call the gateway's rules hold for a human (409
``approval_pending``) becomes ADK's tool confirmation
(``tool_context.request_confirmation()``, the payload carrying the
approval's id): the invocation pauses with an ``adk_request_confirmation``
function call. The app answers it (any process) with that call's
FunctionResponse ``{"confirmed": true|false}``; ADK runs the tool again and
the adapter makes the same call again: for a ``caller`` rule it first sends
the human's answer to the gateway; the call runs once after an approval, or
the model reads the denial. A ``step_conflict`` and other refusals the model
can act on come back as the tool's ``{"error": ...}``; a gateway that cannot
be reached raises out of the invocation, which the app resumes later.
"""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from . import _adapter, wire
from .aio import AsyncClient
from .client import Client
from .errors import ApprovalPendingError, DeniedError, GatewayError, InvalidInputError
from .runtimes import session_id_from_parts

__all__ = ["GatewayTool", "gateway_tools", "adk_identity"]

# Refusals the model can act on, as the tool's {"error": ...}; every other
# error stops the invocation.
_MODEL_VISIBLE = frozenset({
    wire.CODE_STEP_CONFLICT, wire.CODE_EFFECT_CONFLICT, wire.CODE_IDEMPOTENCY_KEY_REUSED,
    wire.CODE_INVALID_ARGUMENTS, wire.CODE_PAYLOAD_TOO_LARGE, wire.CODE_UPSTREAM_RESPONSE_TOO_LARGE,
})


def adk_identity(tool_context: ToolContext) -> Tuple[str, int]:
    """``(session_id, step_index)`` of the function call ``tool_context`` is
    for: the ADK session, and the call's ordinal among the function calls of
    the session's (final) events: the calls of earlier events that got a
    response, plus the call's position in its own event.

    Raises:
        IdentityError: no session or no function call id.
        InvalidInputError: the call is not in the session's events.
    """
    session = getattr(tool_context, "session", None)
    session_id = _adapter.require_identity(getattr(session, "id", None), "the ADK session",
                                           "run the agent with a Runner and a session service")
    call_id = _adapter.require_identity(tool_context.function_call_id, "the function call's id",
                                        "ADK sets it on every function call")
    events = [event for event in session.events if not getattr(event, "partial", False)]
    # A call an earlier turn made that never got a response (its process was
    # killed) takes no step: ADK may answer a resumed invocation with a new
    # model turn, whose calls must land on the steps the lost ones had.
    answered = {response.id for event in events for response in event.get_function_responses()}
    step = 0
    for event in events:
        calls = [call.id for call in event.get_function_calls() if not (call.name or "").startswith("adk_")]
        if call_id in calls:
            return session_id_from_parts(session.app_name, session.user_id, session_id), step + calls.index(call_id)
        step += sum(1 for call in calls if call in answered)
    raise InvalidInputError(f"toolgateway: function call {call_id!r} is not in the session's events; "
                            "the step of a call is its ordinal there")


class GatewayTool(BaseTool):
    """One gateway tool as an ADK tool (made by :func:`gateway_tools`)."""

    def __init__(self, client: AsyncClient, definition: Mapping[str, Any]) -> None:
        super().__init__(name=definition["name"], description=definition.get("description") or definition["name"])
        self._client = client
        self._schema = definition.get("input_schema") or {"type": "object"}
        self._read_only = _adapter.is_read_only(definition)

    def _get_declaration(self) -> Optional[types.FunctionDeclaration]:
        return types.FunctionDeclaration(name=self.name, description=self.description,
                                         parameters_json_schema=self._schema)

    async def run_async(self, *, args: Dict[str, Any], tool_context: ToolContext) -> Any:
        if self._read_only:
            session_id, step = _adapter.READ_ONLY_IDENTITY
        else:
            session_id, step = adk_identity(tool_context)
        confirmation = tool_context.tool_confirmation
        try:
            try:
                result = await _adapter.acall(self._client, session_id, step, self.name, args)
            except ApprovalPendingError as pending:
                if confirmation is None:
                    return self._pause(args, pending, tool_context)
                # The human answered ADK's confirmation: send it as the
                # caller's decision (an operator's approval answers
                # approval_not_yours: it is decided at the gateway), then
                # make the same call again.
                sent = await _adapter.adecide(self._client.session(session_id), pending.approval_id,
                                              {"approved": bool(confirmation.confirmed), "note": None})
                if not confirmation.confirmed and not sent:
                    return {"error": _adapter.declined_text(self.name)}
                result = await _adapter.acall(self._client, session_id, step, self.name, args)
        except ApprovalPendingError as still:
            return self._pause(args, still, tool_context)
        except DeniedError as denied:
            return {"error": _adapter.denial_text(self.name, denied)}
        except GatewayError as err:
            if err.retryable or err.code not in _MODEL_VISIBLE:
                raise
            if err.code in (wire.CODE_STEP_CONFLICT, wire.CODE_EFFECT_CONFLICT):
                return {"error": _adapter.conflict_text(self.name, step, err)}
            return {"error": f"The gateway refused this call of {self.name} ({err.status} {err.code}): "
                             f"{err.detail or err.title}", "violations": err.problem.get("errors")}
        value = _adapter.result_value(result)
        if result.status >= 400:
            return {"error": value}
        return value if isinstance(value, dict) else {"result": value}

    def _pause(self, args: Dict[str, Any], pending: ApprovalPendingError, tool_context: ToolContext) -> Dict[str, Any]:
        """ADK's tool confirmation for a call the gateway holds for a human."""
        request = _adapter.approval_request(self.name, args, pending)
        tool_context.request_confirmation(
            hint=(f"The call of {self.name} waits for approval {pending.approval_id} at the gateway. Answer with "
                  "the adk_request_confirmation FunctionResponse once it is decided (confirmed: true to make the "
                  "call again, false to decline)."),
            payload=request)
        tool_context.actions.skip_summarization = True
        return {"error": f"This call of {self.name} waits for a human's approval ({pending.approval_id}); "
                         "nothing ran yet.", "approval": request}


def gateway_tools(client: Union[AsyncClient, Client], tools: Optional[Sequence[Any]] = None) -> List[GatewayTool]:
    """The gateway's tools as ADK tools for an ``LlmAgent``.

    Args:
        client: a :class:`toolgateway.AsyncClient` (or a Client, for which
            one with the same settings is made).
        tools: ``None`` for every tool the gateway lists to the client's
            tenant (fetched now), a sequence of names (a subset of it), or of
            definitions ``{"name", "description", "input_schema",
            "read_only"}`` (nothing fetched).

    Raises:
        InvalidInputError: a bad client or definition, an unknown tool name.
    """
    aclient = _adapter.async_client(client)
    if tools is None or all(isinstance(t, str) for t in tools):
        listed = _adapter.list_tools(aclient)
        names = list(listed) if tools is None else list(tools)
        missing = [n for n in names if n not in listed]
        if missing:
            raise InvalidInputError(f"toolgateway: the gateway lists no tool named {', '.join(missing)} for this client")
        definitions: List[Any] = [listed[n] for n in names]
    else:
        definitions = list(tools)
    made = []
    for definition in definitions:
        if not isinstance(definition, Mapping) or not isinstance(definition.get("name"), str):
            raise InvalidInputError(f"toolgateway: a tool definition needs a name: {definition!r}")
        made.append(GatewayTool(aclient, definition))
    return made

