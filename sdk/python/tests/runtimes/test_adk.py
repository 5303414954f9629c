"""Google ADK behind the gateway: a resumable App whose sessions live in a
DatabaseSessionService on SQLite, an LlmAgent with a scripted model, in a
child process (agents/adk_agent.py) killed with SIGKILL at the fault's
point; the killed invocation resumed in a new process with
``runner.run_async(invocation_id=...)``. Executions counted at the
CountingUpstream, never from the agent's output.

Each fault runs without the gateway (recorded for the matrix) and with it
(asserted: 1 execution, or 0 when denied).
"""

import json

import pytest

pytest.importorskip("google.adk")
pytest.importorskip("sqlalchemy")

from harness import matrix_record  # noqa: E402

#: A bound on a hang (never a speed assertion): the runtimes import slowly on a loaded machine.
HANG = 300.0
RUNTIME = "google-adk"
AGENT = "adk_agent.py"
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


@pytest.fixture
def db(tmp_path):
    return f"sqlite+aiosqlite:///{tmp_path}/sessions.db"


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_mid_call_then_resume_invocation(with_gateway, upstream, gateway_factory, agents, db):
    """kill -9 while the upstream holds the call; a new process resumes the
    invocation from the stored session: ADK runs the call again (it has no
    response yet) with the same ordinal, answered from the first execution."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    upstream.hold("charge")
    first = agents(AGENT, "--db", db, env=_env(upstream, gateway))
    invocation = _line(first, "INVOCATION")
    upstream.wait_arrived("charge", 1, timeout=HANG)
    first.kill9()
    resumed = agents(AGENT, "--db", db, "--invocation", invocation, env=_env(upstream, gateway))
    upstream.release("charge")
    answer = _line(resumed, "ANSWER")
    assert resumed.wait(HANG) == 0, resumed.output
    executions = upstream.count("charge")
    matrix_record(RUNTIME, "kill_mid_call", with_gateway, executions)
    if with_gateway:
        assert executions == 1, resumed.output
        assert answer == [{"tool": "charge", "args": {"amount": 500}, "execution": 1}]


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_after_call_before_checkpoint(with_gateway, upstream, gateway_factory, agents, db):
    """kill -9 in the model's turn after the tool answered: whether ADK
    stored the function response or not, the resumed invocation does not
    run the call a second time with the gateway."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    first = agents(AGENT, "--db", db, "--hold-after-call", env=_env(upstream, gateway))
    invocation = _line(first, "INVOCATION")
    first.wait_for("TOOL-RESULT-SEEN", timeout=HANG)
    first.kill9()
    resumed = agents(AGENT, "--db", db, "--invocation", invocation, env=_env(upstream, gateway))
    _line(resumed, "ANSWER")
    executions = upstream.count("charge")
    matrix_record(RUNTIME, "kill_before_checkpoint", with_gateway, executions)
    if with_gateway:
        assert executions == 1, resumed.output


def test_parallel_calls_get_distinct_steps(upstream, gateway_factory, agents, db):
    """Three function calls in one model turn: steps 0, 1, 2 of the session,
    each executed once."""
    gateway = gateway_factory(TOOLS, upstream=upstream)
    agent = agents(AGENT, "--db", db, "--parallel", env=_env(upstream, gateway))
    answer = _line(agent, "ANSWER")
    requests = upstream.requests("charge")
    assert sorted((r["step_index"], r["args"]["amount"]) for r in requests) == [("0", 10), ("1", 20), ("2", 30)]
    assert {r["session_id"] for r in requests} == {"tgadk/u1/s1"}
    assert sorted(a["args"]["amount"] for a in answer) == [10, 20, 30]


@pytest.mark.parametrize("decision", ["approve", "deny"])
@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_while_paused_for_approval(with_gateway, decision, upstream, gateway_factory, agents, db):
    """The invocation pauses at ADK's tool confirmation (with the gateway:
    the call held by the gateway's rule, the approval's id in the payload);
    the process is killed; a human decides (``gateway admin``; without the
    gateway the confirmation itself); a new process answers the confirmation
    and resumes: 1 execution approved, 0 denied, the model reading why."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    paused = agents(AGENT, "--db", db, "--approval", env=_env(upstream, gateway))
    pause = _line(paused, "PAUSED")
    paused.kill9()
    assert upstream.count("refund") == 0
    confirm = "yes" if decision == "approve" else "no"
    if with_gateway:
        request = pause["args"]["toolConfirmation"]["payload"]
        [approval] = gateway.approvals()
        assert approval["id"] == request["approval_id"] and approval["session_id"] == "tgadk/u1/s1"
        if decision == "approve":
            gateway.approve(approval["id"])
        else:
            gateway.deny(approval["id"], "not this one")
        confirm = "yes"  # the operator decided: the app lets the call go to the gateway again
    resumed = agents(AGENT, "--db", db, "--approval", "--invocation", pause["invocation"], "--confirm", confirm,
                     "--confirmation-id", pause["confirmation_id"], env=_env(upstream, gateway))
    answer = _line(resumed, "ANSWER")
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "kill_paused_approval", with_gateway, executions, decision=decision)
    assert executions == (1 if decision == "approve" else 0), resumed.output
    if decision == "approve":
        assert answer[0]["execution"] == 1
    elif with_gateway:
        assert "NOT run" in answer[0]["error"] and "not this one" in answer[0]["error"]


def test_bad_input_is_refused():
    """A definition without a name is refused at wrap time; a tool context
    without a session is refused, naming what is missing."""
    from toolgateway import Client, IdentityError, InvalidInputError
    from toolgateway.adk import adk_identity, gateway_tools

    with pytest.raises(InvalidInputError, match="needs a name"):
        gateway_tools(Client("http://127.0.0.1:1"), [{"description": "x"}])

    class NoSession:
        session = None
        function_call_id = "c1"

    with pytest.raises(IdentityError, match="ADK session"):
        adk_identity(NoSession())


def test_step_is_the_ordinal_of_answered_calls():
    """Parallel calls of one event get consecutive steps; a call lost with a
    killed process (no response) takes no step, so the new model turn ADK
    may answer a resumed invocation with lands on the lost call's step."""
    from types import SimpleNamespace

    from google.adk.events import Event
    from google.genai import types

    from toolgateway.adk import adk_identity

    def calls(*ids):
        return Event(author="ops", invocation_id="i1", content=types.Content(role="model", parts=[
            types.Part(function_call=types.FunctionCall(name="charge", args={}, id=i)) for i in ids]))

    def responses(*ids):
        return Event(author="ops", invocation_id="i1", content=types.Content(role="user", parts=[
            types.Part(function_response=types.FunctionResponse(name="charge", id=i, response={})) for i in ids]))

    session = SimpleNamespace(id="s1", app_name="app", user_id="u1",
                              events=[calls("a", "b"), responses("a", "b"), calls("lost"), calls("c", "d")])
    steps = {call_id: adk_identity(SimpleNamespace(session=session, function_call_id=call_id))
             for call_id in ("a", "b", "lost", "c", "d")}
    assert steps == {"a": ("app/u1/s1", 0), "b": ("app/u1/s1", 1), "lost": ("app/u1/s1", 2),
                     "c": ("app/u1/s1", 2), "d": ("app/u1/s1", 3)}
