"""CrewAI adapter: the gateway's tools as CrewAI tools, each call exactly
once across crashes, reruns and CrewAI's own retries.

    from toolgateway import Client
    from toolgateway.crewai import gateway_tools

    agent = Agent(role="ops", goal="...", backstory="...", llm=llm,
                  tools=gateway_tools(Client(url, token=token), run_id=order_id))

Identity (docs/runtimes.md, "CrewAI"): the session is the app's ``run_id``
(what identifies this piece of work across reruns: an order, a ticket) and
the task (its name, else its position in the crew); the step is the lowest
step of that task that no call has used (answered) or holds (in flight),
reserved by a ``before_tool_call`` hook (CrewAI's PRE_TOOL_CALL interception
point, which sees the task and the crew). It is independent of the
arguments: CrewAI retries a failed call by re-prompting the model, which
often changes the arguments, and the retry must land on the same step so
the gateway can refuse a second action (``step_conflict``) instead of
running it.

CrewAI has no durable pause. A call the gateway's rules hold for a human,
a ``step_conflict`` or ``effect_conflict``, and an ``outcome_unknown`` stop
the crew: the tool reports a ``ToolFailure`` (code = the gateway's problem
code, details = the problem) under ``tool_failure_policy=RAISE``, so
``crew.kickoff()`` raises CrewAI's ``ToolExecutionFailedError`` (``.record.
failure.code``). After the approval is decided, the app runs the crew again
with the same ``run_id``: the same call gets the same step and runs once,
or the model reads that it was denied. A call that got no answer (the
gateway unreachable after the client's retries, a 5xx) is reported to the
model as unconfirmed and does not use up its step: CrewAI's retry, with the
same or changed arguments, goes to the same step.
"""

import contextvars
import json
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, create_model

from crewai.hooks.tool_hooks import ToolCallHookContext, register_before_tool_call_hook
from crewai.tools import BaseTool
from crewai.tools.tool_failure import ToolFailure, ToolFailurePolicy

from . import _adapter, wire
from .aio import AsyncClient
from .client import Client
from .errors import (ApprovalPendingError, DeniedError, EffectConflictError, GatewayConnectionError, GatewayError,
                     IdentityError, OutcomeUnknownError, StepConflictError)
from .runtimes import session_id_from_parts

__all__ = ["GatewayTool", "gateway_tools", "STOPPING_CODES"]

#: The gateway's answers that stop the crew (a ToolFailure under the RAISE
#: policy): the call must not be made again as something else.
STOPPING_CODES = frozenset({wire.CODE_APPROVAL_PENDING, wire.CODE_STEP_CONFLICT, wire.CODE_EFFECT_CONFLICT,
                            wire.CODE_OUTCOME_UNKNOWN})

# The identity the hook reserved for the call about to run (CrewAI runs the
# hook and then the tool in the same context): (session_id, task, step).
_pending: "contextvars.ContextVar[Optional[Tuple[str, str, int]]]" = contextvars.ContextVar(
    "toolgateway_crewai_call", default=None)


class _Steps:
    """Per (session, task), in this process: the steps of the calls that got
    an answer and of the calls in flight. A call takes the lowest step that
    is neither, so the parallel calls of one turn get distinct steps, and a
    call that got no answer gives its step back for CrewAI's retry. A crew
    run again from the start counts the same way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answered: Dict[Tuple[str, str], set] = {}
        self._in_flight: Dict[Tuple[str, str], set] = {}

    def reserve(self, session_id: str, task: str) -> int:
        with self._lock:
            taken = self._answered.setdefault((session_id, task), set())
            flying = self._in_flight.setdefault((session_id, task), set())
            step = 0
            while step in taken or step in flying:
                step += 1
            flying.add(step)
            return step

    def finish(self, session_id: str, task: str, step: int, answered: bool) -> None:
        with self._lock:
            self._in_flight.get((session_id, task), set()).discard(step)
            if answered:
                self._answered.setdefault((session_id, task), set()).add(step)


def _never_cache(_args: Any = None, _result: Any = None) -> bool:
    """CrewAI's tool cache would answer a later call with the same arguments
    without making it; the gateway decides what is a repeat."""
    return False


class GatewayTool(BaseTool):
    """One gateway tool as a CrewAI tool (made by :func:`gateway_tools`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    gateway_name: str = Field(description="The tool's name at the gateway.")
    read_only: bool = False
    # A refusal that must not become another call stops the crew.
    tool_failure_policy: Optional[ToolFailurePolicy] = ToolFailurePolicy.RAISE
    cache_function: Any = _never_cache
    _client: Any = PrivateAttr(default=None)
    _run_id: str = PrivateAttr(default="")
    _steps: Any = PrivateAttr(default=None)

    def identity_for(self, context: ToolCallHookContext) -> Tuple[str, str, int]:
        """The call's session from the hook's context (the run id and the
        task), the task's name, and the step it reserves: the lowest step of
        the task that is neither answered nor in flight.

        Raises:
            IdentityError: the call runs outside a task.
        """
        task = context.task
        if task is None:
            raise IdentityError("toolgateway: no stable identity: the tool call runs outside a crew task "
                                "(CrewAI gave the hook no task); run the agent in a Crew's Task")
        name = getattr(task, "name", None)
        if not name:
            crew_tasks = list(getattr(context.crew, "tasks", None) or [])
            name = f"task-{next((i for i, t in enumerate(crew_tasks) if t is task), 0)}"
        session_id = session_id_from_parts(self._run_id, name)
        return session_id, name, self._steps.reserve(session_id, name)

    def _run(self, **kwargs: Any) -> Any:
        if self.read_only:
            session_id, step = _adapter.READ_ONLY_IDENTITY
            return self._call(session_id, step, kwargs)[0]
        pending = _pending.get()
        _pending.set(None)  # one reservation, one call
        if pending is None:
            raise IdentityError("toolgateway: no stable identity: the before_tool_call hook did not run for "
                                f"{self.gateway_name} (call the tool through a CrewAI agent)")
        session_id, task_name, step = pending
        answered = False
        try:
            value, answered = self._call(session_id, step, kwargs)
            return value
        finally:
            self._steps.finish(session_id, task_name, step, answered)

    def _call(self, session_id: str, step: int, kwargs: Dict[str, Any]) -> Tuple[Any, bool]:
        """The tool's answer for CrewAI, and whether the step is used up."""
        try:
            result = _adapter.call(self._client, session_id, step, self.gateway_name, kwargs)
        except DeniedError as denied:
            return _adapter.denial_text(self.gateway_name, denied), True
        except (ApprovalPendingError, StepConflictError, EffectConflictError, OutcomeUnknownError) as err:
            return _stop(self.gateway_name, step, err), False
        except (GatewayConnectionError, GatewayError) as err:
            if isinstance(err, GatewayError) and not err.retryable and err.status < 500:
                raise
            # No answer: the step stays free, so CrewAI's retry (the same
            # call, or the model's changed one) goes to the same step.
            return (f"This call of {self.gateway_name} could not be confirmed ({err}): it may or may not have "
                    "run. Make the same call again to learn its outcome."), False
        value = _adapter.result_value(result)
        return (value if isinstance(value, str) else json.dumps(value)), True


def _stop(tool: str, step: int, err: GatewayError) -> ToolFailure:
    if isinstance(err, (StepConflictError, EffectConflictError)):
        message = _adapter.conflict_text(tool, step, err)
    elif isinstance(err, ApprovalPendingError):
        message = (f"This call of {tool} waits for a human's approval ({err.approval_id}); nothing ran. "
                   "Run the crew again with the same run_id once it is decided.")
    else:
        message = f"The outcome of this call of {tool} is unknown ({err.code}); an operator resolves it."
    return ToolFailure(message=message, code=err.code, retryable=False,
                       details={"problem": err.problem, "step": step, "tool": tool})


def _hook(context: ToolCallHookContext) -> None:
    """CrewAI's before_tool_call hook: the identity of a gateway tool's call."""
    tool = getattr(context.tool, "_original_tool", None) or context.tool
    if isinstance(tool, GatewayTool) and not tool.read_only:
        _pending.set(tool.identity_for(context))
    return None


_registered = False
_register_lock = threading.Lock()


def _register_hook() -> None:
    global _registered
    with _register_lock:
        if not _registered:
            register_before_tool_call_hook(_hook)
            _registered = True


def _args_model(name: str, schema: Mapping[str, Any]) -> Type[BaseModel]:
    """A pydantic model of the tool's JSON Schema for CrewAI (names and
    descriptions; the gateway validates the arguments)."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    required = set(schema.get("required") or ())
    fields: Dict[str, Any] = {}
    for prop, spec in properties.items():
        description = spec.get("description", "") if isinstance(spec, Mapping) else ""
        fields[prop] = (Any, Field(... if prop in required else None, description=description))
    return create_model(f"{name.replace('-', '_')}_args", __config__=ConfigDict(extra="allow"), **fields)


def gateway_tools(client: Union[Client, AsyncClient], *, run_id: str,
                  tools: Optional[Sequence[Any]] = None) -> List[GatewayTool]:
    """The gateway's tools as CrewAI tools for one run of the app's work.

    Args:
        client: a :class:`toolgateway.Client` (or AsyncClient).
        run_id: what identifies this piece of work across reruns of the crew
            (an order id, a ticket): required, since CrewAI's own ids
            (``crew.id``, ``task.id``) are new in every process.
        tools: ``None`` for every tool the gateway lists to the client's
            tenant (fetched now), a sequence of names (a subset of it), or
            of definitions ``{"name", "description", "input_schema",
            "read_only"}`` (nothing fetched).

    Raises:
        IdentityError: no run_id.
        InvalidInputError: a bad client or definition, an unknown tool name.
    """
    from .errors import InvalidInputError
    run_id = _adapter.require_identity(run_id, "run_id", "pass the id of the work this crew does, stable across reruns")
    sync = _adapter.sync_client(client)
    if tools is None or all(isinstance(t, str) for t in tools):
        listed = _adapter.list_tools(sync)
        names = list(listed) if tools is None else list(tools)
        missing = [n for n in names if n not in listed]
        if missing:
            raise InvalidInputError(f"toolgateway: the gateway lists no tool named {', '.join(missing)} for this client")
        definitions = [listed[n] for n in names]
    else:
        definitions = list(tools)
    steps = _Steps()
    made: List[GatewayTool] = []
    for definition in definitions:
        if not isinstance(definition, Mapping) or not isinstance(definition.get("name"), str):
            raise InvalidInputError(f"toolgateway: a tool definition needs a name: {definition!r}")
        name = definition["name"]
        tool = GatewayTool(name=name, description=definition.get("description") or name, gateway_name=name,
                           read_only=_adapter.is_read_only(definition),
                           args_schema=_args_model(name, definition.get("input_schema") or {}))
        tool._client = sync
        tool._run_id = run_id
        tool._steps = steps
        made.append(tool)
    _register_hook()
    return made
