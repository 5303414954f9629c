"""Session ids and step indices for agent runtimes.

The key is stable only if its inputs are: a call replayed after a crash must
come back with the same session id and step index, and the parallel tool calls
of one model turn must get distinct indices. The rules (docs/keys.md, "Step
indices for real runtimes"):

- the session id comes from what identifies the run across resumes,
  regenerated turns and forks (the thread, workflow or session id), never
  from an id minted per node execution, task, attempt or model turn
  (LangGraph's checkpoint namespace task ids, a tool-call id);
- the step index of a tool call is its ordinal among the tool calls of the
  session, counted from the session's checkpointed history in the order the
  model emitted them. Never the model's own tool-call id: a regenerated turn
  gets new ids, and an ordinal lets the gateway tell "the same call again"
  (replay) from "another call in the same step" (``step_conflict``).

These helpers are pure functions over the history shapes documented with
each; they import nothing from the runtimes. The adapters
(:mod:`toolgateway.langgraph`, :mod:`toolgateway.openai_agents`) use them
and are crash-tested against the real runtimes; these helpers' own tests run on
hand-written histories in the runtimes' documented shapes and on the configs
and histories recorded from real LangGraph.js runs in
``sdk/testdata/runtimes.json`` (whose shapes LangGraph for Python shares: the
``thread_id``/``checkpoint_ns`` configurable and LangChain's serialised
messages).
"""

import hashlib
from collections.abc import Mapping
from typing import Any, Iterable, Optional, Tuple

from .errors import InvalidInputError
from .keys import MAX_SESSION_ID_LENGTH, validate_session_id

__all__ = [
    "session_id_from_parts",
    "langgraph_session_id",
    "langgraph_step",
    "langgraph_identity",
    "openai_agents_session_id",
    "openai_agents_step",
    "temporal_session_id",
    "temporal_step",
]

_KEEP = frozenset(chr(c) for c in range(0x21, 0x7F)) - {":", "%", "/"}


def session_id_from_parts(*parts: str) -> str:
    """Join runtime identifiers into one valid, deterministic session id.

    Each part is kept as is where the gateway allows it; ``:``, ``%``, ``/``,
    spaces and non-ASCII characters are percent-encoded (UTF-8), and the parts
    are joined with ``/``, so different parts never give the same id. An id
    longer than 256 characters is replaced by ``sha256-<hex of it>``.

    Raises:
        InvalidInputError: no parts, or a part that is not a non-empty str.
    """
    if not parts:
        raise InvalidInputError("toolgateway: session_id_from_parts needs at least one part")
    encoded = []
    for part in parts:
        if not isinstance(part, str) or not part:
            raise InvalidInputError(f"toolgateway: session id part {part!r} must be a non-empty str")
        encoded.append("".join(
            c if c in _KEEP else "".join("%%%02X" % b for b in c.encode("utf-8", "surrogatepass"))
            for c in part))
    joined = "/".join(encoded)
    if len(joined) > MAX_SESSION_ID_LENGTH:
        joined = "sha256-" + hashlib.sha256(joined.encode("ascii")).hexdigest()
    return validate_session_id(joined)


def _get(item: Any, name: str) -> Any:
    """A member of a dict-shaped item or an attribute of an object-shaped one."""
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _ordinal(ids: Iterable[Any], wanted: str, what: str) -> int:
    if not isinstance(wanted, str) or not wanted:
        raise InvalidInputError(f"toolgateway: {what} must be a non-empty str, not {wanted!r}")
    for index, found in enumerate(ids):
        if found == wanted:
            return index
    raise InvalidInputError(
        f"toolgateway: {what} {wanted!r} is not in the history; pass the history that contains the call")


# --- LangGraph ----------------------------------------------------------------

def _graph_path(checkpoint_ns: str) -> list:
    """The node path of the graph a node or tool runs in, from its
    ``checkpoint_ns``: the ``|``-separated segments (``node:<task id>``)
    without the last one, the running node itself, and without the task ids,
    which LangGraph mints per task (a tools node regenerated from a fork runs
    under a new one)."""
    path = []
    for segment in checkpoint_ns.split("|")[:-1]:
        node = segment.split(":", 1)[0]
        if not node:
            raise InvalidInputError(f"toolgateway: checkpoint namespace {checkpoint_ns!r} has an empty node name")
        path.append(node)
    return path


def langgraph_session_id(thread_id: str, checkpoint_ns: str = "") -> str:
    """Session id of a LangGraph thread: the thread id, plus the node path of
    the subgraph when the call runs inside one (its message history, and so
    its step count, is the subgraph's own).

    ``thread_id`` is ``config["configurable"]["thread_id"]``; ``checkpoint_ns``
    is ``config["configurable"].get("checkpoint_ns", "")`` of the node or tool
    that makes the call (inside a ToolNode at the top level it is
    ``tools:<task id>``; in a subgraph ``agent:<task id>|tools:<task id>``).
    Only the node names of the enclosing graphs are used, never the task ids
    or the running node: LangGraph mints a new task id for each node
    execution, so a session built from the namespace as is would give a
    regenerated model turn a new session, and the gateway would run its calls
    a second time.

    Raises:
        InvalidInputError: an empty thread id, or a namespace with an empty
            node name.
    """
    if not isinstance(checkpoint_ns, str):
        raise InvalidInputError(f"toolgateway: checkpoint namespace must be a str, not {checkpoint_ns!r}")
    return session_id_from_parts(thread_id, *_graph_path(checkpoint_ns))


def _tool_calls(message: Any) -> Any:
    """The tool calls of a message in the shapes LangGraph holds and records:
    a message object or its dict form (``tool_calls``), LangChain's
    serialisation (``{"lc": 1, "type": "constructor", "kwargs": {"tool_calls"}}``),
    a stored message (``{"type": "ai", "data": {"tool_calls"}}``)."""
    calls = _get(message, "tool_calls")
    if calls is not None:
        return calls
    if _get(message, "lc") == 1 and _get(message, "type") == "constructor":
        return _get(_get(message, "kwargs") or {}, "tool_calls")
    if _get(message, "type") == "ai":
        return _get(_get(message, "data") or {}, "tool_calls")
    return None


def langgraph_step(messages: Iterable[Any], tool_call_id: str) -> int:
    """Step index of a tool call in a LangGraph thread: the 0-based ordinal of
    the call among all tool calls of the thread's message history.

    ``messages`` is the checkpointed ``state["messages"]``, oldest first, whose
    AI messages carry ``tool_calls`` (LangChain ``AIMessage`` objects, their
    dict form ``{"type": "ai", "tool_calls": [{"id", "name", "args"}]}``,
    LangChain's serialised form ``{"lc": 1, "type": "constructor", "id": [...,
    "AIMessage"], "kwargs": {"tool_calls": [...]}}`` or OpenAI-style
    ``{"role": "assistant", "tool_calls": [{"id", "function"}]}``).
    It must include the AI message that made the call. ``tool_call_id`` only
    locates the call (it comes with the call: ``InjectedToolCallId``); the
    index does not depend on it, so a regenerated turn with the same calls in
    the same order reproduces the same indices.

    Raises:
        InvalidInputError: the call is not in ``messages``.
    """
    def ids() -> Iterable[Any]:
        for message in messages:
            calls = _tool_calls(message)
            if not isinstance(calls, (list, tuple)):
                continue
            for call in calls:
                yield _get(call, "id")
    return _ordinal(ids(), tool_call_id, "tool call id")


def langgraph_identity(config: Mapping, messages: Iterable[Any], tool_call_id: str) -> Tuple[str, int]:
    """``(session_id, step_index)`` of a tool call inside a LangGraph node or
    tool, from its ``RunnableConfig``, the thread's messages and the call's id.

    Raises:
        InvalidInputError: no ``thread_id`` in the config, or the call is not in
            ``messages``.
    """
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if not thread_id:
        raise InvalidInputError("toolgateway: config has no configurable.thread_id (run the graph with a checkpointer)")
    session_id = langgraph_session_id(str(thread_id), configurable.get("checkpoint_ns") or "")
    return session_id, langgraph_step(messages, tool_call_id)


# --- OpenAI Agents SDK --------------------------------------------------------

def openai_agents_session_id(session_id: str) -> str:
    """Session id for an OpenAI Agents SDK session (the id given to
    ``SQLiteSession(...)`` or another ``Session``), made valid for the
    gateway (``:`` and other characters percent-encoded)."""
    return session_id_from_parts(session_id)


def openai_agents_step(items: Iterable[Any], call_id: str) -> int:
    """Step index of a function call in an OpenAI Agents SDK session: the
    0-based ordinal of its ``function_call`` item among the function-call
    items of the session.

    ``items`` is the session's stored items (``await session.get_items()``)
    followed by the items of the current run up to and including the model
    response that made the call, oldest first: dicts (``{"type":
    "function_call", "call_id": ..., "name": ..., "arguments": ...}``) or
    the SDK's objects with the same attributes. Other items (messages,
    ``function_call_output``, reasoning) do not count. ``call_id`` locates the
    call; the index is its position, not the id, which a regenerated turn
    changes.

    Raises:
        InvalidInputError: the call is not in ``items``.
    """
    def ids() -> Iterable[Any]:
        for item in items:
            if _get(item, "type") == "function_call":
                yield _get(item, "call_id")
    return _ordinal(ids(), call_id, "call_id")


# --- Temporal -----------------------------------------------------------------

_SCHEDULED = ("EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", "ActivityTaskScheduled")


def temporal_session_id(workflow_id: str, run_id: Optional[str] = None) -> str:
    """Session id of a Temporal workflow: its workflow id (stable across worker
    crashes, activity retries and replays). Pass ``run_id`` only for a
    workflow that continues as new, whose activity sequence numbers start
    again in each run."""
    if run_id:
        return session_id_from_parts(workflow_id, run_id)
    return session_id_from_parts(workflow_id)


def temporal_step(activity_id: str, history: Optional[Iterable[Mapping]] = None) -> int:
    """Step index of a Temporal activity: its sequence number in the workflow.

    Without ``history``, ``activity_id`` must be the default activity id the
    SDKs assign, which is that sequence number in decimal
    (``activity.info().activity_id``, e.g. ``"3"``); it is returned as an
    int. With ``history`` (events in the JSON shape of ``temporal workflow
    show --output json``: ``{"eventType": "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
    "activityTaskScheduledEventAttributes": {"activityId": ...}}``), the
    index is the 0-based ordinal of the activity's scheduled event among the
    workflow's scheduled activities, which also works for custom activity ids.
    Retries of an activity keep its id and so its step.

    Raises:
        InvalidInputError: a non-decimal id without history, or an id not in
            the history.
    """
    if history is None:
        if not isinstance(activity_id, str) or not activity_id.isascii() or not activity_id.isdigit() \
                or (len(activity_id) > 1 and activity_id[0] == "0") or len(activity_id) > 16:
            raise InvalidInputError(
                f"toolgateway: activity id {activity_id!r} is not a default (decimal sequence number) "
                "activity id; pass the workflow history to count it")
        step = int(activity_id)
        if step > 2**53 - 1:
            raise InvalidInputError(f"toolgateway: activity id {activity_id} is beyond 2^53-1")
        return step

    def ids() -> Iterable[Any]:
        for event in history or ():
            if event.get("eventType") in _SCHEDULED:
                attributes = event.get("activityTaskScheduledEventAttributes") or {}
                yield attributes.get("activityId")
    return _ordinal(ids(), activity_id, "activity id")
