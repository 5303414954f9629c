"""LangGraph (langgraph 1.2.x, the real SQLite checkpointer, a scripted chat
model) through toolgateway.langgraph, against the real gateway binary.

Each fault runs twice: with the tools posting straight to the upstream
(LangGraph's own behaviour, recorded for the matrix, not asserted) and
through the gateway (asserted). Executions are what the upstream counted;
the agent process is killed with SIGKILL at a marker or while the upstream
holds its call, and a new process resumes the thread from the checkpoint."""

import json

import pytest

pytest.importorskip("langgraph")

from harness import matrix_record  # noqa: E402

RUNTIME = "langgraph"
TOOLS = [
    {"name": "refund", "lease_expiry": "unknown", "effect_key": "refund:{/txn}",
     "decide": [{"when": "args.amount <= 100", "decision": "allow"},
                {"decision": "approve", "reason": "finance says"}]},
    {"name": "lookup"},
]


@pytest.fixture
def stack(upstream, gateway_factory, agents, tmp_path):
    """(spawn(with_gateway, **options) -> AgentProcess, upstream, gateway)."""
    gateway = gateway_factory(TOOLS, upstream=upstream)
    thread = f"thread-{tmp_path.name}"

    def spawn(with_gateway, **options):
        options.setdefault("db", str(tmp_path / "checkpoints.sqlite"))
        options.setdefault("thread", thread)
        env = dict(upstream.env())
        if with_gateway:
            env.update(gateway.env())
        return agents("langgraph_agent.py", json.dumps(options), env=env)
    return spawn, upstream, gateway


def final(agent):
    return agent.lines_with("FINAL")[-1]


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_while_the_upstream_holds_the_call(stack, with_gateway):
    spawn, upstream, _ = stack
    upstream.hold("refund")
    first = spawn(with_gateway, action="start", turn=[{"name": "refund", "args": {"txn": "t1", "amount": 50}}])
    upstream.wait_arrived("refund", 1)
    first.kill9()
    upstream.release("refund")
    second = spawn(with_gateway, action="resume")
    second.expect_success()
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "kill_mid_call", with_gateway, executions)
    if with_gateway:
        assert executions == 1
        assert '"execution": 1' in final(second)


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_after_the_call_before_the_checkpoint(stack, with_gateway):
    spawn, upstream, _ = stack
    first = spawn(with_gateway, action="start", pause_after_tool=True,
                  turn=[{"name": "refund", "args": {"txn": "t2", "amount": 60}}])
    first.wait_for("AFTER-TOOL")
    first.kill9()
    second = spawn(with_gateway, action="resume")
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
    interrupt = first.wait_for("INTERRUPT")
    first.wait_for("PAUSED")
    first.kill9()
    if with_gateway:
        value = json.loads(interrupt.split(" ", 1)[1])
        approval = gateway.wait_approval("refund")
        assert (value["type"], value["approval_id"], value["args"]) == \
            ("toolgateway.approval", approval["id"], {"txn": "t3", "amount": 500})
        if decision == "approve":
            gateway.approve(approval["id"])
        else:
            gateway.deny(approval["id"], "not this one")
        # The operator decided: the resume value only says "check again".
        second = spawn(True, action="resume", resume="checked")
    else:
        second = spawn(False, action="resume", resume=decision == "approve", approval_tools=["refund"])
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


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_parallel_calls_get_distinct_steps_and_a_regenerated_turn_replays(stack, use_async):
    spawn, upstream, _ = stack
    turn = [{"name": "lookup", "args": {"q": "a"}}, {"name": "lookup", "args": {"q": "b"}},
            {"name": "refund", "args": {"txn": "t4", "amount": 10}}]
    spawn(True, action="start", turn=turn, **{"async": use_async}).expect_success()
    steps = sorted(int(r["step_index"]) for tool in ("lookup", "refund") for r in upstream.requests(tool))
    assert steps == [0, 1, 2]
    assert (upstream.count("lookup"), upstream.count("refund")) == (2, 1)
    # The same turn regenerated from the checkpoint before it: new tool-call
    # ids, the same steps: every call replays.
    again = spawn(True, action="fork", turn=turn)
    again.expect_success()
    assert (upstream.count("lookup"), upstream.count("refund")) == (2, 1)
    assert '"execution": 1' in final(again)


@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_regenerated_turn_with_a_new_call_first_runs_the_refund_once(stack, with_gateway):
    spawn, upstream, _ = stack
    refund = {"name": "refund", "args": {"txn": "t5", "amount": 20}}
    spawn(with_gateway, action="start", turn=[refund]).expect_success()
    # [A] regenerated as [B, A]: A's step moved; its effect key replays it.
    again = spawn(with_gateway, action="fork", turn=[{"name": "lookup", "args": {"q": "x"}}, refund])
    again.expect_success()
    executions = upstream.count("refund")
    matrix_record(RUNTIME, "regenerated_turn", with_gateway, executions)
    if with_gateway:
        assert executions == 1
        # B landed on A's old step: refused (not run), told to the model.
        assert upstream.count("lookup") == 0
        assert "step_conflict" in final(again)


def test_a_graph_without_checkpointer_is_refused(upstream, gateway_factory):
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph

    from toolgateway import Client, IdentityError, InvalidInputError
    from toolgateway.langgraph import gateway_tool_node

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        raise AssertionError("the local body never runs")

    gateway = gateway_factory(TOOLS, upstream=upstream)
    client = Client(gateway.url, token=gateway.token)
    with pytest.raises(InvalidInputError):
        gateway_tool_node([], client)
    with pytest.raises(InvalidInputError):
        gateway_tool_node([lookup], client, handle_tool_errors=True)
    builder = StateGraph(MessagesState)
    builder.add_node("tools", gateway_tool_node([lookup], client))
    builder.add_edge(START, "tools")
    graph = builder.compile()  # no checkpointer
    call = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"q": "a"}, "id": "c1", "type": "tool_call"}])
    with pytest.raises(IdentityError, match="checkpointer"):
        graph.invoke({"messages": [HumanMessage(content="hi"), call]}, {"configurable": {"thread_id": "t"}})
    assert upstream.count() == 0


def test_postgres_checkpointer_and_store_kill_mid_call(upstream, gateway_factory, agents):
    """The same crash with LangGraph's PostgreSQL checkpointer and the gateway
    on its PostgreSQL store (the server on 127.0.0.1:5432, database test;
    the checkpointer's tables in a schema of their own, dropped after)."""
    pytest.importorskip("langgraph.checkpoint.postgres")
    psycopg = pytest.importorskip("psycopg")
    import uuid
    base = "postgresql://postgres@127.0.0.1:5432/test"
    schema = f"pyrt_lgcp_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(base, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    except psycopg.OperationalError as err:
        pytest.skip(f"no PostgreSQL on 127.0.0.1:5432: {err}")
    try:
        gateway = gateway_factory(TOOLS, upstream=upstream, store=base)
        options = {"pg_url": f"{base}?options=-csearch_path%3D{schema}", "thread": "pg-thread", "db": ""}
        env = dict(upstream.env(), **gateway.env())
        upstream.hold("refund")
        first = agents("langgraph_agent.py", json.dumps(dict(options, action="start", turn=[
            {"name": "refund", "args": {"txn": "t-pg", "amount": 30}}])), env=env)
        upstream.wait_arrived("refund", 1)
        first.kill9()
        upstream.release("refund")
        second = agents("langgraph_agent.py", json.dumps(dict(options, action="resume")), env=env)
        second.expect_success()
        assert upstream.count("refund") == 1
        assert '"execution": 1' in final(second)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
