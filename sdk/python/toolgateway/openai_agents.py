"""OpenAI Agents SDK adapter: gateway tools as function tools, each call
exactly once across crashes, resumes and regenerated turns.

``pip install 'toolgateway[openai-agents]'`` (openai-agents 0.24.x); in the app::

    gw = OpenAIAgentsGateway(Client(url, token=token), session)     # session: the run's SQLiteSession (or any Session)
    agent = Agent(name="ops", model=gw.model(model), tools=gw.tools())

Identity (docs/runtimes.md): the gateway session is the SDK session's
``session_id``; the step of a function call is its ordinal among the
``function_call`` items of the history the model was sent for its turn (the
session's items, then the items of the current run) plus its position in the
model's response. :meth:`OpenAIAgentsGateway.model` wraps the model to read
them; the model's ``call_id``, minted fresh on every turn, only locates the
call. A run resumed from a serialised ``RunState`` in a new process takes
the steps from the state (:meth:`OpenAIAgentsGateway.resume`).

Approvals: each tool's ``needs_approval`` asks the gateway. A call its rules
allow runs then (the tool's own invocation replays the answer); a call held
for a human (409 ``approval_pending``) interrupts the run with the SDK's
``ToolApprovalItem``. Store ``result.to_state()``; once decided (an operator
with ``gateway admin``, or the app's human: ``state.approve(item)`` sends a
caller approval to the gateway with the client's token), ``gw.resume(state)``
and ``Runner.run(agent, state)`` run it once. A denied call's output is a
readable denial for the model.

Failures never become "please try again" text: the tools are built with
``failure_error_function=None``, so ``step_conflict``, ``effect_conflict``,
``outcome_unknown``, an outage or a missing identity raise their typed
:class:`~toolgateway.GatewayError` (or :class:`~toolgateway.IdentityError`)
out of ``Runner.run`` (the SDK may wrap it: the typed error is the exception
or its ``__cause__`` chain); nothing is stored as done, so the same run
makes the same calls again.
"""

import json
import urllib.request
from collections.abc import Mapping
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from agents import FunctionTool
from agents.models.interface import Model
from agents.tool import set_function_tool_failure_error_function

from . import _adapter, runtimes, wire
from .aio import AsyncClient
from .client import Client, Result
from .errors import ApprovalPendingError, DeniedError, GatewayError, IdentityError, InvalidInputError

__all__ = ["OpenAIAgentsGateway", "GatewayModel"]


def _get(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _function_call_ids(items: Iterable[Any]) -> List[str]:
    return [_get(item, "call_id") for item in items if _get(item, "type") == "function_call"]


class GatewayModel(Model):
    """A model that records the step of every function call of its responses
    (see :class:`OpenAIAgentsGateway`), then answers as the wrapped one."""

    def __init__(self, inner: Model, gateway: "OpenAIAgentsGateway") -> None:
        self.inner = inner
        self.gateway = gateway

    def _record(self, input: Any, output: Sequence[Any]) -> None:
        base = len(_function_call_ids(input)) if isinstance(input, list) else 0
        for index, call_id in enumerate(_function_call_ids(output)):
            self.gateway._steps[call_id] = base + index

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        response = await self.inner.get_response(system_instructions, input, *args, **kwargs)
        self._record(input, response.output)
        return response

    def stream_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        async def events() -> Any:
            async for event in self.inner.stream_response(system_instructions, input, *args, **kwargs):
                if _get(event, "type") == "response.completed":
                    self._record(input, event.response.output)
                yield event
        return events()

    async def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            await close()


class OpenAIAgentsGateway:
    """The gateway tools of one SDK session.

    Args:
        client: a :class:`~toolgateway.Client` or :class:`~toolgateway.AsyncClient`.
        session: the run's SDK ``Session`` (``SQLiteSession(...)``, ...): its
            ``session_id`` is the gateway session. Refused without one: a
            run without a session has no identity that survives a restart.

    Raises:
        IdentityError: no session, or a session without a ``session_id``.
    """

    def __init__(self, client: Union[Client, AsyncClient], session: Any) -> None:
        if session is None:
            raise IdentityError("toolgateway: no stable identity: the OpenAI Agents session is missing "
                                "(pass the run's Session, e.g. SQLiteSession(conversation_id, db))")
        session_id = _adapter.require_identity(getattr(session, "session_id", None), "session.session_id",
                                               "the Session the run uses, e.g. SQLiteSession(conversation_id, db)")
        self.client = _adapter.sync_client(client)
        self.async_client = _adapter.async_client(client)
        self.session = session
        self.session_id = runtimes.openai_agents_session_id(session_id)
        self._steps: Dict[str, int] = {}
        # Answers of calls made from needs_approval, handed to the tool's
        # invocation of the same call (one request for an allowed call).
        self._answers: Dict[str, Union[Result, GatewayError]] = {}

    def model(self, model: Model) -> GatewayModel:
        """Wrap the agent's model so the tools know each call's step."""
        if isinstance(model, GatewayModel):
            return model
        if not isinstance(model, Model):
            raise InvalidInputError(f"toolgateway: want an agents Model instance, not {type(model).__name__} "
                                    "(resolve a model name with the provider first)")
        return GatewayModel(model, self)

    def resume(self, state: Any) -> Any:
        """Record the steps of the calls in a ``RunState`` (one loaded in a new
        process with ``RunState.from_json``) before ``Runner.run(agent,
        state)``; returns the state."""
        items: List[Any] = []
        original = getattr(state, "_original_input", None)
        if isinstance(original, list):
            items.extend(original)
        items.extend(item.raw_item for item in getattr(state, "_generated_items", []) or [])
        last = getattr(state, "_last_processed_response", None)
        items.extend(item.raw_item for item in (getattr(last, "new_items", None) or []))
        seen: List[str] = []
        for call_id in _function_call_ids(items):
            if call_id not in seen:
                seen.append(call_id)
        for index, call_id in enumerate(seen):
            self._steps.setdefault(call_id, index)
        return state

    def step(self, call_id: str) -> int:
        """The step recorded for ``call_id``.

        Raises:
            IdentityError: the call's turn was not seen (the model not wrapped
                with :meth:`model`, or a resumed state not given to :meth:`resume`).
        """
        step = self._steps.get(call_id)
        if step is None:
            raise IdentityError("toolgateway: no stable identity: no step for this call: wrap the agent's model "
                                "with gw.model(...) and pass a resumed RunState to gw.resume(state)")
        return step

    def tools(self, definitions: Optional[Iterable[Dict[str, Any]]] = None) -> List[FunctionTool]:
        """Function tools for the gateway's tools: ``definitions`` as the
        discovery list's entries (``{"name", "description", "input_schema"}``),
        by default the gateway's own list (``GET /api/tools/v1``)."""
        if definitions is None:
            definitions = _discover(self.client)
        return [self._tool(definition) for definition in definitions]

    def _tool(self, definition: Dict[str, Any]) -> FunctionTool:
        name = definition["name"]
        schema = definition.get("input_schema") or {"type": "object"}
        read_only = definition.get("read_only") is True

        async def on_invoke(ctx: Any, arguments: str) -> str:
            args = json.loads(arguments or "{}")
            call_id = ctx.tool_call_id
            answer = self._answers.pop(call_id, None)
            session = self.async_client.session("read-only" if read_only else self.session_id)
            step = 0 if read_only else self.step(call_id)
            while True:
                try:
                    if answer is None:
                        answer = await session.call(step, name, args)
                    if isinstance(answer, GatewayError):
                        raise answer
                    return _output(answer)
                except ApprovalPendingError as pending:
                    # The SDK let it run: the app approved. That is no
                    # person's decision (adecide sends nothing without a
                    # person's token): still pending, it is raised, never
                    # approved on the agent's behalf.
                    if ctx.is_tool_approved(name, call_id) and \
                            await _adapter.adecide(session, pending.approval_id, {"approved": True}):
                        answer = None
                        continue
                    raise
                except DeniedError as err:
                    return _adapter.denial_text(name, err)

        async def needs_approval(ctx: Any, params: Dict[str, Any], call_id: str) -> bool:
            if read_only:
                return False
            try:
                self._answers[call_id] = await self.async_client.session(self.session_id).call(
                    self.step(call_id), name, params)
            except ApprovalPendingError:
                return True
            except GatewayError as err:
                self._answers[call_id] = err  # raised (or told the model) by the invocation
            return False

        tool = FunctionTool(name=name, description=definition.get("description") or name,
                            params_json_schema=schema, on_invoke_tool=on_invoke, strict_json_schema=False,
                            needs_approval=needs_approval)
        # Errors raise out of the run instead of becoming text for the model.
        return set_function_tool_failure_error_function(tool, None)


def _output(result: Result) -> str:
    value = _adapter.result_value(result)
    return value if isinstance(value, str) else result.body.decode("utf-8", "replace")


def _discover(client: Client) -> List[Dict[str, Any]]:
    """The gateway's tool list (``GET /api/tools/v1``)."""
    headers = {"Accept": wire.MEDIA_TYPE_JSON}
    if client.token:
        headers[wire.HEADER_AUTHORIZATION] = "Bearer " + client.token
    request = urllib.request.Request(client.base_url + "/api/tools/v1", headers=headers)
    with urllib.request.urlopen(request, timeout=client.timeout) as response:
        return json.loads(response.read())["tools"]
