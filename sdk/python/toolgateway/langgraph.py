"""LangGraph adapter: the tool calls of a graph's tools node run at the
gateway, exactly once across crashes, resumes, retries and regenerated turns.

``pip install 'toolgateway[langgraph]'`` (langgraph 1.2.x); in the app::

    from toolgateway.langgraph import gateway_tool_node
    builder.add_node("tools", gateway_tool_node(tools, Client(url, token=token)))

``tools`` are the LangChain tools the model is bound to (their names and
schemas); their bodies do not run: each call runs the gateway tool of the
same name. The node is LangGraph's own ``ToolNode`` with a
``wrap_tool_call`` hook (:class:`GatewayToolCalls`; use it in your own
``ToolNode`` or ``AgentMiddleware`` if you have one), so parallel tool calls,
``Send`` fan-out and the state handling are LangGraph's.

Identity of a call (docs/keys.md): the session is the thread
(``config["configurable"]["thread_id"]``, plus the node path of a subgraph;
never the per-task namespace), the step is the call's ordinal among all
tool calls of the thread's checkpointed ``messages``
(:func:`toolgateway.runtimes.langgraph_step`), never the model's tool-call
id. A graph run without a checkpointer or a thread id, or a state without
``messages``, is refused with :class:`~toolgateway.IdentityError` naming what
is missing.

Approvals: a call held for a human (409 ``approval_pending``) pauses the
graph at ``interrupt()`` with :func:`toolgateway._adapter.approval_request`'s
value (``{"type": "toolgateway.approval", "approval_id", ...}``). Resume with
``Command(resume=answer)``: ``True``/``False``/``{"approved", "note"}``
decides a caller approval (``approver: caller``) with the client's token;
anything else (``None``) just checks again (an operator decided with
``gateway admin`` or the admin API). The call then runs once, or the model
reads the denial as the tool's error message.

Refusals the model can act on (``call_denied``, ``approval_denied``,
``approval_expired``, ``step_conflict``, ``effect_conflict``) become tool
messages with ``status="error"``; everything else (``outcome_unknown``, an
outage, auth or configuration errors) is raised as its typed
:class:`~toolgateway.GatewayError` out of ``graph.invoke``, and the thread
stays at its last checkpoint: invoking it again makes the same calls with the
same keys.
"""

from typing import Any, Awaitable, Callable, Optional, Sequence, Union

from langchain_core.messages import ToolMessage
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt

from . import _adapter, runtimes
from .aio import AsyncClient
from .client import Client, Result
from .errors import (ApprovalPendingError, DeniedError, EffectConflictError, GatewayError, IdentityError,
                     InvalidInputError, StepConflictError)

__all__ = ["GatewayToolCalls", "gateway_tool_node", "call_identity"]


def call_identity(request: Any) -> "tuple[str, int]":
    """``(session_id, step)`` of a ToolNode call (a ``ToolCallRequest``).

    Raises:
        IdentityError: no thread id, no checkpointer, or no ``messages`` in the
            state holding the call.
    """
    runtime = request.runtime
    config = getattr(runtime, "config", None) or {}
    configurable = config.get("configurable") or {}
    thread_id = _adapter.require_identity(
        configurable.get("thread_id"), 'config["configurable"]["thread_id"]',
        "compile the graph with a checkpointer and invoke it with {'configurable': {'thread_id': ...}}")
    if configurable.get("__pregel_checkpointer") is None:
        raise IdentityError("toolgateway: no stable identity: the graph has no checkpointer "
                            "(compile it with checkpointer=...): without one a resume cannot find the step")
    state = request.state
    messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    if isinstance(state, list):
        messages = state
    if messages is None:
        raise IdentityError("toolgateway: no stable identity: the state has no 'messages' "
                            "(the step is counted from the thread's message history)")
    session_id = runtimes.langgraph_session_id(str(thread_id), configurable.get("checkpoint_ns") or "")
    return session_id, runtimes.langgraph_step(messages, request.tool_call["id"])


class GatewayToolCalls:
    """The ``wrap_tool_call`` / ``awrap_tool_call`` hooks of a ``ToolNode``
    that run each call at the gateway instead of the local tool's body.

    Args:
        client: a :class:`~toolgateway.Client` or :class:`~toolgateway.AsyncClient`
            (the async hook uses httpx when installed, no thread per call).
        refusals_as_messages: ``True`` (default) hands the model the refusals
            it can act on as error tool messages; ``False`` raises them too.
    """

    def __init__(self, client: Union[Client, AsyncClient], *, refusals_as_messages: bool = True) -> None:
        self.client = _adapter.sync_client(client)
        self.async_client = _adapter.async_client(client)
        self.refusals_as_messages = refusals_as_messages

    def _message(self, call: Any, result: Optional[Result] = None, error: Optional[str] = None) -> ToolMessage:
        if error is not None:
            return ToolMessage(content=error, name=call["name"], tool_call_id=call["id"], status="error")
        value = _adapter.result_value(result)
        content = value if isinstance(value, str) else result.body.decode("utf-8", "replace")
        return ToolMessage(content=content, name=call["name"], tool_call_id=call["id"],
                           status="error" if result.status >= 400 else "success",
                           artifact={"execution_id": result.execution_id, "replayed": result.replayed,
                                     "status": result.status})

    def _refusal(self, call: Any, step: int, err: GatewayError) -> Optional[ToolMessage]:
        """The model's message for a refusal it can act on, or None (raise)."""
        if not self.refusals_as_messages:
            return None
        tool = call["name"]
        if isinstance(err, DeniedError):
            return self._message(call, error=_adapter.denial_text(tool, err))
        if isinstance(err, (StepConflictError, EffectConflictError)):
            earlier = err.problem.get("execution_id") or "another call"
            return self._message(call, error=(
                f"{err.code}: this call of {tool} was NOT run: step {step} of this conversation (or this "
                f"action, for effect_conflict) already ran as execution {earlier} with other arguments, in an "
                "earlier attempt at this turn. If this call is still needed, make it again as a new call."))
        return None

    def wrap_tool_call(self, request: Any, execute: Callable[[Any], Any]) -> Any:
        """The ``ToolNode(wrap_tool_call=...)`` hook (``execute`` is not called)."""
        call = request.tool_call
        session_id, step = call_identity(request)
        session = self.client.session(session_id)
        while True:
            try:
                return self._message(call, session.call(step, call["name"], call["args"]))
            except ApprovalPendingError as pending:
                # Raises GraphInterrupt the first time (the run pauses at its
                # checkpoint); returns the resume value on resume, when the
                # node runs again from its start and reaches here again.
                answer = _adapter.answer_of(interrupt(_adapter.approval_request(call["name"], call["args"], pending)))
                if answer is not None and not _adapter.decide(session, pending.approval_id, answer) \
                        and not answer["approved"]:
                    return self._message(call, error=_adapter.declined_text(call["name"]))
            except GatewayError as err:
                message = self._refusal(call, step, err)
                if message is None:
                    raise
                return message

    async def awrap_tool_call(self, request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        """The ``ToolNode(awrap_tool_call=...)`` hook, on the event loop."""
        call = request.tool_call
        session_id, step = call_identity(request)
        session = self.async_client.session(session_id)
        while True:
            try:
                return self._message(call, await session.call(step, call["name"], call["args"]))
            except ApprovalPendingError as pending:
                answer = _adapter.answer_of(interrupt(_adapter.approval_request(call["name"], call["args"], pending)))
                if answer is not None and not await _adapter.adecide(session, pending.approval_id, answer) \
                        and not answer["approved"]:
                    return self._message(call, error=_adapter.declined_text(call["name"]))
            except GatewayError as err:
                message = self._refusal(call, step, err)
                if message is None:
                    raise
                return message


def gateway_tool_node(tools: Sequence[Any], client: Union[Client, AsyncClient], *,
                      refusals_as_messages: bool = True, **tool_node_options: Any) -> ToolNode:
    """A LangGraph ``ToolNode`` over ``tools`` whose calls run at the gateway
    (see :class:`GatewayToolCalls`). ``handle_tool_errors`` is off: a typed
    error reaches the app, and LangGraph's interrupt is never turned into
    text.

    Raises:
        InvalidInputError: no tools, ``handle_tool_errors`` set, or a client
            that is not one of the SDK's.
    """
    if not tools:
        raise InvalidInputError("toolgateway: gateway_tool_node needs the tools the model is bound to (none given)")
    hooks = GatewayToolCalls(client, refusals_as_messages=refusals_as_messages)
    if tool_node_options.get("handle_tool_errors"):
        raise InvalidInputError("toolgateway: handle_tool_errors would turn the gateway's typed errors and "
                            "approval interrupts into text; leave it off")
    tool_node_options["handle_tool_errors"] = False
    return ToolNode(list(tools), wrap_tool_call=hooks.wrap_tool_call, awrap_tool_call=hooks.awrap_tool_call,
                    **tool_node_options)
