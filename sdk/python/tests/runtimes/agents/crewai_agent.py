"""A CrewAI crew for tests/runtimes/test_crewai.py: one agent, one task, a
scripted LLM (a BaseLLM subclass, ReAct text, no network) that calls
``charge`` (``refund`` with ``--approval``) and answers with what it read.

Tools go through the gateway (toolgateway.crewai.gateway_tools) when
TOOLGATEWAY_URL is set, else straight to the counting upstream (a plain
CrewAI tool; the approval is then a before_tool_call hook that waits for a
decision file, CrewAI's synchronous human-input pause).

Faults: ``--lose-reply`` makes the first call's answer get lost after the
upstream ran it (the client raises a connection error), and the scripted
model retries with changed arguments, as CrewAI's re-prompt does;
``--hold-after-call`` sleeps in the model's turn after the tool's result
(before the crew records anything), so the test can kill -9 there.

Markers: MODEL-TURN <n>, TOOL-RESULT-SEEN, PAUSED <json>, STOPPED <json>
(the crew raised ToolExecutionFailedError), ANSWER <json>.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402

from agent_support import direct_call, gateway_token, gateway_url, marker  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--run-id", default="order-77")
parser.add_argument("--approval", action="store_true")
parser.add_argument("--lose-reply", action="store_true")
parser.add_argument("--hold-after-call", action="store_true")
parser.add_argument("--decision-file")
opts = parser.parse_args()

TOOL = "refund" if opts.approval else "charge"


def _text(messages) -> str:
    """What the crew added after its prompt: the model's earlier turns and
    the tools' observations."""
    if isinstance(messages, str):
        return ""
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
    return "\n".join(str(m.get("content", "")) for m in messages[first:])


class ScriptedLLM(BaseLLM):
    """ReAct text: call the tool; after an unconfirmed answer call it again
    with changed arguments (a re-prompted model rarely repeats itself);
    after a result, the final answer."""

    def __init__(self) -> None:
        super().__init__(model="scripted")
        self.turn = 0

    def call(self, messages, tools=None, callbacks=None, available_functions=None, from_task=None,
             from_agent=None, response_model=None, **kwargs):
        self.turn += 1
        marker("MODEL-TURN", self.turn)
        text = _text(messages)
        if os.environ.get("CREWAI_AGENT_DEBUG"):
            print("MESSAGES", json.dumps(messages, default=str)[-1500:])
        observations = text.split("Observation:")
        last = observations[-1] if len(observations) > 1 else ""
        if not last:
            return f'Thought: I will call {TOOL}.\nAction: {TOOL}\nAction Input: {{"amount": 500}}'
        if "could not be confirmed" in last or "lost" in last:
            return f'Thought: try again.\nAction: {TOOL}\nAction Input: {{"amount": 501}}'
        marker("TOOL-RESULT-SEEN")
        if opts.hold_after_call:
            time.sleep(3600)
        return "Thought: done.\nFinal Answer: " + json.dumps(last.strip()[:2000])

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 100000


_lost = {"done": False}

if gateway_url():
    from toolgateway import Client, GatewayConnectionError
    from toolgateway.crewai import gateway_tools

    class LosingClient(Client):
        """Loses the first call's answer after the gateway answered it."""

        def _call(self, *args, **kwargs):
            result = super()._call(*args, **kwargs)
            if opts.lose_reply and not _lost["done"]:
                _lost["done"] = True
                raise GatewayConnectionError("toolgateway: the answer was lost (test)", 1)
            return result

    # The glue: the gateway's tools for this run of the work.
    tools = gateway_tools(LosingClient(gateway_url(), token=gateway_token()), run_id=opts.run_id, tools=[TOOL])
else:
    class DirectTool(BaseTool):
        """The tool without the gateway: it posts to the upstream itself."""

        def _run(self, amount: int) -> str:
            answer = direct_call(self.name, {"amount": amount})
            if opts.lose_reply and not _lost["done"]:
                _lost["done"] = True
                raise ConnectionError("the answer was lost (test)")
            return json.dumps(answer)

    tools = [DirectTool(name=TOOL, description=f"{TOOL} an amount")]
    if opts.approval:
        from crewai.hooks import before_tool_call

        @before_tool_call
        def human_approval(context):
            """CrewAI's pause: synchronous, in the process (here a file
            stands for the human's answer)."""
            marker("PAUSED", {"tool": context.tool_name})
            while not os.path.exists(opts.decision_file):
                time.sleep(0.05)
            with open(opts.decision_file) as f:
                return None if f.read().strip() == "approve" else False

agent = Agent(role="ops", goal="run the requested action", backstory="a scripted test agent",
              llm=ScriptedLLM(), tools=tools, max_iter=5, verbose=False, allow_delegation=False)
task = Task(name="pay", description=f"{TOOL} 500 for order {opts.run_id}", expected_output="the tool's answer",
            agent=agent)
crew = Crew(agents=[agent], tasks=[task], verbose=False)

try:
    from crewai.tools.tool_failure import ToolExecutionFailedError
except ImportError:  # pragma: no cover
    ToolExecutionFailedError = RuntimeError

try:
    output = crew.kickoff()
except ToolExecutionFailedError as err:
    failure = err.record.failure
    marker("STOPPED", {"code": failure.code, "message": failure.message, "details": failure.details})
    if failure.code == "approval_pending":
        time.sleep(3600)  # paused: the test kills the process here
    sys.stdout.flush()
    os._exit(3)
marker("ANSWER", {"raw": output.raw})
sys.stdout.flush()
os._exit(0)
