"""A LangGraph agent for the crash tests: a StateGraph (model node, tools
node) with the real SQLite checkpointer, a scripted chat model (no network),
tools through the gateway (toolgateway.langgraph) when TOOLGATEWAY_URL is
set, else tools that post straight to the upstream.

argv[1] is JSON: {"db": path, "thread": id, "action": "start"|"resume"|"fork",
"turn": [{"name", "args"}, ...] (the model's tool calls for the user's
message), "resume": value for Command(resume=...) (resume only), "pg_url": a
PostgreSQL URL (the PostgreSQL checkpointer instead of SQLite), "async":
bool, "pause_after_tool": bool (print AFTER-TOOL and sleep: the test kills
before the checkpoint), "pause_on_interrupt": bool (print PAUSED and sleep)}.
Prints INTERRUPT <value>, FINAL <text>, STEPS <json>.
"""

import asyncio
import json
import sys
import time
import uuid
from typing import Any, List, Optional

from agent_support import direct_call, gateway_token, gateway_url, marker
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

OPTIONS = json.loads(sys.argv[1])


class ScriptedModel(BaseChatModel):
    """After the user's message: the scripted tool calls, each with a fresh
    id (as a real model mints them). After tool results: a final answer
    quoting them, which the test reads."""

    turn: List[dict]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: List[Any], stop: Optional[List[str]] = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], HumanMessage):
            calls = [{"name": c["name"], "args": c["args"], "id": "call_" + uuid.uuid4().hex, "type": "tool_call"}
                     for c in self.turn]
            message = AIMessage(content="", tool_calls=calls)
        else:
            results = [m.content for m in messages if isinstance(m, ToolMessage)]
            message = AIMessage(content="done: " + " | ".join(results))
        return ChatResult(generations=[ChatGeneration(message=message)])


def direct_tool(name: str, needs_approval: bool):
    """The tool as the app would write it without the gateway (LangGraph's
    own human-in-the-loop: interrupt() before the call)."""
    def run(**args: Any) -> str:
        if needs_approval:
            answer = interrupt({"type": "approval", "tool": name, "args": args})
            if answer is not True and not (isinstance(answer, dict) and answer.get("approved")):
                return f"This call of {name} was NOT run: declined."
        return json.dumps(direct_call(name, args))
    return run


@tool
def refund(txn: str, amount: int) -> str:
    """Refund a transaction."""
    return json.dumps(direct_call("refund", {"txn": txn, "amount": amount}))


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return json.dumps(direct_call("lookup", {"q": q}))


def pause_after(message: Any) -> Any:
    if OPTIONS.get("pause_after_tool"):
        marker("AFTER-TOOL")
        time.sleep(3600)
    return message


def build(checkpointer: Any) -> Any:
    tools = [refund, lookup]
    if gateway_url():
        from toolgateway import AsyncClient, Client
        from toolgateway.langgraph import GatewayToolCalls
        client = (AsyncClient if OPTIONS.get("async") else Client)(gateway_url(), token=gateway_token(),
                                                                   prefer_wait=0)
        hooks = GatewayToolCalls(client)

        def wrap(request: Any, execute: Any) -> Any:
            return pause_after(hooks.wrap_tool_call(request, execute))

        async def awrap(request: Any, execute: Any) -> Any:
            return pause_after(await hooks.awrap_tool_call(request, execute))
        node = ToolNode(tools, wrap_tool_call=wrap, awrap_tool_call=awrap, handle_tool_errors=False)
    else:
        def wrap(request: Any, execute: Any) -> Any:
            call = request.tool_call
            content = direct_tool(call["name"], call["name"] in OPTIONS.get("approval_tools", []))(**call["args"])
            return pause_after(ToolMessage(content=content, name=call["name"], tool_call_id=call["id"]))
        node = ToolNode(tools, wrap_tool_call=wrap, handle_tool_errors=False)

    model = ScriptedModel(turn=OPTIONS.get("turn", []))
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def report(graph: Any, config: dict, result: Any) -> None:
    for item in (result or {}).get("__interrupt__", []) if isinstance(result, dict) else []:
        marker("INTERRUPT", item.value)
        if OPTIONS.get("pause_on_interrupt"):
            marker("PAUSED")
            time.sleep(3600)
    messages = graph.get_state(config).values.get("messages", [])
    if messages and isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls:
        marker("FINAL " + messages[-1].content)


def inputs(graph: Any, config: dict) -> tuple:
    """What to invoke with, per action: (input, config)."""
    action = OPTIONS["action"]
    if action == "start":
        return {"messages": [HumanMessage(content="please")]}, config
    if action == "resume":
        state = graph.get_state(config)
        if not state.values:  # nothing checkpointed yet: start again
            return {"messages": [HumanMessage(content="please")]}, config
        if "resume" in OPTIONS:
            return Command(resume=OPTIONS["resume"]), config
        return None, config
    if action == "fork":
        # The checkpoint before the model's turn: regenerate the turn from it.
        for state in graph.get_state_history(config):
            if state.next == ("agent",) and len(state.values.get("messages", [])) == 1:
                return None, state.config
        raise SystemExit("no checkpoint before the model's turn")
    raise SystemExit(f"unknown action {action}")


def main() -> None:
    config = {"configurable": {"thread_id": OPTIONS["thread"]}}
    if OPTIONS.get("async"):
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async def run() -> None:
            async with AsyncSqliteSaver.from_conn_string(OPTIONS["db"]) as saver:
                graph = build(saver)
                state = await graph.aget_state(config)
                if OPTIONS["action"] == "start" or not state.values:
                    payload, cfg = {"messages": [HumanMessage(content="please")]}, config
                else:
                    payload, cfg = (Command(resume=OPTIONS["resume"]) if "resume" in OPTIONS else None), config
                result = await graph.ainvoke(payload, cfg, durability="sync")
                for item in result.get("__interrupt__", []):
                    marker("INTERRUPT", item.value)
                messages = (await graph.aget_state(config)).values.get("messages", [])
                if messages and isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls:
                    marker("FINAL " + messages[-1].content)
        asyncio.run(run())
        return
    if OPTIONS.get("pg_url"):
        from langgraph.checkpoint.postgres import PostgresSaver
        saver_cm = PostgresSaver.from_conn_string(OPTIONS["pg_url"])
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver
        saver_cm = SqliteSaver.from_conn_string(OPTIONS["db"])
    with saver_cm as saver:
        if OPTIONS.get("pg_url"):
            saver.setup()
        graph = build(saver)
        payload, cfg = inputs(graph, config)
        marker("RUNNING")
        result = graph.invoke(payload, cfg, durability="sync")
        report(graph, config, result)


if __name__ == "__main__":
    main()
