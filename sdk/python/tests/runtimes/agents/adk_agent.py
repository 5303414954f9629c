"""A Google ADK agent for tests/runtimes/test_adk.py: an LlmAgent with a
scripted model (a BaseLlm subclass, no network) in a resumable App, its
sessions in a DatabaseSessionService on SQLite. The model calls ``charge``
(three times in one turn with ``--parallel``; ``refund`` with
``--approval``) and then answers with the tool responses it read.

Tools go through the gateway (toolgateway.adk.gateway_tools) when
TOOLGATEWAY_URL is set, else straight to the counting upstream (a
FunctionTool; ``refund`` with ``require_confirmation=True``, ADK's own
pause).

Runs: without ``--invocation`` a new invocation with the user's message;
with it, ``runner.run_async(invocation_id=...)`` resumes that invocation
(after a kill), with ``--confirm yes|no`` answering the pending tool
confirmation. Markers: INVOCATION <id>, TOOL-RESULT-SEEN (the model's turn
after the tools), PAUSED <json> (an adk_request_confirmation call), ANSWER
<json>. ``--hold-after-call`` sleeps at TOOL-RESULT-SEEN.
"""

import argparse
import asyncio
import json
import os
import sys
import time

from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from google.adk.tools import FunctionTool
from google.genai import types

from agent_support import direct_call, gateway_token, gateway_url, marker

parser = argparse.ArgumentParser()
parser.add_argument("--db", required=True)
parser.add_argument("--session", default="s1")
parser.add_argument("--parallel", action="store_true")
parser.add_argument("--approval", action="store_true")
parser.add_argument("--hold-after-call", action="store_true")
parser.add_argument("--invocation")
parser.add_argument("--confirm", choices=("yes", "no"))
parser.add_argument("--confirmation-id")
opts = parser.parse_args()

TOOL = "refund" if opts.approval else "charge"
APP, USER = "tgadk", "u1"


class ScriptedLlm(BaseLlm):
    """Function calls first; once the tools answered, a text with what they said."""

    async def generate_content_async(self, llm_request, stream=False):
        responses = []
        last = llm_request.contents[-1] if llm_request.contents else None
        for part in (last.parts or []) if last is not None else []:
            if part.function_response is not None and not (part.function_response.name or "").startswith("adk_"):
                responses.append(part.function_response.response)
        if not responses:
            amounts = (10, 20, 30) if opts.parallel else (500,)
            yield LlmResponse(content=types.Content(role="model", parts=[
                types.Part(function_call=types.FunctionCall(name=TOOL, args={"amount": a})) for a in amounts]))
            return
        marker("TOOL-RESULT-SEEN")
        if opts.hold_after_call:
            time.sleep(3600)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=json.dumps(responses))]))


if gateway_url():
    from toolgateway import AsyncClient
    from toolgateway.adk import gateway_tools
    # The glue: the gateway's tools for the agent.
    tools = gateway_tools(AsyncClient(gateway_url(), token=gateway_token()), tools=[TOOL])
else:
    def charge(amount: int) -> dict:
        """Charge an amount."""
        return direct_call("charge", {"amount": amount})

    def refund(amount: int) -> dict:
        """Refund an amount."""
        return direct_call("refund", {"amount": amount})

    tools = [FunctionTool(refund, require_confirmation=True)] if opts.approval else [FunctionTool(charge)]

_announced = set()


def announce(callback_context, llm_request):
    """The invocation's id, before the model's first turn (so before any
    tool runs): the test resumes it after a kill."""
    if callback_context.invocation_id not in _announced:
        _announced.add(callback_context.invocation_id)
        marker("INVOCATION", callback_context.invocation_id)
    return None


agent = LlmAgent(name="ops", model=ScriptedLlm(model="scripted"), instruction="Run the requested action.",
                 tools=tools, before_model_callback=announce)
app = App(name=APP, root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True))


async def main() -> None:
    service = DatabaseSessionService(db_url=opts.db)
    runner = Runner(app=app, session_service=service)
    if await service.get_session(app_name=APP, user_id=USER, session_id=opts.session) is None:
        await service.create_session(app_name=APP, user_id=USER, session_id=opts.session)
    if opts.confirm:
        message = types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
            name="adk_request_confirmation", id=opts.confirmation_id,
            response={"confirmed": opts.confirm == "yes"}))])
        events = runner.run_async(user_id=USER, session_id=opts.session, invocation_id=opts.invocation,
                                  new_message=message)
    elif opts.invocation:
        events = runner.run_async(user_id=USER, session_id=opts.session, invocation_id=opts.invocation)
    else:
        events = runner.run_async(user_id=USER, session_id=opts.session,
                                  new_message=types.Content(role="user", parts=[types.Part(text="go")]))
    answer = paused = None
    async for event in events:
        for call in event.get_function_calls():
            if call.name == "adk_request_confirmation":
                paused = {"confirmation_id": call.id, "invocation": event.invocation_id, "args": call.args}
        if event.content and event.content.parts and event.content.parts[0].text and not event.partial:
            answer = event.content.parts[0].text
    if paused is not None:
        # The invocation ended at the confirmation (its events are stored).
        marker("PAUSED", paused)
        time.sleep(3600)  # paused: the test kills the process here
    marker("ANSWER", json.loads(answer) if answer else None)


asyncio.run(main())
sys.stdout.flush()
os._exit(0)
