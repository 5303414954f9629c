"""CrewAI behind the gateway: a real Crew (one agent, one task) with a
scripted LLM in a child process (agents/crewai_agent.py), killed with
SIGKILL at the fault's point or hit by a lost reply; executions counted at
the CountingUpstream, never from the crew's output.

Each fault runs without the gateway (recorded for the matrix) and with it
(asserted: 1 execution, or 0 when denied).
"""

import json

import pytest

pytest.importorskip("crewai")

from harness import matrix_record  # noqa: E402

#: A bound on a hang (never a speed assertion): the runtimes import slowly on a loaded machine.
HANG = 300.0
RUNTIME = "crewai"
AGENT = "crewai_agent.py"
AMOUNT = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}
TOOLS = [
    {"name": "charge", "description": "Charge an amount", "input_schema": AMOUNT},
    {"name": "refund", "description": "Refund an amount", "input_schema": AMOUNT,
     "decide": [{"decision": "approve", "reason": "refunds need finance"}]},
]


def _env(upstream, gateway):
    env = dict(upstream.env())
    if gateway is not None:
        env.update(gateway.env())
    return env


def _line(agent, marker):
    return json.loads(agent.wait_for(marker + " ", timeout=HANG).split(" ", 1)[1])


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_retry_with_changed_arguments_gets_step_conflict(with_gateway, upstream, gateway_factory, agents):
    """The first call's answer is lost after the upstream ran it; the model
    reads that the call is unconfirmed and calls again with other arguments.
    With the gateway the retry lands on the same step: step_conflict stops
    the crew (ToolExecutionFailedError, code step_conflict), nothing runs a
    second time."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    agent = agents(AGENT, "--lose-reply", env=_env(upstream, gateway))
    code = agent.wait(HANG)
    executions = upstream.count("charge")
    matrix_record(RUNTIME, "retry_changed_args", with_gateway, executions)
    if not with_gateway:
        return  # CrewAI ran the tool again (its own retry of a raised error): recorded, not asserted
    assert code == 3, agent.output
    stopped = _line(agent, "STOPPED")
    assert stopped["code"] == "step_conflict"
    assert stopped["details"]["problem"]["tool"] == "charge"
    assert executions == 1
    [request] = upstream.requests("charge")
    assert request["args"] == {"amount": 500} and request["step_index"] == "0"
    assert request["session_id"] == "order-77/pay"


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_mid_call_then_rerun(with_gateway, upstream, gateway_factory, agents):
    """kill -9 while the upstream holds the call; the crew is run again with
    the same run_id: the same call gets the same step and is answered from
    the first execution."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    upstream.hold("charge")
    first = agents(AGENT, env=_env(upstream, gateway))
    upstream.wait_arrived("charge", 1, timeout=HANG)
    first.kill9()
    rerun = agents(AGENT, env=_env(upstream, gateway))
    upstream.release("charge")
    answer = _line(rerun, "ANSWER")
    assert rerun.wait(HANG) == 0, rerun.output
    executions = upstream.count("charge")
    matrix_record(RUNTIME, "kill_mid_call", with_gateway, executions)
    if with_gateway:
        assert executions == 1
        assert '\\"execution\\": 1' in answer["raw"] or '"execution": 1' in answer["raw"]


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_after_call_before_checkpoint_then_rerun(with_gateway, upstream, gateway_factory, agents):
    """kill -9 after the tool's answer reached the model, before the crew
    finished (CrewAI records nothing until the task ends): the rerun makes
    the call again, and the gateway replays it."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    first = agents(AGENT, "--hold-after-call", env=_env(upstream, gateway))
    first.wait_for("TOOL-RESULT-SEEN", timeout=HANG)
    first.kill9()
    rerun = agents(AGENT, env=_env(upstream, gateway))
    _line(rerun, "ANSWER")
    assert rerun.wait(HANG) == 0, rerun.output
    executions = upstream.count("charge")
    matrix_record(RUNTIME, "kill_before_checkpoint", with_gateway, executions)
    if with_gateway:
        assert executions == 1


@pytest.mark.parametrize("decision", ["approve", "deny"])
@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_while_paused_for_approval(with_gateway, decision, upstream, gateway_factory, agents, tmp_path):
    """CrewAI has no durable pause: with the gateway the held call stops the
    crew (ToolExecutionFailedError, code approval_pending, the approval's
    id); the process is killed; ``gateway admin`` decides; the crew run
    again with the same run_id runs the call once, or the model reads the
    denial. Without the gateway the pause is CrewAI's own (a hook waiting
    for a human in the process), lost with the process."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    decision_file = str(tmp_path / "decision")
    args = ("--approval", "--decision-file", decision_file)
    paused = agents(AGENT, *args, env=_env(upstream, gateway))
    if with_gateway:
        stopped = _line(paused, "STOPPED")
        assert stopped["code"] == "approval_pending"
        approval_id = stopped["details"]["problem"]["approval_id"]
        [approval] = gateway.approvals()
        assert approval["id"] == approval_id and approval["session_id"] == "order-77/pay"
    else:
        paused.wait_for("PAUSED", timeout=HANG)
    paused.kill9()
    assert upstream.count("refund") == 0
    if with_gateway:
        if decision == "approve":
            gateway.approve(approval_id)
        else:
            gateway.deny(approval_id, "not this one")
    else:
        with open(decision_file, "w") as f:
            f.write(decision)
    rerun = agents(AGENT, *args, env=_env(upstream, gateway))
    answer = _line(rerun, "ANSWER")
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "kill_paused_approval", with_gateway, executions, decision=decision)
    assert executions == (1 if decision == "approve" else 0), rerun.output
    if with_gateway and decision == "deny":
        assert "NOT run" in answer["raw"] and "not this one" in answer["raw"]


def test_bad_input_is_refused_at_wrap_time():
    """No run_id (CrewAI's own ids are new in every process) or a nameless
    definition is refused before any crew runs."""
    from toolgateway import Client, IdentityError, InvalidInputError
    from toolgateway.crewai import gateway_tools

    client = Client("http://127.0.0.1:1")
    with pytest.raises(IdentityError, match="run_id"):
        gateway_tools(client, run_id="", tools=[{"name": "charge"}])
    with pytest.raises(InvalidInputError, match="needs a name"):
        gateway_tools(client, run_id="r", tools=[{"description": "x"}])


def test_steps_parallel_calls_and_retries():
    """The steps a task's calls reserve: parallel calls in flight get
    distinct steps; a call that got no answer gives its step back (CrewAI's
    retry, with any arguments, takes it again); an answered step is never
    given again."""
    from toolgateway.crewai import _Steps

    steps = _Steps()
    first, second = steps.reserve("run", "pay"), steps.reserve("run", "pay")
    assert (first, second) == (0, 1)
    steps.finish("run", "pay", first, answered=False)  # lost reply
    assert steps.reserve("run", "pay") == 0  # the retry: same step
    steps.finish("run", "pay", 0, answered=True)
    steps.finish("run", "pay", second, answered=True)
    assert steps.reserve("run", "pay") == 2
    assert steps.reserve("run", "other") == 0  # each task counts its own
