"""An OpenAI Agents SDK agent for the crash tests: a real SQLiteSession, a
scripted Model (the SDK's Model interface, no network), tools through the
gateway (toolgateway.openai_agents) when TOOLGATEWAY_URL is set, else
function tools that post straight to the upstream (with the SDK's own
needs_approval for the approval tools).

argv[1] is JSON: {"db", "session", "state": path of the stored RunState,
"action": "start"|"resume"|"regenerate", "turn": [{"name", "args"}],
"approve": bool (resume of an interrupted run), "pause_after_tool",
"pause_on_interrupt", "approval_tools": [...] (without the gateway),
"reply_timeout": seconds (the reply of a slower call is lost),
"sdk_default_errors": the SDK's default failure text (without the gateway)}.
Prints INTERRUPT <json>, FINAL <text>, ERROR <exception classes>.
"""

import asyncio
import json
import os
import sys
import time
import uuid
from typing import Any, List

from agent_support import direct_call, gateway_token, gateway_url, marker
from agents import Agent, FunctionTool, RunState, Runner, SQLiteSession, Usage, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

OPTIONS = json.loads(sys.argv[1])
set_tracing_disabled(True)


def _get(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


class ScriptedModel(Model):
    """After the user's message: the scripted function calls, each with a
    fresh call_id (as the real API mints them). After their outputs: a
    final message quoting them."""

    def __init__(self, turn: List[dict]) -> None:
        self.turn = turn

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        items = input if isinstance(input, list) else [{"role": "user", "content": input}]
        last_user = max(i for i, item in enumerate(items) if _get(item, "role") == "user")
        outputs = [str(_get(item, "output")) for item in items[last_user:] if _get(item, "type") == "function_call_output"]
        calls_made = sum(1 for item in items[last_user:] if _get(item, "type") == "function_call")
        if outputs and "try again" in outputs[-1] and calls_made < 2:
            outputs = []  # the SDK told the model to try again: a model does
        if not outputs:
            output: List[Any] = [ResponseFunctionToolCall(
                id="fc_" + uuid.uuid4().hex, call_id="call_" + uuid.uuid4().hex, name=c["name"],
                arguments=json.dumps(c["args"]), type="function_call", status="completed") for c in self.turn]
        else:
            output = [ResponseOutputMessage(
                id="msg_" + uuid.uuid4().hex, role="assistant", status="completed", type="message",
                content=[ResponseOutputText(type="output_text", text="done: " + " | ".join(outputs),
                                            annotations=[])])]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run without streaming")


def pause_after(tool: FunctionTool) -> FunctionTool:
    inner = tool.on_invoke_tool

    async def invoke(ctx: Any, arguments: str) -> Any:
        output = await inner(ctx, arguments)
        if OPTIONS.get("pause_after_tool"):
            marker("AFTER-TOOL")
            time.sleep(3600)
        return output
    tool.on_invoke_tool = invoke
    return tool


def direct_tools() -> List[FunctionTool]:
    """The tools as an app writes them without the gateway: @function_tool,
    the SDK's own needs_approval, and (sdk_default_errors) the SDK's default
    failure text for the model."""
    timeout = OPTIONS.get("reply_timeout", 120)
    errors: Any = {} if OPTIONS.get("sdk_default_errors") else {"failure_error_function": None}
    approval = OPTIONS.get("approval_tools", [])

    @function_tool(needs_approval="refund" in approval, **errors)
    async def refund(txn: str, amount: int) -> str:
        """Refund a transaction."""
        return json.dumps(await asyncio.to_thread(direct_call, "refund", {"txn": txn, "amount": amount}, timeout))

    @function_tool(needs_approval="lookup" in approval, **errors)
    async def lookup(q: str) -> str:
        """Look something up."""
        return json.dumps(await asyncio.to_thread(direct_call, "lookup", {"q": q}, timeout))
    return [refund, lookup]


async def main() -> None:
    session = SQLiteSession(OPTIONS["session"], OPTIONS["db"])
    model: Any = ScriptedModel(OPTIONS.get("turn", []))
    gw = None
    if gateway_url():
        from toolgateway import Client
        from toolgateway.openai_agents import OpenAIAgentsGateway
        if OPTIONS.get("reply_timeout"):  # a short timeout: the reply is lost, the client retries
            client = Client(gateway_url(), token=gateway_token(), timeout=OPTIONS["reply_timeout"],
                            prefer_wait=0, initial_backoff=0.2, max_backoff=0.5, max_attempts=50)
        else:
            client = Client(gateway_url(), token=gateway_token(), prefer_wait=0, max_attempts=3,
                            initial_backoff=0.05, max_backoff=0.2)
        gw = OpenAIAgentsGateway(client, session)
        model, tools = gw.model(model), gw.tools()
    else:
        tools = direct_tools()
    agent = Agent(name="ops", instructions="scripted", model=model, tools=[pause_after(t) for t in tools])

    action = OPTIONS["action"]
    run_input: Any = "please"
    if action == "resume" and os.path.exists(OPTIONS["state"]):
        with open(OPTIONS["state"]) as f:
            state = await RunState.from_json(agent, json.load(f))
        if gw is not None:
            gw.resume(state)
        for item in state.get_interruptions():
            if OPTIONS.get("approve", True):
                state.approve(item)
            else:
                state.reject(item)
        run_input = state
    elif action == "resume" and await session.get_items():
        run_input = []  # the user's message is in the session: the turn again
    elif action == "regenerate":
        # Drop everything after the user's message; the model answers again.
        while True:
            items = await session.get_items()
            if _get(items[-1], "role") == "user":
                break
            await session.pop_item()
        run_input = []
    if OPTIONS.get("go_file"):  # the test breaks something first
        marker("READY")
        while not os.path.exists(OPTIONS["go_file"]):
            time.sleep(0.05)
    marker("RUNNING")
    try:
        result = await Runner.run(agent, run_input, session=session)
    except Exception as err:  # the typed error, possibly wrapped by the SDK
        chain, seen = [], err
        while seen is not None:
            chain.append(type(seen).__name__)
            seen = seen.__cause__ or seen.__context__
        marker("ERROR " + " ".join(chain))
        raise SystemExit(3)
    if result.interruptions:
        with open(OPTIONS["state"], "w") as f:
            json.dump(result.to_state().to_json(), f)
        for item in result.interruptions:
            marker("INTERRUPT", {"tool": item.tool_name, "arguments": _get(item.raw_item, "arguments")})
        if OPTIONS.get("pause_on_interrupt"):
            marker("PAUSED")
            time.sleep(3600)
        return
    marker("FINAL " + str(result.final_output))


if __name__ == "__main__":
    asyncio.run(main())
