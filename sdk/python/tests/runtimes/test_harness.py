"""The harness itself against the real gateway: the upstream counts what the
gateway sends, a held call is counted before it answers, approvals are
listed and decided with `gateway admin`, a restarted gateway keeps its
port and store, and an agent process is killed at a marker."""

import json

import pytest

from harness import AgentProcess, matrix_record
from toolgateway import ApprovalPendingError, Client, GatewayError


def test_gateway_upstream_admin_and_restart(upstream, gateway_factory, tmp_path, monkeypatch):
    gateway = gateway_factory([
        {"name": "lookup"},
        {"name": "refund", "lease_expiry": "unknown",
         "decide": [{"when": "args.amount <= 100", "decision": "allow"},
                    {"decision": "approve", "reason": "finance says"}]},
    ], upstream=upstream)
    client = Client(gateway.url, token=gateway.token, max_attempts=1, prefer_wait=0)
    session = client.session("harness-1")
    first = session.call(0, "lookup", {"n": 1})
    assert (first.replayed, first.json()["execution"]) == (False, 1)
    request = upstream.requests("lookup")[0]
    assert (request["session_id"], request["step_index"], bool(request["idempotency_key"])) == ("harness-1", "0", True)

    with pytest.raises(ApprovalPendingError) as pending:
        session.call(1, "refund", {"amount": 500})
    listed = gateway.wait_approval("refund")
    assert listed["id"] == pending.value.approval_id
    gateway.deny(listed["id"], "no")
    with pytest.raises(GatewayError) as denied:
        session.call(1, "refund", {"amount": 500})
    assert denied.value.code == "approval_denied"
    assert upstream.count("refund") == 0

    gateway.restart()
    again = Client(gateway.url, token=gateway.token).session("harness-1").call(0, "lookup", {"n": 1})
    assert (again.replayed, again.execution_id) == (True, first.execution_id)
    assert upstream.count("lookup") == 1

    out = tmp_path / "matrix.jsonl"
    monkeypatch.setenv("TOOLGATEWAY_MATRIX_OUT", str(out))
    matrix_record("harness", "lost_reply", True, 1)
    assert json.loads(out.read_text()) == {"runtime": "harness", "fault": "lost_reply",
                                           "with_gateway": True, "executions": 1}


def test_hold_counts_before_answering_and_agent_kill(upstream, tmp_path):
    script = tmp_path / "agent.py"
    script.write_text("import agent_support as s\ns.marker('CALLING')\nprint(s.direct_call('slow', {'a': 1}))\n")
    upstream.hold("slow")
    agent = AgentProcess(str(script), env=upstream.env())
    agent.wait_for("CALLING")
    upstream.wait_arrived("slow", 1)
    agent.kill9()
    upstream.release("slow")
    assert agent.proc.returncode == -9
    assert upstream.count("slow") == 1
