"""Approvals against the real gateway binary: a tool whose decide rules hold a
call for a human raises ApprovalPendingError at once (no retry), the same call
runs once after a person approves (the operator through the admin API, or
the app's user with their own access token from a real OpenID provider),
an agent's own
Client.approve is refused (403 not_an_approver) and runs nothing. The
upstream counts the executions."""

import base64
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

from _support import go_binary
from test_e2e import Gateway

from toolgateway import ApprovalPendingError, Client, GatewayError, canonicalize, wire

TOKEN = "py-approvals-token"
AUDIENCE = "http://toolgateway.test/approvals"
ADMIN = "py-approvals-admin"


class _Upstream(http.server.BaseHTTPRequestHandler):
    """The refund tool's HTTP backend: counts each execution by its
    arguments (the gateway sends their canonical bytes)."""

    runs: dict = {}
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.lock:
            key = body.decode()
            self.runs[key] = self.runs.get(key, 0) + 1
        answer = json.dumps({"refunded": json.loads(body)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args) -> None:
        pass


class ApprovalsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
        threading.Thread(target=cls.upstream.serve_forever, daemon=True).start()
        cls.binary = go_binary("./cmd/gateway")
        # A real OpenID provider (internal/cmd/testop): a person's access
        # token is what decides an approver: caller rule.
        cls.provider = subprocess.Popen(
            [go_binary("./internal/cmd/testop"), "-audience", AUDIENCE, "-client-id", "unused",
             "-client-secret", "unused", "-redirect-url", "http://127.0.0.1:1/cb"],
            stdout=subprocess.PIPE, text=True)
        cls.issuer = json.loads(cls.provider.stdout.readline())["issuer"]
        cls.dir = tempfile.mkdtemp(prefix="toolgateway-py-approvals-")
        cls.config = os.path.join(cls.dir, "gateway.yaml")
        with open(cls.config, "w") as f:
            f.write("listen: 127.0.0.1:0\n"
                    "log_level: info\n"
                    "store:\n  path: store/gateway.db\n"
                    f"auth:\n  oidc:\n    issuer: {cls.issuer}\n    audience: {AUDIENCE}\n    tenant_claim: org_id\n"
                    "  tenants:\n    - name: py-approvals\n"
                    f"      token_sha256: {hashlib.sha256(TOKEN.encode()).hexdigest()}\n"
                    f"admin:\n  token_sha256: {hashlib.sha256(ADMIN.encode()).hexdigest()}\n"
                    "tools:\n  - name: refund\n    lease_expiry: unknown\n"
                    f"    http:\n      url: http://127.0.0.1:{cls.upstream.server_port}/refund\n"
                    "    decide:\n"
                    "      - when: \"args.amount <= 100\"\n        decision: allow\n"
                    "      - when: \"args.amount <= 1000\"\n        decision: approve\n"
                    "        approver: caller\n        reason: \"the user says\"\n"
                    "      - decision: approve\n        reason: \"finance says\"\n")
        cls.gateway = Gateway(cls.binary, cls.config)

    @classmethod
    def tearDownClass(cls):
        cls.gateway.kill()
        cls.provider.kill()
        cls.provider.wait()
        cls.upstream.shutdown()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def client(self) -> Client:
        # One attempt only: a client that retried approval_pending would
        # fail another way; prefer_wait 0 so the gateway answers at once.
        return Client(self.gateway.url, token=TOKEN, max_attempts=1, prefer_wait=0)

    def runs(self, args: dict) -> int:
        with _Upstream.lock:
            return _Upstream.runs.get(canonicalize(args).decode(), 0)

    def person_token(self) -> str:
        """An access token of the provider's service user, tenant
        py-approvals (org_id from the org: scope)."""
        request = urllib.request.Request(
            self.issuer.rstrip("/") + "/oauth/token",
            data=urllib.parse.urlencode({"grant_type": "client_credentials", "scope": "org:py-approvals"}).encode(),
            headers={"Authorization": "Basic " + base64.b64encode(b"sid1:verysecret").decode(),
                     "Content-Type": "application/x-www-form-urlencoded"}, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["access_token"]

    def operator_approves(self, approval_id: str) -> None:
        request = urllib.request.Request(
            f"{self.gateway.url}/admin/v1/approvals/{approval_id}/approve",
            data=b'{"by":"maria@finance","note":"checked"}', method="POST",
            headers={"Authorization": "Bearer " + ADMIN, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            self.assertEqual(response.status, 200)

    def test_operator_approval_raises_pending_then_runs_once(self):
        session = self.client().session("py-approvals-operator")
        args = {"amount": 5000, "order": "A-1"}
        with self.assertRaises(ApprovalPendingError) as caught:
            session.call(1, "refund", args)
        pending = caught.exception
        self.assertEqual((pending.status, pending.code, pending.attempts), (409, wire.CODE_APPROVAL_PENDING, 1))
        self.assertTrue(pending.approval_id)
        self.assertGreater(pending.expires_at.timestamp(), time.time())
        self.assertGreater(pending.retry_after or 0, 0)
        with self.assertRaises(ApprovalPendingError) as again:
            session.call(1, "refund", args)
        self.assertEqual(again.exception.approval_id, pending.approval_id)
        # The tenant may not decide an operator's approval.
        with self.assertRaises(GatewayError) as refused:
            session.approve(pending.approval_id, "me")
        self.assertEqual(refused.exception.code, wire.CODE_APPROVAL_NOT_YOURS)

        self.operator_approves(pending.approval_id)
        first = session.call(1, "refund", args)
        second = session.call(1, "refund", args)
        self.assertFalse(first.replayed)
        self.assertTrue(second.replayed)
        self.assertEqual(first.body, second.body)
        self.assertEqual(self.runs(args), 1)

    def test_caller_approval_needs_a_person(self):
        # approver: caller means a person: the agent approving its own call
        # with its static token gets 403 not_an_approver and nothing runs,
        # however often it tries; a person's approval (their own access
        # token from a real OpenID provider) runs the call once.
        session = self.client().session("py-approvals-caller")
        with self.assertRaises(ApprovalPendingError) as caught:
            session.call(1, "refund", {"amount": 500})
        for _ in range(3):
            with self.assertRaises(GatewayError) as refused:
                session.approve(caught.exception.approval_id, "I approve myself")
            self.assertEqual((refused.exception.status, refused.exception.code), (403, wire.CODE_NOT_AN_APPROVER))
            with self.assertRaises(ApprovalPendingError):
                session.call(1, "refund", {"amount": 500})
        self.assertEqual(self.runs({"amount": 500}), 0)

        session.approve(caught.exception.approval_id, "a person checked it", token=self.person_token())
        result = session.call(1, "refund", {"amount": 500})
        self.assertFalse(result.replayed)
        self.assertEqual(self.runs({"amount": 500}), 1)

if __name__ == "__main__":
    unittest.main()
