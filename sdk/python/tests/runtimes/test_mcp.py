"""MCP Python clients against the real gateway binary, and a FastMCP server
as the gateway's MCP upstream.

Clients: the official ``mcp`` SDK's ``ClientSession`` and FastMCP's
``Client``, calling the gateway's ``/mcp`` through ``toolgateway.mcp.call_tool``
(the identity in ``_meta``). Each fault runs twice: the same app calling a
plain FastMCP server (``agents/fastmcp_upstream.py``) directly — "without
the gateway", recorded for the matrix, not asserted — and through the
gateway, asserted. Every execution is counted at the side effect: the
CountingUpstream the tools post to, which outlives the killed processes.
A fault's repeat is made by another process than the killed one (the
test's own), with the identity the app had kept.
"""

import asyncio
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

pytest.importorskip("mcp")
pytest.importorskip("fastmcp")

from harness import AGENTS_DIR, TENANT, WAIT, AgentProcess, CountingUpstream, Gateway, matrix_record  # noqa: E402
from _support import closed_port  # noqa: E402  (the harness put tests/ on sys.path)

sys.path.insert(0, AGENTS_DIR)
import mcp_agent  # noqa: E402  (the app's connect and call, shared with the agent processes)

from toolgateway import ApprovalPendingError, GatewayError, derive_key, wire  # noqa: E402
from toolgateway.errors import ApprovalDeniedError, StepConflictError  # noqa: E402
from toolgateway.mcp import call_tool, execution_id, replayed  # noqa: E402

CLIENTS = ["mcp", "fastmcp"]
#: Refunds up to 100 run at once; up to 1000 the caller's user approves
#: (over MCP: an elicitation, to a client that declared it); larger ones wait
#: for an operator.
REFUND = {"name": "refund", "decide": [{"when": "args.amount <= 100", "decision": "allow"},
                                       {"when": "args.amount <= 1000", "decision": "approve", "approver": "caller",
                                        "reason": "the user confirms refunds over 100"},
                                       {"decision": "approve", "reason": "finance says"}]}


class FastMCPServer:
    """agents/fastmcp_upstream.py over Streamable HTTP on a free port; its
    tool ``refund`` posts to the CountingUpstream."""

    def __init__(self, effect_url: str) -> None:
        self.port = closed_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        # Its log goes to a file: a pipe nobody reads would block it once full.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, os.path.join(AGENTS_DIR, "fastmcp_upstream.py"), effect_url,
                                      "http", str(self.port)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + WAIT
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError("the FastMCP server did not listen: " + self.output) from None
                time.sleep(0.05)

    @property
    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def effects():
    """The side effect every refund reaches, shared by the module's tests;
    each test counts the requests of its own order (:func:`executions`)."""
    with CountingUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(effects):
    server = Gateway([REFUND], upstream=effects)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def plain_server(effects):
    server = FastMCPServer(effects.url)
    yield server
    server.stop()


@pytest.fixture
def order():
    """A refund of this test's own: its order id appears in no other test."""
    return {"order": f"A-{uuid.uuid4().hex[:8]}", "amount": 40}


def executions(effects, order: dict) -> int:
    """How many times the refund of ``order`` ran (requests at the effect)."""
    return sum(1 for request in effects.requests("refund") if (request["args"] or {}).get("order") == order["order"])


def target(request, with_gateway: bool) -> str:
    """``gateway``, or the plain FastMCP server's URL (started on first use)."""
    return "gateway" if with_gateway else request.getfixturevalue("plain_server").url


def in_process(gateway, kind: str, to: str, session_id: str, step: int, args: dict, timeout=None):
    """One call from the test process (another process than a killed agent).
    An error is raised outside the client's context, so it is the error
    itself, not an ExceptionGroup of the client's task group."""
    async def run():
        url = gateway.url + "/mcp" if to == "gateway" else to
        async with mcp_agent.connect(kind, url, gateway.token if to == "gateway" else "") as client:
            try:
                return await mcp_agent.call(client, to == "gateway", session_id, step, "refund", args, timeout)
            except Exception as exc:  # re-raised below, outside the task group
                error = exc
        raise error
    return asyncio.run(run())


def spawn(agents, gateway, kind: str, to: str, session_id: str, step: int, args: dict, *flags: str) -> AgentProcess:
    return agents("mcp_agent.py", kind, to, session_id, str(step), "refund", json.dumps(args), *flags,
                  env=gateway.env())


def result_line(agent: AgentProcess) -> dict:
    return json.loads(agent.wait_for("RESULT ").split(" ", 1)[1])


# --- the faults -----------------------------------------------------------------

def held(effects):
    """Hold the refunds; returns the count the next arrival makes."""
    effects.hold("refund")
    return effects.count("refund") + 1


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_mid_call_then_repeat(kind, with_gateway, request, effects, gateway, order, agents):
    """kill -9 of the app while the upstream holds its call; another process
    repeats the call with the same identity: 1 execution through the gateway."""
    to, session_id = target(request, with_gateway), f"kill-mid-{uuid.uuid4().hex[:8]}"
    arrival = held(effects)
    agent = spawn(agents, gateway, kind, to, session_id, 0, order)
    effects.wait_arrived("refund", arrival)
    agent.kill9()
    effects.release("refund")
    repeat = in_process(gateway, kind, to, session_id, 0, order)
    count = executions(effects, order)
    matrix_record(kind, "kill_mid_call", with_gateway, count)
    if with_gateway:
        assert count == 1
        assert replayed(repeat) and execution_id(repeat)
        sent = effects.requests("refund")[arrival - 1]
        assert (sent["args"], sent["session_id"], sent["step_index"]) == (order, session_id, "0")


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_kill_before_checkpoint_then_repeat(kind, with_gateway, request, effects, gateway, order, agents):
    """The answer arrived and the app was killed before saving it; the
    repeat replays the first answer (same execution id, same body)."""
    to, session_id = target(request, with_gateway), f"kill-ckpt-{uuid.uuid4().hex[:8]}"
    agent = spawn(agents, gateway, kind, to, session_id, 0, order, "--stop-before-checkpoint")
    first = result_line(agent)
    agent.wait_for("BEFORE-CHECKPOINT")
    agent.kill9()
    repeat = mcp_agent.summary(in_process(gateway, kind, to, session_id, 0, order))
    count = executions(effects, order)
    matrix_record(kind, "kill_before_checkpoint", with_gateway, count)
    if with_gateway:
        assert count == 1
        assert (first["replayed"], repeat["replayed"]) == (False, True)
        assert repeat["execution_id"] == first["execution_id"]
        assert (repeat["text"], repeat["structured"]) == (first["text"], first["structured"])


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_lost_reply_then_retry(kind, with_gateway, request, effects, gateway, order):
    """The first answer never reaches the app (its read times out while the
    upstream holds the call); the app sends the same call again."""
    to, session_id = target(request, with_gateway), f"lost-{uuid.uuid4().hex[:8]}"
    arrival = held(effects)

    async def run():
        url = gateway.url + "/mcp" if with_gateway else to
        async with mcp_agent.connect(kind, url, gateway.token if with_gateway else "") as client:
            try:
                await mcp_agent.call(client, with_gateway, session_id, 0, "refund", order, timeout=1)
            except GatewayError:
                raise
            except Exception:  # the clients' timeout errors differ: the reply is lost
                pass
            else:
                raise AssertionError("the held call answered")
            effects.wait_arrived("refund", arrival)
            effects.release("refund")
            return await mcp_agent.call(client, with_gateway, session_id, 0, "refund", order)

    retried = asyncio.run(run())
    count = executions(effects, order)
    matrix_record(kind, "lost_reply", with_gateway, count)
    if with_gateway:
        assert count == 1
        assert replayed(retried)


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("with_gateway", [False, True], ids=["without", "with"])
def test_retry_with_changed_arguments(kind, with_gateway, request, effects, gateway, order):
    """The app retries a step with other arguments (a re-prompted model): the
    gateway answers step_conflict, typed, and runs nothing."""
    to, session_id = target(request, with_gateway), f"changed-{uuid.uuid4().hex[:8]}"
    in_process(gateway, kind, to, session_id, 0, order)
    changed = dict(order, amount=45)
    if with_gateway:
        with pytest.raises(StepConflictError) as conflict:
            in_process(gateway, kind, to, session_id, 0, changed)
        assert (conflict.value.code, conflict.value.retryable) == (wire.CODE_STEP_CONFLICT, False)
        assert conflict.value.jsonrpc_code == -32602 and conflict.value.status == 0
        assert str(conflict.value).startswith("toolgateway: step_conflict: ")
        assert conflict.value.problem.get("tool") == "refund"
    else:
        in_process(gateway, kind, to, session_id, 0, changed)
    count = executions(effects, order)
    matrix_record(kind, "retry_changed_args", with_gateway, count)
    if with_gateway:
        assert count == 1


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_kill_while_paused_for_approval(kind, decision, effects, gateway, agents):
    """The call waits for a human (approval_pending, typed); the paused app is
    killed; the operator decides with `gateway admin`; another process makes
    the same call: 1 execution when approved, 0 and a readable denial when
    denied. (Without the gateway an MCP call has no pause: not recorded.)"""
    session_id, big = f"paused-{uuid.uuid4().hex[:8]}", {"order": f"B-{uuid.uuid4().hex[:8]}", "amount": 5000}
    agent = spawn(agents, gateway, kind, "gateway", session_id, 3, big, "--wait-when-paused")
    approval_id = agent.wait_for("APPROVAL-PENDING").split()[1]
    agent.kill9()
    assert executions(effects, big) == 0
    with pytest.raises(ApprovalPendingError) as still:
        in_process(gateway, kind, "gateway", session_id, 3, big)
    assert still.value.approval_id == approval_id and still.value.retryable
    assert still.value.expires_at is not None
    if decision == "approve":
        gateway.approve(approval_id)
        result = in_process(gateway, kind, "gateway", session_id, 3, big)
        assert not replayed(result) and not result.is_error
        assert executions(effects, big) == 1
        again = in_process(gateway, kind, "gateway", session_id, 3, big)
        assert replayed(again) and execution_id(again) == execution_id(result)
        count = executions(effects, big)
        matrix_record(kind, "kill_paused_approval", True, count, decision="approve")
        assert count == 1
    else:
        gateway.deny(approval_id, "over the refund limit")
        with pytest.raises(ApprovalDeniedError) as denied:
            in_process(gateway, kind, "gateway", session_id, 3, big)
        assert (denied.value.code, denied.value.retryable) == (wire.CODE_APPROVAL_DENIED, False)
        assert "over the refund limit" in denied.value.detail  # what the model reads
        assert denied.value.result is not None and denied.value.result.is_error
        count = executions(effects, big)
        matrix_record(kind, "kill_paused_approval", True, count, decision="deny")
        assert count == 0


@pytest.mark.parametrize("kind, answer", [("mcp", "approve"), ("fastmcp", "decline"), ("fastmcp", "approve")])
def test_caller_approval_asked_over_elicitation(kind, answer, effects, gateway):
    """An `approver: caller` call, made by a client with an elicitation
    handler (protocol 2026-07-28): the gateway asks the user through the
    client (input_required), the client's own multi round-trip driver sends
    the continuation with the same _meta, and the answer decides: approved,
    the call runs once (a repeat replays, nobody is asked again); declined,
    nothing runs and the app gets ApprovalDeniedError."""
    session_id, order = f"elicit-{uuid.uuid4().hex[:8]}", {"order": f"C-{uuid.uuid4().hex[:8]}", "amount": 500}
    asked = []

    async def run():
        url = gateway.url + "/mcp"
        if kind == "fastmcp":
            from fastmcp import Client

            async def handler(message, response_type, params, context):
                asked.append(message)
                return {"approve": True} if answer == "approve" else _declined()

            def _declined():
                from fastmcp.client.elicitation import ElicitResult
                return ElicitResult(action="decline")

            client_cm = Client(url, auth=gateway.token, elicitation_handler=handler)
        else:
            import httpx2
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client
            from mcp.types import ElicitResult

            async def callback(context, params):
                asked.append(params.message)
                if answer == "approve":
                    return ElicitResult(action="accept", content={"approve": True})
                return ElicitResult(action="decline")

            http = httpx2.AsyncClient(headers={"Authorization": "Bearer " + gateway.token},
                                      timeout=httpx2.Timeout(30, read=300))
            client_cm = Client(streamable_http_client(url, http_client=http), elicitation_callback=callback)
        outcomes = []
        async with client_cm as client:
            for _ in range(2):
                try:
                    outcomes.append(await call_tool(client, "refund", order, session_id=session_id, step_index=0))
                except GatewayError as err:  # caught inside the client's task group
                    outcomes.append(err)
        return outcomes

    first, second = asyncio.run(run())
    assert len(asked) == 1 and "refund" in asked[0], asked
    if answer == "approve":
        assert not isinstance(first, Exception), first
        assert (replayed(first), replayed(second)) == (False, True)
        assert execution_id(first) == execution_id(second)
        assert executions(effects, order) == 1
    else:
        assert isinstance(first, ApprovalDeniedError) and isinstance(second, ApprovalDeniedError), (first, second)
        assert executions(effects, order) == 0


def test_bad_identity_is_refused_before_sending(effects, gateway, order):
    """A malformed session or step, or a gateway _meta member passed by hand,
    is refused by call_tool with a message naming it; nothing is sent."""
    from toolgateway import InvalidInputError
    cases = [("run:7", 0, None, "session"), ("run-7", -1, None, "step"),
             ("run-7", 0, {wire.META_STEP_INDEX: 9}, "the gateway's own")]

    async def run():
        messages = []
        async with mcp_agent.connect("mcp", gateway.url + "/mcp", gateway.token) as client:
            for session_id, step, meta, _ in cases:
                try:
                    await call_tool(client, "refund", order, session_id=session_id, step_index=step, meta=meta)
                except InvalidInputError as refused:
                    messages.append(str(refused))
        return messages

    messages = asyncio.run(run())
    assert len(messages) == len(cases)
    for (_, _, _, expected), message in zip(cases, messages):
        assert expected in message, message
    assert executions(effects, order) == 0


# --- a FastMCP server behind the gateway ---------------------------------------

@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_fastmcp_server_as_upstream(transport, upstream, gateway_factory, order):
    """The gateway fronts a FastMCP server (mcp_servers, over stdio or
    Streamable HTTP): a call runs once at the server, a repeat replays, and
    the server receives the scoped key and the identity in _meta."""
    script = os.path.join(AGENTS_DIR, "fastmcp_upstream.py")
    server = None
    if transport == "stdio":
        entry = {"name": "refunds", "command": [sys.executable, script, upstream.url, "stdio"], "prefix": "f_"}
    else:
        server = FastMCPServer(upstream.url)
        entry = {"name": "refunds", "url": server.url, "prefix": "f_"}
    try:
        gateway = gateway_factory([], extra={"mcp_servers": [entry]})
        session_id = f"upstream-{transport}-{uuid.uuid4().hex[:8]}"

        async def twice():
            async with mcp_agent.connect("mcp", gateway.url + "/mcp", gateway.token) as client:
                first = await call_tool(client, "f_refund", order, session_id=session_id, step_index=2)
                second = await call_tool(client, "f_refund", order, session_id=session_id, step_index=2)
                return first, second

        first, second = asyncio.run(twice())
        assert upstream.count("refund") == 1
        assert (replayed(first), replayed(second)) == (False, True)
        assert execution_id(first) == execution_id(second)
        assert first.structured_content == second.structured_content == {"refunded": order["order"], "amount": 40,
                                                                           "execution": 1}
        meta = upstream.requests("refund")[0]["args"]["meta"]
        assert meta[wire.META_SESSION_ID] == session_id and meta[wire.META_STEP_INDEX] == 2
        assert meta[wire.META_EXECUTION_ID] == execution_id(first)
        assert meta[wire.META_TENANT] == TENANT
        # The key the server gets is scoped: SHA-256(tenant ":" tool ":" key), not the client's key.
        client_key = derive_key(session_id, 2, "f_refund", order)
        scoped = hashlib.sha256(f"{TENANT}:f_refund:{client_key}".encode()).hexdigest()
        assert meta[wire.META_IDEMPOTENCY_KEY] == scoped != client_key
        assert isinstance(meta[wire.META_FENCING_TOKEN], int)
    finally:
        if server is not None:
            server.stop()
