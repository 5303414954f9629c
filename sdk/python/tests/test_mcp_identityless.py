"""The official Python ``mcp`` client as a chat host behaves (ChatGPT,
Claude.ai): an OAuth access token from a real OpenID provider
(internal/cmd/testop), no identity in ``_meta``. Against the real gateway
binary, counted at the upstream: the same call five times in a row and
eight times at once runs once; another person's same call runs once more.
"""

import asyncio
import base64
import json
import os
import subprocess
import tempfile
import threading
import unittest
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# The official MCP Python SDK (pip install mcp); skipped without it.
pytest.importorskip("mcp")

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client  # noqa: E402

from _support import go_binary  # noqa: E402
from test_e2e import Gateway  # noqa: E402
from toolgateway import wire  # noqa: E402

AUDIENCE = "http://gateway.test/mcp"


class Provider:
    """internal/cmd/testop: zitadel/oidc's example OP, as the Go tests use it."""

    def __init__(self) -> None:
        # The web client is testop's required argument; the tokens here come
        # from the OP's service user (client credentials).
        args = ["-audience", AUDIENCE, "-client-id", "py-host", "-client-secret", "py-host-secret",
                "-redirect-url", "http://127.0.0.1:1/cb"]
        self.proc = subprocess.Popen([go_binary("./internal/cmd/testop"), *args], stdout=subprocess.PIPE, text=True)
        self.issuer = json.loads(self.proc.stdout.readline())["issuer"]

    def token(self, person: str) -> str:
        """A JWT access token for person in tenant acme (client credentials of
        the OP's service user; the person: scope sets sub)."""
        body = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": f"org:acme person:{person}"})
        req = urllib.request.Request(self.issuer.rstrip("/") + "/oauth/token", data=body.encode(), method="POST")
        req.add_header("Authorization", "Basic " + base64.b64encode(b"sid1:verysecret").decode())
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)["access_token"]

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


class CountingUpstream:
    """An HTTP tool that records each request body and answers after 200 ms,
    so concurrent duplicates overlap."""

    def __init__(self) -> None:
        self.bodies: list = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                with lock:
                    outer.bodies.append(body)
                threading.Event().wait(0.2)
                payload = b'{"refunded":true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()


async def calls(url: str, token: str, arguments: dict, sequential: int, concurrent: int) -> list:
    """Makes the call sequential times in a row, then concurrent times at
    once, with token and no _meta, as a chat host does; returns the results."""
    async with create_mcp_http_client(headers={"Authorization": "Bearer " + token}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                results = [await session.call_tool("refund", arguments) for _ in range(sequential)]
                results += await asyncio.gather(*(session.call_tool("refund", arguments) for _ in range(concurrent)))
                return results


class IdentitylessTest(unittest.TestCase):
    def test_chat_host_calls_run_once_per_person(self) -> None:
        provider = Provider()
        self.addCleanup(provider.stop)
        upstream = CountingUpstream()
        self.addCleanup(upstream.stop)
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "gateway.yaml")
            with open(config, "w") as f:
                f.write(f"""listen: 127.0.0.1:0
store:
  path: {os.path.join(tmp, "gw.db")}
auth:
  oidc:
    issuer: {provider.issuer}
    audience: {AUDIENCE}
    tenant_claim: org_id
tools:
  - name: refund
    http:
      url: {upstream.url}/refund
""")
            gateway = Gateway(go_binary("./cmd/gateway"), config)
            self.addCleanup(gateway.kill)
            url = gateway.url + "/mcp"

            ada = asyncio.run(calls(url, provider.token("ada"), {"amount": 5}, sequential=5, concurrent=8))
            self.assertEqual(upstream.bodies, ['{"amount":5}'], "ada's 13 identical calls ran once")
            for i, result in enumerate(ada):
                self.assertFalse(result.is_error, result)
                meta = result.meta or {}
                self.assertEqual(meta.get(wire.META_IDENTITY), wire.META_IDENTITY_FINGERPRINT)
                self.assertEqual(meta.get(wire.META_REPLAYED), i > 0)
            self.assertTrue(ada[1].content[0].text.startswith("This exact call"), ada[1].content)
            self.assertEqual(ada[1].structured_content, {"refunded": True})

            bob = asyncio.run(calls(url, provider.token("bob"), {"amount": 5}, sequential=2, concurrent=0))
            self.assertEqual([r.meta.get(wire.META_REPLAYED) for r in bob], [False, True])
            self.assertEqual(len(upstream.bodies), 2, "bob's same call ran once more, once")


if __name__ == "__main__":
    unittest.main()
