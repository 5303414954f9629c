"""A PydanticAI agent for tests/runtimes/test_pydantic_ai.py: a scripted
model (FunctionModel, no network) that calls ``charge`` (or, with
``--parallel``, ``charge`` three times in one turn, or ``refund`` with
``--approval``) and then answers with the tool results it read.

Tools go through the gateway (toolgateway.pydantic_ai.GatewayToolset) when
TOOLGATEWAY_URL is set, else straight to the counting upstream (a plain
function tool; under DBOS a ``@DBOS.step``, as PydanticAI's DBOS guide says
for tools that do I/O; the approval tool ``requires_approval=True``).

Modes:
  plain  --history FILE: one run; the app stores the run's messages in FILE
         (the approval pause: DeferredToolRequests); ``--resume approve|deny``
         continues from FILE with DeferredToolResults in a new process.
  dbos   --db URL --workflow ID: the run inside a DBOS workflow (PostgreSQL);
         ``--recover`` launches DBOS (which recovers the killed worker's
         pending workflow) and waits for the workflow's result.

Markers: MODEL-TURN <n>, TOOL-CALLED (direct tool, after the upstream
answered), TOOL-RESULT-SEEN (the model's turn after the tools, before that
turn is checkpointed), PAUSED <json>, ANSWER <json>. ``--hold-after-call``
sleeps after TOOL-CALLED / TOOL-RESULT-SEEN so the test can kill -9 there.
"""

import argparse
import asyncio
import json
import os
import sys
import time

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.messages import (ModelMessagesTypeAdapter, ModelRequest, ModelResponse, TextPart, ToolCallPart,
                                  ToolReturnPart, RetryPromptPart)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent_support import direct_call, gateway_token, gateway_url, marker

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=("plain", "dbos"), default="plain")
parser.add_argument("--conversation", default="conv-1")
parser.add_argument("--parallel", action="store_true")
parser.add_argument("--approval", action="store_true")
parser.add_argument("--hold-after-call", action="store_true")
parser.add_argument("--history")
parser.add_argument("--resume", choices=("approve", "deny"))
parser.add_argument("--db")
parser.add_argument("--workflow")
parser.add_argument("--recover", action="store_true")
opts = parser.parse_args()

TOOL = "refund" if opts.approval else "charge"


def hold() -> None:
    if opts.hold_after_call:
        time.sleep(3600)


def scripted(messages, info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    results = [p for p in last.parts if isinstance(p, (ToolReturnPart, RetryPromptPart))] \
        if isinstance(last, ModelRequest) else []
    if not results:
        marker("MODEL-TURN", 1)
        if opts.parallel:
            return ModelResponse(parts=[ToolCallPart("charge", {"amount": amount}) for amount in (10, 20, 30)])
        return ModelResponse(parts=[ToolCallPart(TOOL, {"amount": 500})])
    marker("TOOL-RESULT-SEEN")
    hold()
    return ModelResponse(parts=[TextPart(json.dumps(
        [p.content if isinstance(p, ToolReturnPart) else p.model_response() for p in results], default=str))])


durability = []
if opts.mode == "dbos":
    from dbos import DBOS, DBOSConfig, SetWorkflowID
    from pydantic_ai.durable_exec.dbos import DBOSDurability
    config: DBOSConfig = {"name": "toolgateway-pydantic-ai-test", "system_database_url": opts.db}
    DBOS(config=config)
    durability = [DBOSDurability()]

if gateway_url():
    from toolgateway import AsyncClient
    from toolgateway.pydantic_ai import GatewayToolset
    # The glue: one toolset with the gateway's tools.
    agent = Agent(FunctionModel(scripted), name="ops", toolsets=[GatewayToolset(AsyncClient(gateway_url(), token=gateway_token()))],
                  output_type=[str, DeferredToolRequests], capabilities=durability)
else:
    agent = Agent(FunctionModel(scripted), name="ops", output_type=[str, DeferredToolRequests], capabilities=durability)

    def _direct(tool: str, amount: int) -> object:
        answer = direct_call(tool, {"amount": amount})
        marker("TOOL-CALLED")
        hold()
        return answer

    if opts.mode == "dbos":
        _direct = DBOS.step()(_direct)

    @agent.tool_plain
    def charge(amount: int) -> object:
        """Charge the card."""
        return _direct("charge", amount)

    @agent.tool_plain(requires_approval=True)
    def refund(amount: int) -> object:
        """Refund the card."""
        return _direct("refund", amount)


def report(output) -> None:
    if isinstance(output, DeferredToolRequests):
        marker("PAUSED", {"approvals": [c.tool_call_id for c in output.approvals], "metadata": output.metadata})
    else:
        marker("ANSWER", json.loads(output))


async def plain() -> None:
    if opts.resume:
        with open(opts.history, "rb") as f:
            history = ModelMessagesTypeAdapter.validate_json(f.read())
        pending = [p for p in history[-1].parts if isinstance(p, ToolCallPart)]
        decision = True if opts.resume == "approve" else ToolDenied("the app's user said no")
        result = await agent.run(message_history=history,
                                 deferred_tool_results=DeferredToolResults(approvals={p.tool_call_id: decision
                                                                                      for p in pending}))
    else:
        result = await agent.run("go", conversation_id=opts.conversation)
    if opts.history:
        with open(opts.history, "wb") as f:
            f.write(ModelMessagesTypeAdapter.dump_json(result.all_messages()))
    report(result.output)
    if isinstance(result.output, DeferredToolRequests):
        time.sleep(3600)  # paused: the test kills the process here


async def dbos() -> None:
    @DBOS.workflow()
    async def run_agent(prompt: str) -> str:
        result = await agent.run(prompt)
        return result.output if isinstance(result.output, str) else "deferred"

    DBOS.launch()  # recovers the pending workflows of a killed worker
    try:
        if opts.recover:
            handle = await DBOS.retrieve_workflow_async(opts.workflow)
        else:
            with SetWorkflowID(opts.workflow):
                handle = await DBOS.start_workflow_async(run_agent, "go")
        report(await handle.get_result())
    finally:
        DBOS.destroy()


asyncio.run(plain() if opts.mode == "plain" else dbos())
sys.stdout.flush()
os._exit(0)  # no lingering threads
