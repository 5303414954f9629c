"""PydanticAI (pydantic-ai-slim, with DBOS durable execution on PostgreSQL)
behind the gateway: real agents with a scripted model in a child process
(agents/pydantic_ai_agent.py), killed with SIGKILL at the fault's point;
executions counted at the CountingUpstream, never from the agent's output.

Each fault runs without the gateway (the runtime's own behaviour, recorded
for the matrix) and with it (asserted: 1 execution, or 0 when denied).
"""

import json
import os
import uuid

import pytest

pytest.importorskip("pydantic_ai")

from harness import matrix_record  # noqa: E402

#: A bound on a hang (never a speed assertion): the runtimes import slowly on a loaded machine.
HANG = 300.0
RUNTIME = "pydantic-ai"
AGENT = "pydantic_ai_agent.py"
POSTGRES = os.environ.get("TOOLGATEWAY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")
TOOLS = [
    {"name": "charge", "input_schema": {"type": "object", "properties": {"amount": {"type": "integer"}},
                                        "required": ["amount"]}},
    {"name": "refund", "decide": [{"decision": "approve", "reason": "refunds need finance"}]},
]


@pytest.fixture(scope="module")
def dbos_db():
    """A PostgreSQL database of its own for DBOS's system tables, dropped at the end."""
    psycopg = pytest.importorskip("psycopg")
    pytest.importorskip("dbos")
    name = f"toolgateway_dbos_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(f"{POSTGRES}/postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as err:
        pytest.skip(f"no PostgreSQL at {POSTGRES}: {err}")
    with admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield f"{POSTGRES}/{name}"
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _env(upstream, gateway):
    env = dict(upstream.env())
    if gateway is not None:
        env.update(gateway.env())
    return env


def _result(agent):
    """The agent's ANSWER line, decoded."""
    return json.loads(agent.wait_for("ANSWER ", timeout=HANG).split(" ", 1)[1])


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_dbos_kill_mid_call_recovered_workflow_replays(with_gateway, upstream, gateway_factory, agents, dbos_db):
    """kill -9 of the DBOS worker while the upstream holds the call; a new
    worker recovers the workflow, whose call is made again with the same
    identity: the gateway answers it from the first execution."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    workflow = f"wf-{uuid.uuid4().hex[:8]}"
    args = ("--mode", "dbos", "--db", dbos_db, "--workflow", workflow)
    upstream.hold("charge")
    first = agents(AGENT, *args, env=_env(upstream, gateway))
    upstream.wait_arrived("charge", 1, timeout=HANG)
    first.kill9()
    recovered = agents(AGENT, *args, "--recover", env=_env(upstream, gateway))
    upstream.release("charge")
    result = _result(recovered)
    assert recovered.wait(HANG) == 0, recovered.output
    executions = upstream.count("charge")
    matrix_record(RUNTIME + " (DBOS)", "kill_mid_call", with_gateway, executions)
    if with_gateway:
        assert executions == 1, recovered.output
        assert result[0]["execution"] == 1  # the first execution's answer, replayed
        keys = {r["idempotency_key"] for r in upstream.requests("charge")}
        assert len(keys) == 1


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_dbos_kill_after_call_before_checkpoint(with_gateway, upstream, gateway_factory, agents, dbos_db):
    """kill -9 after the call was answered, before DBOS recorded anything
    after it (inside the direct tool's step; in the model's next step with
    the gateway): the recovered workflow makes the call again."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    workflow = f"wf-{uuid.uuid4().hex[:8]}"
    args = ("--mode", "dbos", "--db", dbos_db, "--workflow", workflow)
    first = agents(AGENT, *args, "--hold-after-call", env=_env(upstream, gateway))
    first.wait_for("TOOL-RESULT-SEEN" if with_gateway else "TOOL-CALLED", timeout=HANG)
    first.kill9()
    assert upstream.count("charge") == 1
    recovered = agents(AGENT, *args, "--recover", env=_env(upstream, gateway))
    result = _result(recovered)
    executions = upstream.count("charge")
    matrix_record(RUNTIME + " (DBOS)", "kill_before_checkpoint", with_gateway, executions)
    if with_gateway:
        assert executions == 1, recovered.output
        assert result[0]["execution"] == 1


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_regenerated_turn_replays(with_gateway, upstream, gateway_factory, agents):
    """The history was lost after the call (a crash before the app stored
    it): the conversation runs again from the prompt and the model makes the
    same call under a new tool_call_id; the same conversation id and ordinal
    give the same key."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    for _ in range(2):
        agent = agents(AGENT, "--conversation", "order-77", env=_env(upstream, gateway))
        result = _result(agent)
        assert agent.wait(HANG) == 0
    executions = upstream.count("charge")
    matrix_record(RUNTIME, "regenerated_turn", with_gateway, executions)
    if with_gateway:
        assert executions == 1
        assert result[0]["execution"] == 1


def test_parallel_calls_get_distinct_steps(upstream, gateway_factory, agents):
    """Three calls in one model turn: steps 0, 1, 2 of the conversation,
    each executed once; the regenerated turn replays all three."""
    gateway = gateway_factory(TOOLS, upstream=upstream)
    for _ in range(2):
        agent = agents(AGENT, "--parallel", "--conversation", "par-1", env=_env(upstream, gateway))
        result = _result(agent)
        assert agent.wait(HANG) == 0
    requests = upstream.requests("charge")
    assert len(requests) == 3
    assert sorted((r["step_index"], r["args"]["amount"]) for r in requests) == [("0", 10), ("1", 20), ("2", 30)]
    assert {r["session_id"] for r in requests} == {"par-1"}
    assert sorted(r["args"]["amount"] for r in result) == [10, 20, 30]


@pytest.mark.parametrize("decision", ["approve", "deny"])
@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_while_paused_for_approval(with_gateway, decision, upstream, gateway_factory, agents, tmp_path):
    """The run pauses at the approval (DeferredToolRequests; the app stores
    the messages), the process is killed; a human decides (``gateway admin``
    with the gateway, the app's DeferredToolResults without); a new process
    resumes from the stored messages: 1 execution approved, 0 denied, and the
    model reads the result or the denial."""
    gateway = gateway_factory(TOOLS, upstream=upstream) if with_gateway else None
    history = str(tmp_path / "history.json")
    paused = agents(AGENT, "--approval", "--history", history, env=_env(upstream, gateway))
    pause = json.loads(paused.wait_for("PAUSED", timeout=HANG).split(" ", 1)[1])
    paused.kill9()
    assert upstream.count("refund") == 0
    resume = decision
    if with_gateway:
        call_id = pause["approvals"][0]
        approval_id = pause["metadata"][call_id]["toolgateway"]["approval_id"]
        [approval] = gateway.approvals()
        assert approval["id"] == approval_id and approval["tool"] == "refund"
        if decision == "approve":
            gateway.approve(approval_id)
        else:
            gateway.deny(approval_id, "not this one")
        resume = "approve"  # the operator decided: the app lets the call go to the gateway again
    resumed = agents(AGENT, "--approval", "--history", history, "--resume", resume, env=_env(upstream, gateway))
    result = _result(resumed)
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "kill_paused_approval", with_gateway, executions, decision=decision)
    assert executions == (1 if decision == "approve" else 0)
    if decision == "approve":
        assert result[0]["execution"] == 1
    elif with_gateway:
        assert "NOT run" in result[0] and "not this one" in result[0]


def test_bad_input_is_refused_at_wrap_time():
    """A toolset without a toolgateway client, or with a nameless
    definition, is refused before any run; the step of a call that is not
    in the history is refused rather than guessed."""
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    from toolgateway import IdentityError, InvalidInputError
    from toolgateway.pydantic_ai import GatewayToolset, pydantic_ai_step

    with pytest.raises(InvalidInputError, match="Client or AsyncClient"):
        GatewayToolset("http://127.0.0.1:8080")
    with pytest.raises(InvalidInputError, match="needs a name"):
        GatewayToolset(__import__("toolgateway").Client("http://127.0.0.1:1"), [{"description": "x"}])
    history = [ModelResponse(parts=[ToolCallPart("a", {}, tool_call_id="c1"), ToolCallPart("b", {}, tool_call_id="c2")]),
               ModelResponse(parts=[ToolCallPart("a", {}, tool_call_id="c3")])]
    assert [pydantic_ai_step(history, c) for c in ("c1", "c2", "c3")] == [0, 1, 2]
    with pytest.raises(InvalidInputError, match="not in the run's message history"):
        pydantic_ai_step(history, "c9")
    with pytest.raises(IdentityError, match="tool_call_id"):
        pydantic_ai_step(history, "")
