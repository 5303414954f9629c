"""OpenAI Agents SDK (openai-agents 0.24.x, a real SQLiteSession, a scripted
Model) through toolgateway.openai_agents, against the real gateway binary.

Each fault runs twice: with function tools posting straight to the
upstream (the SDK's own behaviour, recorded for the matrix, not asserted)
and through the gateway (asserted). Executions are what the upstream
counted; the agent process is killed with SIGKILL, and a new process
resumes from the session (or from the stored RunState)."""

import json

import pytest

pytest.importorskip("agents")

from harness import matrix_record  # noqa: E402

RUNTIME = "openai-agents"
TOOLS = [
    {"name": "refund", "lease_expiry": "unknown", "effect_key": "refund:{/txn}",
     "input_schema": {"type": "object", "properties": {"txn": {"type": "string"}, "amount": {"type": "integer"}},
                      "required": ["txn", "amount"]},
     "decide": [{"when": "args.amount <= 100", "decision": "allow"},
                {"decision": "approve", "reason": "finance says"}]},
    {"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
]


@pytest.fixture
def stack(upstream, gateway_factory, agents, tmp_path):
    gateway = gateway_factory(TOOLS, upstream=upstream)

    def spawn(with_gateway, **options):
        options.setdefault("db", str(tmp_path / "sessions.sqlite"))
        options.setdefault("session", f"conv:{tmp_path.name}")
        options.setdefault("state", str(tmp_path / "run-state.json"))
        env = dict(upstream.env())
        if with_gateway:
            env.update(gateway.env())
        return agents("openai_agents_agent.py", json.dumps(options), env=env)
    return spawn, upstream, gateway


def final(agent):
    return agent.lines_with("FINAL")[-1]


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_lost_reply(stack, with_gateway):
    """The upstream answers the first refund after the caller stopped waiting
    (the reply is lost). Without the gateway the SDK's default turns the
    timeout into "Please try again" and the model calls again; with it the
    client retries the same key and gets the one execution's answer."""
    import time
    spawn, upstream, _ = stack

    def slow_first(tool, args, n):
        if n == 1:
            time.sleep(4)
        return {"tool": tool, "args": args, "execution": n}
    upstream.set_response("refund", slow_first)
    agent = spawn(with_gateway, action="start", reply_timeout=1.5, sdk_default_errors=True,
                  turn=[{"name": "refund", "args": {"txn": "t0", "amount": 40}}])
    agent.expect_success()
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "lost_reply", with_gateway, executions)
    if with_gateway:
        assert executions == 1
        assert '"execution": 1' in final(agent)


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_while_the_upstream_holds_the_call(stack, with_gateway):
    spawn, upstream, _ = stack
    upstream.hold("refund")
    turn = [{"name": "refund", "args": {"txn": "t1", "amount": 50}}]
    first = spawn(with_gateway, action="start", turn=turn)
    upstream.wait_arrived("refund", 1)
    first.kill9()
    upstream.release("refund")
    second = spawn(with_gateway, action="resume", turn=turn)
    second.expect_success()
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "kill_mid_call", with_gateway, executions)
    if with_gateway:
        assert executions == 1
        assert '"execution": 1' in final(second)


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_after_the_call_before_the_session_saves_it(stack, with_gateway):
    spawn, upstream, _ = stack
    turn = [{"name": "refund", "args": {"txn": "t2", "amount": 60}}]
    first = spawn(with_gateway, action="start", pause_after_tool=True, turn=turn)
    first.wait_for("AFTER-TOOL")
    first.kill9()
    second = spawn(with_gateway, action="resume", turn=turn)
    second.expect_success()
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "kill_before_checkpoint", with_gateway, executions)
    if with_gateway:
        assert executions == 1
        assert '"execution": 1' in final(second)


@pytest.mark.parametrize("decision", ["approve", "deny"])
@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_while_paused_for_approval(stack, with_gateway, decision):
    spawn, upstream, gateway = stack
    turn = [{"name": "refund", "args": {"txn": "t3", "amount": 500}}]
    first = spawn(with_gateway, action="start", pause_on_interrupt=True, turn=turn, approval_tools=["refund"])
    first.wait_for("INTERRUPT")
    first.wait_for("PAUSED")
    first.kill9()
    if with_gateway:
        approval = gateway.wait_approval("refund")
        if decision == "approve":
            gateway.approve(approval["id"])
        else:
            gateway.deny(approval["id"], "not this one")
        # The operator decided; the app resumes its stored RunState.
        second = spawn(True, action="resume", turn=turn)
    else:
        second = spawn(False, action="resume", turn=turn, approve=decision == "approve", approval_tools=["refund"])
    second.expect_success()
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "kill_paused_approval", with_gateway, executions, decision=decision)
    if with_gateway:
        if decision == "approve":
            assert executions == 1
            assert '"execution": 1' in final(second)
        else:
            assert executions == 0
            assert "NOT run" in final(second) and "not this one" in final(second)


def test_parallel_calls_get_distinct_steps_and_a_regenerated_turn_replays(stack):
    spawn, upstream, _ = stack
    turn = [{"name": "lookup", "args": {"q": "a"}}, {"name": "lookup", "args": {"q": "b"}},
            {"name": "refund", "args": {"txn": "t4", "amount": 10}}]
    spawn(True, action="start", turn=turn).expect_success()
    steps = sorted(int(r["step_index"]) for tool in ("lookup", "refund") for r in upstream.requests(tool))
    assert steps == [0, 1, 2]
    assert (upstream.count("lookup"), upstream.count("refund")) == (2, 1)
    again = spawn(True, action="regenerate", turn=turn)
    again.expect_success()
    assert (upstream.count("lookup"), upstream.count("refund")) == (2, 1)
    assert '"execution": 1' in final(again)


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_regenerated_turn_with_a_new_call_first_runs_the_refund_once(stack, with_gateway):
    spawn, upstream, _ = stack
    refund = {"name": "refund", "args": {"txn": "t5", "amount": 20}}
    spawn(with_gateway, action="start", turn=[refund]).expect_success()
    again = spawn(with_gateway, action="regenerate", turn=[{"name": "lookup", "args": {"q": "x"}}, refund])
    code = again.wait()
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "regenerated_turn", with_gateway, executions)
    if with_gateway:
        assert executions == 1
        # B landed on A's old step: refused (not run), raised to the app as
        # the typed error, not turned into text for the model.
        assert upstream.count("lookup") == 0
        assert code == 3 and "StepConflictError" in again.lines_with("ERROR")[-1], again.output


def test_an_outage_reaches_the_app_as_a_typed_error(stack, tmp_path):
    spawn, upstream, gateway = stack
    go = tmp_path / "go"
    agent = spawn(True, action="start", go_file=str(go), turn=[{"name": "lookup", "args": {"q": "a"}}])
    agent.wait_for("READY")  # its tools are read from the gateway
    gateway.kill()
    go.touch()
    assert agent.wait() == 3
    assert "GatewayConnectionError" in agent.lines_with("ERROR")[-1], agent.output
    assert "FINAL" not in agent.output  # no "please try again" text went to the model
    assert upstream.count() == 0


def test_no_session_is_refused_at_wrap_time(upstream, gateway_factory):
    from toolgateway import Client, IdentityError
    from toolgateway.openai_agents import OpenAIAgentsGateway

    gateway = gateway_factory(TOOLS, upstream=upstream)
    with pytest.raises(IdentityError, match="session"):
        OpenAIAgentsGateway(Client(gateway.url, token=gateway.token), None)

    class NoId:
        session_id = ""
    with pytest.raises(IdentityError, match="session.session_id"):
        OpenAIAgentsGateway(Client(gateway.url, token=gateway.token), NoId())
